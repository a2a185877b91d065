"""The server stays responsive under big lines (issue 32 item 6): no line holds the event loop for
long. Five 700 KB JSON records held /healthz for 8.7 s: the parsers' regexes ran over every
megabyte-long message, and a batch of many lines was fed in one go. Now the parsers read a window of
a long message (its first and last parts) and a runner feeds a big batch a slice at a time, giving
the event loop a turn in between. Timings are bench/hostile.py's (docs/benchmarks.md); these tests
check the mechanisms, which cannot flake."""

import asyncio
import json

from exporter.daemon.runners import FIRST_SLICE, SLICE_LINES, SourceRunner
from exporter.framing.clock import Clock
from exporter.metrics import Metrics
from exporter.stream import pipeline as pipeline_mod
from exporter.stream.pipeline import PARSE_WINDOW_CHARS, Pipeline

OOM = "torch.OutOfMemoryError: CUDA out of memory."


def seen_lengths(monkeypatch) -> list[int]:
    seen: list[int] = []
    real = pipeline_mod.parse_frame

    def spy(f):
        seen.append(len(f.message))
        return real(f)

    monkeypatch.setattr(pipeline_mod, "parse_frame", spy)
    return seen


def test_the_parsers_read_a_window_of_a_700_kb_line_and_its_error_still_counts(monkeypatch):
    seen = seen_lengths(monkeypatch)
    p = Pipeline(Clock(year=2026))
    line = "(EngineCore_DP0 pid=7) ERROR 08-04 02:50:00 [core.py:1] " + OOM + " " + "w " * 350_000
    _, events = p.feed(line)
    assert seen and max(seen) <= PARSE_WINDOW_CHARS + 1
    assert "oom" in {e.kind for e in events + p.flush()}


def test_the_parsers_read_a_window_of_each_line_of_a_700_kb_json_record(monkeypatch):
    seen = seen_lengths(monkeypatch)
    p = Pipeline(Clock(year=2026))
    rec = json.dumps({"levelname": "ERROR", "name": "vllm.v1.engine.core", "message": OOM + " " + "x" * 700_000})
    _, events = p.feed(rec)
    assert seen and max(seen) <= PARSE_WINDOW_CHARS + 1
    assert "oom" in {e.kind for e in events + p.flush()}


class OneBatch:
    """A source that yields one batch, then ends."""

    name = "big"

    def __init__(self, lines):
        self.lines = lines

    async def batches(self, status):
        status.up(True)
        yield self.lines


def test_a_runner_feeds_a_big_batch_in_slices():
    lines = [""] * (20 * SLICE_LINES)  # 40,960 empty lines: what 40 KiB of newlines is
    runner = SourceRunner(OneBatch(lines), Metrics(process_metrics=False), Clock(year=2026))
    fed: list[int] = []
    real = runner.feed
    runner.feed = lambda batch: (fed.append(len(batch)), real(batch))[1]
    asyncio.run(runner.run())
    assert sum(fed) == len(lines) and max(fed) <= SLICE_LINES and fed[0] == FIRST_SLICE


def test_slow_lines_give_the_event_loop_a_turn_by_time_not_by_count(monkeypatch):
    """1,000 lines a user's rule takes 10 ms each over (the issue's 2 KB lines and a quadratic pattern
    under Python's re: the loop was held 10 s). On a clock the feeding itself advances (deterministic:
    a loaded machine changes nothing), the loop never waits longer than SLICE_SECONDS and a slice."""
    import types

    from exporter.daemon import runners

    now = [0.0]
    monkeypatch.setattr(runners, "time", types.SimpleNamespace(perf_counter=lambda: now[0], monotonic=lambda: now[0]))
    lines = ["x"] * 1000
    runner = SourceRunner(OneBatch(lines), Metrics(process_metrics=False), Clock(year=2026))
    real = runner.feed

    def slow(batch):
        now[0] += 0.010 * len(batch)
        return real(batch)

    runner.feed = slow
    turns: list[float] = []

    async def main():
        async def ticker():
            while True:
                turns.append(now[0])
                await asyncio.sleep(0)

        t = asyncio.create_task(ticker())
        await runner.run()
        t.cancel()

    asyncio.run(main())
    assert now[0] >= 9.99  # every line was fed
    held = max((b - a for a, b in zip(turns, turns[1:])), default=now[0])
    assert held <= 0.1, held  # (before: 10 s, one slice of 1,000 lines)
    assert len(turns) > 100
