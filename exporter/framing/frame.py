"""Framing: turn one raw physical log line into a :class:`Frame`, one way for every shape.

A vLLM line reaches us wrapped in layers that vLLM did not write (journald, ``podman logs -t``,
compose, kubectl, stern, Ray, a viewer), coloured with ANSI codes, and prefixed by vLLM's own process
tag and logger header. ``frame_general`` reads a line in one pass: colour and redraws cleaned; a JSON
envelope's line taken out (exporter.framing.envelopes); the named wrappers peeled from the start
(exporter.framing.wrappers); the record's start read there, or found further in behind a wrapper
(exporter.framing.headers: the first start wins); the rest is the message. ``frame_line`` first tries
the commonest whole shapes in one match (``common_match``: journald's text, an RFC 3339 stamp, a node log's
tag, or no wrapper; then vLLM's process tag and header), which must agree with it.

Framing is pure: no I/O, no state except the timestamp converter's cache.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime

from exporter.framing import envelopes, headers, wrappers
from exporter.framing.clock import EARLIEST, LATEST, Clock, zone_of
from exporter.framing.headers import HEADER_P, PROCESS, PROCESS_NAME_P, PROCESS_P, pid_of  # noqa: F401 (re-exported)
from exporter.framing.wrappers import JOURNALD_P, MONTHS

# ESC-form colours always go; caret-notation (``^[[0;36m``) always goes too. The ESC-less form
# (``[0;36m`` left after a paste lost the ESC byte) is only stripped when a reset code shows the
# line really was coloured, so a literal ``[5m`` in a message survives.
_ANSI_ESC = re.compile(r"\x1b\[[0-9;]*[A-Za-z]|(?:\^\[|#033)\[[0-9;]*m")
_ANSI_BARE = re.compile(r"\[(?:\d{1,3};)*\d{1,3}m")
_BARE_RESET_HINTS = ("[0;0m", "[0m", "[39m")

# A level word and its space, commonest first: a message holding none of them has no vLLM record
# glued on (the pipeline and its fast path test this before the glue regex).
LEVEL_WORDS = ("INFO ", "WARNING ", "ERROR ", "DEBUG ", "CRITICAL ")
# What a Python traceback's first line starts with (the pipeline joins what follows).
TRACEBACK_START = "Traceback (most recent call last)"
# The most common whole shape, journald + optional process tag + vLLM header, in one match; built
# from the same three patterns. Anything else (other wrappers, nesting, colour) takes the general way.
JOURNALD_RECORD_P = JOURNALD_P + f"((?:{PROCESS_P})?{HEADER_P})"
_JOURNALD_RECORD = re.compile(JOURNALD_RECORD_P)
# The commonest instance of that shape with nothing optional left out (an English month, the unit's pid, a
# process tag, the header's date): a third cheaper to match, with the same groups in the same places; a line
# it does not fit is matched by the whole pattern. The pipeline's fast path matches it first and hands the
# match on with a line it declines, so a line is matched once (``frame_line``'s ``shape``).
JOURNALD_COMMON = re.compile(
    r"([A-Z][a-z]{2}) {1,2}(\d{1,2}) (\d\d):(\d\d):(\d\d) ([^\s:\[\]]+) ([^\s\[:]+)\[(\d+)\]: "
    rf"(\(({PROCESS_NAME_P}) pid=(\d+)\) (DEBUG|INFO|WARNING|ERROR|CRITICAL) (\d\d)-(\d\d) (\d\d):(\d\d):(\d\d) "
    r"\[([^\s\]]+):(\d+)\] )")
# The record part of that shape (groups 9-19 there), and the same record behind the other commonest wrappers,
# with the record's groups in the same places: vLLM's own line with no wrapper (a plain file, stdin, ``podman
# logs``: groups 1-8 empty), and behind an RFC 3339 stamp with a zone (the container API's ``timestamps=1``)
# and a Kubernetes node log's full-line tag (groups 1-8: year .. zone, as wrappers.RFC3339's). Each reads as
# frame_general reads it: tests/test_fastpath.py compares them on every fixture line in each wrapper.
_RECORD_COMMON_P = JOURNALD_COMMON.pattern[JOURNALD_COMMON.pattern.index(r"(\(("):]
PLAIN_COMMON = re.compile("()" * 8 + _RECORD_COMMON_P)
STAMPED_COMMON = re.compile(r"(\d{4})-(\d\d)-(\d\d)T(\d\d):(\d\d):(\d\d)(\.\d+)?(Z|[+-]\d\d:?\d\d) (?:(?:stdout|stderr) F )?"
                            + _RECORD_COMMON_P)


def common_match(text: str) -> re.Match | None:
    """The match of the commonest shapes on ``text`` (a clean line, white space stripped from its end):
    journald's (``JOURNALD_COMMON``, else the whole journald pattern), the bare record's or the stamped one's,
    by the first character; None for any other line. Groups 9-19 are the record's in each."""
    c = text[:1]
    if c == "(":
        return PLAIN_COMMON.match(text)
    if c.isalpha():
        return JOURNALD_COMMON.match(text) or _JOURNALD_RECORD.match(text)
    if c.isdigit():
        # (wrappers.peel reads a stamp as a viewer's stamp and bar first where "|" stands in text[16:48]: in this
        # shape only the stamp, the tag and the record's start, which hold none, stand there)
        return STAMPED_COMMON.match(text)
    return None


