#!/usr/bin/env python3
"""Pod churn: N pod replacements under a Kubernetes node-log glob, one at a time, as a rollout makes them.

    python bench/pod_churn.py [N=1000] [--keep]

Each step lays out a new pod as kubelet does (/var/log/pods/<ns>_<pod>_<uid>/<container>/0.log) with a
start-up banner, stats windows, spec-decode lines and access lines, lets the exporter's real glob runner
(exporter.daemon.runners.GlobRunner, real file sources, real Metrics) read it, then deletes the previous pod's
files. Scans run as the daemon runs them, with the clock stepped past --forget-gone-after (the time is
the only thing not waited for). Every 100 steps: the series /metrics holds, how many belong to live
pods, gone pods still held, and the process's resident memory (VmRSS). With --keep, forgetting is off
(--forget-gone-after 0), for comparison.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import shutil
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from exporter.config.settings import SourceConfig  # noqa: E402
from exporter.daemon.globs import GlobRunner  # noqa: E402
from exporter.framing.clock import Clock  # noqa: E402
from exporter.metrics import Metrics  # noqa: E402

STAMP = "2026-08-04T02:45:{:02d}.123456789Z"


def pod_lines(i: int) -> str:
    h = "(APIServer pid=1) INFO 08-04 02:45:{:02d} [x.py:1] "
    out = [h.format(0) + "vLLM API server version 0.32.0", h.format(1) + "Application startup complete."]
    for s in range(2, 12):
        out.append(h.format(s) + f"Engine 000: Avg prompt throughput: {100 + i % 50}.0 tokens/s, Avg generation "
                   f"throughput: 50.0 tokens/s, Running: 2 reqs, Waiting: 0 reqs, GPU KV cache usage: 5.0%, "
                   f"Prefix cache hit rate: 10.0%")
        out.append(h.format(s) + "SpecDecoding metrics: Mean acceptance length: 3.00, Accepted throughput: 20.00 "
                   "tokens/s, Drafted throughput: 30.00 tokens/s, Accepted: 200 tokens, Drafted: 300 tokens, "
                   "Per-position acceptance rate: 0.800, 0.700, 0.500, Avg Draft acceptance rate: 66.7%")
        out.append(f'(APIServer pid=1) INFO:     10.0.0.1:{1000 + s} - "POST /v1/chat/completions HTTP/1.1" 200 OK')
    return "".join(f"{STAMP.format(k % 60)} stdout F {ln}\n" for k, ln in enumerate(out))


def rss_kib() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


def server_series(metrics: Metrics) -> dict[str, int]:
    out: dict[str, int] = {}
    for line in metrics.render().decode().splitlines():
        i = line.find('server="')
        if line.startswith("#") or i < 0:
            continue
        s = line[i + 8:line.index('"', i + 8)]
        out[s] = out.get(s, 0) + 1
    return out


async def run(n: int, forget_after: float) -> list[tuple]:
    root = Path(tempfile.mkdtemp(prefix="pod-churn-"))
    pods = root / "pods"
    pods.mkdir()
    metrics = Metrics(process_metrics=False)
    sc = SourceConfig(name="pods", type="file", path=str(pods / "*_vllm-*" / "*" / "*.log"), from_start=True,
                      server_label="file")
    runner = GlobRunner(sc, metrics, Clock(year=2026), {}, forget_after=forget_after)
    fake = time.monotonic()
    runner.scan(first=True, now=fake)
    rows = []
    prev: Path | None = None
    try:
        for i in range(1, n + 1):
            d = pods / f"llm_vllm-{i:05d}_uid-{i}" / "vllm"
            d.mkdir(parents=True)
            (d / "0.log").write_text(pod_lines(i))
            fake += 2.0
            runner.scan(first=False, now=fake)
            name = f"vllm-{i:05d}"
            for _ in range(2000):  # bounded: the new pod's 32 lines read
                if (metrics.lines.values.get((name, "parsed")) or 0) >= 32:
                    break
                await asyncio.sleep(0.001)
            if prev is not None:
                shutil.rmtree(prev)
            prev = d.parent
            for _ in range(2):  # a file is let go after two scans without it
                fake += 2.0
                runner.scan(first=False, now=fake)
            fake += max(forget_after, 0.0) + 1.0
            runner.scan(first=False, now=fake)
            if i % 100 == 0 or i == 1:
                gc.collect()
                by_server = server_series(metrics)
                live = {name}
                rows.append((i, sum(by_server.values()), sum(v for s, v in by_server.items() if s in live),
                             len([s for s in by_server if s not in live]), rss_kib()))
    finally:
        for _, task in list(runner.children.values()):
            task.cancel()
        await asyncio.gather(*(t for _, t in runner.children.values()), return_exceptions=True)
        shutil.rmtree(root, ignore_errors=True)
    return rows


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("n", type=int, nargs="?", default=1000)
    ap.add_argument("--keep", action="store_true", help="forgetting off (--forget-gone-after 0)")
    args = ap.parse_args()
    t0 = time.perf_counter()
    rows = asyncio.run(run(args.n, 0.0 if args.keep else 900.0))
    print(f"| replacements | series with a server label | of the live pod | gone pods still in /metrics | RSS (MiB) |")
    print("|---|---|---|---|---|")
    for i, total, live, gone, rss in rows:
        print(f"| {i} | {total} | {live} | {gone} | {rss / 1024:.1f} |")
    print(f"\n{args.n} replacements in {time.perf_counter() - t0:.0f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
