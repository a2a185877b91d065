#!/usr/bin/env python3
"""The daemon's start-up to its first /metrics answer, and its idle RSS, per interpreter or checkout.

    python bench/startup.py [ROUNDS=7] [--python PY ...] [--mtail] [--imports N] [--report [--rules FILE]]

Each round starts every ``--python`` (default: this interpreter; wrappers that enter a checkout compare two
trees) as ``PY -m exporter --source e=EMPTY --web.listen-address 127.0.0.1:PORT``, alternating, and times
process start -> first /metrics answer; 3 s later it reads the process's VmRSS (idle: an empty log). Medians
and ranges. ``--mtail`` adds mtail on the same empty file. ``--imports N``: then, per interpreter, the N
modules that took longest to import themselves (``python -X importtime``, the daemon's own imports, one run).
``--report``: then, per interpreter, the wall time of ``report`` on a one-line log (its start-up: what every
``report`` and ``compare`` pays before its first line), the same rounds, alternating; with ``--rules FILE`` also
with those rules loaded (what loading and checking them adds: the daemon pays it at start-up and at each reload).

Byte code is compiled first (``compileall``) and PYTHONDONTWRITEBYTECODE is dropped from the children's
environment: an image installed with pip holds the byte code, and without it every start compiles the
package anew.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "bench"))
from compare import first_answer, free_port, wait_for_metrics  # noqa: E402


def ours(py: str, empty: Path, port: int) -> list[str]:
    return [py, "-m", "exporter", "--source", f"e={empty}", "--log.level", "error",
            "--web.listen-address", f"127.0.0.1:{port}"]


def self_times(py: str, empty: Path, n: int) -> list[tuple[float, str]]:
    """The n slowest imports (their own time, ms) of the daemon's start, from one run with -X importtime."""
    port = free_port()
    proc = subprocess.Popen([py, "-X", "importtime", *ours(py, empty, port)[1:]], cwd=ROOT,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    wait_for_metrics(port)  # (a start that never answers still has its imports to show)
    proc.terminate()
    err = proc.communicate(timeout=10)[1]
    rows = []
    for line in err.splitlines():
        if line.startswith("import time:") and "self [us]" not in line:
            own, _, name = line[len("import time:"):].split("|")
            rows.append((int(own) / 1000, name.strip()))
    return sorted(rows, reverse=True)[:n]


def report_startup(pythons: list[str], rounds: int, rules: str | None = None) -> None:
    """`report` on a one-line log (an engine-stats line), per interpreter (and with ``rules``): wall time, median
    (range)."""
    one = ROOT / "bench" / "out" / "one-line.log"
    one.write_text("Aug 04 00:01:54 gpu-host vllm[4242]: (APIServer pid=53) INFO 08-04 00:01:54 [loggers.py:314] "
                   "Engine 000: Avg prompt throughput: 442.0 tokens/s, Avg generation throughput: 230.7 tokens/s, "
                   "Running: 2 reqs, Waiting: 0 reqs, GPU KV cache usage: 2.4%, Prefix cache hit rate: 96.5%\n")
    took: dict[str, list[float]] = {}
    for _ in range(rounds):
        for i, py in enumerate(pythons):
            for extra in ([], ["--rules", str(Path(rules).resolve())]) if rules else ([],):
                t = time.perf_counter()
                subprocess.run([py, "-m", "exporter", "report", "--year", "2026", str(one), *extra], cwd=ROOT,
                               check=True, stdout=subprocess.DEVNULL)
                took.setdefault(f"py{i + 1}" + (f" --rules {Path(rules).name}" if extra else ""), []).append(
                    time.perf_counter() - t)
    print("\n| tool | `report` on a one-line log, median (range) |")
    print("|---|---|")
    for name, runs in took.items():
        print(f"| {name} | {statistics.median(runs):.3f} s ({min(runs):.3f}-{max(runs):.3f}) |")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("rounds", type=int, nargs="?", default=7)
    ap.add_argument("--python", action="append")
    ap.add_argument("--mtail", action="store_true")
    ap.add_argument("--imports", type=int, default=0)
    ap.add_argument("--report", action="store_true", help="also time `report` on a one-line log")
    ap.add_argument("--rules", help="with --report: also with these rules loaded")
    args = ap.parse_args()
    os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
    pythons = args.python or [sys.executable]
    for py in pythons:
        subprocess.run([py, "-m", "compileall", "-q", str(ROOT / "exporter")], check=True, stdout=subprocess.DEVNULL)
    empty = ROOT / "bench" / "out" / "empty.log"
    empty.parent.mkdir(exist_ok=True)
    empty.write_text("")
    got: dict[str, list[tuple[float, float]]] = {}
    for _ in range(args.rounds):
        if args.mtail:
            port = free_port()
            got.setdefault("mtail", []).append(first_answer(
                ["mtail", "--progs", str(ROOT / "bench" / "mtail"), "--logs", str(empty), "--address", "127.0.0.1",
                 "--port", str(port), "--logtostderr"], port))
        for i, py in enumerate(pythons):
            port = free_port()
            got.setdefault(f"py{i + 1}", []).append(first_answer(ours(py, empty, port), port))
    print("| tool | start-up to first /metrics, median (range) | idle RSS, median (range) |")
    print("|---|---|---|")
    for name, runs in got.items():
        ups, rss = [u for u, _ in runs], [r / 1e6 for _, r in runs]
        print(f"| {name} | {statistics.median(ups):.3f} s ({min(ups):.3f}-{max(ups):.3f}) | "
              f"{statistics.median(rss):.1f} MB ({min(rss):.1f}-{max(rss):.1f}) |")
    if args.report:
        report_startup(pythons, args.rounds, args.rules)
    for i, py in enumerate(pythons):
        if args.imports:
            print(f"\npy{i + 1} ({py}): slowest imports, own time")
            for ms, name in self_times(py, empty, args.imports):
                print(f"  {ms:6.1f} ms  {name}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
