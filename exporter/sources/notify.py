"""Wake a file source as soon as its file changes, instead of at its next poll.

inotify (through ``inotify_simple``) is only a hint: the file source still polls, because inotify
events go missing on some filesystems (bind mounts from another namespace, overlay lower layers, NFS)
and a rotation must be seen even then. With the hint, a line written is read within milliseconds;
without it (no inotify, the watch limit reached), at the next poll as before.

One inotify instance serves the whole process (a user may have only 128), each :class:`Watch`
watches its file (writes, truncation) and its folder (the file renamed, created or removed there;
other names in the folder do not wake it).
"""

from __future__ import annotations

import asyncio
import os
import time
import weakref

import structlog

log = structlog.get_logger("vllm_log_exporter.source.notify")

# Wake-ups closer together than this are merged: a writer flushing every line would otherwise make
# one small read per line, which costs more than the 5 ms it saves.
MIN_READ_GAP = 0.005

try:
    from inotify_simple import INotify, flags
except ImportError:  # pragma: no cover - a declared dependency; polling still works without it
    INotify = None

if INotify is not None:
    _FILE_MASK = flags.MODIFY | flags.ATTRIB | flags.MOVE_SELF | flags.DELETE_SELF
    _DIR_MASK = flags.CREATE | flags.MOVED_FROM | flags.MOVED_TO | flags.DELETE | flags.MODIFY
    _OVERFLOW = flags.Q_OVERFLOW
    _GONE = flags.IGNORED  # the kernel dropped the watch: its file or folder was deleted


class _Hub:
    """The process's inotify descriptor, read by the event loop, and who waits on each watch."""

    def __init__(self, loop: asyncio.AbstractEventLoop):
        self.loop = loop
        self.ino = INotify(nonblocking=True)
        self.by_wd: dict[int, set[tuple["Watch", str | None]]] = {}
        loop.add_reader(self.ino.fileno(), self._readable)

    def add(self, watch: "Watch", path: str, mask: int, name: str | None) -> int:
        wd = self.ino.add_watch(path, mask)
        self.by_wd.setdefault(wd, set()).add((watch, name))
        return wd

    def remove(self, watch: "Watch", wd: int, name: str | None) -> None:
        users = self.by_wd.get(wd)
        if users is None:
            return
        users.discard((watch, name))
        if not users:
            del self.by_wd[wd]
            try:
                self.ino.rm_watch(wd)
            except OSError:
                pass  # the inode is gone, and the kernel removed the watch itself

    def _readable(self) -> None:
        try:
            events = self.ino.read(timeout=0)
        except OSError:
            return
        for ev in events:
            if ev.mask & _OVERFLOW:  # events were lost: wake everybody, they look for themselves
                for users in self.by_wd.values():
                    for w, _ in users:
                        w._wake()
                continue
            if ev.mask & _GONE:
                for w, _ in self.by_wd.pop(ev.wd, ()):
                    w._lost(ev.wd)
                continue
            for w, name in self.by_wd.get(ev.wd, ()):
                if name is None or ev.name == name:
                    w._wake()


_hubs: "weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _Hub | None]" = weakref.WeakKeyDictionary()


def _hub() -> _Hub | None:
    loop = asyncio.get_running_loop()
    if loop not in _hubs:
        hub = None
        if INotify is not None:
            try:
                hub = _Hub(loop)
            except OSError as e:  # EMFILE: fs.inotify.max_user_instances reached
                log.warning("inotify unavailable: files are polled", error=e.strerror or str(e))
        _hubs[loop] = hub
    return _hubs[loop]


class Watch:
    """Changes of one path: ``await wait(timeout)`` returns early when the file or its name changed."""

    def __init__(self, path: str, enabled: bool = True):
        self.path = os.path.abspath(path)
        self._folder, self._base = os.path.split(self.path)
        self._pending = False
        self._waiter: asyncio.Future | None = None
        self._file_wd: int | None = None
        self._dir_wd: int | None = None
        self._last_read = 0.0
        self._warned = False
        self._hub = _hub() if enabled else None
        self.follow_file()

    @property
    def active(self) -> bool:
        return self._hub is not None and self._dir_wd is not None

    def _try_add(self, path: str, mask: int, name: str | None) -> int | None:
        try:
            return self._hub.add(self, path, mask, name)
        except OSError as e:
            # ENOSPC: fs.inotify.max_user_watches reached; ENOENT: not there (yet)
            if not self._warned and e.errno != 2:
                self._warned = True
                log.warning("inotify watch not added: this file is polled", path=path, error=e.strerror or str(e))
            return None

    def follow_file(self) -> None:
        """Watch the file now at the path (after it was opened, or re-opened after a rotation).

        The file itself is watched as well as its folder so that a path that is a symlink (as
        Kubernetes' /var/log/containers) is woken by writes to where it points."""
        if self._hub is None:
            return
        if self._dir_wd is None:  # not yet, or the folder was deleted and made again
            self._dir_wd = self._try_add(self._folder, _DIR_MASK, self._base)
        if self._file_wd is not None:
            self._hub.remove(self, self._file_wd, None)
        self._file_wd = self._try_add(self.path, _FILE_MASK, None)

    def _lost(self, wd: int) -> None:
        if wd == self._dir_wd:
            self._dir_wd = None  # polled until follow_file() can watch the folder again
        if wd == self._file_wd:
            self._file_wd = None
        self._wake()

    def _wake(self) -> None:
        self._pending = True
        w = self._waiter
        if w is not None and not w.done():
            w.set_result(True)

    async def wait(self, timeout: float) -> None:
        """Until the path changes or ``timeout`` seconds pass (always at most ``timeout``)."""
        if not self._pending and self.active:
            loop = asyncio.get_running_loop()
            fut = self._waiter = loop.create_future()
            handle = loop.call_later(timeout, _settle, fut)
            try:
                await fut
            finally:
                handle.cancel()
                self._waiter = None
        elif not self.active:
            await asyncio.sleep(timeout)
        self._pending = False
        gap = time.monotonic() - self._last_read
        if gap < MIN_READ_GAP:
            await asyncio.sleep(MIN_READ_GAP - gap)
        self._last_read = time.monotonic()

    def close(self) -> None:
        if self._hub is None:
            return
        for wd, name in ((self._file_wd, None), (self._dir_wd, self._base)):
            if wd is not None:
                self._hub.remove(self, wd, name)
        self._file_wd = self._dir_wd = None


def _settle(fut: asyncio.Future) -> None:
    if not fut.done():
        fut.set_result(False)
