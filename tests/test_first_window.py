"""An engine's first stats window is counted once its length can be decided (exporter.stream.windows):
when the log shows vLLM's interval, or, when no line will show it, with the best interval known then: at
the end of the input (backfill, the rules' `test`, a daemon whose stdin ended), at a stop or a new start,
and for an engine gone quiet (the daemon's scrapes, backfill's steps). Its throughputs, and its running
and waiting counts, are held until then and counted once.

The lines are vLLM 0.32's own (whole-second stamps), its interval 2 s while the exporter is left at its
default 10 s: the first line comes 11 s after the ready line, after hidden all-zero calls, so its window
is 2 s (read at once with 10 s, it fitted a first call of a 10 s logger and counted 11 s)."""

from __future__ import annotations

import asyncio
import io
import tempfile
import time

import pytest
from hypothesis import given, settings, strategies as st

from exporter.commands.testing import _check
from exporter.daemon.runners import SourceRunner
from exporter.framing.clock import Clock
from exporter.metrics import Metrics
from exporter.offline.backfill import backfill
from exporter.sources.stdin import StdinSource
from tests.conftest import run_lines
from tests.helpers import samples, value

H = "(APIServer pid=1) INFO 12-04 22:21:{:02d} [{}] "
BANNER = H.format(0, "api_utils.py:347") + " ▄▄ ▄█ █     █     █ ▀▄▀ █  version 0.32.0"
READY = H.format(0, "entry.py:136") + "Supported tasks: ['generate']"
STOP = H.format(14, "launcher.py:254") + "[shutdown] API server: shutdown triggered"


def stats(s: int, prompt: float, gen: float, running: int, waiting: int, engine: int = 0) -> str:
    return H.format(s, "loggers.py:335") + (
        f"Engine {engine:03d}: Avg prompt throughput: {prompt:.1f} tokens/s, Avg generation throughput: {gen:.1f} "
        f"tokens/s, Running: {running} reqs, Waiting: {waiting} reqs, CPU KV cache usage: 1.0%, "
        "Prefix cache hit rate: 0.0%")


FIRST = stats(11, 100.0, 50.0, 2, 1)  # after hidden calls: 2 s
SECOND = stats(13, 10.0, 20.0, 1, 0)
THIRD = stats(15, 0.0, 10.0, 1, 0)  # the second gap after a busy line: the log shows the interval


def metrics() -> Metrics:
    m = Metrics(process_metrics=False, stats_interval=10.0)
    m.add_server("s")
    return m


def events(*lines):
    return run_lines(list(lines), derived=True)[1]


def counters(m: Metrics, engine: str = "0") -> dict[str, float | None]:
    s = samples(m.render().decode())
    return {name: value(s, f"vllm_log_{name}_total", server="s", engine=engine)
            for name in ("generation_tokens", "computed_prompt_tokens", "requests_running_seconds",
                         "requests_waiting_seconds", "stats_windows")}


def test_the_first_window_is_counted_when_the_log_shows_the_interval_and_once():
    m = metrics()
    m.observe_many("s", events(BANNER, READY, FIRST))
    c = counters(m)
    assert (c["generation_tokens"], c["requests_running_seconds"], c["stats_windows"]) == (0, 0, 1), c
    m.observe_many("s", events(SECOND))
    assert counters(m)["generation_tokens"] == 20 * 2  # one gap: not the interval shown yet
    m.observe_many("s", events(THIRD))
    want = {"generation_tokens": 50 * 2 + 20 * 2 + 10 * 2, "computed_prompt_tokens": 100 * 2 + 10 * 2,
            "requests_running_seconds": 2 * 2 + 1 * 2 + 1 * 2, "requests_waiting_seconds": 1 * 2, "stats_windows": 3}
    assert counters(m) == want
    m.settle_windows("s")  # (the end of input, after it was decided: nothing counted twice)
    m.observe_many("s", events(STOP))
    assert counters(m) == want


