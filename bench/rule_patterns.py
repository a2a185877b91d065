#!/usr/bin/env python3
"""The worst case of a rule's pattern: milliseconds for one search over a text made to make it backtrack,
for patterns the load-time check (exporter.config.regex_check) lets through and patterns it refuses.

    python bench/rule_patterns.py [CHARS=2048]

A rule sees at most max_chars of a message (default 2048), so what the check lets through is bounded by
the square of that; what it refuses grows as a cube or exponentially (those are measured on shorter texts
and say so). Best of 3 per row. Each pattern that passes is measured twice: with Python's re, and as a rule
is matched (exporter.config.rule_regex: RE2 where it says the same, the engine named).
"""

from __future__ import annotations

import re
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from exporter.config import regex_check  # noqa: E402
from exporter.config.rule_regex import compile_rule  # noqa: E402

# (pattern, the text that makes it work hardest, as a function of the length)
CASES = [
    (r"(?P<name>\w+) loaded", lambda n: "w" * n),  # a rule regex_check lets through: quadratic under re
    (r"Created mmap file (?P<path>\S+) \((?P<size>[\d.]+) GB\)", lambda n: "Created mmap file " + "x" * n),
    (r"Current speculative depth: (?P<depth>\d+)", lambda n: "Current speculative depth: " * (n // 27)),
    (r"\d+x", lambda n: "1" * n),
    (r"a.*?b", lambda n: "a" * n),
    (r".*a", lambda n: "b" * n),
    (r"^\d+\d+x", lambda n: "1" * n),
    (r"[^,]*,[^,]*,[^,]*x", lambda n: "a," * (n // 2)),
    (r"Engine (\d+): .*?throughput: ([\d.]+)", lambda n: "Engine 1: " + "throughput: " * (n // 12)),
    (r"\d+\d+x", lambda n: "1" * n),
    (r".*a.*b", lambda n: "a" * n),
    (r"(?:ab)*(?:ab)*c", lambda n: "ab" * (n // 2)),
    (r"(a+)+b", lambda n: "a" * n),
]


def worst(pattern: str, text: str, rx=None) -> float:
    rx = rx or re.compile(pattern)
    best = float("inf")
    for _ in range(3):
        t0 = time.perf_counter()
        rx.search(text)
        best = min(best, time.perf_counter() - t0)
    return best * 1000


def main() -> int:
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 2048
    print("| pattern | load-time check | chars | worst search, re (ms) | as a rule is matched (ms) |\n"
          "|---|---|---|---|---|")
    for pattern, make in CASES:
        try:
            regex_check.check(pattern)
            verdict, chars = "passes", n
        except regex_check.Unsafe:
            # refused: measured on shorter texts (the full length would take minutes or years)
            verdict, chars = "refused", 24 if "+)+" in pattern else 512
        ms = worst(pattern, make(chars))
        rule = "–"
        if verdict == "passes":
            rx, engine = compile_rule(pattern, re.compile(pattern))
            rule = f"{worst(pattern, make(chars), rx):,.3f} ({engine})"
        print(f"| `{pattern}` | {verdict} | {chars} | {ms:,.2f} | {rule} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
