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

from exporter.framing.clock import Clock
from exporter.framing.cri import CriJoiner, may_hold_parts
from exporter.framing.frame import LEVEL_WORDS, TRACEBACK_START, Frame, common_header, frame_line, record_time
from exporter.framing.headers import pid_of
from exporter.framing.json_records import looks_like_record, record_frames
from exporter.framing.lines import MAX_LINE_BYTES, cut_text, joined
from exporter.parsers import BUILT_IN, CONTINUATION_PARSERS, Families, echo, parse_frame, tool_parser
from exporter.parsers.base import PROBLEM_LEVELS
from exporter.parsers.events import Event
from exporter.stream import fastpath
from exporter.stream.batch_reader import BatchReader
from exporter.stream.boundary import GLUED, Echoes, inner_returns, message_lines, split_glued
from exporter.stream.lifecycle import Lifecycle
from exporter.stream.results import _RANK, IGNORED, PARSED, RESULTS, UNPARSED  # noqa: F401 (re-exported)
from exporter.stream.traceback import CHAIN, TRACEBACK_IDLE_SECONDS, OpenTraceback, opening_words

# what a frame of a JSON record's message is (Pipeline._classify): its first line, a later line
MESSAGE, MESSAGE_MORE = 1, 2
# Processes remembered at once (their open tracebacks, which engine their last stats line named): a
# real server has a few dozen; a log naming endless ones cannot grow this memory.
MAX_PROCESSES = 256
# What the parsers and the traceback joiner read of a longer message (after a JSON record was decoded
# whole): its first and last parts, 64 KiB in all. No line a family recognises is near that long
# (vLLM's longest, the engine config, is ~4 KB); a megabyte line costs a few milliseconds instead of
# the parsers' regexes over all of it (hundreds of ms), so it cannot hold the event loop.
PARSE_WINDOW_CHARS = 64 << 10
# what is kept of a record's first line to know the next record of the same log call (a prefix is enough)
OPENING_CHARS = 256

# An exception's line as Python prints it at a traceback's end: its type (module path and the types it wraps
# included: "torch.OutOfMemoryError", "ray.exceptions.RayTaskError(OutOfMemoryError)"), then its message.
_EXCEPTION_LINE = re.compile(r"(?:[A-Za-z_]\w*\.)*(?:[A-Z]\w*(?:Error|Exception|Exit|Interrupt)|Exception)(?:\([\w.]*\))?(?:: |$)")
# A traceback's frame line ("  File \"/v/core.py\", line 12, in run"), and the levels a record holding a
# traceback is logged at (logger.exception: ERROR; exc_info on a warning: WARNING).
_FRAME_LINE = re.compile(r'\s+File "[^"\n]*", line \d+')
_RECORD_TRACEBACK_LEVELS = frozenset({"WARNING", "ERROR", "CRITICAL"})

_PY_WARNING_WORDS = r"[^\s:]+\.py:\d+: [A-Z]\w*Warning: "  # a line the warnings module prints
# Output that is plainly vLLM's (or its libraries') but is not a log record: progress bars,
# the banner art, torch/NCCL chatter. Counted as ignored, not unparsed.
_NOISE = re.compile(
    r"^(?:Loading (?:safetensors|pt) checkpoint shards|Capturing CUDA graph|Processed prompts|"
    r"Adding requests|Compiling|\d+%\|| *[█▀▄▌▐ ]+$|NCCL INFO|[\w.-]+:\d+:\d+ \[\d+\] NCCL INFO|"
    r"\[(?:rank\d+\]:)?\[?[WIE]\d{4}|Process \w+:$|warnings\.warn|  warnings\.warn|\s*$|"
    # systemd's lines about a unit, "vllm.service: Consumed 2min 3.1s CPU time." (the journal's
    # MESSAGE without the "systemd[1]: " of the short output)
    r"[\w@:.\\-]+\.(?:service|scope): |"
    # a Python warning printed by the warnings module ("/x/y.py:138: FutureWarning: ..."), nanobind's report of
    # objects leaked at exit (vLLM's CPU build at every stop), argparse's usage before a refused argument's error
    + _PY_WARNING_WORDS + r"|nanobind: | *- leaked | *- \.\.\. skipped remainder$|See https://nanobind\.|"
    r"usage: vllm )"
)
_PY_WARNING = re.compile(_PY_WARNING_WORDS)

