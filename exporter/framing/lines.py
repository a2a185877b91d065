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


class Lines(list):
    """Lines as the splitter cut them from one decoded piece of text, which ``text`` keeps: the
    lines joined by newlines, so a reader that wants them as one string (the pipeline's check of a
    batch) need not join them again. ``text`` describes the list as it was made: ``joined()`` only
    trusts it while the list still has its first length (the splitter's callers never change a
    batch; one that did would get a join, not a wrong answer)."""

    __slots__ = ("text", "first_len")

    def __init__(self, lines: list[str], text: str):
        super().__init__(lines)
        self.text = text
        self.first_len = len(lines)  # (not `count`: that would hide list.count)


def joined(lines: list[str]) -> str:
    """``"\n".join(lines)``, taken from the splitter's text when the lines came from it unchanged."""
    if type(lines) is Lines and len(lines) == lines.first_len:
        return lines.text
    return "\n".join(lines)


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
        """The complete lines ``data`` ends (with what was held before it); a :class:`Lines` when
        they were decoded in one piece."""
        buf = self.buf + data if self.buf else data
        cut = buf.rfind(b"\n")
        if not self.skipping and cut >= 0 and len(buf) - cut - 1 <= self.max_line:
            if cut <= self.max_line or _no_line_over(buf, cut, self.max_line):
                # No line is too long: decode the complete lines at once, in place (a newline is
                # never part of a multi-byte sequence, so this equals decoding line by line).
                self.buf = buf[cut + 1:]
                text = str(memoryview(buf)[:cut], "utf-8", "replace")
                return Lines(text.split("\n"), text)
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