def common_header(m: re.Match) -> str:
    """The vLLM header of a ``common_match`` (its level to the message), white space stripped from its end: what a
    Frame's ``header`` is, stripped, and what the stream's state keys a record's lines by."""
    return m.string[m.start(12):m.end()].rstrip()


@dataclass(slots=True)
class Frame:
    """One physical line, unwrapped. ``message`` is what parsers read."""

    raw: str
    message: str
    ts: float | None = None
    ts_source: str | None = None  # "rfc3339" | "journald" | "local" (a dated wrapper's zone-less stamp) | "vllm"
    host: str | None = None
    unit: str | None = None
    process: str | None = None
    pid: int | None = None
    level: str | None = None
    logger: str | None = None  # "file.py:123"
    header: str | None = None  # the exact vLLM header text, to tie continuation lines together
    uvicorn: bool = False
    clean: str = ""  # the whole line, colour and carriage returns gone
    inner_at: int = 0  # where in ``clean`` the outer wrappers end

    @property
    def inner(self) -> str:
        """The line without outer wrappers (what vLLM itself wrote); cut only when asked for."""
        return self.clean[self.inner_at:]


def strip_ansi(line: str) -> str:
    if "\x1b" in line or "^[" in line or "#033[" in line:
        line = _ANSI_ESC.sub("", line)
    # "0m"/"9m" first: every reset hint holds one, and most lines hold neither (a cheap scan).
    if ("0m" in line or "9m" in line) and "[" in line and any(h in line for h in _BARE_RESET_HINTS):
        line = _ANSI_BARE.sub("", line)
    return line


def _clean(line: str) -> str:
    if "\r" in line:
        # tqdm redraws with bare CR; only the last drawing is what a terminal shows. A process
        # prefix written before the CR belongs to the line, so keep it in front.
        head, _, tail = line.rstrip("\r\n").rpartition("\r")
        if head:
            pm = PROCESS.match(strip_ansi(head.split("\r", 1)[0]))
            line = (pm.group(0) if pm else "") + tail
        else:
            line = tail
    return line.rstrip("\n").rstrip()


def frame_line(line: str, clock: Clock, clean: bool = False, shape: re.Match | None = None) -> Frame:
    """Peel wrappers, colour, process tag and vLLM header off one line.

    ``clean`` says the caller already knows the line holds no ESC, caret or ``#033`` colour and no
    carriage return (the pipeline checks a whole batch at once), so those checks are skipped.
    ``shape``: the caller's ``common_match`` of ``line.rstrip()`` (a clean line's), not made again; False when
    the caller found the line in none of those shapes."""
    if shape is False:
        return frame_general(line, clock)
    if shape is not None or (line[:1] in COMMON_STARTS or line[:1].isalpha()) and (
            clean or ("\r" not in line and "\x1b" not in line and "^[" not in line and "#033[" not in line)):
        f = _frame_common(line, clock, shape)
        if f is not None:
            return f
    return frame_general(line, clock)