def test_a_first_window_no_line_decided_is_counted_at_the_end_of_the_input():
    """backfill, the rules' `test --expect` and a daemon whose stdin ended: with the one gap seen (2 s:
    hidden calls came before the first line), and with the configured interval when there is no gap (a
    first call of a 10 s logger, 3 s after the ready line: nothing lost)."""
    two = [BANNER, READY, FIRST, SECOND]
    one = [BANNER, READY, stats(3, 100.0, 50.0, 2, 1)]
    for lines, gen in ((two, 50 * 2 + 20 * 2), (one, 50 * 3)):
        m = metrics()
        out = io.StringIO()
        backfill((("event", ev) for ev in events(*lines)), m, "s", out, step=1.0)
        assert counters(m)["generation_tokens"] == gen
        last = [ln for ln in out.getvalue().splitlines() if ln.startswith("vllm_log_generation_tokens_total{")][-1]
        assert float(last.split()[1]) == gen, last  # in the last snapshot written

        assert _check([], {"lines": lines, "series": {'vllm_log_generation_tokens_total{engine="0"}': gen}},
                      Clock(year=2026), "s") == []

        m = metrics()
        with tempfile.TemporaryFile() as f:
            f.write(("\n".join(lines) + "\n").encode())
            f.seek(0)
            runner = SourceRunner(StdinSource("s", fd=f.fileno()), m, Clock(year=2026))
            asyncio.run(asyncio.wait_for(runner.run(), 30))
        assert counters(m)["generation_tokens"] == gen


def test_a_first_window_is_counted_at_a_stop_or_a_new_start_and_not_for_a_server_forgotten():
    m = metrics()
    m.observe_many("s", events(BANNER, READY, FIRST, SECOND, STOP))
    assert counters(m)["generation_tokens"] == 50 * 2 + 20 * 2
    m = metrics()
    m.observe_many("s", events(BANNER, READY, FIRST, SECOND, BANNER.replace(":00 [", ":20 [")))
    c = counters(m)
    assert (c["generation_tokens"], c["requests_running_seconds"]) == (50 * 2 + 20 * 2, 2 * 2 + 1 * 2)
    m.observe_many("s", events(stats(25, 0.0, 7.0, 1, 0)))  # the new start's first line: its own first window
    assert counters(m)["generation_tokens"] == 50 * 2 + 20 * 2
    # a source gone for good: its series go, and a first window still pending does not bring them back
    m = metrics()
    m.observe_many("s", events(BANNER, READY, FIRST))
    m.forget_server("s")
    m.settle_windows("s")
    assert counters(m)["generation_tokens"] is None and "server=\"s\"" not in m.render().decode()


def test_the_first_window_of_an_engine_gone_quiet_is_counted_at_a_scrape_or_a_step():
    """The daemon's scrapes (monotonic time: go_idle's ``now``) and backfill's steps (log time): a data-parallel
    engine whose one busy line was its last takes the interval its neighbour shows (one logging loop); a
    lone engine the configured one. Not before a minute (vLLM's interval may be longer than the configured
    one, and its next line, which would decide, is due one interval after a busy line)."""
    dp = [BANNER, READY, FIRST, stats(11, 30.0, 40.0, 1, 0, engine=1), SECOND, THIRD]
    lone = [BANNER, READY, FIRST]
    for lines, engine, gen in ((dp, "1", 40 * 2), (lone, "0", 50 * 11)):
        m = metrics()
        runner = SourceRunner(StdinSource("s", fd=0), m, Clock(year=2026))
        runner.feed(lines)  # the daemon's path for a batch read
        now = time.monotonic()
        m.go_idle(now + 30.0)
        assert counters(m, engine)["generation_tokens"] == 0
        m.go_idle(now + 61.0)
        assert counters(m, engine)["generation_tokens"] == gen
        m.go_idle(now + 600.0)
        assert counters(m, engine)["generation_tokens"] == gen

        m = metrics()
        m.observe_many("s", events(*lines))
        t = [ev.ts for ev in events(*lines) if ev.kind == "engine_stats"][-1]
        m.go_idle(t + 30.0, log_time=True)
        assert counters(m, engine)["generation_tokens"] == 0
        m.go_idle(t + 61.0, log_time=True)
        assert counters(m, engine)["generation_tokens"] == gen


