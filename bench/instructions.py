#!/usr/bin/env python3
"""Instructions per line, per line family, counted by valgrind: a measure this VM's noise cannot move.

    python bench/instructions.py [N_LINES=1000000] [--python PY]

Wall-clock figures on this VM swing by up to 2x between runs; the instruction count of one command
on one input is the same run after run (given a fixed PYTHONHASHSEED), so a change that saves 3 %
shows as 3 %. For each family of the benchmark log (bench/out/mixed-N.log: access-log lines, engine
stats, spec-decode, KV transfer, other INFO/WARNING lines) a file of that family's lines is made and
`report --format json` is run over it under `valgrind --tool=callgrind`; the count of `report` on
an empty file (start-up) is subtracted and the rest divided by the lines. The last column weighs
each family by its share of the log: where the instructions of a whole run go.

Needs valgrind (Debian package valgrind). Takes a minute or two (valgrind runs ~50x slower).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

# (family, test on a line, lines to take): enough lines that start-up noise is far below a percent
FAMILIES = (
    ("access", lambda l: ' - "' in l and "metrics: " not in l and "Engine 0" not in l, 50_000),
    ("engine stats", lambda l: "Avg prompt throughput" in l, 5_000),
    ("spec decode", lambda l: "SpecDecoding metrics: " in l, 5_000),
    ("kv transfer", lambda l: "KV Transfer metrics: " in l, 5_000),
    ("other", lambda l: ' - "' not in l and "metrics: " not in l and "Avg prompt throughput" not in l, 5_000),
)


def instructions(python: str, log: str) -> int:
    env = dict(os.environ, PYTHONHASHSEED="0")
    out = subprocess.run(["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null", python, "-m", "exporter",
                          "report", log, "--format", "json"], cwd=ROOT, env=env, capture_output=True, text=True)
    for line in out.stderr.splitlines():
        if "Collected :" in line:
            return int(line.rsplit(":", 1)[1])
    raise SystemExit(f"valgrind gave no count for {log}: {out.stderr[-500:]}")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("n", type=int, nargs="?", default=1_000_000)
    ap.add_argument("--python", default=sys.executable)
    args = ap.parse_args()
    path = ROOT / "bench" / "out" / f"mixed-{args.n}.log"
    if not path.exists():
        subprocess.run([sys.executable, str(ROOT / "bench" / "gen_log.py"), str(args.n), str(path)], check=True)
    subprocess.run([args.python, "-m", "compileall", "-q", str(ROOT / "exporter")], check=True)
    taken: dict[str, list[str]] = {name: [] for name, _, _ in FAMILIES}
    share = dict.fromkeys(taken, 0)
    with open(path, encoding="utf-8") as f:
        for line in f:
            for name, test, limit in FAMILIES:
                if test(line):
                    share[name] += 1
                    if len(taken[name]) < limit:
                        taken[name].append(line)
                    break
    total_lines = sum(share.values())
    with tempfile.TemporaryDirectory() as tmp:
        empty = Path(tmp) / "empty.log"
        empty.write_text("")
        start = instructions(args.python, str(empty))
        rows = []
        for name, _, _ in FAMILIES:
            p = Path(tmp) / f"{name.replace(' ', '_')}.log"
            p.write_text("".join(taken[name]), encoding="utf-8")
            per_line = (instructions(args.python, str(p)) - start) / len(taken[name])
            rows.append((name, per_line, share[name]))
    weighted = {name: per * n for name, per, n in rows}
    whole = sum(weighted.values())
    print(f"{path.name}: {total_lines:,} lines; `report` start-up {start / 1e6:.0f} M instructions\n")
    print("| family | lines in the log | instructions per line | share of a run's line work |")
    print("|---|---|---|---|")
    for name, per, n in rows:
        print(f"| {name} | {n:,} | {per:,.0f} | {weighted[name] / whole * 100:.0f} % |")
    print(f"\nwhole log: {whole / 1e9:.2f} G instructions of line work + start-up")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
