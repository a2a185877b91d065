"""What makes a file the one we were reading: its device and inode, and its head.

An inode number is reused as soon as a file is deleted, and a file truncated and written again
(copytruncate) keeps its inode: the first bytes tell them apart. The head is the first HEAD_BYTES
from the file's first byte that is not NUL, with that byte's offset. A writer without O_APPEND
(``vllm serve > LOG``) keeps its offset across logrotate's copytruncate, so after each truncation
its next line lands after a hole of NULs as long as the file was: the head then starts further on,
and a truncation is told from the hole's end even when the first 4 KiB are NULs before and after.

Opening is for regular files only, without blocking: a FIFO, a device or a socket put where a log
was would hang ``open()`` (a FIFO with no writer) or never end (``/dev/zero``).
"""

from __future__ import annotations

import errno
import hashlib
import os
import stat
from dataclasses import dataclass

import structlog

log = structlog.get_logger("vllm_log_exporter.source.file")

# The first bytes tell a file from its refill and from a copy of another: 4 KiB is tens of lines,
# timestamps and request ids among them, where one line could start two files alike.
HEAD_BYTES = 4096
# How far past a hole's start its end is looked for when the file system reports no holes (its NULs
# are real bytes then): past this, the file counts as holding no head yet.
MAX_HOLE_SCAN = 1 << 20
_SCAN_STEP = 1 << 16
SPECIAL = "not a regular file"


@dataclass(frozen=True)
class Head:
    start: int  # offset of the file's first byte that is not NUL
    data: bytes  # up to HEAD_BYTES from there

    def __bool__(self) -> bool:
        return bool(self.data)

    def alike(self, other: "Head") -> bool:
        """The same start, and the shorter's bytes begin the longer's (one file seen at two sizes)."""
        n = min(len(self.data), len(other.data))
        return self.start == other.start and self.data[:n] == other.data[:n]

    def fingerprint(self) -> str:
        return hashlib.blake2b(self.data, digest_size=8).hexdigest()


NO_HEAD = Head(0, b"")


def _first_data(fd: int, at: int) -> int:
    """The offset of the first byte past ``at`` that a hole does not hold (``at`` without the look)."""
    cur = os.lseek(fd, 0, os.SEEK_CUR)
    try:
        return os.lseek(fd, at, os.SEEK_DATA)
    except OSError as e:
        if e.errno == errno.ENXIO:  # nothing but hole after ``at``
            return os.fstat(fd).st_size
        return at  # (no SEEK_DATA on this file system: the NULs are scanned)
    finally:
        os.lseek(fd, cur, os.SEEK_SET)  # the reader's own position is untouched


def read_head(fd: int, n: int = HEAD_BYTES) -> Head:
    """The head of the open file ``fd``: up to ``n`` bytes from its first byte that is not NUL. One
    pread for a file that starts with text (every file but one after a hole)."""
    data = os.pread(fd, n, 0)
    if data[:1] != b"\0":
        return Head(0, data)
    at = _first_data(fd, 0)
    end = at + MAX_HOLE_SCAN
    while at < end:
        chunk = os.pread(fd, _SCAN_STEP, at)
        if not chunk:
            return Head(at, b"")
        rest = chunk.lstrip(b"\0")
        if rest:
            at += len(chunk) - len(rest)
            return Head(at, os.pread(fd, n, at))
        at += len(chunk)
    return Head(at, b"")


def same_head(fd: int, head: Head) -> bool:
    """Whether the file still starts as ``head`` says (False: truncated and written again)."""
    return read_head(fd, len(head.data)) == head


def head_of_stream(f, n: int = HEAD_BYTES) -> Head:
    """The head of a file read as a stream (a .gz copy): NULs skipped, at most MAX_HOLE_SCAN of them."""
    at = 0
    while at < MAX_HOLE_SCAN:
        chunk = f.read(_SCAN_STEP)
        if not chunk:
            return Head(at, b"")
        rest = chunk.lstrip(b"\0")
        if rest:
            at += len(chunk) - len(rest)
            return Head(at, (rest + f.read(max(0, n - len(rest))))[:n])
        at += len(chunk)
    return Head(at, b"")


def open_regular(path: str) -> int:
    """An fd of ``path`` opened for reading, only if it is a regular file; never blocks (O_NONBLOCK:
    a FIFO opens at once, and is refused). OSError(EINVAL, SPECIAL) for anything else."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC)
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            raise OSError(errno.EINVAL, f"{SPECIAL} ({kind(mode)})", path)
        os.set_blocking(fd, True)
        return fd
    except BaseException:
        os.close(fd)
        raise


def kind(mode: int) -> str:
    for test, name in ((stat.S_ISFIFO, "a FIFO"), (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"),
                       (stat.S_ISSOCK, "a socket"), (stat.S_ISDIR, "a directory")):
        if test(mode):
            return name
    return "not a file"


@dataclass(frozen=True)
class Position:
    dev: int
    ino: int
    offset: int
    # the file's head when the position was taken (exporter.sources.identity): the same inode holding
    # other first bytes is another file, or this one truncated and written again
    head: Head | None = None
    # the same as read back from the state file: its fingerprint, length and start
    saved_head: tuple[str, int, int] | None = None

    def _head_key(self) -> tuple[str, int, int] | None:
        h = self.head
        return (h.fingerprint(), len(h.data), h.start) if h else self.saved_head

    def checkpoint(self) -> dict:
        cp = {"dev": self.dev, "ino": self.ino, "offset": self.offset}
        key = self._head_key()
        if key is not None:
            cp.update(zip(("head", "head_len", "head_start"), key))
        return cp

    def same_file(self, fd: int) -> bool:
        """Whether the open file ``fd`` (of this position's device and inode) still starts with the
        head the position was taken with (True when it was taken without one)."""
        key = self._head_key()
        if key is None:
            return True
        fp, n, start = key
        now = read_head(fd, n)
        return now.start == start and len(now.data) == n and now.fingerprint() == fp

    @classmethod
    def from_checkpoint(cls, cp) -> "Position | None":
        """A position read back from the state file, or None (with a warning) if it cannot be one."""
        if isinstance(cp, Position):
            return cp
        try:
            values = [cp[k] for k in ("dev", "ino", "offset")]
        except (KeyError, TypeError):
            values = None
        if values is None or not all(isinstance(v, int) and not isinstance(v, bool) and v >= 0 for v in values):
            log.warning("state file: file position is not three non-negative integers, ignored", position=cp)
            return None
        fp, n, start = cp.get("head"), cp.get("head_len"), cp.get("head_start", 0)
        if isinstance(fp, str) and len(fp) <= 64 and all(type(v) is int and 0 <= v for v in (n, start)) \
                and 0 < n <= HEAD_BYTES:
            return cls(*values, saved_head=(fp, n, start))
        return cls(*values)