# what a line in a common shape other than journald's starts with (journald's: a letter)
COMMON_STARTS = frozenset("(0123456789")


# A colour reset that lost its ESC: only then does the general path strip bare colour codes.
BARE_RESET = re.compile(r"\[(?:0|39|0;0)m")
_MISS = object()
NO_MONTH = object()


def _frame_common(line: str, clock: Clock, m: re.Match | None = None) -> Frame | None:
    """The frame of a line in one of the commonest shapes (``common_match``), or None."""
    text = line.rstrip()
    # (every bare colour reset holds "0m" or "9m": two finds before the regex)
    if ("0m" in text or "9m" in text) and BARE_RESET.search(text) is not None:
        return None  # colour codes that lost their ESC: the general path strips them
    if m is None:
        m = common_match(text)
        if m is None:
            return None
    when = record_time(m, text, clock)
    if when is NO_MONTH:
        return None
    proc, pid, level = m.group(10, 11, 12)
    host, unit = (None, None) if m.re is PLAIN_COMMON or m.re is STAMPED_COMMON else m.group(6, 7)
    end = m.end()
    f = Frame(line, text[end:], None, None, host, unit, None, None, level, text[m.start(18):m.end(19)],
              text[m.start(12):end], False, text, m.start(9))
    if proc is not None:  # (nested tags never match: the header must follow the first tag)
        f.process, f.pid = proc, pid_of(pid)
    f.ts, f.ts_source = when
    return f


def record_time(m: re.Match, text: str, clock: Clock):
    """(time, "journald" | "rfc3339" | "vllm" | None) of a ``common_match``: the wrapper's stamp's, else the
    vLLM header's; NO_MONTH if journald's month name is unknown (the general path decides then)."""
    r = m.re
    if r is STAMPED_COMMON or r is PLAIN_COMMON:
        ts = _stamped_time(m, text, clock) if r is STAMPED_COMMON else None
        if ts is not None:
            return ts, "rfc3339"
        ts = _header_time(m, clock)
        return (ts, "vllm") if ts is not None else (None, None)
    ts = _journald_time(m, text, clock)
    if ts is NO_MONTH:
        return NO_MONTH
    if ts is not None:
        return ts, "journald"
    ts = _header_time(m, clock)
    return (ts, "vllm") if ts is not None else (None, None)


def _journald_time(m: re.Match, text: str, clock: Clock):
    # Lines of one minute share the stamp up to the seconds: that part is converted once (every
    # periodic stats line falls in a new second, but rarely in a new minute).
    minutes = clock.minutes
    key = text[:m.start(5)]
    base = minutes.get(key, _MISS)
    if base is _MISS:
        mon, day, hh, mm = m.group(1, 2, 3, 4)
        low = mon.lower()
        month = MONTHS.get(low[:3]) or MONTHS.get(low)
        base = clock.minute_start(month, int(day), int(hh), int(mm)) if month else NO_MONTH
        if len(minutes) > 4096:
            minutes.clear()
        minutes[key] = base
    if base is NO_MONTH:
        return base
    return clock.plus_seconds(base, int(m.group(5)))


