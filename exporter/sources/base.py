"""What every source shares: a name, a status sink, batching of bytes into lines, and backoff."""

from __future__ import annotations

import asyncio
from typing import AsyncIterator, Protocol

import structlog

log = structlog.get_logger("vllm_log_exporter.source")

MAX_LINE_BYTES = 1 << 20


class Status(Protocol):
    def up(self, up: bool) -> None: ...
    def restarted(self) -> None: ...


class Source(Protocol):
    name: str

    def batches(self, status: Status) -> AsyncIterator[list[str]]: ...


class LineSplitter:
    """Bytes in, complete lines out; a partial line is held until its newline arrives.

    A line longer than ``max_line`` bytes is cut there, passed on once (so it is counted) and the
    rest of it dropped up to the next newline, so one runaway line cannot grow memory.
    """

    def __init__(self, name: str, max_line: int = MAX_LINE_BYTES):
        self.name = name
        self.max_line = max_line
        self.buf = b""
        self.skipping = False

    def feed(self, data: bytes) -> list[str]:
        buf = self.buf + data if self.buf else data
        cut = buf.rfind(b"\n")
        if not self.skipping and cut >= 0 and len(buf) - cut - 1 <= self.max_line:
            complete = buf[:cut]
            if len(complete) <= self.max_line or max(map(len, complete.split(b"\n"))) <= self.max_line:
                # No line is too long: decode the complete lines at once (a newline is never part
                # of a multi-byte sequence, so this equals decoding line by line).
                self.buf = buf[cut + 1:]
                return complete.decode("utf-8", "replace").split("\n")
        lines: list[str] = []
        start = 0
        while True:
            nl = buf.find(b"\n", start)
            if nl < 0:
                break
            if self.skipping:
                self.skipping = False
            elif nl - start > self.max_line:
                lines.append(buf[start:start + self.max_line].decode("utf-8", "replace"))
                log.warning("line too long, cut", source=self.name, limit_bytes=self.max_line)
            else:
                lines.append(buf[start:nl].decode("utf-8", "replace"))
            start = nl + 1
        rest = buf[start:]
        if len(rest) > self.max_line:
            if not self.skipping:
                lines.append(rest[: self.max_line].decode("utf-8", "replace"))
                log.warning("line too long, cut", source=self.name, limit_bytes=self.max_line)
                self.skipping = True
            rest = b""
        self.buf = rest
        return lines

    def flush(self) -> list[str]:
        """The held partial line, e.g. when the writer has been silent for a while."""
        if not self.buf or self.skipping:
            self.buf = b""
            self.skipping = False
            return []
        line = self.buf.decode("utf-8", "replace")
        self.buf = b""
        return [line]


class Backoff:
    def __init__(self, first: float = 0.5, cap: float = 30.0):
        self.first, self.cap = first, cap
        self.delay = first

    def reset(self) -> None:
        self.delay = self.first

    async def sleep(self) -> None:
        await asyncio.sleep(self.delay)
        self.delay = min(self.cap, self.delay * 2)

