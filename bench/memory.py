#!/usr/bin/env python3
"""Memory stays flat: the live daemon's RSS after 1 M and after 10 M lines of the same mixed log.

    python bench/memory.py          # builds bench/out/mixed-10x.log from ten copies of the 1 M-line log
"""

from __future__ import annotations

import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def scrape(port: int) -> tuple[float, float]:
    body = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10).read().decode()
    lines = sum(float(l.rsplit(" ", 1)[1]) for l in body.splitlines() if l.startswith("vllm_log_exporter_lines_total{"))
    rss = next(float(l.rsplit(" ", 1)[1]) for l in body.splitlines() if l.startswith("process_resident_memory_bytes"))
    return lines, rss


def main() -> int:
    one = ROOT / "bench" / "out" / "mixed-1000000.log"
    if not one.exists():
        subprocess.run([sys.executable, str(ROOT / "bench" / "gen_log.py"), "1000000", str(one)], check=True)
    big = ROOT / "bench" / "out" / "mixed-10x.log"
    if not big.exists():
        with open(big, "wb") as out:
            for _ in range(10):
                with open(one, "rb") as f:
                    shutil.copyfileobj(f, out)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = subprocess.Popen([sys.executable, "-m", "exporter", "--source", f"mem={big}", "--from-start", "--year", "2026",
                             "--log.level", "error", "--web.listen-address", f"127.0.0.1:{port}"], cwd=ROOT)
    marks = {1_000_000: None, 5_000_000: None, 10_000_000: None}
    t0 = time.monotonic()
    try:
        while time.monotonic() - t0 < 1800 and any(v is None for v in marks.values()):
            time.sleep(0.2)
            try:
                n, rss = scrape(port)
            except OSError:
                continue
            for mark in marks:
                if marks[mark] is None and n >= mark:
                    marks[mark] = (n, rss)
                    print(f"after {n:,.0f} lines: RSS {rss / 1e6:.1f} MB", flush=True)
    finally:
        proc.terminate()
        proc.wait(10)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
