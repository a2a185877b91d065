#!/usr/bin/env python3
"""/metrics as Prometheus asks for it (its Accept header, gzip) at 8 servers x 8 engines.

    python bench/scrape.py [SCRAPES=300] [--python PY]

The daemon follows 8 files, each the sample log with every stats window logged by 8 engines (an
engine-stats and a spec-decode line each), so every family has 8 x 8 engines' series. After it read
them, two rounds of SCRAPES scrapes each, 20 ms apart:
  unchanged  nothing was written since the last scrape (a second Prometheus, or a quiet server)
  changed    a stats window for all 8 engines of one server was appended before each scrape (a busy
             server scraped every 15 s: every scrape finds something new)
and prints p50 / p99 / max of the time to the whole answer (client side, loopback), and its size.
"""

from __future__ import annotations

import argparse
import gzip
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SAMPLE = ROOT / "exporter" / "data" / "sample.log"
ACCEPT = ("application/openmetrics-text;version=1.0.0,application/openmetrics-text;version=0.0.1;q=0.75,"
          "text/plain;version=0.0.4;q=0.5,*/*;q=0.1")  # Prometheus 2.42's
ENGINES = 8
SERVERS = 8


def eight_engines(lines: list[str]) -> list[str]:
    out, held = [], None
    for line in lines:
        if "Engine 000:" in line:
            if held is not None:
                out.extend(held.replace("Engine 000:", f"Engine {k:03d}:") for k in range(ENGINES))
            held = line
        elif held is not None and "SpecDecoding metrics" in line:
            for k in range(ENGINES):
                out += [held.replace("Engine 000:", f"Engine {k:03d}:"), line]
            held = None
        else:
            out.append(line)
    if held is not None:
        out.extend(held.replace("Engine 000:", f"Engine {k:03d}:") for k in range(ENGINES))
    return out


def scrape(port: int) -> tuple[float, int, int]:
    req = urllib.request.Request(f"http://127.0.0.1:{port}/metrics",
                                 headers={"Accept": ACCEPT, "Accept-Encoding": "gzip"})
    t0 = time.perf_counter()
    with urllib.request.urlopen(req, timeout=10) as r:
        body = r.read()
        enc = r.headers.get("Content-Encoding")
    took = time.perf_counter() - t0
    plain = gzip.decompress(body) if enc == "gzip" else body
    return took, len(body), len(plain)


def lines_total(port: int) -> float:
    body = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10).read().decode()
    return sum(float(l.rsplit(" ", 1)[1]) for l in body.splitlines() if l.startswith("vllm_log_exporter_lines_total{"))


def pct(v: list[float], q: float) -> float:
    s = sorted(v)
    return s[min(len(s) - 1, int(q * len(s)))]


def measure(python: str, scrapes: int) -> tuple[int, dict[str, tuple[list[float], tuple[int, int]]]]:
    """(samples in the exposition, {"unchanged" | "changed": (seconds per scrape, (gzip, plain bytes))})."""
    lines = eight_engines(SAMPLE.read_text().splitlines())
    window = [l for l in lines if "Engine 00" in l or "SpecDecoding metrics" in l][: 2 * ENGINES]
    tmp = Path(tempfile.mkdtemp(prefix="vle-scrape-"))
    files = []
    for s in range(SERVERS):
        f = tmp / f"vllm-{s}.log"
        f.write_text("\n".join(lines) + "\n")
        files.append(f)
    with socket.socket() as sk:
        sk.bind(("127.0.0.1", 0))
        port = sk.getsockname()[1]
    cmd = [python, "-m", "exporter", "--from-start", "--log.level", "error", "--web.listen-address",
           f"127.0.0.1:{port}"]
    for s, f in enumerate(files):
        cmd += ["--source", f"vllm-{s}={f}"]
    proc = subprocess.Popen(cmd, cwd=ROOT)
    try:
        want = SERVERS * len(lines)
        for _ in range(600):
            try:
                if lines_total(port) >= want:
                    break
            except OSError:
                pass
            time.sleep(0.05)
        else:
            raise SystemExit("the daemon did not read the files within 30 s")
        results = {}
        for mode in ("unchanged", "changed"):
            times, sizes = [], (0, 0)
            for i in range(scrapes):
                if mode == "changed":
                    with open(files[i % SERVERS], "a") as f:
                        f.write("\n".join(window) + "\n")
                time.sleep(0.02)  # (changed: read by then, as between two real scrapes)
                took, gz, plain = scrape(port)
                times.append(took)
                sizes = (gz, plain)
            results[mode] = (times, sizes)
        series = sum(1 for l in urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics").read().decode().splitlines()
                     if l and not l.startswith("#"))
        return series, results
    finally:
        proc.terminate()
        proc.wait(10)
        shutil.rmtree(tmp, ignore_errors=True)


def table(results) -> str:
    rows = ["| scrape | p50 | p99 | max | body gzip / plain |", "|---|---|---|---|---|"]
    for mode, (times, (gz, plain)) in results.items():
        rows.append(f"| {mode} | {statistics.median(times) * 1e3:.1f} ms | {pct(times, .99) * 1e3:.1f} ms | "
                    f"{max(times) * 1e3:.1f} ms | {gz / 1e3:.0f} KB / {plain / 1e3:.0f} KB |")
    return "\n".join(rows)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("scrapes", type=int, nargs="?", default=300)
    ap.add_argument("--python", default=sys.executable)
    args = ap.parse_args()
    series, results = measure(args.python, args.scrapes)
    print(f"{SERVERS} servers x {ENGINES} engines, {series:,} samples; {args.scrapes} scrapes per row, "
          f"Prometheus' Accept header and gzip; {args.python}\n")
    print(table(results))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
