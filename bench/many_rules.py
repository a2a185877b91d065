#!/usr/bin/env python3
"""Write N rules that match nothing in the benchmark logs, for bench/families.py --rules: what the vocabulary's
size costs a line.

    python bench/many_rules.py [N=200] [OUT=bench/out/rules200.yaml]
    python bench/families.py 5 --no-mtail --rules bench/out/rules200.yaml

Each rule's pattern starts with words of its own (``Zephyr kernel 17 retuned: ...``) and names no logger file or
level, so every line of every family is searched for all N needles: the worst case of a big vocabulary.
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
WORDS = ("Zephyr", "Quokka", "Marmot", "Tapir", "Okapi", "Narwhal", "Axolotl", "Pangolin")


def main() -> int:
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 200
    out = Path(sys.argv[2]) if len(sys.argv) > 2 else ROOT / "bench" / "out" / f"rules{n}.yaml"
    lines = [f"# {n} rules that match nothing in the benchmark logs (bench/many_rules.py)", "rules:"]
    for i in range(n):
        word = WORDS[i % len(WORDS)]
        lines += [f"  - name: dummy_{i}",
                  f"    pattern: '{word} kernel {i} retuned: (?P<n>\\d+) ways'",
                  "    fields: {n: int}",
                  f"    metrics: [{{name: bench_dummy_{i}_ways, type: gauge, value: n}}]"]
    out.parent.mkdir(exist_ok=True)
    out.write_text("\n".join(lines) + "\n", encoding="utf-8")
    print(out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
