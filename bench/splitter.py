#!/usr/bin/env python3
"""The line splitter alone (exporter.framing.lines.LineSplitter.feed), two checkouts side by side:
microseconds per line over 64 MiB of the benchmark log in 128 KiB reads, best of ROUNDS, the two
alternating (their order swapped every round).

    python bench/splitter.py TREE_A TREE_B [ROUNDS=7]

TREE_A and TREE_B are checkouts (git worktrees) whose exporter/framing/lines.py are loaded from their
paths, so both run in one interpreter on the same bytes: a change per chunk (a byte search, a check)
shows here long before it shows in bench/families.py's end-to-end noise.
"""

from __future__ import annotations

import importlib.util
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
READ = 1 << 17


def load(tree: str, name: str):
    spec = importlib.util.spec_from_file_location(name, Path(tree) / "exporter" / "framing" / "lines.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def main() -> int:
    if len(sys.argv) < 3:
        print(__doc__, file=sys.stderr)
        return 2
    trees = sys.argv[1:3]
    rounds = int(sys.argv[3]) if len(sys.argv) > 3 else 7
    log = ROOT / "bench" / "out" / "periodic20-1000000.log"
    if not log.exists():
        subprocess.run([sys.executable, str(ROOT / "bench" / "gen_log.py"), "1000000", str(log), "--mix", "periodic20"],
                       check=True)
    data = log.read_bytes()[:64 << 20]
    chunks = [data[i:i + READ] for i in range(0, len(data), READ)]
    lines = data.count(b"\n")
    modules = [load(t, f"lines_{i}") for i, t in enumerate(trees)]
    best = [float("inf"), float("inf")]
    for r in range(rounds):
        for i in (0, 1) if r % 2 == 0 else (1, 0):
            split = modules[i].LineSplitter("bench")
            t0 = time.perf_counter()
            for c in chunks:
                split.feed(c)
            best[i] = min(best[i], time.perf_counter() - t0)
    a, b = (x / lines * 1e6 for x in best)
    print(f"{lines:,} lines: {trees[0]} {a:.4f} us/line, {trees[1]} {b:.4f} us/line, second / first {b / a:.3f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
