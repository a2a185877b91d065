"""``vllm-log-exporter parse FILE|-``: one JSON event per recognised line, or ``--stats``."""

from __future__ import annotations

import collections
import json
import re
import sys
from typing import TextIO

from exporter.framing import Clock, frame_line
from exporter.offline import Pass
from exporter.pipeline import IGNORED, PARSED, UNPARSED

_DIGITS = re.compile(r"\d+")


def shape(line: str, clock: Clock) -> str:
    """An unparsed line with its wrappers removed and digits folded, so variants group together."""
    inner = frame_line(line, clock).message
    return _DIGITS.sub("N", inner)[:160]


def run(path: str, clock: Clock, stats: bool, out: TextIO = sys.stdout) -> int:
    scan = Pass(path, clock)
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
            emit(events)
    emit(pipe.flush())

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
