#!/usr/bin/env python3
"""How fast /metrics answers while the exporter is crowded at a low file-descriptor limit (issue 19's
reproducer: 377 idle connections at a 256 fd limit made /metrics time out).

    python bench/crowded_scrape.py [SCRAPES=20] [--python PY]

Starts the real exporter with --demo under RLIMIT_NOFILE 256, opens 400 idle connections and 20 that
send a request line and then one byte per round (slow headers), and times SCRAPES scrapes of /metrics
200 ms apart while they stay open. Prints p50 / max of the time to the whole answer and what the
guard counted. tests/test_http_guard.py checks the same scene answers (every scrape 200, the crowd
evicted, no "Too many open files"); the time is measured here, not asserted there.
"""

from __future__ import annotations

import argparse
import resource
import socket
import statistics
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
IDLE, SLOW, FD_LIMIT = 400, 20, 256


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def limit() -> None:
    resource.setrlimit(resource.RLIMIT_NOFILE, (FD_LIMIT, FD_LIMIT))


def run(python: str, scrapes: int) -> dict:
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    proc = subprocess.Popen([python, "-m", "exporter", "--demo", "--web.listen-address", f"127.0.0.1:{port}",
                             "--log.format", "json"], cwd=ROOT, preexec_fn=limit,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    clients: list[socket.socket] = []
    try:
        for _ in range(600):  # bounded: 60 s
            try:
                urllib.request.urlopen(url + "/healthz", timeout=5).read()
                break
            except OSError:
                time.sleep(0.1)
        else:
            raise SystemExit("the exporter did not answer within 60 s")
        clients += [socket.create_connection(("127.0.0.1", port), timeout=10) for _ in range(IDLE)]
        slow = []
        for _ in range(SLOW):
            s = socket.create_connection(("127.0.0.1", port), timeout=10)
            s.sendall(b"GET /metrics HTTP/1.1\r\n")
            slow.append(s)
        clients += slow
        times, body = [], b""
        for _ in range(scrapes):
            t0 = time.perf_counter()
            with urllib.request.urlopen(url + "/metrics", timeout=60) as r:
                body = r.read()
            times.append(time.perf_counter() - t0)
            for s in slow:
                try:
                    s.sendall(b"X")
                except OSError:
                    pass
            time.sleep(0.2)
        evicted = open_now = None
        for line in body.decode().splitlines():
            if line.startswith('vllm_log_exporter_http_connections_closed_total{reason="evicted"}'):
                evicted = float(line.rsplit(" ", 1)[1])
            elif line.startswith("vllm_log_exporter_http_connections "):
                open_now = float(line.rsplit(" ", 1)[1])
        return {"times": times, "evicted": evicted, "open": open_now}
    finally:
        for s in clients:
            s.close()
        proc.terminate()
        err = proc.communicate(timeout=30)[1]
        if "Too many open files" in err:
            print("the exporter logged 'Too many open files'", file=sys.stderr)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("scrapes", type=int, nargs="?", default=20)
    ap.add_argument("--python", default=sys.executable)
    args = ap.parse_args()
    r = run(args.python, args.scrapes)
    t = sorted(r["times"])
    print(f"{IDLE} idle + {SLOW} slow-header clients, fd limit {FD_LIMIT}, {len(t)} scrapes: "
          f"p50 {statistics.median(t) * 1000:.1f} ms, max {t[-1] * 1000:.1f} ms; "
          f"evicted {r['evicted']:.0f}, open at the last scrape {r['open']:.0f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
