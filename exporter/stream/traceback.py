"""A Python traceback being joined: the frames and exception lines that follow its first line, until it ends.

One traceback spans many physical lines (a ``logger.exception`` record repeats its header on each; a
bare stderr traceback has none) and becomes one ``traceback`` event, plus the error kinds its exception
lines name (an OOM, a CUDA error, a dead engine...). exporter.stream.pipeline decides which lines are
offered to which open traceback and when a silent one is over.

A record is its header line, not its prefix: records of one process, one second and one call site
(a burst of requests failing alike) share a byte-identical prefix, so the prefix alone would make
every record of a burst a run-on line of the first one's exception. A line that begins the way the
record's own first line began (``opening``: its message, or that message's literal words before its
first argument) starts a new record, as does any line a family recognises.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from exporter.framing.frame import TRACEBACK_START, Frame
from exporter.parsers import parse_errors, parse_frame, tool_parser
from exporter.parsers.events import Event

CHAIN = (
    "The above exception was the direct cause of the following exception",
    "During handling of the above exception, another exception occurred",
)
_FILE_LINE = re.compile(r'File "([^"]+)", line (\d+)(?:, in (\S+))?')
_EXC_LINE = re.compile(r"([A-Za-z_][\w.]*)(?:: (.*))?$")
MAX_TRACEBACK_LINES = 2000
MAX_EXCEPTION_EXTRA_LINES = 20
# What one traceback keeps of its exception lines: each cut to this many characters (their event
# keeps 500; the error families read an exception's first words), and the first and the latest
# MAX_EXCEPTIONS of a chain. A traceback of 2,000 one-megabyte lines must not hold 2 GB.
MAX_EXCEPTION_CHARS = 4096
MAX_EXCEPTIONS = 32
TRACEBACK_IDLE_SECONDS = 2.0
# the literal words a log call's format begins with: the message up to its first number or quote
# (where the arguments of most of vLLM's formats go); shorter than this, the whole message must match
_ARGUMENT = re.compile(r"[\d'\"\[({<]")
MIN_OPENING_WORDS = 12


def opening_words(message: str) -> str:
    """What a record from the same log call begins with (see the module's docstring)."""
    m = _ARGUMENT.search(message)
    head = message[:m.start()] if m else message
    return head if len(head) >= MIN_OPENING_WORDS else message


# vLLM's model loaders: a CUDA OOM raised inside one is weights that do not fit, a failed start-up.
_LOADING_FUNCTIONS = frozenset({"load_model", "load_weights", "_load_weights", "initialize_model", "_initialize_model",
                                "load_model_weights", "download_and_load_weights"})


@dataclass
class OpenTraceback:
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
    chain: int = 0  # exceptions seen (``exceptions`` keeps at most MAX_EXCEPTIONS of them)
    touched: float = 0.0
    last_ts: float | None = None  # log time of the latest line taken
    tool_parser: bool = False  # the record's first line was a tool parser's failure (exporter.parsers.tool_parser)
    # False: this read began after the traceback's start (exporter.stream.pipeline: an exception's line with no
    # traceback open, which is its first line)
    start_seen: bool = True
    opening: str | None = None  # opening_words of the record's first line (the message before "Traceback")
    # A headered record whose opening is unknown (its first line was before this read began): the line just
    # taken as a run-on of its exception, and, once a "Traceback" line follows it, that line given back as the
    # first line of the next record of a burst (exporter.stream.pipeline feeds it again).
    runon: tuple[Frame, int, int] | None = None  # (the frame, its kind, its line number)
    split: tuple[Frame, int, int] | None = None

    def offer(self, f: Frame, text: int = 0, lineno: int = 0) -> bool:
        """Take ``f`` if it continues this traceback; False means the traceback ended before it (and ``split``,
        when set, is a line taken that belongs to what comes after: it is fed again; ``text``: see
        exporter.stream.pipeline's frame kinds; ``lineno``: its line)."""
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
        opening = self.opening
        if opening is not None and msg.startswith(opening) and msg[:1] not in (" ", "\t"):
            return False  # the same log call again: the next record of a burst
        runon, self.runon = self.runon, None
        if s.startswith(TRACEBACK_START):
            if runon is not None and self.phase == "exception":
                # a record's first line, then its traceback: the line was no run-on but the next record of
                # a burst (a run-on line never precedes a "Traceback" line; a chain has its own words)
                self.exceptions[-1].pop()
                self.extra -= 1
                self.lines -= 1
                self.split = runon
                return False
            self.phase = "frames"
        elif self.phase == "frames":
            if not s or msg[:1] in (" ", "\t"):
                m = _FILE_LINE.search(s) if s.startswith("File ") else None
                if m:
                    self.frames += 1
                    self.where = (f"{m.group(1).rsplit('/', 1)[-1]}:{m.group(2)}"
                                  + (f" in {m.group(3)}" if m.group(3) else ""))[:200]
                    if m.group(3) in _LOADING_FUNCTIONS:
                        self.loading = True
            else:
                if len(self.exceptions) >= MAX_EXCEPTIONS:
                    del self.exceptions[1]  # (the first is the root cause: kept)
                self.exceptions.append([s[:MAX_EXCEPTION_CHARS]])
                self.chain += 1
                self.phase = "exception"
                self.extra = 0
        else:
            if s and msg[:1] == " " and self.extra < MAX_EXCEPTION_EXTRA_LINES and "validation error" in self.exceptions[-1][0]:
                # pydantic's "1 validation error for CacheConfig" gives the rule broken indented below
                self.exceptions[-1].append(s)
                self.extra += 1
            elif not s or s.startswith(CHAIN) or msg[:1] in (" ", "\t"):
                pass
            elif self.extra < MAX_EXCEPTION_EXTRA_LINES and not parse_frame(f):
                # Exception messages run on (CUDA's "CUDA kernel errors might be asynchronously ...").
                self.exceptions[-1].append(s[:MAX_EXCEPTION_CHARS])
                self.extra += 1
                if self.opening is None and self.header is not None:
                    self.runon = (f, text, lineno)
            else:
                return False
        self.lines += 1
        return True

    def events(self) -> list[Event]:
        fields: dict = {"frames": self.frames, "lines": self.lines, "chain_length": self.chain}
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
        if self.header is None:
            fields["uncaught"] = True  # printed by Python's excepthook, not a logger: the process died of it
        if not self.start_seen:
            fields["start_seen"] = False  # (its frames were before this read began)
        out = [Event("traceback", fields)]
        seen = set()
        for lines in self.exceptions:
            # The exception line itself names the error; run-on lines only when it does not.
            evs = parse_errors(Frame(raw=lines[0], message=lines[0]))
            if not evs and len(lines) > 1:
                text = " ".join(lines)
                evs = parse_errors(Frame(raw=text, message=text))
            elif len(lines) > 1:
                for ev in evs:  # pydantic names the field and the rule on lines of their own
                    if ev.kind == "startup_failure":
                        ev.fields["message"] = " ".join(lines)[:500]
            for ev in evs:
                if ev.kind not in seen:
                    seen.add(ev.kind)
                    out.append(ev)
        if "oom" in seen and self.loading and "startup_failure" not in seen:
            seen.add("startup_failure")
            out.append(Event("startup_failure", {"reason": "weights_oom", "message": fields.get("message", "")[:500]}))
        # what the traceback was recognised as (exporter.stream.incidents: such a traceback is counted as that kind)
        fields["kinds"] = sorted(seen)
        if not seen and (self.tool_parser or tool_parser.header_parser(self.header) is not None):
            # a tool-call parser's logger.exception: the failure its record's first line counted
            # (exporter.parsers.tool_parser), the model's output, not a server error
            fields["kinds"] = ["tool_call_parser_failure"]
            fields["message"] = ""  # (the exception quotes the model's output)
            fields.pop("root_message", None)
        for ev in out:
            ev.ts, ev.process, ev.pid, ev.line = self.ts, self.process, self.pid, self.line
        return out
