#!/usr/bin/env python3
"""`report`'s peak memory against the log's length: flat is the goal (issue 16).

    python bench/report_memory.py [MILLIONS ...]     # default: 1 3 6 (6 M lines is ~1 GB)

Each log is made by bench/gen_log.py with ``--mix periodic20`` (20 % stats, spec-decode, KV and
other INFO lines: the report's per-window work), one continuous run of that many lines, not copies.
Prints peak RSS (the child's own: bench/own_peak.py, not the high-water mark it would inherit from
the process that started it) and wall time of ``report --format json`` and ``report --html``
(matplotlib loaded: what the HTML page costs on top).
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "bench"))
from own_peak import OwnPeak  # noqa: E402


def run(python: str, args: list[str]) -> tuple[float, float]:
    t0 = time.perf_counter()
    with OwnPeak([python, "-m", "exporter", *args], cwd=ROOT, stdout=subprocess.DEVNULL,
                 stderr=subprocess.DEVNULL) as child:
        pass
    if child.returncode != 0:
        raise SystemExit(f"report {args} failed")
    return child.rss, time.perf_counter() - t0


def log_of(millions: float) -> Path:
    n = int(millions * 1_000_000)
    path = ROOT / "bench" / "out" / f"periodic20-{n}.log"
    if not path.exists():
        subprocess.run([sys.executable, str(ROOT / "bench" / "gen_log.py"), str(n), str(path), "--mix", "periodic20"],
                       check=True)
    return path


def measure(python: str, millions: float, html: bool = True) -> dict:
    path = log_of(millions)
    rss, wall = run(python, ["report", str(path), "--format", "json", "--year", "2026"])
    out = {"lines": int(millions * 1_000_000), "bytes": path.stat().st_size, "rss": rss, "wall": wall}
    if html:
        with tempfile.TemporaryDirectory() as tmp:
            out["html_rss"], out["html_wall"] = run(python, ["report", str(path), "--year", "2026", "--html", f"{tmp}/r.html"])
    return out


def main() -> int:
    sizes = [float(a) for a in sys.argv[1:]] or [1, 3, 6]
    print("| lines | log size | `report --format json` peak RSS | time | `report --html` peak RSS | time |")
    print("|---|---|---|---|---|---|")
    for m in sizes:
        r = measure(sys.executable, m)
        print(f"| {r['lines']:,} | {r['bytes'] / 1e6:,.0f} MB | {r['rss'] / 1e6:.1f} MB | {r['wall']:.1f} s | "
              f"{r['html_rss'] / 1e6:.1f} MB | {r['html_wall']:.1f} s |", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
