"""``vllm-log-exporter parse FILE|-``: one JSON event per recognised line, or ``--stats``, or
``--explain``: every line with what became of it (``LINE<TAB>RESULT<TAB>WHAT<TAB>TEXT<TAB>WRAPPER``: the
wrapper is what stood before vLLM's record, and where the line's time came from)."""

from __future__ import annotations

import collections
import json
import re
import sys
from typing import TextIO

from exporter.commands.common import not_vllm_output
from exporter.framing.clock import Clock

from exporter.framing.frame import frame_line
from exporter.framing.lines import MAX_LINE_BYTES
from exporter.offline.passes import Pass
from exporter.stream.pipeline import IGNORED, PARSED, UNPARSED

_DIGITS = re.compile(r"\d+")


def _frame(line: str, clock: Clock):
    """The line's frame; None when framing it raises (the pipeline already said so, naming the line)."""
    try:
        return frame_line(line, clock)
    except Exception:  # noqa: BLE001 - the pipeline's guard counted and named this line
        return None


def shape(line: str, clock: Clock) -> str:
    """An unparsed line with its wrappers removed and digits folded, so variants group together."""
    f = _frame(line[:4096], clock)
    inner = f.message if f is not None else "(a line that could not be read)"
    return _DIGITS.sub("N", inner)[:160]


def explain(line: str, result: str, events, pending: bool, clock: Clock) -> str:
    """What became of one line, in words: its events, or why it gave none."""
    if events:
        return ", ".join(sorted({ev.kind for ev in events}))
    if result == PARSED:
        return "part of a traceback (its event comes when the traceback ends)" if pending else "parsed"
    f = _frame(line, clock)
    if f is None:
        return "unparsed: the line could not be read (see the warning naming it)"
    if result == IGNORED:
        if f.level:
            return f"a vLLM {f.level} line that no parser wants"
        if f.process:
            return f"a line of process {f.process} with no level (e.g. progress output)"
        return "known noise (blank, progress bar, banner art)"
    if f.process or f.level:
        return "unparsed: a vLLM header but a message no parser knows"
    return "unparsed: no vLLM header (process tag or level): not vLLM output, or a wrapper the framing does not know"


_TIME_FROM = {"rfc3339": "time from the wrapper", "journald": "time from the wrapper",
              "local": "time from the wrapper", "vllm": "time from vLLM's header", "json": "time from the record"}


def wrapper(line: str, clock: Clock) -> str:
    """What stood before vLLM's record on ``line`` (its tools' wrappers), and where its time came from."""
    f = _frame(line, clock)
    if f is None or not f.inner_at:
        return ""
    return f"{f.clean[:f.inner_at].strip()!r} ({_TIME_FROM.get(f.ts_source, 'no time')})"


def run(path: str, clock: Clock, stats: bool, out: TextIO | None = None, explain_lines: bool = False,
        max_line: int = MAX_LINE_BYTES, rules=()) -> int:
    """``rules``: the user's rules (exporter.config.rules specs): their lines are events of kind ``rule``."""
    from exporter.commands.common import Visible

    # (stdout as it is now: a default bound at import would keep a stream redirected then, and closed since)
    out = Visible(sys.stdout if out is None else out)  # the log's text acts on no terminal
    scan = Pass(path, clock, max_line=max_line, rules=rules)
    pipe = scan.pipeline
    results = collections.Counter()
    kinds = collections.Counter()
    shapes = collections.Counter()

    def emit(events):
        for ev in events:
            kinds[ev.kind] += 1
            if not stats:
                out.write(json.dumps(ev.to_dict(), ensure_ascii=False, separators=(", ", ": ")) + "\n")

    for lines in scan.line_lists():
        for line in pipe.join_parts(lines):
            result, events = pipe.feed(line)
            results[result] += 1
            if result == UNPARSED and stats:
                shapes[shape(line, clock)] += 1
            if explain_lines:
                what = explain(line, result, events, pipe.pending_tracebacks > 0, clock)
                out.write(f"{pipe.lineno}\t{result}\t{what}\t{line[:160]}\t{wrapper(line, clock)}\n")
                for ev in events:
                    kinds[ev.kind] += 1
                continue
            emit(events)
    if explain_lines:
        for ev in pipe.flush():
            out.write(f"{ev.line}\tparsed\t{ev.kind} (traceback ended)\t\n")
        return 0
    emit(pipe.flush())
    if not stats and (why := not_vllm_output(path, results)):  # (--stats and --explain say it themselves)
        print(f"vllm-log-exporter: parse: {why}", file=sys.stderr)

    if stats:
        total = sum(results.values())
        out.write(f"lines read: {total}\n")
        for r in (PARSED, IGNORED, UNPARSED):
            out.write(f"  {r}: {results[r]}\n")
        out.write("events by kind:\n")
        for kind, n in sorted(kinds.items(), key=lambda kv: (-kv[1], kv[0])):
            out.write(f"  {kind}: {n}\n")
        if shapes:
            out.write("most common unparsed line shapes:\n")
            for s, n in shapes.most_common(10):
                out.write(f"  {n:>7}  {s}\n")
    return 0
