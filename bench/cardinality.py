"""A log crafted to make new label values, against the live daemon: series, /metrics size, scrape
time and RSS after one flood and after a second one as large (issue 19's reproducer).

    python3 bench/cardinality.py --values 10000

Each flood line family brings ``--values`` new values: engine numbers, worker names, models,
HTTP status codes, methods and paths. With bounded labels the second flood adds no series and the
RSS stays where the first left it. Loopback only.
"""

from __future__ import annotations

import argparse
import random
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
HEAD = "(APIServer pid=53) INFO 08-04 02:45:02 [loggers.py:314] "


def flood(n: int, seed: int) -> str:
    rnd = random.Random(seed)
    out = []
    for i in range(n):
        out.append(f"{HEAD}Engine {rnd.randrange(10**6):03d}: Avg prompt throughput: 1.0 tokens/s, Avg generation "
                   f"throughput: 2.0 tokens/s, Running: 1 reqs, Waiting: 0 reqs, GPU KV cache usage: 1.0%, "
                   f"Prefix cache hit rate: 0.0%")
        out.append(f"(Worker_TP{rnd.randrange(10**6)} pid={i}) INFO 08-04 02:44:28 [gpu_worker.py:617] "
                   f"Available KV cache memory: 8.59 GiB")
        out.append(f"(APIServer pid=53) INFO 08-04 02:43:00 [api_utils.py:345]   model   /models/m{seed}-{i}")
        out.append(f'(APIServer pid=53) INFO:     127.0.0.1:1 - "GET /v1/models HTTP/1.1" {rnd.randrange(100, 600)} OK')
        out.append(f'(APIServer pid=53) INFO:     127.0.0.1:1 - "M{rnd.randrange(10**6)} /x{seed}-{i} HTTP/1.1" 200 OK')
    return "\n".join(out) + "\n"


def measure(port: int) -> tuple[int, int, float, float, float]:
    t = time.perf_counter()
    body = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=60).read()
    took = time.perf_counter() - t
    text = body.decode()
    series = sum(1 for ln in text.splitlines() if ln and not ln.startswith("#"))
    rss = next(float(ln.rsplit(" ", 1)[1]) for ln in text.splitlines() if ln.startswith("process_resident_memory_bytes"))
    lines = sum(float(ln.rsplit(" ", 1)[1]) for ln in text.splitlines() if ln.startswith("vllm_log_exporter_lines_total{"))
    return series, len(body), took, rss, lines


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--values", type=int, default=10000, help="new values per label family per flood")
    ap.add_argument("--python", default=sys.executable)
    args = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="vle-cardinality-"))
    log = work / "gp.log"
    log.touch()
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = subprocess.Popen([args.python, "-m", "exporter", "--source", f"gp={log}", "--year", "2026",
                             "--web.listen-address", f"127.0.0.1:{port}", "--log.format", "json"],
                            cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        for _ in range(100):
            try:
                before = measure(port)
                break
            except OSError:
                time.sleep(0.1)
        print(f"start:         series={before[0]:,} body={before[1]:,} B scrape={before[2] * 1000:.0f} ms "
              f"rss={before[3] / 2**20:.1f} MiB")
        written = 0
        for round_ in (1, 2):
            text = flood(args.values, round_)
            written += text.count("\n")
            with open(log, "a") as f:
                f.write(text)
            for _ in range(1200):  # until every line is counted (bounded: 120 s)
                m = measure(port)
                if m[4] >= written:
                    break
                time.sleep(0.1)
            print(f"after flood {round_}: series={m[0]:,} body={m[1]:,} B scrape={m[2] * 1000:.0f} ms "
                  f"rss={m[3] / 2**20:.1f} MiB lines={int(m[4]):,}")
    finally:
        proc.terminate()
        proc.wait(10)
        log.unlink()
        work.rmdir()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
