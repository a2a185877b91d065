#!/usr/bin/env python3
"""Throughput of the whole pipeline (file -> framing -> parsers -> metrics), memory, /metrics render time.

    python bench/pipeline.py [N_LINES]      # default 1,000,000; generates bench/out/mixed-N.log if missing

Prints: offline lines/s (read the file, feed every line through the pipeline and the metrics, as the
daemon does), the live daemon's lines/s (`serve --from-start` on the file until
vllm_log_exporter_lines_total reaches N), peak RSS of each, and the /metrics render time with every
family present for 3 servers x 4 engines.
"""

from __future__ import annotations

import resource
import statistics
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from prometheus_client import generate_latest  # noqa: E402

from exporter.daemon.runners import SourceRunner  # noqa: E402
from exporter.framing.clock import Clock  # noqa: E402
from exporter.metrics import Metrics  # noqa: E402


class _Src:
    name = "bench"


def offline(path: Path) -> tuple[float, int]:
    m = Metrics()
    runner = SourceRunner(_Src(), m, Clock(year=2026))
    t0 = time.perf_counter()
    n = 0
    batch = []
    with open(path, "rb") as f:
        for raw in f:
            batch.append(raw.decode("utf-8", "replace").rstrip("\n"))
            if len(batch) == 1000:
                runner.feed(batch)
                n += len(batch)
                batch = []
    if batch:
        runner.feed(batch)
        n += len(batch)
    runner.flush(None)
    return n / (time.perf_counter() - t0), n


def live(path: Path, n: int) -> tuple[float, float]:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    t0 = time.perf_counter()
    proc = subprocess.Popen([sys.executable, "-m", "exporter", "--source", str(path), "--from-start", "--year", "2026",
                             "--web.listen-address", f"127.0.0.1:{port}", "--log.level", "error"], cwd=ROOT)
    try:
        deadline = time.monotonic() + 3600
        while time.monotonic() < deadline:
            try:
                body = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5).read().decode()
            except OSError:
                time.sleep(0.2)
                continue
            total = sum(float(l.rsplit(" ", 1)[1]) for l in body.splitlines() if l.startswith("vllm_log_exporter_lines_total{"))
            if total >= n:
                elapsed = time.perf_counter() - t0
                rss = next(float(l.rsplit(" ", 1)[1]) for l in body.splitlines() if l.startswith("process_resident_memory_bytes"))
                return n / elapsed, rss
            time.sleep(0.2)
        raise RuntimeError("live daemon did not finish")
    finally:
        proc.terminate()
        proc.wait(10)


def render_time() -> tuple[float, float, float]:
    from tests.conftest import SAMPLE, run_lines  # the sample holds every V1 family

    m = Metrics()
    _, events = run_lines(SAMPLE.read_text(encoding="utf-8").splitlines())
    for server in ("a", "b", "c"):
        m.add_server(server)
        for engine in range(4):
            for ev in events:
                if "engine" in ev.fields:
                    ev.fields["engine"] = engine
                m.observe(server, ev)
    times = []
    for _ in range(50):
        t0 = time.perf_counter()
        m.render()  # what /metrics serves
        times.append(time.perf_counter() - t0)
    generic = []
    for _ in range(50):
        t0 = time.perf_counter()
        generate_latest(m.registry)
        generic.append(time.perf_counter() - t0)
    om = []
    for _ in range(50):
        t0 = time.perf_counter()
        m.render_openmetrics()  # what a scraper that takes only OpenMetrics gets
        om.append(time.perf_counter() - t0)
    return statistics.median(times), statistics.median(generic), statistics.median(om)


def main() -> int:
    if sys.argv[1:] == ["--render-only"]:
        ours, generic, om = render_time()
        print(f"/metrics render, 3 servers x 4 engines, every family: {ours * 1000:.2f} ms (median of 50; "
              f"generate_latest {generic * 1000:.2f} ms; OpenMetrics {om * 1000:.2f} ms)")
        return 0
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 1_000_000
    path = ROOT / "bench" / "out" / f"mixed-{n}.log"
    if not path.exists():
        subprocess.run([sys.executable, str(ROOT / "bench" / "gen_log.py"), str(n), str(path)], check=True)
    rate, count = offline(path)
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    print(f"offline pipeline: {count} lines, {rate:,.0f} lines/s, peak RSS {peak / 1e6:.0f} MB")
    lrate, lrss = live(path, n)
    print(f"live daemon (--from-start): {lrate:,.0f} lines/s, RSS at end {lrss / 1e6:.0f} MB")
    ours, generic, om = render_time()
    print(f"/metrics render, 3 servers x 4 engines, every family: {ours * 1000:.2f} ms (median of 50; "
          f"prometheus-client's generate_latest on the same registry: {generic * 1000:.2f} ms; "
          f"its OpenMetrics writer: {om * 1000:.2f} ms)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
