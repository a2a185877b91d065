"""Bytes to lines, as every source and the offline commands cut them (no asyncio here: the offline
commands import this without the daemon's machinery)."""

from __future__ import annotations

MAX_LINE_BYTES = 1 << 20


def _warn_cut(name: str, limit: int) -> None:
    import structlog

    structlog.get_logger("vllm_log_exporter.source").warning("line too long, cut", source=name, limit_bytes=limit)


def _no_line_over(data: bytes, end: int, limit: int) -> bool:
    """True when no line of ``data[:end]`` is longer than ``limit`` bytes (False may also mean
    "not sure").

    Every block of limit/2 bytes holding a newline bounds each line below ``limit``: a few finds
    instead of splitting a megabyte just to measure it."""
    half = max(1, limit // 2)
    return all(data.find(b"\n", a, a + half) >= 0 for a in range(0, end - half + 1, half))


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
            if cut <= self.max_line or _no_line_over(buf, cut, self.max_line):
                # No line is too long: decode the complete lines at once, in place (a newline is
                # never part of a multi-byte sequence, so this equals decoding line by line).
                self.buf = buf[cut + 1:]
                return str(memoryview(buf)[:cut], "utf-8", "replace").split("\n")
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
                _warn_cut(self.name, self.max_line)
            else:
                lines.append(buf[start:nl].decode("utf-8", "replace"))
            start = nl + 1
        rest = buf[start:]
        if len(rest) > self.max_line:
            if not self.skipping:
                lines.append(rest[: self.max_line].decode("utf-8", "replace"))
                _warn_cut(self.name, self.max_line)
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
