"""The line pipeline of one log stream: framing, parsing, traceback joining, engine attribution.

One :class:`Pipeline` per stream (per vLLM server), because two facts need memory of earlier lines:
a Python traceback spans many lines and becomes one event, and spec-decode / KV-transfer lines carry
no engine id and belong to the ``Engine NNN`` stats line logged just before them by the same process.

Every line fed is accounted exactly once as ``parsed``, ``ignored`` (recognisably vLLM/uvicorn
output that carries no metric) or ``unparsed`` (nothing recognised it).
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass, field

from exporter.stream import fastpath
from exporter.parsers.events import Event
from exporter.framing.frame import LEVEL_WORDS, TRACEBACK_START, Clock, Frame, frame_line
from exporter.framing.cri import CriJoiner, may_hold_parts
from exporter.stream.lifecycle import Lifecycle
from exporter.framing.lines import joined
from exporter.framing.json_records import looks_like_record, record_frames
from exporter.parsers import access_log, parse_errors, parse_frame

PARSED, IGNORED, UNPARSED = "parsed", "ignored", "unparsed"
RESULTS = (PARSED, IGNORED, UNPARSED)
_RANK = {UNPARSED: 0, IGNORED: 1, PARSED: 2}

_CHAIN = (
    "The above exception was the direct cause of the following exception",
    "During handling of the above exception, another exception occurred",
)
_FILE_LINE = re.compile(r'File "([^"]+)", line (\d+)(?:, in (\S+))?')
_EXC_LINE = re.compile(r"([A-Za-z_][\w.]*)(?:: (.*))?$")
_GLUED = re.compile(r"(?<=\S)(?=(?:DEBUG|INFO|WARNING|ERROR|CRITICAL) \d\d-\d\d \d\d:\d\d:\d\d \[)")

# Output that is plainly vLLM's (or its libraries') but is not a log record: progress bars,
# the banner art, torch/NCCL chatter. Counted as ignored, not unparsed.
_NOISE = re.compile(
    r"^(?:Loading (?:safetensors|pt) checkpoint shards|Capturing CUDA graph|Processed prompts|"
    r"Adding requests|Compiling|\d+%\|| *[█▀▄▌▐ ]+$|NCCL INFO|[\w.-]+:\d+:\d+ \[\d+\] NCCL INFO|"
    r"\[(?:rank\d+\]:)?\[?[WIE]\d{4}|Process \w+:$|warnings\.warn|  warnings\.warn|\s*$|"
    # systemd's lines about a unit, "vllm.service: Consumed 2min 3.1s CPU time." (the journal's
    # MESSAGE without the "systemd[1]: " of the short output)
    r"[\w@:.\\-]+\.(?:service|scope): )"
)

# Anything that makes the raw text of a line differ from what framing hands the parsers (colour,
# carriage returns), or that makes line order matter (a traceback starting): a batch holding one of
# these takes the line-by-line path.
BATCH_UNSAFE = ("\x1b", "\r", "^[", "#033[", TRACEBACK_START)


def batch_unsafe(text: str) -> bool:
    """Whether ``text`` holds one of BATCH_UNSAFE. A one-character find is a memchr; the others are
    searched only when their first character occurs (CPython's search for a two-character needle
    is slow on a megabyte)."""
    return ("\x1b" in text or "\r" in text or ("^" in text and "^[" in text)
            or ("#" in text and "#033[" in text) or TRACEBACK_START in text)


# What str.isspace() calls space, as a set: a set lookup beats a method call on every access line
# (tests check the list against str.isspace over all of Unicode).
_WHITESPACE = frozenset("\t\n\x0b\x0c\r\x1c\x1d\x1e\x1f \x85\xa0\u1680\u2000\u2001\u2002\u2003\u2004\u2005"
                        "\u2006\u2007\u2008\u2009\u200a\u2028\u2029\u202f\u205f\u3000")


# What count_access finds in a batch: how often each access-line tail occurs, the positions of the
# other lines (in order), and the positions of the first and last line counted (-1: none).
Tally = tuple[dict[str, int], list[int], int, int]


def count_access(lines: list[str]) -> Tally:
    """The batch path's count of ``lines``, which the caller found free of BATCH_UNSAFE.

    The common access line is counted by its tail, the text after the client address (what that
    text means is looked up once per distinct text, later); a " [" after the request means another
    record was glued on, so that line is one of the others, which the pipeline feeds one by one.
    Pure: lines in, tally out."""
    sep = access_log.SEP
    match_tail = access_log.match_tail
    ws = _WHITESPACE
    tails: dict[str, int] = {}
    get = tails.get
    others: list[int] = []
    other = others.append
    for i, line in enumerate(lines):
        # (partition, not find: str.find parses its arguments the slow way)
        head, found, tail = line.partition(sep)
        if found and head and head[-1] not in ws:
            n = get(tail)
            if n is not None:
                tails[tail] = n + 1
                continue
            if " [" not in tail and match_tail(tail) is not None:
                tails[tail] = 1
                continue
        other(i)
    if not tails:
        return tails, others, -1, -1
    # the counted lines are the gaps in `others`: the first gap from either end
    first = next((j for j, i in enumerate(others) if i != j), len(others))
    n = len(lines)
    last = n - 1 - next((j for j, i in enumerate(reversed(others)) if i != n - 1 - j), len(others))
    return tails, others, first, last


MAX_TRACEBACK_LINES = 2000
MAX_EXCEPTION_EXTRA_LINES = 20
TRACEBACK_IDLE_SECONDS = 2.0


# vLLM's model loaders: a CUDA OOM raised inside one is weights that do not fit, a failed start-up.
_LOADING_FUNCTIONS = frozenset({"load_model", "load_weights", "_load_weights", "initialize_model", "_initialize_model",
                                "load_model_weights", "download_and_load_weights"})


@dataclass
class _Traceback:
    ts: float | None
    process: str | None
    pid: int | None
    header: str | None
    line: int
    phase: str = "frames"  # "frames" | "exception"
    exceptions: list[list[str]] = field(default_factory=list)
    frames: int = 0
    where: str | None = None
    loading: bool = False  # a frame was loading the model's weights (an OOM there: the weights do not fit)
    lines: int = 1
    extra: int = 0
    touched: float = 0.0
    last_ts: float | None = None  # log time of the latest line taken

    def offer(self, f: Frame) -> bool:
        """Take ``f`` if it continues this traceback; False means the traceback ended before it."""
        # logger.exception repeats the first line's exact header on every line of the record;
        # a bare (stderr) traceback has no header at all.
        if self.header is not None:
            # a blank line of the record ("ERROR ... [core.py:398] ") lost its last space to framing's
            # rstrip: the header is the same without it
            if f.header is None or f.header.rstrip() != self.header:
                return False
        elif f.header is not None or f.uvicorn:
            return False
        if self.lines >= MAX_TRACEBACK_LINES:
            return False
        msg = f.message
        s = msg.strip()
        if s.startswith(TRACEBACK_START):
            self.phase = "frames"
        elif self.phase == "frames":
            if not s or msg[:1] in (" ", "\t"):
                m = _FILE_LINE.search(s) if s.startswith("File ") else None
                if m:
                    self.frames += 1
                    self.where = f"{m.group(1).rsplit('/', 1)[-1]}:{m.group(2)}" + (f" in {m.group(3)}" if m.group(3) else "")
                    if m.group(3) in _LOADING_FUNCTIONS:
                        self.loading = True
            else:
                self.exceptions.append([s])
                self.phase = "exception"
                self.extra = 0
        else:
            if not s or s.startswith(_CHAIN) or msg[:1] in (" ", "\t"):
                pass
            elif self.extra < MAX_EXCEPTION_EXTRA_LINES and not parse_frame(f):
                # Exception messages run on (CUDA's "CUDA kernel errors might be asynchronously ...").
                self.exceptions[-1].append(s)
                self.extra += 1
            else:
                return False
        self.lines += 1
        return True

    def events(self) -> list[Event]:
        fields: dict = {"frames": self.frames, "lines": self.lines, "chain_length": len(self.exceptions)}
        parsed = []
        for lines in self.exceptions:
            m = _EXC_LINE.match(lines[0])
            if m and (m.group(2) is not None or "." in m.group(1) or m.group(1)[:1].isupper()):
                parsed.append((m.group(1), (m.group(2) or "").strip()))
            else:
                parsed.append((None, lines[0]))
        if parsed:
            fields["exception"], fields["message"] = parsed[-1][0], parsed[-1][1][:500]
            if len(parsed) > 1:
                fields["root_exception"], fields["root_message"] = parsed[0][0], parsed[0][1][:500]
        else:
            fields["exception"], fields["message"] = None, ""
        if self.where:
            fields["where"] = self.where
        out = [Event("traceback", fields)]
        seen = set()
        for lines in self.exceptions:
            # The exception line itself names the error; run-on lines only when it does not.
            evs = parse_errors(Frame(raw=lines[0], message=lines[0]))
            if not evs and len(lines) > 1:
                text = " ".join(lines)
                evs = parse_errors(Frame(raw=text, message=text))
            for ev in evs:
                if ev.kind not in seen:
                    seen.add(ev.kind)
                    out.append(ev)
        if "oom" in seen and self.loading and "startup_failure" not in seen:
            seen.add("startup_failure")
            out.append(Event("startup_failure", {"reason": "weights_oom", "message": fields.get("message", "")[:500]}))
        # what the traceback was recognised as (exporter.stream.incidents: such a traceback is counted as that kind)
        fields["kinds"] = sorted(seen)
        for ev in out:
            ev.ts, ev.process, ev.pid, ev.line = self.ts, self.process, self.pid, self.line
        return out


class Pipeline:
    def __init__(self, clock: Clock | None = None):
        self.clock = clock or Clock()
        self.lineno = 0
        self._tracebacks: dict[tuple, _Traceback] = {}
        self._engine_of: dict[tuple, int] = {}
        self._cri = CriJoiner()
        self.lifecycle = Lifecycle()  # what the error lines mean: a death, a stop, a failed start

    def join_parts(self, lines: list[str], text: str | None = None) -> list[str]:
        """The lines with Kubernetes' CRI partial records joined (exporter.framing.cri); feed_batch does
        this itself, callers of ``feed`` do it first."""
        if self._cri.pending or may_hold_parts(joined(lines) if text is None else text):
            return self._cri.feed(lines)
        return lines

    def feed_batch(self, lines: list[str], on_error=None) -> tuple[
            dict[str, int], list[Event], dict[tuple, int], tuple[float | None, float | None]]:
        """Account many lines; return counts by result, the events, access-log responses counted by
        (method, path, status, http version) instead of one event each, and the timestamps of the
        first and last access line so counted (for a run's time range).

        Access-log lines are most of a busy server's log and carry nothing but those three values,
        so when no traceback is open and the batch holds nothing that framing would change, they are
        counted on the raw lines (``count_access``) and every other line goes through ``feed``. The
        result is the same as feeding each line (tests compare both paths); only the per-line access
        events (their timestamps and line numbers) are not made.

        A line whose parsing raises (a parser bug) is counted as unparsed and handed to
        ``on_error(line)``; without ``on_error`` the exception propagates.
        """
        counts = {PARSED: 0, IGNORED: 0, UNPARSED: 0}
        events: list[Event] = []
        text = joined(lines)
        if self._cri.pending or may_hold_parts(text):
            lines = self._cri.feed(lines)
            text = "\n".join(lines)
        clean = not batch_unsafe(text)
        start = self.lineno
        if not clean or self._tracebacks:
            # Line order matters (a traceback is open or may start) or framing changes the text:
            # every line is fed.
            tails, others, first, last = {}, range(len(lines)), -1, -1
        else:
            tails, others, first, last = count_access(lines)
        classify, clock, ignore = fastpath.classify, self.clock, fastpath.IGNORE
        fast_event, usual = self._fast_event, self._feed_usual
        for i in others:
            line = lines[i]
            self.lineno = start + i  # feed() counts this line
            try:
                # feed()'s own steps, unrolled: most of these lines are periodic or ignored ones
                fast = classify(line, clock) if clean and not self._tracebacks else None
                if fast is ignore:
                    counts[IGNORED] += 1
                    continue
                res, ev = (PARSED, [fast_event(fast)]) if fast is not None else usual(line, clean)
            except Exception:
                if on_error is None:
                    raise
                counts[UNPARSED] += 1
                on_error(line)
                continue
            counts[res] += 1
            if ev:
                events.extend(ev)
        self.lineno = start + len(lines)
        counts[PARSED] += len(lines) - len(others)
        access: dict[tuple, int] = {}
        match_tail = access_log.match_tail
        for tail, n in tails.items():
            r = match_tail(tail)
            access[r] = access.get(r, 0) + n
        if events:
            events = self.lifecycle.feed(events)
        span = (None, None)
        if first >= 0:
            span = (frame_line(lines[first], self.clock).ts, frame_line(lines[last], self.clock).ts)
        return counts, events, access, span

    def feed(self, line: str, clean: bool = False) -> tuple[str, list[Event]]:
        """Account one physical line; return its result and the events it completed.

        ``clean``: the caller checked that the line holds nothing of BATCH_UNSAFE."""
        if clean and not self._tracebacks:
            fast = fastpath.classify(line, self.clock)
            if fast is fastpath.IGNORE:
                self.lineno += 1
                return IGNORED, []
            if fast is not None:
                return PARSED, self.lifecycle.feed([self._fast_event(fast)])
        res, events = self._feed_usual(line, clean)
        return res, (self.lifecycle.feed(events) if events else events)

    def _fast_event(self, fast: tuple) -> Event:
        self.lineno += 1
        kind, fields, ts, process, pid = fast
        self._attribute(kind, fields, (process, pid))
        return Event(kind, fields, ts, process, pid, self.lineno)

    def _feed_usual(self, line: str, clean: bool) -> tuple[str, list[Event]]:
        """Framing, the glue check and the parsers: every line the fast path does not answer."""
        self.lineno += 1
        f = frame_line(line, self.clock, clean)
        msg = f.message
        if msg[:2] == '{"' and looks_like_record(msg):
            frames = record_frames(f, self.clock, self.lineno)
            if frames:
                return self._feed_record(frames)
        # A glued record's header holds " [" (one cheap scan rules out most lines).
        if " [" in msg and any(w in msg for w in LEVEL_WORDS) and _GLUED.search(msg):
            return self._feed_glued(f)
        return self._feed_frame(f)

    def _feed_frames(self, frames) -> tuple[str, list[Event]]:
        """Several frames of one physical line: their events, and the line's best result."""
        best, events = UNPARSED, []
        for g in frames:
            r, ev = self._feed_frame(g)
            events.extend(ev)
            if _RANK[r] > _RANK[best]:
                best = r
        return best, events

    def _feed_glued(self, f: Frame) -> tuple[str, list[Event]]:
        parts = [part for part in _GLUED.split(f.message) if part]
        f.message = parts[0]
        return self._feed_frames([f] + [self._glued_part(f, part) for part in parts[1:]])

    def _glued_part(self, f: Frame, part: str) -> Frame:
        """A record glued onto ``f``'s line: its own framing, the line's wrapper facts where it has none."""
        g = frame_line(part, self.clock)
        g.process, g.pid = g.process or f.process, g.pid or f.pid
        g.host, g.unit = f.host, f.unit
        if f.ts_source == "rfc3339" or g.ts is None:
            g.ts, g.ts_source = f.ts, f.ts_source
        return g

    def _feed_record(self, frames: list[Frame]) -> tuple[str, list[Event]]:
        """A JSON record's frames (exporter.framing.json_records): its message, then its traceback's lines,
        which end with the record."""
        best, events = self._feed_frames(frames)
        key = (frames[0].process, frames[0].pid)
        tb = self._tracebacks.get(key)
        if tb is not None and tb.header == frames[0].header.rstrip():
            events.extend(self._tracebacks.pop(key).events())
        return best, events

    def _feed_frame(self, f: Frame) -> tuple[str, list[Event]]:
        key = (f.process, f.pid)
        if not self._tracebacks:
            return self._classify(f, key)
        tb = self._tracebacks.get(key)
        if tb is not None:
            if tb.offer(f):
                tb.touched = time.monotonic()
                if f.ts is not None:
                    tb.last_ts = f.ts
                return PARSED, []
            done = self._tracebacks.pop(key).events()
            r, ev = self._classify(f, key)
            return r, done + ev
        if f.ts is not None:
            # Another process's line, later in log time: a traceback silent since then is over. This
            # keeps offline passes (no wall clock) in step with the daemon's idle flush.
            done = self._finish_quiet(f.ts)
            if done:
                r, ev = self._classify(f, key)
                return r, done + ev
        return self._classify(f, key)

    def _finish_quiet(self, now_ts: float) -> list[Event]:
        out: list[Event] = []
        for k in list(self._tracebacks):
            tb = self._tracebacks[k]
            last = tb.last_ts if tb.last_ts is not None else tb.ts
            if last is not None and now_ts - last > TRACEBACK_IDLE_SECONDS:
                out.extend(self._tracebacks.pop(k).events())
        return out

    def _attribute(self, kind: str, fields: dict, key: tuple) -> None:
        """Spec-decode and KV-transfer lines name no engine: they belong to the engine of the stats
        line the same process logged just before."""
        if kind == "engine_stats":
            self._engine_of[key] = fields.get("engine", 0)
        elif kind in ("spec_decode", "spec_calibration", "kv_transfer"):
            fields.setdefault("engine", self._engine_of.get(key, 0))

    def _classify(self, f: Frame, key: tuple) -> tuple[str, list[Event]]:
        msg = f.message
        if msg.startswith(TRACEBACK_START) or (msg[:1] == " " and msg.lstrip().startswith(TRACEBACK_START)):
            self._tracebacks[key] = _Traceback(
                f.ts, f.process, f.pid, f.header and f.header.rstrip(), self.lineno, touched=time.monotonic(), last_ts=f.ts
            )
            return PARSED, []
        events = parse_frame(f)
        if events:
            for ev in events:
                ev.ts, ev.process, ev.pid, ev.line = f.ts, f.process, f.pid, self.lineno
                self._attribute(ev.kind, ev.fields, key)
            return PARSED, events
        level = f.level
        if level in ("WARNING", "ERROR", "CRITICAL"):
            ev = Event(
                "log",
                {"level": level.lower(), "logger": f.logger or ("uvicorn" if f.uvicorn else None), "message": msg[:1000]},
                f.ts,
                f.process,
                f.pid,
                self.lineno,
            )
            return PARSED, [ev]
        # systemd's own chatter about the unit (Started, Stopping, Consumed ... CPU time) that no
        # parser wants: recognisably the supervisor's, carrying nothing
        if level is not None or f.process is not None or f.unit == "systemd" or _NOISE.match(msg):
            return IGNORED, []
        return UNPARSED, []

    def flush(self, idle_seconds: float | None = None) -> list[Event]:
        """Finish pending tracebacks: all of them, or those untouched for ``idle_seconds``."""
        out: list[Event] = []
        if idle_seconds is None and self._cri.pending:
            for line in self._cri.flush():  # the file ended inside a split line: keep what came
                out.extend(self.feed(line)[1])
        now = time.monotonic()
        done: list[Event] = []
        for key in list(self._tracebacks):
            tb = self._tracebacks[key]
            if idle_seconds is None or now - tb.touched >= idle_seconds:
                done.extend(self._tracebacks.pop(key).events())
        if done:
            out.extend(self.lifecycle.feed(done))
        out.extend(self.lifecycle.tick(idle_seconds))
        return out

    @property
    def pending_tracebacks(self) -> int:
        return len(self._tracebacks)