def test_the_stats_clock_settles_with_the_best_interval_it_knows():
    """exporter.stream.windows: a gap past two configured intervals is lost lines, not the interval; a
    server forgotten for good owes nothing."""
    from exporter.stream.windows import StatsClock

    key = ("s", "0")
    c = StatsClock(10.0)
    c.ready("s", 100.0)
    c.window(key, 111.0, True)
    c.window(key, 400.0, True)  # lines lost (or a hang): no measure of the interval
    c.settle("s")
    assert c.take_first(key) == 11.0 and not c.first_pending(key)  # a first call of the configured 10 s
    c = StatsClock(10.0)
    c.ready("s", 100.0)
    c.window(key, 111.0, True)
    c.drop("s")
    c.settle("s")
    assert c.take_first(key) == 0.0 and c.pending() == []


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(st.sampled_from([2.0, 2.0, 2.0, 3.0, 10.0, 10.0, 0.4, 25.0]), st.booleans(), st.booleans()),
                min_size=70, max_size=140))
def test_a_full_window_of_gaps_that_gives_up_the_gap_it_takes_is_judged_as_before(steps):
    """StatsClock._observe spares the sort when its full window of gaps gives up the very gap it takes: the
    interval it shows and the warnings it gives are those of judging every gap (a steady log repeats its gap)."""
    from collections import deque
    from exporter.stream import windows

    class EveryGap(windows.StatsClock):  # the same clock, judging every gap
        def _observe(self, key, gap, precise):
            self._judged.pop(key, None)
            return super()._observe(key, gap, precise)

    said = {"spared": [], "every": []}
    clocks = {"spared": windows.StatsClock(10.0, lambda *a: said["spared"].append(a)),
              "every": EveryGap(10.0, lambda *a: said["every"].append(a))}
    t = {"spared": 1000.0, "every": 1000.0}
    for gap, busy, fraction in steps:
        for name, clock in clocks.items():
            t[name] += gap + (0.25 if fraction else 0.0)
            clock.window(("s", 0), t[name], busy)
        assert clocks["spared"].shown(("s", 0)) == clocks["every"].shown(("s", 0))
    assert said["spared"] == said["every"]
    assert isinstance(clocks["spared"]._gaps.get(("s", 0), deque()), deque)


def test_a_window_counted_by_the_configured_interval_is_made_up_once_the_log_shows_a_longer_one():
    """Told 10 s, a vLLM logging every 30 s: the second line's gap (30 s) is over two configured intervals and
    counted as one (lines lost, as far as the clock knows); the third line's gap shows 30 s, and the 20 s the
    second window was short of are owed once. Lines really lost (30 s, then 10 s gaps) owe nothing."""
    from exporter.stream.windows import StatsClock

    key = ("s", 0)
    clock = StatsClock(10.0)
    got = [(clock.window(key, t, True), clock.take_owed(key)) for t in (100.0, 130.0, 160.0, 190.0)]
    assert got == [(0.0, 0.0), (10.0, 0.0), (30.0, 20.0), (30.0, 0.0)]
    assert clock.shown(key) == 30.0
    clock = StatsClock(10.0)
    got = [(clock.window(key, t, True), clock.take_owed(key)) for t in (100.0, 130.0, 140.0, 150.0, 160.0)]
    assert got == [(0.0, 0.0), (10.0, 0.0), (10.0, 0.0), (10.0, 0.0), (10.0, 0.0)]
    # and the exporter counts the second line's throughputs over the seconds owed
    m = metrics()
    m.observe_many("s", events(BANNER, READY, stats(1, 0.0, 10.0, 1, 0), stats(31, 0.0, 20.0, 1, 0)))
    second = counters(m)
    m.observe_many("s", events(stats(1, 0.0, 30.0, 1, 0).replace("22:21:01", "22:22:01")))
    third = counters(m)
    assert second["generation_tokens"] == pytest.approx(20.0 * 10)  # the second window: one configured interval
    # at the third line: the first window, decided (a first call 1 s after the ready line: at least the interval,
    # 30 s), the 20 s the second was short of, and the third's own 30 s
    assert third["generation_tokens"] == pytest.approx(20.0 * 10 + 10.0 * 30 + 20.0 * 20 + 30.0 * 30)
    assert third["requests_running_seconds"] == pytest.approx(10 + 30 + 20 + 30)
