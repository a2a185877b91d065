#!/usr/bin/env python3
"""How long from a line appended to the log until a counter moved in /metrics: ours and mtail's.

    python bench/latency.py [SAMPLES=200] [--python PY]

Both follow the same file (mtail with bench/mtail/vllm.mtail); samples alternate between them. A
sample appends one access-log line (one write) at a random moment, so a poller's phase is random,
then scrapes every 2 ms until the counter (ours: vllm_log_http_requests_total, mtail's:
vllm_http_requests_total) moved; the time is from the write to the answer that shows it, so it
includes one scrape (a few ms at this size: said as the resolution).
"""

from __future__ import annotations

import argparse
import random
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
LINE = ('Aug 04 02:44:53 gpu-host vllm[4242]: (APIServer pid=53) INFO:     10.10.10.2:58841 - '
        '"GET /metrics HTTP/1.1" 200 OK\n')


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def counter(port: int, name: str) -> float:
    body = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5).read().decode()
    return sum(float(l.rsplit(" ", 1)[1]) for l in body.splitlines() if l.startswith(name + "{"))


def wait_up(port: int, name: str, proc: subprocess.Popen) -> None:
    for _ in range(300):
        if proc.poll() is not None:
            raise SystemExit(f"{proc.args[0]} exited with {proc.returncode}")
        try:
            counter(port, name)
            return
        except OSError:
            time.sleep(0.05)
    raise SystemExit(f"{proc.args} did not answer within 15 s")


def sample(path: Path, port: int, name: str) -> float:
    before = counter(port, name)
    time.sleep(random.uniform(0.05, 0.35))  # a random phase against any poll interval
    with open(path, "a") as f:
        t0 = time.perf_counter()
        f.write(LINE)
    for _ in range(2500):  # bounded: 5 s at 2 ms
        if counter(port, name) > before:
            return time.perf_counter() - t0
        time.sleep(0.002)
    raise SystemExit(f"{name} did not move within 5 s")


def pct(values: list[float], q: float) -> float:
    v = sorted(values)
    return v[min(len(v) - 1, int(q * len(v)))]


def measure(python: str, samples: int) -> dict[str, list[float]]:
    """Seconds from write to counter moved, per sample: {"ours": [...], "mtail": [...]} (mtail if installed)."""
    tmp = Path(tempfile.mkdtemp(prefix="vle-latency-"))
    path = tmp / "vllm.log"
    path.write_text(LINE)
    procs = []
    try:
        ours_port, mtail_port = free_port(), free_port()
        ours = subprocess.Popen([python, "-m", "exporter", "--source", f"bench={path}", "--year", "2026",
                                 "--log.level", "error", "--web.listen-address", f"127.0.0.1:{ours_port}"], cwd=ROOT)
        procs.append(ours)
        contestants = [("ours", ours_port, "vllm_log_http_requests_total")]
        if shutil.which("mtail"):
            mt = subprocess.Popen(["mtail", "--progs", str(ROOT / "bench" / "mtail"), "--logs", str(path),
                                   "--address", "127.0.0.1", "--port", str(mtail_port), "--logtostderr"],
                                  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            procs.append(mt)
            contestants.append(("mtail", mtail_port, "vllm_http_requests_total"))
        for (_, port, name), proc in zip(contestants, procs):
            wait_up(port, name, proc)
        time.sleep(1.0)
        res: dict[str, list[float]] = {c[0]: [] for c in contestants}
        for _ in range(samples):
            for who, port, name in contestants:
                res[who].append(sample(path, port, name))
        return res
    finally:
        for p in procs:
            p.terminate()
            p.wait(10)
        shutil.rmtree(tmp, ignore_errors=True)


def table(res: dict[str, list[float]]) -> str:
    rows = ["| tool | p50 | p90 | p99 | max |", "|---|---|---|---|---|"]
    for who, v in res.items():
        rows.append(f"| {who} | {pct(v, .5) * 1e3:.1f} ms | {pct(v, .9) * 1e3:.1f} ms | {pct(v, .99) * 1e3:.1f} ms | "
                    f"{max(v) * 1e3:.1f} ms |")
    return "\n".join(rows)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("samples", type=int, nargs="?", default=200)
    ap.add_argument("--python", default=sys.executable)
    args = ap.parse_args()
    res = measure(args.python, args.samples)
    print(f"{args.samples} samples each, alternating\n")
    print(table(res))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
