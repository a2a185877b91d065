#!/usr/bin/env python3
"""What the vocabulary's size costs a line, in one process: per family, the pipeline's CPU time per line
without rules and with N rules that match nothing (bench/many_rules.py), alternating, best of ROUNDS.

    python bench/vocabulary.py [ROUNDS=5] [--rules 10,200] [--lines 20000] [--wrapper journald|bare|stamped|cri]

The families' files are bench/families.py's (made by it when missing). Only ``Pipeline.feed_batch`` is timed
(``time.process_time``), so neither start-up nor the report's tables nor other sessions' load on this VM
blur a difference of a few percent the way timing whole `report` runs does. Run it with each checkout's
interpreter (wrappers that enter a tree) to compare two trees.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

FAMILIES = ("engine stats", "spec decode", "KV transfer", "request log", "requests finished", "warnings", "ignored INFO",
            "access")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("rounds", type=int, nargs="?", default=5)
    ap.add_argument("--rules", default="200", help="comma-separated numbers of rules (default 200)")
    ap.add_argument("--lines", type=int, default=20_000)
    ap.add_argument("--wrapper", default="journald", help="the lines in this wrapper (bench/families.py WRAPPERS)")
    args = ap.parse_args()

    from exporter.config.rules import load_rule_file
    from exporter.framing.clock import Clock
    from exporter.parsers import BUILT_IN
    from exporter.parsers.rules import families
    from exporter.stream.pipeline import Pipeline

    out = ROOT / "bench" / "out"
    files = {name: out / f"family-{name.replace(' ', '-')}.log" for name in FAMILIES}
    if not all(f.exists() for f in files.values()):
        from families import family_files
        family_files()
    if args.wrapper != "journald":
        from families import wrapped_files
        files = wrapped_files(files, args.wrapper)
    sets = {"none": BUILT_IN}
    for n in (int(x) for x in args.rules.split(",")):
        path = out / f"rules{n}.yaml"
        subprocess.run([sys.executable, str(ROOT / "bench" / "many_rules.py"), str(n), str(path)], check=True,
                       stdout=subprocess.DEVNULL)
        sets[f"{n} rules"] = families(load_rule_file(str(path)))
    print("| family | " + " | ".join(f"{k} (µs)" for k in sets) + " | "
          + " | ".join(f"{k} / none" for k in list(sets)[1:]) + " |")
    print("|---" * (1 + 2 * len(sets) - 1) + "|")
    for name, path in files.items():
        with open(path, encoding="utf-8") as f:
            lines = [line.rstrip("\n") for _, line in zip(range(args.lines), f)]
        best = {k: float("inf") for k in sets}
        for _ in range(args.rounds):
            for k, fams in sets.items():
                pipe = Pipeline(Clock(year=2026), families=fams)
                t = time.process_time()
                for i in range(0, len(lines), 1000):
                    pipe.feed_batch(lines[i:i + 1000])
                best[k] = min(best[k], (time.process_time() - t) / len(lines) * 1e6)
        base = best["none"]
        print(f"| {name} | " + " | ".join(f"{v:.2f}" for v in best.values()) + " | "
              + " | ".join(f"{best[k] / base:.2f}x" for k in list(sets)[1:]) + " |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
