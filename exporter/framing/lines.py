"""Bytes to lines, as every source and the offline commands cut them (no asyncio here: the offline
commands import this without the daemon's machinery)."""

from __future__ import annotations

# The bound on a logical line (--max-line-bytes): a physical line as read, a line joined from
# Kubernetes' CRI parts, a journal entry's message. Real lines are far shorter: the longest seen in
# vLLM logs (tests/fixtures, public threads) are a JSON record holding a whole traceback, tens of KB
# (Python prints at most 1,000 frames of one exception). A longer line is cut to its first three
# quarters and last quarter of the bound (the traceback's end, where the exception is, survives), is
# counted (vllm_log_exporter_lines_truncated_total) and warned about once per source; the middle
# is never held in memory.
MAX_LINE_BYTES = 1 << 20
MIN_LINE_BYTES, MAX_MAX_LINE_BYTES = 16 << 10, 64 << 20  # the range --max-line-bytes takes
# A JSON record's or journal entry's lines (message and traceback): the traceback joiner's own bound
# (exporter.stream.traceback.MAX_TRACEBACK_LINES), kept as the first and last half.
MAX_RECORD_LINES = 2000
_BACKSLASH = 0x5C
BOM = "\ufeff"
# A source's first bytes that must hold no LF before its CRs are taken as line ends: more than any
# line vLLM writes, so that no client's text behind a CR in a first record becomes lines of its own.
CR_EVIDENCE = 64 << 10


class Cut(str):
    """A line already cut to its first and last parts (and counted): a JSON record in it that also
    holds too many lines is not counted again."""

    __slots__ = ()


def tail_size(limit: int) -> int:
    return limit // 4


def _clean_head(head):
    """``head`` without an escape it cuts in two (a lone ``\\`` or a ``\\u`` missing hex digits), so
    that a cut inside a JSON string still leaves valid JSON. Bytes or text."""
    backslash = "\\" if isinstance(head, str) else b"\\"
    n = len(head) - len(head.rstrip(backslash))
    if n % 2:
        head = head[:-1]
    k = head.rfind(backslash, max(0, len(head) - 5))
    if k >= 0 and head[k + 1:k + 2] in ("u", b"u"):
        run = len(head[:k]) - len(head[:k].rstrip(backslash))
        if run % 2 == 0:  # the backslash at k starts an escape: drop the unfinished \uXX
            head = head[:k]
    return head


def cut_bytes(head: bytes, tail: bytes) -> str:
    """A cut line from its first bytes and its last ones (the tail as kept: one byte more than it
    needs, so that its start can be moved past a split escape): no UTF-8 sequence and no JSON escape
    split at either edge."""
    j = len(head)
    i = j
    while i > 0 and 0x80 <= head[i - 1] < 0xC0 and j - i < 3:
        i -= 1
    if i > 0 and head[i - 1] >= 0xC0:  # a lead byte: is its sequence complete?
        need = 2 if head[i - 1] < 0xE0 else 3 if head[i - 1] < 0xF0 else 4
        if j - (i - 1) < need:
            j = i - 1
    head = _clean_head(head[:j])
    k = 1  # the byte before the tail's first is unknown: start one on at least
    while k < len(tail) and k < 8 and (tail[k - 1] == _BACKSLASH or 0x80 <= tail[k] < 0xC0):
        k += 1
    return Cut(str(head, "utf-8", "replace") + str(memoryview(tail)[k:], "utf-8", "replace"))


def cut_line(line: bytes, limit: int) -> str:
    """``line`` (longer than ``limit``) as its first three quarters and last quarter of ``limit``."""
    t = tail_size(limit)
    return cut_bytes(line[:limit - t], line[len(line) - t - 1:] if t else b"")


def cut_text(text: str, limit: int) -> str:
    """The same for text (characters, not bytes): a line joined from parts, a journal message."""
    t = tail_size(limit)
    tail = text[len(text) - t - 1:] if t else ""
    k = 1
    while k < len(tail) and k < 8 and tail[k - 1] == "\\":
        k += 1
    return Cut(_clean_head(text[:limit - t]) + tail[k:])


