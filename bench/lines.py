#!/usr/bin/env python3
"""Where the time of one line goes, per line family and per stage (issue 6).

    python bench/lines.py [N_LINES=1000000]

Takes the first line of each family from the benchmark log (bench/out/mixed-N.log, generated if
missing) and times, in microseconds per line (best of 5 repeats of 2,000 calls):
  frame    framing (exporter.framing.frame.frame_line)
  parse    the parsers on the framed line (exporter.parsers.parse_frame)
  feed     the pipeline's whole per-line path (Pipeline.feed: framing, glue check, parsers, events)
  batch    the same inside a clean batch (Pipeline.feed with clean=True: the one-match fast path of
           exporter.stream.fastpath for the periodic lines, framing + parsers for the rest)
  metrics  the daemon's metric updates for the events (Metrics.observe_many)
  stats    the report's statistics for the events (RunStats.add)
and prints how many lines of each family the log holds, so the per-family cost can be weighed.
Access-log lines normally take the batch loop instead (counted by request text, no event): its cost
per line is Pipeline.feed_batch's over a run of 7,000 such lines.
"""

from __future__ import annotations

import subprocess
import sys
import timeit
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from exporter.framing.clock import Clock  # noqa: E402

from exporter.framing.frame import frame_line
from exporter.metrics import Metrics  # noqa: E402
from exporter.parsers import parse_frame  # noqa: E402
from exporter.stream.pipeline import Pipeline  # noqa: E402
from exporter.offline.report.stats import RunStats  # noqa: E402

FAMILIES = (
    ("access", ' - "'),
    ("stats", "Avg prompt throughput"),
    ("spec", "SpecDecoding metrics"),
    ("kv", "KV Transfer metrics"),
    ("info", "Received request"),
)


def best(fn, number: int = 2000) -> float:
    return min(timeit.repeat(fn, number=number, repeat=5)) / number * 1e6


def main() -> int:
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 1_000_000
    path = ROOT / "bench" / "out" / f"mixed-{n}.log"
    if not path.exists():
        subprocess.run([sys.executable, str(ROOT / "bench" / "gen_log.py"), str(n), str(path)], check=True)
    first: dict[str, str] = {}
    counts = {name: 0 for name, _ in FAMILIES}
    counts["other"] = 0
    with open(path, encoding="utf-8", errors="replace") as f:
        for line in f:
            for name, needle in FAMILIES:
                if needle in line:
                    counts[name] += 1
                    first.setdefault(name, line.rstrip("\n"))
                    break
            else:
                counts["other"] += 1
    clock = Clock(year=2026)
    print(f"{path.name}: lines by family {counts}\n")
    print("| family | frame µs | parse µs | feed µs | batch µs | metrics µs | stats µs |")
    print("|---|---|---|---|---|---|---|")
    for name, _ in FAMILIES:
        line = first[name]
        frame = frame_line(line, clock)
        pipe = Pipeline(clock)
        _, events = pipe.feed(line)
        metrics = Metrics(process_metrics=False)
        metrics.add_server("bench")
        stats = RunStats()
        t_frame = best(lambda: frame_line(line, clock))
        t_parse = best(lambda: parse_frame(frame))
        t_feed = best(lambda: pipe.feed(line))
        t_clean = best(lambda: pipe.feed(line, clean=True))
        t_metrics = best(lambda: metrics.observe_many("bench", events))
        t_stats = best(lambda: [stats.add(ev) for ev in events])
        print(f"| {name} | {t_frame:.2f} | {t_parse:.2f} | {t_feed:.2f} | {t_clean:.2f} | {t_metrics:.2f} | {t_stats:.2f} |")
    batch = [first["access"]] * 7000
    pipe = Pipeline(clock)
    t_batch = best(lambda: pipe.feed_batch(batch), number=5) / len(batch)
    print(f"\naccess lines through the batch path: {t_batch:.2f} µs per line")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
