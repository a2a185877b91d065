"""Time is bounded (issue 43 items 7 and 8): a record stamped in the future (a 6 h zone mismatch)
kept a pushed OOM alert firing 6 h 10 min; year-less stamps across New Year were dated a year back
(`report --year 2026` of a 4-minute run over midnight spanned 2026-01-01 to 2026-12-31, `backfill`
squashed the new year into one instant, and a daemon's per-hour cache never decided the year again)."""

import json
import subprocess
import sys
from datetime import datetime, timezone

import structlog

from exporter.alerts.from_events import RECENT_SECONDS, Alerts
from exporter.framing.clock import Clock
from exporter.framing.frame import frame_line
from exporter.parsers.events import Event
from tests.conftest import ROOT

UTC = timezone.utc


def utc(*a) -> float:
    return datetime(*a, tzinfo=UTC).timestamp()


FUTURE_SKEW_SECONDS = 300.0  # (exporter.alerts.from_events's: a clock a few minutes ahead is no mismatch)


def test_an_oom_stamped_six_hours_ahead_starts_its_alert_now_and_ends_ten_minutes_on():
    from exporter.alerts import from_events

    assert from_events.FUTURE_SKEW_SECONDS == FUTURE_SKEW_SECONDS
    now = utc(2026, 12, 5, 12, 0)
    a = Alerts(instance="h:1")
    a.observe("s", [Event("oom", {"message": "torch.OutOfMemoryError: CUDA out of memory."}, now + 6 * 3600)], now=now)
    (alert,) = a.pending(now=now)
    assert alert.starts_at == now and alert.ends_at == now + RECENT_SECONDS
    a.observe("t", [Event("oom", {"message": "x"}, now + FUTURE_SKEW_SECONDS - 1)], now=now)  # a clock a bit ahead
    assert [x.starts_at for x in a.pending(now=now) if x.labels["server"] == "t"] == [now + FUTURE_SKEW_SECONDS - 1]


def test_the_daemon_counts_stamps_from_the_future_and_says_so_once(tmp_path):
    from exporter.daemon.runners import SourceRunner
    from exporter.metrics import Metrics

    class Lines:
        name = "v"

        async def batches(self, status):
            yield lines

    ahead = datetime.fromtimestamp(datetime.now(UTC).timestamp() + 6 * 3600, UTC)
    stamp = ahead.strftime("%m-%d %H:%M:%S")
    lines = [f"(EngineCore_DP0 pid=7) ERROR {stamp} [core.py:1] torch.OutOfMemoryError: CUDA out of memory."] * 3
    m = Metrics(process_metrics=False)
    runner = SourceRunner(Lines(), m, Clock(tz=UTC))
    import asyncio

    with structlog.testing.capture_logs() as logged:
        asyncio.run(runner.run())
    assert m.future_stamps.values[("v",)] == 3
    said = [e for e in logged if e["event"].startswith("log stamps lie in the future")]
    assert len(said) == 1 and 6 * 3600 - 120 <= said[0]["ahead_seconds"] <= 6 * 3600 + 120


def test_new_years_midnight_with_a_fixed_year_goes_on_into_the_next_year():
    c = Clock(year=2026, tz=UTC)
    first = frame_line("INFO 12-31 23:58:30 [a.py:1] x", c).ts
    second = frame_line("INFO 01-01 00:02:10 [a.py:1] x", c).ts
    assert first == utc(2026, 12, 31, 23, 58, 30) and second == utc(2027, 1, 1, 0, 2, 10)
    assert frame_line("INFO 12-31 23:59:59 [a.py:1] late line", c).ts == utc(2026, 12, 31, 23, 59, 59)


def test_a_writer_half_a_second_ahead_at_midnight_dates_the_new_year_in_the_new_year():
    now = utc(2026, 12, 31, 23, 59, 59) + 0.5
    c = Clock(tz=UTC, now=now)
    assert frame_line("INFO 01-01 00:00:00 [a.py:1] x", c).ts == utc(2027, 1, 1)


def test_a_daemon_a_year_on_decides_the_year_again():
    c = Clock(tz=UTC, now=utc(2026, 1, 5, 10))
    c.tick(utc(2026, 1, 5, 10))
    assert frame_line("INFO 01-05 09:00:00 [a.py:1] x", c).ts == utc(2026, 1, 5, 9)
    c._now = utc(2027, 1, 5, 10)  # a quiet log, a year on
    c.tick(utc(2027, 1, 5, 10))
    assert frame_line("INFO 01-05 09:00:00 [a.py:1] x", c).ts == utc(2027, 1, 5, 9)


def test_each_source_has_its_own_year(tmp_path):
    c = Clock(year=2026, tz=UTC)
    a, b = c.fresh(), c.fresh()
    frame_line("INFO 12-31 23:59:00 [a.py:1] x", a)
    assert frame_line("INFO 01-01 00:01:00 [a.py:1] x", a).ts == utc(2027, 1, 1, 0, 1)
    assert frame_line("INFO 01-01 00:01:00 [a.py:1] x", b).ts == utc(2026, 1, 1, 0, 1)  # its first stamp


RUN = [
    "(APIServer pid=1) INFO 12-31 23:58:00 [api_server.py:1] vLLM API server version 0.11.2, serving model m",
    "(APIServer pid=1) INFO 12-31 23:59:30 [loggers.py:271] Engine 000: Avg prompt throughput: 10.0 tokens/s, "
    "Avg generation throughput: 20.0 tokens/s, Running: 1 reqs, Waiting: 0 reqs, GPU KV cache usage: 1.0%, "
    "Prefix cache hit rate: 0.0%",
    "(APIServer pid=1) INFO 01-01 00:00:30 [loggers.py:271] Engine 000: Avg prompt throughput: 10.0 tokens/s, "
    "Avg generation throughput: 20.0 tokens/s, Running: 1 reqs, Waiting: 0 reqs, GPU KV cache usage: 1.0%, "
    "Prefix cache hit rate: 0.0%",
    "(EngineCore_DP0 pid=7) ERROR 01-01 00:02:00 [core.py:1] torch.OutOfMemoryError: CUDA out of memory.",
]


def cli(*args):
    return subprocess.run([sys.executable, "-m", "exporter", *args, "--year", "2026", "--timezone", "UTC"], cwd=ROOT,
                          capture_output=True, text=True, timeout=60)


def test_report_and_backfill_of_a_run_over_midnight_keep_its_four_minutes(tmp_path):
    log = tmp_path / "ny.log"
    log.write_text("\n".join(RUN) + "\n")
    r = cli("report", str(log), "--format", "json")
    assert r.returncode == 0, r.stderr
    rng = json.loads(r.stdout)["range"]
    assert rng["first"] == utc(2026, 12, 31, 23, 58) and rng["last"] == utc(2027, 1, 1, 0, 2)
    out = tmp_path / "ny.om"
    assert cli("backfill", str(log), "-o", str(out), "--step", "30").returncode == 0
    stamps = sorted({float(x.rsplit(" ", 1)[1]) for x in out.read_text().splitlines() if x and not x.startswith("#")})
    assert stamps[0] >= utc(2026, 12, 31, 23, 58) and stamps[-1] <= utc(2027, 1, 1, 0, 3) and len(stamps) >= 6
