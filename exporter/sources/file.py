"""Follow a file like ``tail -F``.

Starts at the end (or the start with ``from_start``), survives rename rotation (the old file is read
to its end before the new one is opened), copytruncate (size below our offset: start again at 0),
deletion and re-creation, and a file that does not exist yet. Polls: it works the same on every
filesystem, including bind mounts and overlay where inotify events go missing.
"""

from __future__ import annotations

import asyncio
import os
from typing import AsyncIterator

import structlog

from exporter.sources.base import MAX_LINE_BYTES, LineSplitter, Status

log = structlog.get_logger("vllm_log_exporter.source.file")

CHUNK = 1 << 18


class FileSource:
    def __init__(self, name: str, path: str, from_start: bool = False, poll_interval: float = 0.25,
                 partial_timeout: float = 5.0, max_line: int = MAX_LINE_BYTES):
        self.name = name
        self.path = path
        self.from_start = from_start
        self.poll_interval = poll_interval
        self.partial_timeout = partial_timeout
        self.max_line = max_line

    def _open(self, at_end: bool):
        try:
            f = open(self.path, "rb")
        except OSError:
            return None, None
        st = os.fstat(f.fileno())
        if at_end:
            f.seek(0, os.SEEK_END)
        return f, (st.st_dev, st.st_ino)

    async def batches(self, status: Status) -> AsyncIterator[list[str]]:
        split = LineSplitter(self.name, self.max_line)
        f, ident = self._open(at_end=not self.from_start)
        opened_before = f is not None
        if f is None:
            log.info("waiting for file", source=self.name, path=self.path)
        status.up(f is not None)
        idle = 0.0
        try:
            while True:
                if f is None:
                    await asyncio.sleep(self.poll_interval)
                    # A file that appears after start is new: read it from the beginning.
                    f, ident = self._open(at_end=False)
                    if f is not None:
                        if opened_before:
                            status.restarted()
                        opened_before = True
                        status.up(True)
                        log.info("file opened", source=self.name, path=self.path)
                    continue
                data = f.read(CHUNK)
                if data:
                    idle = 0.0
                    lines = split.feed(data)
                    if lines:
                        yield lines
                    if len(data) == CHUNK:
                        continue  # more is waiting: read it before looking at the path again
                await asyncio.sleep(self.poll_interval)
                idle += self.poll_interval
                if idle >= self.partial_timeout and split.buf:
                    lines = split.flush()
                    if lines:
                        yield lines
                try:
                    st = os.stat(self.path)
                except OSError:
                    st = None
                pos = f.tell()
                if st is None or (st.st_dev, st.st_ino) != ident:
                    # Rotated or deleted: drain what the old file still holds, then look for the new one.
                    rest = f.read()
                    lines = split.feed(rest) if rest else []
                    lines += split.flush()
                    if lines:
                        yield lines
                    f.close()
                    f = None
                    status.up(False)
                    log.info("file rotated or removed", source=self.name, path=self.path)
                    continue
                if st.st_size < pos:
                    log.info("file truncated", source=self.name, path=self.path, offset=pos, size=st.st_size)
                    lines = split.flush()
                    if lines:
                        yield lines
                    f.seek(0)
                    status.restarted()
        finally:
            if f is not None:
                f.close()
