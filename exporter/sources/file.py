"""Follow a file like ``tail -F``.

Starts at the end (or the start with ``from_start``), survives rename rotation (the old file is read
to its end before the new one is opened), copytruncate, deletion and re-creation, and a file that
does not exist yet. Polls: it works the same on every filesystem, including bind mounts and overlay
where inotify events go missing; inotify (exporter.sources.notify) only ends a poll's wait early, so
a line written is read within milliseconds where inotify works.

copytruncate is seen by size (below our offset) or, when the file refilled past our offset within
one poll, by its first bytes changing. The tail we had not read yet is then taken from the copy
(a sibling file that starts with the same bytes, ``.gz`` too), so what is lost is only what
logrotate itself loses: lines written between its copy and its truncate. Rename rotations that
outran us (two within one poll, or while catching up) leave files we never opened: after a rotation,
sibling files written after the old file's last write are read before the new file, each once.
A file renamed away is kept open and read for ROTATED_GRACE_SECONDS after its last write, beside the
new one, because its writer may not have reopened yet.

``position`` is the (device, inode, offset) just past the last complete line handed on and taken
by the consumer, with the file's head (exporter.sources.identity). Given back as ``resume`` (from the
state file) after a restart of the exporter, the source continues exactly there: in the same file
(if it still starts with that head), or, when the file was rotated while the exporter was down, in
the rotated file found by its inode in the same directory, then the new file. Only regular files are
opened, without blocking; a path that cannot be looked at for a while (its directory's permissions,
no file descriptor left) is no rotation, and the same file coming back to its path is read on.
"""

from __future__ import annotations

import asyncio
import errno
import gzip
import os
import time
import zlib
from typing import AsyncIterator

import structlog

from exporter.framing.lines import MAX_LINE_BYTES, LineSplitter
from exporter.sources.base import FROM_START_HINT, Status
from exporter.sources.identity import (HEAD_BYTES, NO_HEAD, SPECIAL, Head, Position, head_of_stream, open_regular,
                                       read_head, same_head)
from exporter.sources.notify import Watch

log = structlog.get_logger("vllm_log_exporter.source.file")

CHUNK = 1 << 17  # as exporter.offline.passes: small enough to stay in the CPU caches
LOOP_TURN_SECONDS = 0.01
# A file renamed away stays open this long after its last write: the writer may still be writing to
# it until it reopens its log (logrotate's postrotate signal), and inotify sees the rename at once.
ROTATED_GRACE_SECONDS = 5.0
# A file the exporter was pointed at and that is still not there this long after it first looked is a
# warning, and /healthz says "waiting": a mistyped --source would otherwise wait in silence. A missing
# directory is said at once (vLLM creates its log file, not the directories above it).
MISSING_WARN_SECONDS = 30.0
_COMPRESSED = (".gz", ".xz", ".bz2", ".zst", ".lz4")


def _note(status: Status, event: str) -> None:
    note = getattr(status, "note", None)
    if note is not None:
        note(event)


def _waiting(status: Status, reason: str | None) -> None:
    waiting = getattr(status, "waiting", None)
    if waiting is not None:
        waiting(reason)


def _siblings(path: str, exclude: set[tuple[int, int]]) -> list[tuple[str, os.stat_result]]:
    """Regular files next to ``path`` named like its rotations (``x.log.1``, ``x.log-20261203``, ``.gz``)."""
    folder, base = os.path.split(os.path.abspath(path))
    out = []
    try:
        with os.scandir(folder) as it:
            for entry in it:
                if not (entry.name.startswith(base + ".") or entry.name.startswith(base + "-")):
                    continue
                try:
                    st = entry.stat(follow_symlinks=False)
                except OSError:
                    continue
                if entry.is_file(follow_symlinks=False) and (st.st_dev, st.st_ino) not in exclude:
                    out.append((entry.path, st))
    except OSError:
        pass
    return out


class _GzipCopy(gzip.GzipFile):
    """A compressed copy read through its own file object, closed with it."""

    def close(self) -> None:
        raw = self.fileobj
        try:
            super().close()
        finally:
            if raw is not None:
                raw.close()


