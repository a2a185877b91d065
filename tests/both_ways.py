"""Reading lines both ways, for the tests that the fast path makes of every line what the usual way makes."""

from __future__ import annotations

from exporter.framing.clock import Clock
from exporter.parsers import BUILT_IN
from exporter.stream.batch import framing_unsafe
from exporter.stream.pipeline import Pipeline


def outcome(lines: list[str], clean: bool, families=BUILT_IN, timed: bool = False):
    """What one pipeline makes of ``lines`` fed one by one: ``clean`` lets the fast path answer (the lines hold nothing
    of framing_unsafe), else every line goes the usual way; each result with its events' kinds and fields (``timed``:
    and their times, processes, pids and line numbers), then the end's."""
    p = Pipeline(Clock(year=2026), families=families)

    def seen(e):
        return (e.kind, e.fields, e.ts, e.process, e.pid, e.line) if timed else (e.kind, e.fields)

    out = []
    for line in lines:
        res, events = p.feed(line, clean)
        out.append((res, [seen(e) for e in events]))
    return out, [seen(e) for e in p.flush()]


def edited(batch: list[tuple[str, list[tuple[int, str]]]]) -> list[str]:
    """Each line of ``batch`` with its edits (position, text put in place of the character there) made, those left
    that framing changes nothing of (the fast path may read them: nothing of framing_unsafe)."""
    lines = []
    for line, edits in batch:
        for pos, text in edits:
            line = line[:pos] + text + line[pos + 1:]
        if not framing_unsafe(line):
            lines.append(line)
    return lines
