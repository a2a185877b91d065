#!/usr/bin/env python3
"""Load test on loopback: a writer appends RATE lines/s for SECONDS to a log the exporter follows,
while a real Prometheus scrapes the exporter every second. Reports lines written vs counted and the
scrape durations Prometheus measured.

    python bench/load.py [RATE=5000] [SECONDS=60]
"""

from __future__ import annotations

import json
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.helpers import Exporter, Prometheus, wait_until  # noqa: E402

LINE = ('Aug 04 02:50:28 h vllm[1]: (APIServer pid=53) INFO:     10.10.10.2:52922 - '
        '"POST /v1/chat/completions HTTP/1.1" 200 OK\n')
STATS = ("Aug 04 02:50:28 h vllm[1]: (APIServer pid=53) INFO 08-04 02:50:28 [loggers.py:314] Engine 000: Avg prompt "
         "throughput: 250.6 tokens/s, Avg generation throughput: 166.5 tokens/s, Running: 1 reqs, Waiting: 0 reqs, "
         "GPU KV cache usage: 2.1%, Prefix cache hit rate: 95.5%\n")


def main() -> int:
    rate = int(sys.argv[1]) if len(sys.argv) > 1 else 5000
    seconds = int(sys.argv[2]) if len(sys.argv) > 2 else 60
    tmp = Path(tempfile.mkdtemp(prefix="vle-load-"))
    log = tmp / "load.log"
    log.write_text("")
    with Exporter("--source", f"load={log}", "--log.level", "warning") as ex:
        config = {"global": {"scrape_interval": "1s"},
                  "scrape_configs": [{"job_name": "vle", "static_configs": [{"targets": [f"127.0.0.1:{ex.port}"]}]}]}
        with Prometheus(tmp, json.dumps(config)) as prom:
            wait_until(lambda: prom.query('up{job="vle"} == 1'), 30, 0.5, what="target up")
            written = 0
            t0 = time.monotonic()
            with open(log, "a", buffering=1 << 16) as f:
                for tick in range(seconds * 10):  # 100 ms slices
                    n = rate // 10
                    f.write(STATS if tick % 100 == 0 else "")
                    f.write(LINE * (n - (1 if tick % 100 == 0 else 0)))
                    f.flush()
                    written += n
                    sleep = t0 + (tick + 1) / 10 - time.monotonic()
                    if sleep > 0:
                        time.sleep(sleep)
            wrote_for = time.monotonic() - t0

            def counted():
                v = ex.value("vllm_log_exporter_lines_total", server="load")
                return v if v == written else None

            wait_until(counted, 60, 0.5, what=f"{written} lines counted")
            lag = time.monotonic() - t0 - wrote_for
            time.sleep(2)
            window = f"{int(seconds + 10)}s"

            def q(expr):
                r = prom.query(expr)
                return float(r[0]["value"][1]) if r else float("nan")

            print(f"wrote {written:,} lines in {wrote_for:.1f} s ({written / wrote_for:,.0f} lines/s); "
                  f"counted {ex.value('vllm_log_exporter_lines_total', server='load'):,.0f} "
                  f"(parsed {ex.value('vllm_log_exporter_lines_total', server='load', result='parsed'):,.0f}); "
                  f"caught up {lag:.2f} s after the writer stopped")
            sel = 'scrape_duration_seconds{job="vle"}'
            up = 'up{job="vle"}'
            med = q(f"quantile_over_time(0.5, {sel}[{window}])") * 1000
            p99 = q(f"quantile_over_time(0.99, {sel}[{window}])") * 1000
            mx = q(f"max_over_time({sel}[{window}])") * 1000
            failed = q(f"count_over_time({up}[{window}]) - sum_over_time({up}[{window}])")
            print(f"scrape duration over the run: median {med:.1f} ms, p99 {p99:.1f} ms, max {mx:.1f} ms; "
                  f"failed scrapes: {failed:.0f}")
            print(f"exporter RSS at the end: {ex.value('process_resident_memory_bytes') / 1e6:.0f} MB")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