def record_lines(text: str, max_lines: int = MAX_RECORD_LINES) -> tuple[list[str], bool]:
    """``text.split("\\n")``, at most ``max_lines`` of them (the first and last half) without making
    the others; True when some were left out."""
    if text.count("\n", 0) < max_lines:
        return text.split("\n"), False
    half = max_lines // 2
    head = text.split("\n", half)
    tail = head.pop().rsplit("\n", max_lines - half)
    return head + tail[1:], True


def warn_cut(name: str, limit: int, line_bytes: int) -> None:
    import structlog

    structlog.get_logger("vllm_log_exporter.source").warning(
        "line longer than --max-line-bytes, cut to its first and last parts (said once per source)",
        source=name, limit_bytes=limit, line_bytes=line_bytes)


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

    A line longer than ``max_line`` bytes is passed on cut (``cut_line``: its first and last parts),
    once, when its newline arrives; while it runs on, only those parts are held, so one runaway line
    cannot grow memory. ``on_cut(line_bytes)`` is called for each such line (default: a warning,
    once per splitter).
    """

    def __init__(self, name: str, max_line: int = MAX_LINE_BYTES, on_cut=None):
        self.name = name
        self.max_line = max_line
        self.on_cut = on_cut
        self.buf = b""
        self.skipping = False  # in a line longer than max_line: only its head and tail are kept
        self.head = b""
        self.tail = b""
        self.line_bytes = 0  # while skipping: bytes of that line read so far
        self._warned = False
        # exporter.framing.text's byte policy: NULs dropped (those inside the line not yet passed
        # on counted, so that ``held`` stays in the file's bytes), a BOM at a line's start dropped,
        # and CR as the line end of a source that never has LF
        self.nuls_held = 0
        # True until an LF is seen: reading began at a line's start (a file's first byte, a saved
        # position), so a source whose bytes hold CR and no LF may be one with CR-only ends. A
        # source that starts reading mid-file sets it False: its first bytes may be any line's middle.
        self.cr_ends = True
        self.cr_mode = False  # CR-only line ends found: each CR ends a line
        self._evidence = min(CR_EVIDENCE, max_line)
        self._pending = 0  # bytes read before any LF (while undecided)
        self._crs = 0  # CRs among them
        self._held_cr = False  # (CR mode) the last read ended with a CR, held back (in ``held``, not in ``buf``)

    @property
    def held(self) -> int:
        """Bytes read that no line passed on holds yet: a checkpoint lies that much before the read
        position (a cut line in progress is read again from its start after a restart)."""
        return (self.line_bytes if self.skipping else len(self.buf)) + self.nuls_held + self._held_cr

    def _line_ends(self, data: bytes) -> bytes:
        """CR-only line ends (exporter.framing.text): when the first CR_EVIDENCE bytes read from a
        file's start hold no LF and at least two CRs, each CR up to the first LF ends a line (but one
        right before that LF: CRLF's). An LF settles it: a bare CR is then a progress bar's redraw or
        a client's text, never a line end. Until then nothing was passed on (no line had ended), so
        the answer is the same however the bytes arrived."""
        if not self.cr_mode:
            room = self._evidence - self._pending
            if data.find(b"\n", 0, room) >= 0:
                self.cr_ends = False
                return data
            self._crs += data.count(b"\r", 0, room)
            if len(data) < room:
                self._pending += len(data)
                return data
            if self._crs < 2:  # a long first line: LF ends lines
                self.cr_ends = False
                return data
            self.cr_mode = True
            self.buf = self.buf.replace(b"\r", b"\n")  # (all that was read: nothing has been passed on)
        prefix = b""
        if self._held_cr:  # the CR the last read ended with: a line end unless an LF follows it (CRLF's)
            # (held here, not in the buffer: an over-long line being skipped would have taken it, and the line
            # after it with it)
            self._held_cr = False
            prefix = b"\r" if data[:1] == b"\n" else b"\n"
        nl = data.find(b"\n")
        if nl >= 0:
            self.cr_mode = self.cr_ends = False
            head = data[:nl]
            return prefix + (head[:-1].replace(b"\r", b"\n") + b"\r" if head[-1:] == b"\r"
                             else head.replace(b"\r", b"\n")) + data[nl:]
        if data[-1:] == b"\r":
            self._held_cr = True
            return prefix + data[:-1].replace(b"\r", b"\n")
        return prefix + data.replace(b"\r", b"\n")

    def _drop_nuls(self, data: bytes) -> bytes:
        """``data`` without its NULs; those inside the line left unfinished are counted in ``held``
        (those before its first other byte are as good as read: a restart may skip them)."""
        nl = data.rfind(b"\n")
        if nl >= 0:
            self.nuls_held = data[nl + 1:].lstrip(b"\0").count(b"\0")
        elif self.buf or self.skipping:
            self.nuls_held += data.count(b"\0")
        else:
            self.nuls_held += data.lstrip(b"\0").count(b"\0")
        return data.replace(b"\0", b"")

    def _cut(self, line_bytes: int) -> None:
        if self.on_cut is not None:
            self.on_cut(line_bytes)
        elif not self._warned:
            self._warned = True
            warn_cut(self.name, self.max_line, line_bytes)

    def _start_skipping(self, rest: bytes) -> None:
        t = tail_size(self.max_line)
        self.skipping = True
        self.head = rest[:self.max_line - t]
        self.tail = rest[len(rest) - t - 1:] if t else b""
        self.line_bytes = len(rest)

    def _more(self, data: bytes) -> None:
        t = tail_size(self.max_line)
        if t:
            self.tail = (self.tail + data[-t - 1:])[-t - 1:]
        self.line_bytes += len(data)

    def _finish(self) -> str:
        line = cut_bytes(self.head, self.tail)
        self._cut(self.line_bytes)
        self.skipping, self.head, self.tail, self.line_bytes = False, b"", b"", 0
        return line

    def feed(self, data: bytes) -> list[str]:
        """The complete lines ``data`` ends (with what was held before it); a :class:`Lines` when
        they were decoded in one piece."""
        if self.cr_ends:
            data = self._line_ends(data)
        if b"\0" in data:
            data = self._drop_nuls(data)
        elif self.nuls_held and b"\n" in data:
            self.nuls_held = 0
        first: list[str] = []
        if self.skipping:
            nl = data.find(b"\n")
            if nl < 0:
                self._more(data)
                return first
            self._more(data[:nl])
            first.append(self._finish())
            data = data[nl + 1:]
        buf = self.buf + data if self.buf else data
        cut = buf.rfind(b"\n")
        if cut >= 0 and len(buf) - cut - 1 <= self.max_line:
            if cut <= self.max_line or _no_line_over(buf, cut, self.max_line):
                # No line is too long: decode the complete lines at once, in place (a newline is
                # never part of a multi-byte sequence, so this equals decoding line by line).
                self.buf = buf[cut + 1:]
                text = str(memoryview(buf)[:cut], "utf-8", "replace")
                if BOM in text:  # (free for text all below U+0100: it cannot hold one)
                    return first + _no_bom(text.split("\n"))
                return first + text.split("\n") if first else Lines(text.split("\n"), text)
        lines = first
        start = 0
        limit = self.max_line
        while True:
            nl = buf.find(b"\n", start)
            if nl < 0:
                break
            if nl - start > limit:
                lines.append(cut_line(buf[start:nl], limit))
                self._cut(nl - start)
            else:
                lines.append(buf[start:nl].decode("utf-8", "replace"))
            start = nl + 1
        rest = buf[start:]
        if len(rest) > limit:
            self._start_skipping(rest)
            rest = b""
        self.buf = rest
        return _no_bom(lines)

    def flush(self, final: bool = False) -> list[str]:
        """The held partial line, e.g. when the writer has been silent for a while (a cut one too).
        ``final``: the input ended; a source that never had an LF then has CR-ended lines if it has
        a CR (exporter.framing.text)."""
        self.nuls_held = 0
        held_cr, self._held_cr = self._held_cr, False
        if self.skipping:
            return _no_bom([self._finish()])
        if held_cr:
            self.buf += b"\r"  # (it ends the line held)
        if not self.buf:
            return []
        if self.cr_mode or (final and self.cr_ends and b"\r" in self.buf):
            parts = self.buf.decode("utf-8", "replace").split("\r")
            self.buf = b""
            return _no_bom(parts[:-1] if not parts[-1] else parts)
        line = self.buf.decode("utf-8", "replace")
        self.buf = b""
        return _no_bom([line])


def _no_bom(lines: list[str]) -> list[str]:
    """A byte order mark at a line's start is no text (exporter.framing.text): dropped."""
    for i, line in enumerate(lines):
        if line[:1] == BOM:
            lines[i] = line[1:]
    return lines