def _open_copy(path: str):
    """A rotated file or copy, gzip or not by its first bytes; a regular file only (never blocks)."""
    f = os.fdopen(open_regular(path), "rb")
    if f.read(2) == b"\x1f\x8b":
        f.seek(0)
        return _GzipCopy(fileobj=f, mode="rb")
    f.seek(0)
    return f


def _head_of(path: str, n: int) -> Head | None:
    try:
        with _open_copy(path) as g:
            return head_of_stream(g, n) if hasattr(g, "fileobj") else read_head(g.fileno(), n)
    except (OSError, EOFError, zlib.error):
        return None


def _ident(f) -> tuple[int, int]:
    st = os.fstat(f.fileno())
    return st.st_dev, st.st_ino


def _find_by_inode(path: str, dev: int, ino: int) -> str | None:
    folder = os.path.dirname(os.path.abspath(path))
    try:
        with os.scandir(folder) as it:
            for entry in it:
                try:
                    st = entry.stat(follow_symlinks=False)
                except OSError:
                    continue
                if st.st_ino == ino and st.st_dev == dev and entry.is_file(follow_symlinks=False):
                    return entry.path
    except OSError:
        return None
    return None


class FileSource:
    def __init__(self, name: str, path: str, from_start: bool = False, poll_interval: float = 0.25,
                 partial_timeout: float = 5.0, max_line: int = MAX_LINE_BYTES, resume: Position | dict | None = None,
                 notify: bool = True, within: tuple[str, ...] | None = None, quiet: bool = False):
        self.name = name
        self.path = path
        # a glob's file (exporter.sources.file_glob): what is opened must still be a regular file
        # inside these directories when it is opened, not only when the glob looked
        self.within = within
        self.from_start = from_start
        self.poll_interval = poll_interval
        self.notify = notify  # False: poll only (where inotify is known not to work)
        self.partial_timeout = partial_timeout
        self.max_line = max_line
        self.resume = Position.from_checkpoint(resume) if resume is not None else None
        self.position: Position | None = None
        self.head: Head = NO_HEAD  # the head of the file being read
        self.quiet = quiet  # where reading begins is not said (a glob's file taking its turn again)
        self._missing_since: float | None = None  # (monotonic) when the file was first found not there
        self._missing_said = False

    def checkpoint(self) -> dict | None:
        p = self.position
        return None if p is None else p.checkpoint()

    def _open(self, path: str, quiet: bool = False):
        try:
            f = self._open_within(path)
        except OSError as e:
            if not quiet:
                self._cannot_open(e)
            return None, None
        self._open_errno = None
        st = os.fstat(f.fileno())
        return f, (st.st_dev, st.st_ino)

    def _open_within(self, path: str):
        """Open ``path`` only as a regular file (a FIFO, device or socket put in its place must not
        hang the event loop in open(), nor be read for ever: exporter.sources.identity), and for a
        glob's file only if its real path lies inside ``within``: a directory of the path swapped for
        a link after the glob looked is caught here, by what was opened."""
        from exporter.sources.file_glob import inside

        fd = open_regular(path)
        if self.within is None:
            return os.fdopen(fd, "rb")
        try:
            try:
                real = os.readlink(f"/proc/self/fd/{fd}")
            except OSError:  # no /proc: the path as it resolves now
                real = os.path.realpath(path)
            if not inside(real, self.within):
                raise OSError(errno.EXDEV, "not a regular file inside the followed directories", real)
            return os.fdopen(fd, "rb")
        except BaseException:
            os.close(fd)
            raise

    def _cannot_open(self, e: OSError) -> None:
        """Why the file is not being read, said once each time the reason changes (it is retried)."""
        if e.errno == getattr(self, "_open_errno", None):
            return
        self._open_errno = e.errno
        if e.errno == errno.ENOENT:
            log.info("waiting for file", source=self.name, path=self.path, then="read from its first line")
        elif e.errno in (errno.EACCES, errno.EPERM):
            log.warning("cannot read file: permission denied; retrying", source=self.name, path=self.path,
                        uid=os.geteuid(), gid=os.getegid())
        elif e.errno == errno.EXDEV:
            log.warning("file not followed: it is no longer a regular file inside the followed directories",
                        source=self.name, path=self.path, now=e.filename)
        elif e.errno == errno.EINVAL and SPECIAL in (e.strerror or ""):
            log.warning("file not read: it is not a regular file (a FIFO, device or socket would block or never "
                        "end); waiting for a regular file there", source=self.name, path=self.path, found=e.strerror)
        else:
            log.warning("cannot open file; retrying", source=self.name, path=self.path, error=e.strerror or str(e))

    def _check_missing(self, status: Status) -> None:
        """The file is not there: say so, once, at once when its directory is missing too, else after
        MISSING_WARN_SECONDS; /healthz says "waiting" until it comes. A glob's files come and go with
        their pods: not said for them."""
        if self.within is not None or self._missing_said or getattr(self, "_open_errno", None) != errno.ENOENT:
            return
        now = time.monotonic()
        if self._missing_since is None:
            self._missing_since = now
        folder = os.path.dirname(os.path.abspath(self.path))
        said = {"source": self.name, "path": self.path, "then": "read from its first line when it appears"}
        if not os.path.isdir(folder):
            log.warning("the file's directory does not exist: is the path right?", **said, directory=folder)
            reason = f"no such directory: {folder}"
        elif now - self._missing_since >= MISSING_WARN_SECONDS:
            log.warning("the file still does not exist: is the path right?", **said,
                        waited_seconds=round(now - self._missing_since))
            reason = f"no such file: {self.path}"
        else:
            return
        self._missing_said = True
        _waiting(status, reason)

    def _found(self, status: Status) -> None:
        if self._missing_said:
            _waiting(status, None)
        self._missing_since, self._missing_said = None, False

    def _commit(self, f, ident, split: LineSplitter) -> None:
        self.position = Position(ident[0], ident[1], f.tell() - split.held, self.head or None)

    async def _drain_rotated(self, split: LineSplitter) -> AsyncIterator[list[str]]:
        """After a restart: finish the file we were reading if it was rotated away meanwhile."""
        r = self.resume
        old = _find_by_inode(self.path, r.dev, r.ino)
        if old is None or os.path.abspath(old) == os.path.abspath(self.path):
            return
        f, ident = self._open(old, quiet=True)
        if f is not None and (ident != (r.dev, r.ino) or not r.same_file(f.fileno())):
            f.close()  # (its inode taken by another file since)
            f = None
        if f is None:
            return
        self.head = read_head(f.fileno())
        log.info("resuming in rotated file", source=self.name, path=old, offset=r.offset)
        with f:
            if os.fstat(f.fileno()).st_size >= r.offset:
                f.seek(r.offset)
            async for lines in self._to_end(f, split, lambda: self._commit(f, ident, split)):
                yield lines

    @staticmethod
    def _read_head(f) -> Head:
        return read_head(f.fileno())

    @staticmethod
    def _from_first_data(f) -> None:
        """Read from the file's first byte, past a hole at its start: a writer without O_APPEND after
        a copytruncate leaves one as long as the file was, which need not be read NUL by NUL."""
        f.seek(read_head(f.fileno(), 1).start)

    @staticmethod
    async def _to_end(g, split: LineSplitter, commit=None, intact=None) -> AsyncIterator[list[str]]:
        """What an open file holds from where it stands to its end (``commit`` after each batch taken).

        ``intact(offset)``, asked after each read from ``offset``, False: what was read is not the
        file's any more; reading stops there."""
        while True:
            at = g.tell() if intact is not None else 0
            data = g.read(CHUNK)
            if intact is not None and not intact(at):
                break
            if not data:
                break
            lines = split.feed(data)
            if lines:
                yield lines
                if commit is not None:
                    commit()
            await asyncio.sleep(0)
        lines = split.flush()
        if lines:
            yield lines

    async def _read_from(self, path: str, offset: int, split: LineSplitter,
                         head: Head | None = None) -> AsyncIterator[list[str]]:
        """``head``: what the file starts with. A copy can be rewritten in place while it is read
        (a copytruncate that copies onto the same name): each read below the size the file had
        when opened is kept only if the file still starts so; else ``self.rewritten`` is set and
        reading stops."""
        self.rewritten = False
        with _open_copy(path) as g:
            if offset:
                g.seek(offset)
            size = os.fstat(g.fileno()).st_size

            def still_the_copy(at: int) -> bool:
                if at < size and not head.alike(read_head(g.fileno(), len(head.data))):
                    self.rewritten = True
                return not self.rewritten
            # (a .gz copy is written once, under a new name: only a plain copy is checked)
            checked = head and not hasattr(g, "fileobj")
            async for lines in self._to_end(g, split, intact=still_the_copy if checked else None):
                yield lines

    async def _tail_from_copy(self, split: LineSplitter, head: Head, pos: int, ident,
                              status: Status) -> AsyncIterator[list[str]]:
        """After copytruncate: the part of the old content we had not read, from logrotate's copy."""
        if not head:  # nothing was read, so nothing is unread
            return
        candidates = sorted(_siblings(self.path, {ident}), key=lambda c: c[1].st_mtime_ns, reverse=True)
        for path, st in candidates[:8]:
            copied = _head_of(path, len(head.data))
            if copied is None or not head.alike(copied):
                continue  # (a copy may be shorter than the head read since: the same bytes as far as it goes)
            if not path.endswith(_COMPRESSED) and st.st_size <= pos:
                # the copy ends where reading had already come (or before: what was written between
                # logrotate's copy and its truncate was read from the file itself): nothing is lost
                log.info("the copy of the truncated file holds nothing unread", source=self.name, path=path,
                         copy_bytes=st.st_size, read_to=pos)
                return
            try:
                async for lines in self._read_from(path, pos, split, head):
                    yield lines
            except (OSError, EOFError, zlib.error) as e:
                _note(status, "tail_lost")
                log.warning("copy of the truncated file unreadable; its unread tail is lost", source=self.name,
                            path=path, error=str(e))
                return
            if self.rewritten:
                _note(status, "tail_lost")
                log.warning("copy of the truncated file was rewritten while it was read (the next copytruncate "
                            "came first): part of its unread tail is lost", source=self.name, path=path, offset=pos)
                return
            log.info("unread tail taken from the copy", source=self.name, path=path, offset=pos)
            return
        _note(status, "tail_lost")
        log.warning("file truncated and no copy of it found: lines written after the last read are lost",
                    source=self.name, path=self.path, offset=pos)

    async def _late_rotations(self, split: LineSplitter, rotated_from, new_ident, status: Status) -> AsyncIterator[list[str]]:
        """Files rotated away before we ever opened them: written after the file we let go, never seen."""
        old_ident, old_mtime_ns, old_head = rotated_from
        late = [(p, st) for p, st in _siblings(self.path, {old_ident, new_ident})
                if st.st_mtime_ns > old_mtime_ns]
        for path, st in sorted(late, key=lambda c: c[1].st_mtime_ns):
            if path.endswith(_COMPRESSED):
                # compressing makes a new file of old lines (and a new mtime): not a missed rotation
                continue
            head = _head_of(path, HEAD_BYTES)
            if head is None:
                _note(status, "file_skipped")
                log.warning("rotated file skipped: it could not be read", source=self.name, path=path)
                continue
            if old_head and head.alike(old_head):
                continue  # a copy of the file we already read (a backup, copytruncate's copy)
            log.warning("rotated file read late: it was rotated away before it was opened (reading fell behind)",
                        source=self.name, path=path, bytes=st.st_size)
            _note(status, "rotated_late")
            try:
                async for lines in self._read_from(path, 0, split):
                    yield lines
            except (OSError, EOFError, zlib.error) as e:
                _note(status, "file_skipped")
                log.warning("rotated file skipped: it could not be read", source=self.name, path=path, error=str(e))

    def _initial(self, split: LineSplitter):
        """Open the file at start-up and decide where reading begins."""
        f, ident = self._open(self.path)
        if f is None:
            return None, None
        r = self.resume
        size = os.fstat(f.fileno()).st_size
        said = {"source": self.name, "path": self.path}
        same = r is not None and ident == (r.dev, r.ino)
        if same and r.offset <= size and r.same_file(f.fileno()):
            f.seek(r.offset)
            if r.offset:  # what ended the line before says the file's line ends (exporter.framing.text)
                split.cr_mode = split.cr_ends = os.pread(f.fileno(), 1, r.offset - 1) == b"\r"
            (log.debug if self.quiet else log.info)("reading resumes at the saved offset", **said, offset=r.offset,
                                                    unread_bytes=size - r.offset)
            return f, ident
        if same and r.offset <= size:
            log.info("reading starts at the file's first line: it starts with other bytes than when its offset was "
                     "saved (truncated and written again, or another file on the same inode)", **said, size=size)
        elif same:
            log.info("reading starts at the file's first line: it is shorter than the saved offset "
                     "(truncated while the exporter was down)", **said, offset=r.offset, size=size)
        elif r is not None:  # a new file replaced the one we knew: all of it is new
            log.info("reading starts at the file's first line: it is not the file the saved offset was in "
                     "(rotated or replaced meanwhile)", **said, size=size)
        elif not self.from_start:
            f.seek(0, os.SEEK_END)
            split.cr_ends = False  # (its first bytes may be any line's middle)
            log.info("reading starts at the end of the file: the lines already in it are not read", **said,
                     skipped_bytes=size, hint=FROM_START_HINT)
            return f, ident
        else:
            log.info("reading starts at the file's first line (from_start)", **said, size=size)
        self._from_first_data(f)
        return f, ident

    def _drain_old(self, draining: list) -> list[str]:
        """What files renamed away got since we let go of them; each closed after its grace period."""
        out: list[str] = []
        now = time.monotonic()
        for entry in list(draining):
            g, split, last = entry
            while True:
                data = g.read(CHUNK)
                if not data:
                    break
                out += split.feed(data)
                entry[2] = last = now
            if now - last >= ROTATED_GRACE_SECONDS:
                out += split.flush()
                g.close()
                draining.remove(entry)
        return out

    async def batches(self, status: Status) -> AsyncIterator[list[str]]:
        split = LineSplitter(self.name, self.max_line, on_cut=getattr(status, "line_cut", None))
        if self.position is not None:  # started again (after a failure): on from where it was
            self.resume = self.position
        if self.resume is not None:
            async for lines in self._drain_rotated(split):
                yield lines
        f, ident = self._initial(split)
        opened_before = f is not None
        # a regular file there that could not be opened (permission, no file descriptor left) is the
        # file we were to read: once it opens, reading begins as it would have (not at its first line)
        unopened = f is None and os.path.isfile(self.path)
        head = self.head = self._read_head(f) if f is not None else NO_HEAD
        missing_polls = 0
        rotated_from = None  # (ident, mtime_ns, head) of the file we last let go by rotation
        if f is not None:
            self._commit(f, ident, split)
        else:
            self._check_missing(status)
        status.up(f is not None)
        watch = Watch(self.path, enabled=self.notify)
        idle_since = None
        last_turn = time.monotonic()
        draining: list = []  # [file, splitter, time of its last data] of files renamed away
        try:
            while True:
                if draining:
                    lines = self._drain_old(draining)
                    if lines:
                        yield lines
                if f is None:
                    if rotated_from is None or missing_polls:
                        await watch.wait(self.poll_interval)
                    missing_polls += 1
                    # A file that appears after start is new: read it from the beginning.
                    if unopened:
                        f, ident = self._initial(split)
                    else:
                        f, ident = self._open(self.path)
                    if f is None:
                        self._check_missing(status)
                    else:
                        self._found(status)
                    if f is not None and rotated_from is not None and ident == rotated_from[0] \
                            and self.position is not None and self.position.same_file(f.fileno()):
                        # the very file let go (its path was away for a while): on from where it was
                        log.info("file back at its path: read on from where it was", source=self.name,
                                 path=self.path)
                        f.seek(self.position.offset)
                        for entry in [e for e in draining if _ident(e[0]) == ident]:
                            # (kept open since it left: what it read meanwhile was passed on; on from there)
                            g, old_split, _ = entry
                            draining.remove(entry)
                            f.seek(g.tell() - old_split.held)
                            g.close()
                        rotated_from, missing_polls = None, 0
                        watch.follow_file()
                        head = self.head = self._read_head(f)
                        status.up(True)
                        continue
                    if f is not None:
                        if rotated_from is not None:
                            async for lines in self._late_rotations(split, rotated_from, ident, status):
                                yield lines
                            rotated_from = None
                        if opened_before:
                            status.restarted()
                        opened_before = True
                        watch.follow_file()
                        missing_polls = 0
                        if unopened:
                            unopened = False
                            head = self.head = self._read_head(f)
                        else:
                            head = self.head = NO_HEAD
                            self._from_first_data(f)
                        self._commit(f, ident, split)
                        status.up(True)
                        log.info("file opened", source=self.name, path=self.path)
                    continue
                data = f.read(CHUNK)
                if data:
                    idle_since = None
                    if len(head.data) < HEAD_BYTES:
                        # taken as we read, not at the next poll: by then a refill may have replaced it
                        head = self.head = self._read_head(f)
                    lines = split.feed(data)
                    if lines:
                        yield lines
                    self._commit(f, ident, split)
                    # while catching up, a copytruncate can refill the file past us: look at its first
                    # bytes (one pread per chunk) and leave to the checks below if they changed
                    if len(data) == CHUNK and not (head and not same_head(f.fileno(), head)):
                        # More is waiting: read it before looking at the path again, but let the
                        # event loop answer scrapes in between (every few milliseconds, not every
                        # chunk: each turn of the loop costs), or catching up starves /metrics.
                        now = time.monotonic()
                        if now - last_turn >= LOOP_TURN_SECONDS:
                            last_turn = now
                            await asyncio.sleep(0)
                        continue
                if idle_since is None:
                    idle_since = time.monotonic()
                await watch.wait(self.poll_interval)
                if split.buf and time.monotonic() - idle_since >= self.partial_timeout:
                    lines = split.flush()
                    if lines:
                        yield lines
                    self._commit(f, ident, split)
                try:
                    st = os.stat(self.path)
                except OSError as e:
                    if e.errno not in (errno.ENOENT, errno.ENOTDIR):
                        # the path cannot be looked at now (its directory's permissions, no descriptor
                        # left): nothing says the file went; the one open is read on, looked at again
                        continue
                    st = None
                pos = f.tell()
                if st is None or (st.st_dev, st.st_ino) != ident:
                    # Rotated or deleted: drain what the old file still holds, then look for the new one.
                    # (a chunk at a time: the old file may hold gigabytes written since the last read)
                    async for lines in self._to_end(f, split):
                        yield lines
                    self._commit(f, ident, split)
                    rotated_from = (ident, os.fstat(f.fileno()).st_mtime_ns, self._read_head(f))
                    missing_polls = 0  # look for the new file at once: the next rotation may be close
                    if os.fstat(f.fileno()).st_nlink and len(draining) < 4:
                        draining.append([f, LineSplitter(self.name, self.max_line, getattr(status, "line_cut", None)),
                                         time.monotonic()])
                    else:  # deleted (or many rotations at once): nobody writes there any more
                        f.close()
                    f = None
                    status.up(False)
                    log.info("file rotated or removed", source=self.name, path=self.path)
                    continue
                refilled = bool(head) and st.st_size >= pos and not same_head(f.fileno(), head)
                if st.st_size < pos or refilled:
                    log.info("file truncated", source=self.name, path=self.path, offset=pos, size=st.st_size,
                             seen_by="first bytes" if refilled else "size")
                    _note(status, "truncated")
                    now = self._read_head(f)  # the generation that followed
                    async for lines in self._tail_from_copy(split, head, pos, ident, status):
                        yield lines
                    # Reading the copy takes time: a writer faster than we read, with rotations
                    # close together, may have truncated the file again meanwhile. The generation
                    # seen in it is then only in a copy (read from there) or gone (counted lost).
                    for _ in range(8):
                        if not now or same_head(f.fileno(), now):
                            break
                        log.warning("file truncated again while its copy was read (reading is behind the "
                                    "writer)", source=self.name, path=self.path)
                        _note(status, "truncated")
                        seen, now = now, self._read_head(f)
                        async for lines in self._tail_from_copy(split, seen, 0, ident, status):
                            yield lines
                    lines = split.flush()
                    if lines:
                        yield lines
                    self._from_first_data(f)
                    head = self.head = NO_HEAD
                    self._commit(f, ident, split)
                    status.restarted()
        finally:
            watch.close()
            for g, _, _ in draining:
                g.close()
            if f is not None:
                f.close()
