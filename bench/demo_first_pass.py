#!/usr/bin/env python3
"""How long after `vllm-log-exporter --demo` starts each family is in view (the demo's first pass plays
in 30 s: docs/demo.md's "every family, the OOM and the dead engines within half a minute").

    .venv/bin/python bench/demo_first_pass.py [--runs 3] [--python PY]

Starts the real exporter with --demo on a free loopback port, scrapes /metrics every 0.1 s and notes
when each family first has a value above 0 (seconds from the start of the process, so start-up is
included), until all are seen or 120 s pass. This is the measurement tests/test_daemon.py used to
assert with a 40 s bound; a test waits on the families with a ceiling, the time is here.
"""

from __future__ import annotations

import argparse
import socket
import statistics
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

from prometheus_client.parser import text_string_to_metric_families

ROOT = Path(__file__).resolve().parent.parent
# (what docs/demo.md calls it, metric, labels, server)
FAMILIES = [
    ("stats", "vllm_log_generation_throughput_tokens_per_second", {}, "demo"),
    ("spec decode", "vllm_log_spec_decode_accepted_tokens_total", {}, "demo"),
    ("KV offload store", "vllm_log_kv_offload_bytes_total", {"direction": "store"}, "demo"),
    ("KV offload load", "vllm_log_kv_offload_bytes_total", {"direction": "load"}, "demo"),
    ("HTTP 500", "vllm_log_http_requests_total", {"status": "500"}, "demo"),
    ("the OOM", "vllm_log_errors_total", {"kind": "oom"}, "demo"),
    ("a dead engine", "vllm_log_errors_total", {"kind": "engine_dead"}, "demo"),
    ("the restart", "vllm_log_restarts_total", {}, "demo"),
    ("dynamic drafts", "vllm_log_spec_decode_drafts_by_length_total", {}, "demo"),
    ("LMCache retrieve", "vllm_log_lmcache_bytes_total", {"direction": "retrieve"}, "demo-lmcache"),
    ("LMCache KV load recovered", "vllm_log_kv_load_failures_total", {"outcome": "recovered"}, "demo-lmcache"),
    ("V0 start-up failure", "vllm_log_errors_total", {"kind": "startup_failure"}, "demo-v0"),
]
CEILING = 120.0


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def values(port: int) -> dict:
    body = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5).read().decode()
    return {(s.name, frozenset(s.labels.items())): s.value
            for fam in text_string_to_metric_families(body) for s in fam.samples}


def seen(sample: dict, metric: str, labels: dict, server: str) -> bool:
    want = {("server", server), *labels.items()}
    return sum(v for (name, lbls), v in sample.items() if name == metric and want <= lbls) > 0


def one_run(python: str) -> dict[str, float | None]:
    port = free_port()
    t0 = time.monotonic()
    proc = subprocess.Popen([python, "-m", "exporter", "--demo", "--web.listen-address", f"127.0.0.1:{port}",
                             "--log.level", "warning"], cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    first: dict[str, float | None] = {f[0]: None for f in FAMILIES}
    try:
        while time.monotonic() - t0 < CEILING and any(v is None for v in first.values()):
            if proc.poll() is not None:
                raise SystemExit(f"the exporter exited with {proc.returncode}")
            try:
                sample = values(port)
            except OSError:
                time.sleep(0.05)
                continue
            now = time.monotonic() - t0
            for what, metric, labels, server in FAMILIES:
                if first[what] is None and seen(sample, metric, labels, server):
                    first[what] = now
            time.sleep(0.1)
    finally:
        proc.terminate()
        proc.wait(10)
    return first


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--python", default=sys.executable)
    args = ap.parse_args(argv)
    runs = [one_run(args.python) for _ in range(args.runs)]
    print(f"seconds from the exporter's start until each is in /metrics ({args.runs} runs; median, range)")
    print("| what | median | range |")
    print("|---|---|---|")
    for what, *_ in FAMILIES:
        got = [r[what] for r in runs if r[what] is not None]
        missing = len(runs) - len(got)
        if not got:
            print(f"| {what} | not within {CEILING:.0f} s | |")
            continue
        note = f" ({missing} runs: not within {CEILING:.0f} s)" if missing else ""
        print(f"| {what} | {statistics.median(got):.1f} s | {min(got):.1f}-{max(got):.1f} s{note} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
