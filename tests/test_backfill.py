"""backfill -> real promtool blocks -> real Prometheus -> range queries return what the log holds."""

import subprocess
import sys

import pytest

from tests.conftest import ROOT, SAMPLE
from tests.helpers import Prometheus, have, http_get, wait_until

pytestmark = pytest.mark.skipif(not (have("promtool") and have("prometheus")), reason="prometheus not installed")


def test_backfilled_blocks_answer_range_queries(tmp_path):
    om = tmp_path / "run.om"
    r = subprocess.run([sys.executable, "-m", "exporter", "backfill", str(SAMPLE), "-o", str(om), "--server", "grandpa",
                        "--year", "2026", "--timezone", "UTC"], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    assert om.read_text().endswith("# EOF\n")
    data = tmp_path / "data"
    r = subprocess.run(["promtool", "tsdb", "create-blocks-from", "openmetrics", str(om), str(data)],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    config = {"global": {"scrape_interval": "15s"}, "scrape_configs": []}
    with Prometheus(tmp_path, config, extra_args=["--storage.tsdb.retention.time=100y"]) as prom:
        # The sample runs 2026-08-04 02:43-03:03 UTC; the OOM is at 02:52:52.
        def range_q(expr, start, end, step=10):
            import json
            import urllib.parse

            q = urllib.parse.urlencode({"query": expr, "start": start, "end": end, "step": step})
            status, body = http_get(f"{prom.url}/api/v1/query_range?{q}")
            assert status == 200, body
            return json.loads(body)["data"]["result"]

        t0 = 1785811380  # 2026-08-04T02:43:00Z
        res = wait_until(lambda: range_q('vllm_log_kv_cache_tokens{server="grandpa"}', t0, t0 + 1200), 20,
                         what="backfilled series")
        assert {v for _, v in res[0]["values"]} == {"285336"}
        oom = range_q('vllm_log_errors_total{server="grandpa",kind="oom"}', t0, t0 + 1200)[0]["values"]
        before = [float(v) for ts, v in oom if ts < t0 + 592]
        after = [float(v) for ts, v in oom if ts > t0 + 600]
        assert set(before) == {0.0} and set(after) == {1.0}
        peak = range_q('max_over_time(vllm_log_kv_cache_usage_ratio{server="grandpa"}[30m])', t0 + 1150, t0 + 1150)
        assert float(peak[0]["values"][0][1]) == 0.794
        spec = range_q('vllm_log_spec_decode_depth{server="grandpa"}', t0, t0 + 1200)
        assert {v for _, v in spec[0]["values"]} == {"5"}


def test_backfilled_window_gauges_go_idle_two_intervals_after_the_last_stats_line(tmp_path):
    """No Prometheus needed for this one: the OpenMetrics text itself."""
    log = tmp_path / "gp.log"
    stats = ("Aug 04 02:46:00 h vllm[1]: (APIServer pid=53) INFO 08-04 02:46:00 [loggers.py:314] Engine 000: "
             "Avg prompt throughput: 0.0 tokens/s, Avg generation throughput: 359.0 tokens/s, Running: 1 reqs, "
             "Waiting: 0 reqs, GPU KV cache usage: 1.9%, Prefix cache hit rate: 88.1%")
    later = 'Aug 04 02:47:30 h vllm[1]: (APIServer pid=53) INFO:     10.0.0.1:5 - "GET /health HTTP/1.1" 200 OK'
    log.write_text(stats + "\n" + later + "\n")
    om = tmp_path / "gp.om"
    r = subprocess.run([sys.executable, "-m", "exporter", "backfill", str(log), "-o", str(om), "--year", "2026",
                        "--timezone", "UTC", "--step", "10"], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    import calendar

    t0 = calendar.timegm((2026, 8, 4, 2, 46, 0))
    values = {}
    for line in om.read_text().splitlines():
        if line.startswith("vllm_log_generation_throughput_tokens_per_second{"):
            value, ts = line.rsplit(" ", 2)[1:]
            values[int(float(ts)) - t0] = float(value)
    # the interval is 10 s: busy at +10 and +20, idle from +30 on (more than 2 intervals after the line)
    assert values[10] == 359.0 and values[20] == 359.0
    assert values[30] == 0.0 and values[90] == 0.0


def test_untimed_events_take_the_time_of_their_neighbours():
    """exporter.offline.passes.NeighbourTimes: before the first stamp, the first stamp after; then the
    one before; in a log with none, the fallback (the file's mtime)."""
    from exporter.offline.passes import NeighbourTimes
    from exporter.parsers.events import Event

    t = NeighbourTimes(fallback=5.0)
    out = t.fill([Event("a"), Event("b", ts=10.0)]) + t.fill([Event("c"), Event("d", ts=12.0), Event("e")])
    assert [(e.kind, e.ts) for e in out] == [("a", 10.0), ("b", 10.0), ("c", 10.0), ("d", 12.0), ("e", 12.0)]
    t = NeighbourTimes(fallback=5.0)
    assert t.fill([Event("a")]) == [] and [(e.kind, e.ts) for e in t.end()] == [("a", 5.0)]