def _stamped_time(m: re.Match, text: str, clock: Clock) -> float | None:
    """An RFC 3339 stamp's time, as Clock.rfc3339 reads it; its minute converted once (the clock's cache).

    (STAMPED_COMMON's stamp starts the line, fixed-width up to its seconds: "2026-08-04T02:45" is text[:16], the
    seconds text[17:19]; a line costs a slice, a look-up and the fraction's float.)"""
    frac, zone = m.group(7, 8)
    minutes = clock.minutes
    key = text[:16] + zone
    base = minutes.get(key, _MISS)
    if base is _MISS:
        # (a new minute: its day's start, converted once a day, and the minutes since; a zone is a fixed offset)
        days, day_key = clock.days, key[:10] + zone
        day = days.get(day_key, _MISS)
        if day is _MISS:
            try:
                day = datetime(int(text[:4]), int(text[5:7]), int(text[8:10]), tzinfo=zone_of(zone)).timestamp()
            except (ValueError, OverflowError):
                day = None
            if len(days) > 256:
                days.clear()
            days[day_key] = day
        hh, mm = int(text[11:13]), int(text[14:16])
        base = day + hh * 3600 + mm * 60 if day is not None and hh < 24 and mm < 60 else None
        if len(minutes) > 4096:
            minutes.clear()
        minutes[key] = base
    if base is None:
        return None
    ss = int(text[17:19])
    ts = base + (ss if ss < 60 else 59) + (float(frac) if frac else 0.0)
    return ts if EARLIEST <= ts <= LATEST else None  # (clock.plausible, inline)


def _header_time(m: re.Match, clock: Clock) -> float | None:
    if m.group(13) is None:
        return None
    mo, vday, vhh, vmm, vss = m.group(13, 14, 15, 16, 17)
    return clock.local(int(mo), int(vday), int(vhh), int(vmm), int(vss))


def frame_general(line: str, clock: Clock) -> Frame:
    """Every shape, the one way (the reference the fast shape must agree with): the line cleaned of
    colour and redraws; the named wrappers peeled from its start (exporter.framing.wrappers); the record's
    start read there (exporter.framing.headers), else looked for further in, where what stands before it
    must be a wrapper (read for its time); the rest is the message. With no record start found, the
    message is the line after its named wrappers."""
    text = _clean(line)
    if text[:2] == '{"' and (inner := envelopes.unwrap(text)) is not None:
        return _enveloped(line, inner, clock)  # (before colour goes: the envelope escapes the line's ESC bytes)
    text = strip_ansi(text)
    f = Frame(raw=line, message=text, clean=text)
    if text[:1] == "(":  # (vLLM's own line, its process tag first: the commonest shape of a plain file)
        rest, after_stamp = text, False
    else:
        rest, after_stamp = wrappers.peel(f, text, clock)
        f.inner_at = len(text) - len(rest)
    msg = headers.read(f, rest, clock, after_stamp)
    if msg is None and (rest[:4] == "    " or rest[:8] == '  File "'):
        f.message = rest  # a bare traceback's frame or code line: no record starts behind it (the search is spared)
        return f
    if msg is not None and f.level is None and f.process is not None and msg[:1] not in ("", " ", "("):
        # a prefix between the process tag and the header (VLLM_LOGGING_PREFIX's text, 0.12-0.30)
        at = headers.find(msg[:64])
        if at > 0 and wrappers.wrapper_like(msg[:at]) and (more := headers.read(f, msg[at:], clock)) is not None:
            msg = more
    if msg is None:
        at = headers.find(rest)
        if at > 0 and wrappers.wrapper_like(rest[:at]):
            wrappers.read_time(f, rest[:at], clock)
            f.inner_at += at
            found = rest[at:]
            if found[:1].isdigit():  # (Dynamo's header after its stamp: the stamp is the record's time)
                found, stamped = wrappers.peel(f, found, clock)
                msg = headers.read(f, found, clock, stamped)
            else:
                msg = headers.read(f, found, clock)
    f.message = rest if msg is None else msg
    return f


def _enveloped(raw: str, inner: tuple, clock: Clock) -> Frame:
    """The frame of a line a JSON envelope carries (exporter.framing.envelopes): the line's own, with the
    envelope's time (a zoned stamp beats the line's own) and names where the line has none."""
    line, ts, host, unit = inner
    f = frame_general(line, clock)
    f.raw = raw
    if ts is not None and f.ts_source != "rfc3339":
        f.ts, f.ts_source = ts, "rfc3339"
    f.host, f.unit = f.host or host, f.unit or unit
    return f