class Pipeline(BatchReader):
    """``on_bad_line(lineno, line, error)``: what to do with a line whose reading raised (a parser
    bug, input nobody foresaw). With it, such a line is counted as unparsed and handed over, and its
    neighbours are read as if it were not there: on every path (``feed``, ``feed_batch``'s batch edges
    and fast path, CRI joining, the lifecycle). Without it (tests), the exception propagates."""

    def __init__(self, clock: Clock | None = None, on_bad_line=None, max_line: int = MAX_LINE_BYTES, on_cut=None,
                 families: Families = BUILT_IN):
        self.clock = clock or Clock()
        self.on_bad_line = on_bad_line
        # on_cut(line_size): a line joined from CRI parts longer than max_line, or a JSON record of
        # more than MAX_RECORD_LINES lines, was cut (exporter.framing.lines)
        self.on_cut = on_cut
        # the built-in families and the user's rules (exporter.parsers.Families); the daemon swaps them
        # on a reload
        self.families = families
        self.lineno = 0
        self._warning_line = -1  # the line of the latest Python warning (its source line follows it)
        self._scan_rest = 0  # batches feed_batch reads before it scans for quiet lines again (they found few)
        self._tracebacks: dict[tuple, OpenTraceback] = {}
        # (process key, header) of the latest tool-parser failure read by its words (tool_parser.BY_WORDS): a
        # logger.exception's traceback under that header is the same record (its file alone does not say so)
        self._tool_failure: tuple | None = None
        # process key -> (header, message) of its latest WARNING-or-worse record line: the first line of the
        # record whose traceback may follow under the same header (OpenTraceback.opening)
        self._openers: dict[tuple, tuple[str, str]] = {}
        self._engine_of: dict[tuple, int] = {}
        self._cri = CriJoiner(max_line, on_cut)
        self._echoes = Echoes()  # records that echo a client's text, and their continuation lines
        self.lifecycle = Lifecycle()  # what the error lines mean: a death, a stop, a failed start

    def _bad(self, line: str, error: BaseException) -> None:
        """A line whose reading raised: handed to on_bad_line (the caller counts it as unparsed)."""
        if self.on_bad_line is None:
            raise error
        self.on_bad_line(self.lineno, line, error)

    def join_parts(self, lines: list[str], text: str | None = None) -> list[str]:
        """The lines with Kubernetes' CRI partial records joined (exporter.framing.cri); feed_batch does
        this itself, callers of ``feed`` do it first."""
        if self._cri.pending or may_hold_parts(joined(lines) if text is None else text):
            try:
                return self._cri.feed(lines)
            except Exception as e:  # noqa: BLE001 - the guard: the lines go on unjoined
                self._cri.pending.clear()
                self._bad(lines[0] if lines else "", e)
        return lines

    def _lifecycle(self, events: list[Event]) -> list[Event]:
        """The lifecycle's answer for ``events``; an event it cannot take is passed on as it is."""
        try:
            return self.lifecycle.feed(events)
        except Exception:  # noqa: BLE001 - one event at a time, so only the culprit goes untouched
            if self.on_bad_line is None:
                raise
        out: list[Event] = []
        for ev in events:
            try:
                out.extend(self.lifecycle.feed([ev]))
            except Exception:  # noqa: BLE001
                out.append(ev)
        return out

    def feed(self, line: str, clean: bool = False) -> tuple[str, list[Event]]:
        """Account one physical line; return its result and the events it completed.

        ``clean``: the caller checked that framing changes nothing of it (exporter.stream.batch.framing_unsafe)."""
        start = self.lineno
        try:
            fast = None
            if clean and not self._tracebacks:
                fast = fastpath.classify(line, self.clock, True, self.families)
                if fast is fastpath.IGNORE:
                    self.lineno += 1
                    return IGNORED, []
                if type(fast) is tuple:
                    made = self._fast_events(fast)
                    if made is not None:
                        return (PARSED, self._lifecycle(made)) if made else (IGNORED, made)
                    fast = None
            res, events = self._feed_usual(line, clean, fast)
        except Exception as e:  # noqa: BLE001 - the guard: one line, never its neighbours
            self.lineno = start + 1
            self._bad(line, e)
            return UNPARSED, []
        return res, (self._lifecycle(events) if events else events)

    def _fast_events(self, fast: tuple) -> list[Event] | None:
        """The events of a line the fast path read (fastpath.classify's tuple), or None when this stream's state
        takes the line otherwise (the usual way reads it then)."""
        if fast[0] is fastpath.ECHO_RECORD:
            return self._fast_echo(fast)
        kind, fields, ts, process, pid, last = fast
        key = (process, pid)
        if kind == "log":  # a WARNING-or-worse record no family wants (``last``: its header): what _classify does
            if self._echoes.continues(key, last):
                return None  # a line of an echo record (the same header): its record's
            self._opened(key, last, fields["message"])
        else:  # a periodic line (``last``: the wrapper's match)
            open_echo = self._echoes.header(key)
            if open_echo is not None and open_echo == common_header(last):
                return None  # a line of an echo record's client text, whatever it says: its record's
            self._attribute(kind, fields, key)
        self.lineno += 1
        return [Event(kind, fields, ts, process, pid, self.lineno)]

    def _fast_echo(self, fast: tuple) -> list[Event] | None:
        """An echo record's facts, if it counts any (fastpath's ECHO_RECORD answer), as ``_classify`` reads them from its
        frame (``_echo``), the stream's echo state told of it; its time read only when it has a fact to count (most
        requests received name no adapter)."""
        _, record, m, text, header = fast
        end = m.end()
        if self.families.client_text_table or len(text) - end > PARSE_WINDOW_CHARS:
            return None  # a user's rule that reads a client's text reads the frame; a longer message is cut first
        process, pid = m.group(10, 11)
        key = (process, pid_of(pid))
        record = self._echoes.begins(key, header, record)
        self.lineno += 1
        events = self._echo_facts(record, key, text[end:], m.group(12), text[m.start(18):m.end(19)])
        if events:
            ts, lineno = record_time(m, text, self.clock)[0], self.lineno
            for ev in events:
                ev.ts, ev.process, ev.pid, ev.line = ts, process, key[1], lineno
        return events

    def _opened(self, key: tuple, header: str, msg: str) -> None:
        """A WARNING-or-worse record's first words, which a traceback its process logs next opens with."""
        openers = self._openers
        if len(openers) >= MAX_PROCESSES and key not in openers:
            openers.clear()  # a log naming endless processes: forget, never grow
        openers[key] = (header, msg[:OPENING_CHARS])

    def _feed_usual(self, line: str, clean: bool, shape=None) -> tuple[str, list[Event]]:
        """Every line the fast path does not answer, the one way: framed once (``_framed``: the line's frame, or
        a JSON record's, or the records a lost newline glued together), then each frame is joined to an open
        traceback or classified (``_feed_frame``, ``_classify``). ``shape``: the fast path's match of the
        line's wrapper, if it made one (framing does not match it again)."""
        self.lineno += 1
        frames, text, record = self._framed(line, clean, shape)
        if len(frames) == 1 and not record:
            return self._feed_frame(frames[0])
        best, events = UNPARSED, []
        for i, g in enumerate(frames):
            # a JSON record's first ``text`` frames are its message: the first is read as a record's message is,
            # but opens no traceback; the others are its text (exporter.stream.boundary.message_lines)
            r, ev = self._feed_frame(g, (MESSAGE if i == 0 else MESSAGE_MORE) if i < text else 0)
            events.extend(ev)
            if _RANK[r] > _RANK[best]:
                best = r
        if record:  # (a JSON record's traceback, its exc_info, ends with the record)
            key = (frames[0].process, frames[0].pid)
            tb = self._tracebacks.get(key)
            if tb is not None and tb.header == frames[0].header.rstrip():
                events.extend(self._tracebacks.pop(key).events())
        return best, events

    def _framed(self, line: str, clean: bool, shape=None) -> tuple[list[Frame], int, bool]:
        """The frames of one physical line, framed once (exporter.framing): its own; or a JSON record's message
        and traceback lines (exporter.framing.json_records; how many are its message; True); or the records a
        lost newline glued onto it, each split off only after text that is vLLM's own
        (exporter.stream.boundary.split_glued)."""
        if not clean and "\r" in line:
            line = inner_returns(line, self.clock)
        f = frame_line(line, self.clock, clean, shape)
        msg = f.message
        if msg[:2] == '{"' and looks_like_record(msg):
            # (a line the splitter or the joiner cut was counted there)
            frames = record_frames(f, self.clock, self.lineno, on_cut=self.on_cut if type(line) is str else None)
            if frames:
                return frames, message_lines(msg, len(frames)), True
        if len(msg) > PARSE_WINDOW_CHARS:
            msg = f.message = cut_text(msg, PARSE_WINDOW_CHARS)
        # A glued record's header holds " [" (one cheap scan rules out most lines); a record that echoes
        # a client's text is never split (a header in it is the client's).
        if " [" in msg and any(w in msg for w in LEVEL_WORDS) and GLUED.search(msg) and echo.recognise(f) is None:
            return split_glued(f, self.clock), 0, False
        return [f], 0, False

    def _feed_frame(self, f: Frame, text: int = 0) -> tuple[str, list[Event]]:
        if len(f.message) > PARSE_WINDOW_CHARS:  # (a JSON record's line)
            f.message = cut_text(f.message, PARSE_WINDOW_CHARS)
        key = (f.process, f.pid)
        if not self._tracebacks:
            return self._classify(f, key, text)
        tb = self._tracebacks.get(key)
        if tb is not None:
            lineno = self.lineno
            if tb.offer(f, text, lineno):
                tb.touched = time.monotonic()
                if f.ts is not None:
                    tb.last_ts = f.ts
                return PARSED, []
            done = self._tracebacks.pop(key).events()
            if tb.split is not None:  # a line it had taken is the next record's first line: that record first
                split, kind, self.lineno = tb.split
                _, ev = self._classify(split, key, kind)
                self.lineno = lineno
                done += ev
            r, ev = self._classify(f, key, text)
            return r, done + ev
        if f.ts is not None:
            # Another process's line, later in log time: a traceback silent since then is over. This
            # keeps offline passes (no wall clock) in step with the daemon's idle flush.
            done = self._finish_quiet(f.ts)
            if done:
                r, ev = self._classify(f, key, text)
                return r, done + ev
        return self._classify(f, key, text)

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
            if len(self._engine_of) >= MAX_PROCESSES and key not in self._engine_of:
                self._engine_of.clear()  # a log naming endless processes: forget, never grow
            self._engine_of[key] = fields.get("engine", 0)
        elif kind in ("spec_decode", "spec_calibration", "diffusion_decoding", "kv_transfer"):
            fields.setdefault("engine", self._engine_of.get(key, 0))

    def _classify(self, f: Frame, key: tuple, text: int = 0) -> tuple[str, list[Event]]:
        """``text``: 0 for a line of its own, MESSAGE for the first line of a JSON record's message,
        MESSAGE_MORE for its later lines (no traceback opens in either; only CONTINUATION_PARSERS read
        the later ones, and they are no message of their own)."""
        record = self._echoes.record(f, key)
        if record is not None:
            return self._ruled(f, *self._echo(f, record, key))
        msg = f.message
        if text == MESSAGE_MORE:
            events = parse_frame(f, CONTINUATION_PARSERS)
            if not events:
                return self._ruled(f, IGNORED, [])
            for ev in events:
                ev.ts, ev.process, ev.pid, ev.line = f.ts, f.process, f.pid, self.lineno
            return self._ruled(f, PARSED, events)
        # (a traceback is logged at ERROR, or WARNING with exc_info, or bare on stderr: never at INFO or
        # DEBUG, the levels of the records that echo a client's text)
        if (msg.startswith(TRACEBACK_START) or (msg[:1] == " " and msg.lstrip().startswith(TRACEBACK_START))) \
                and (f.level or "") in PROBLEM_LEVELS and not text:
            done: list[Event] = []
            if len(self._tracebacks) >= MAX_PROCESSES and key not in self._tracebacks:
                # endless processes each opening a traceback: the oldest is over, never held for ever
                done = self._tracebacks.pop(next(iter(self._tracebacks))).events()
            header = f.header and f.header.rstrip()
            opener = self._openers.pop(key, None) if header is not None else None
            self._tracebacks[key] = OpenTraceback(
                f.ts, f.process, f.pid, header, self.lineno, touched=time.monotonic(), last_ts=f.ts,
                tool_parser=header is not None and self._tool_failure == (key, header),
                opening=opening_words(opener[1]) if opener is not None and opener[0] == header else None,
            )
            return PARSED, done
        if f.header is not None and (f.level or "") in PROBLEM_LEVELS and msg.strip() and not msg.startswith(CHAIN):
            # (a blank line or a chain's words are a traceback's middle, never a record's first line)
            self._opened(key, f.header.rstrip(), msg)
        if not text and (f.level is None and f.header is None and (_EXCEPTION_LINE.match(msg) or _FRAME_LINE.match(msg))
                         or f.level in _RECORD_TRACEBACK_LEVELS and f.header is not None and _FRAME_LINE.match(msg)):
            return PARSED, self._orphan_traceback(f, key)
        # a user's rules add to what the families made of the line (exporter.parsers.Families: one search for
        # the needles of both)
        if self.families.rules:
            events, ruled = self.families.parse(f)
        else:
            events, ruled = parse_frame(f), None
        if ruled:
            for ev in ruled:
                ev.ts, ev.process, ev.pid, ev.line = f.ts, f.process, f.pid, self.lineno
        if events:
            for ev in events:
                ev.ts, ev.process, ev.pid, ev.line = f.ts, f.process, f.pid, self.lineno
                self._attribute(ev.kind, ev.fields, key)
            return PARSED, events + ruled if ruled else events
        level = f.level
        if level in ("WARNING", "ERROR", "CRITICAL"):
            failed = tool_parser.failure(f)
            if failed is not None:
                if f.header is not None and tool_parser.parser_of(f.logger) is None:
                    self._tool_failure = (key, f.header.rstrip())
                # a tool-call parser's record quotes the model's output: its level counts, its text is not kept
                out = [failed, Event("log", {"level": level.lower(), "logger": f.logger, "tool_parser": True})]
                for ev in out:
                    ev.ts, ev.process, ev.pid, ev.line = f.ts, f.process, f.pid, self.lineno
                return PARSED, out
            ev = Event(
                "log",
                {"level": level.lower(), "logger": f.logger or ("uvicorn" if f.uvicorn else None), "message": msg[:1000]},
                f.ts,
                f.process,
                f.pid,
                self.lineno,
            )
            return PARSED, [ev] + ruled if ruled else [ev]
        if ruled:
            return PARSED, ruled
        # systemd's own chatter about the unit (Started, Stopping, Consumed ... CPU time) that no
        # parser wants: recognisably the supervisor's, carrying nothing
        if level is not None or f.process is not None or f.unit == "systemd" or _NOISE.match(msg):
            if msg[:1] != " " and _PY_WARNING.match(msg):
                self._warning_line = self.lineno
            return IGNORED, []
        if msg[:2] == "  " and self._warning_line == self.lineno - 1:
            return IGNORED, []  # the source line Python prints under a warning
        return UNPARSED, []

    def _orphan_traceback(self, f: Frame, key: tuple) -> list[Event]:
        """A traceback's line with no traceback open for its process: a frame's (``  File "...", line N``, bare or
        in a WARNING-or-worse record, whose header logger.exception repeats on every line) or the exception's
        (bare, or right after a process tag). It is the traceback whose start this read did not see (it began
        before the file's end the daemon started at, before a rotation, or a runtime cut the log): it joins what
        follows as the whole one would and ends as it does, with the same events (the error kinds its
        exception names), so the lifecycle decides what it means as it would for the whole one."""
        done: list[Event] = []
        if len(self._tracebacks) >= MAX_PROCESSES:
            done = self._tracebacks.pop(next(iter(self._tracebacks))).events()
        header = f.header and f.header.rstrip()
        tb = OpenTraceback(f.ts, f.process, f.pid, header, self.lineno, touched=time.monotonic(), last_ts=f.ts,
                           lines=0, start_seen=False,
                           tool_parser=header is not None and self._tool_failure == (key, header))
        tb.offer(f)
        self._tracebacks[key] = tb
        return done

    def _ruled(self, f: Frame, result: str, events: list[Event]) -> tuple[str, list[Event]]:
        """A frame the trust boundary keeps from the families (an echo of a client's text, or a JSON
        record's later message line): only the user's rules that say ``client_text: true`` read it."""
        families = self.families
        if not families.client_text_table:
            return result, events
        ruled = families.rule_events(f, echo=True)
        if not ruled:
            return result, events
        for ev in ruled:
            ev.ts, ev.process, ev.pid, ev.line = f.ts, f.process, f.pid, self.lineno
        return PARSED, events + ruled

    def _echo(self, f: Frame, record: str, key: tuple) -> tuple[str, list[Event]]:
        """A record that echoes a client's text: only its bounded facts are read (``_echo_facts``)."""
        events = self._echo_facts(record, key, f.message, f.level, f.logger)
        if not events:
            return IGNORED, []
        for ev in events:
            ev.ts, ev.process, ev.pid, ev.line = f.ts, f.process, f.pid, self.lineno
        return PARSED, events

    def _echo_facts(self, record: str, key: tuple, message: str, level: str | None, logger: str | None) -> list[Event]:
        """The events of a line of an echo record (``record``, Echoes.record's name; "continued" for a later line):
        its bounded facts (exporter.parsers.echo: a request's adapter, a response's finish reason, an abort, a LoRA
        adapter loaded), on its first line or, when a line break in the id pushed them on, on the first later line
        that holds them (exporter.stream.boundary.Echoes.pending). At WARNING or above, its first line counts as a
        message of its level (without its text)."""
        echoes = self._echoes
        if record == "continued":
            record = echoes.pending(key)
            if record is None:
                return []
            events = echo.events(record, message, level, logger)
            if events:
                echoes.found(key)
            return events
        events = echo.events(record, message, level, logger)
        if events and record in echo.FACT_RECORDS:
            echoes.found(key)
        if level in ("WARNING", "ERROR", "CRITICAL"):
            events.append(Event("log", {"level": level.lower(), "logger": logger, "echo": record}))
        return events

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
                del self._tracebacks[key]
                try:
                    done.extend(tb.events())
                except Exception as e:  # noqa: BLE001 - the guard: that traceback's event is lost, no more
                    self._bad(f"(the traceback that began at line {tb.line})", e)
        if done:
            out.extend(self._lifecycle(done))
        try:
            out.extend(self.lifecycle.tick(idle_seconds))
        except Exception as e:  # noqa: BLE001
            self._bad("(the lifecycle's clock)", e)
        return out

    @property
    def pending_tracebacks(self) -> int:
        return len(self._tracebacks)
