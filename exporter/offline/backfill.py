"""Backfill: the daemon's metrics for a past run, sampled on the log's own clock, as OpenMetrics.

The events go through the same :class:`~exporter.metrics.Metrics` the daemon uses; every ``step``
seconds of log time the registry is snapshotted with that timestamp. OpenMetrics wants each family's
samples together, so each family is spooled to its own temporary file and the files are joined at
the end: memory stays flat however long the log is. Gaps longer than ``max_gap`` (a stopped server)
are skipped instead of filled, so Prometheus shows them as gaps.
"""

from __future__ import annotations

import math
import os
import shutil
import tempfile
from typing import IO

from exporter.framing.clock import EARLIEST, LATEST
from exporter.metrics import Metrics

MAX_GAP_SECONDS = 600.0
MIN_STEP_SECONDS = 0.001  # (a step of 1e-300 would take for ever to cross one second)


def _escape_label(v: str) -> str:
    return v.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def _escape_help(v: str) -> str:
    return v.replace("\\", "\\\\").replace("\n", "\\n")


def _fmt(v: float) -> str:
    if math.isinf(v):
        return "+Inf" if v > 0 else "-Inf"
    if math.isnan(v):
        return "NaN"
    return repr(float(v))


class OpenMetricsSpool:
    def __init__(self, metrics: Metrics):
        self.metrics = metrics
        self.dir = tempfile.mkdtemp(prefix="vllm-log-backfill-")
        self.files: dict[str, IO[str]] = {}
        self.meta: dict[str, tuple[str, str]] = {}
        self.samples = 0

    def snapshot(self, ts: float) -> None:
        stamp = f" {ts:.3f}\n"
        for fam in self.metrics.registry.collect():
            # the log's series and the user's rules' (never named process_ or python_), not this process's own
            if not fam.samples or fam.name.startswith(("process_", "python_")):
                continue
            f = self.files.get(fam.name)
            if f is None:
                f = self.files[fam.name] = open(os.path.join(self.dir, f"{len(self.files)}.om"), "w", encoding="utf-8")
                self.meta[fam.name] = (fam.type, fam.documentation)
            for s in fam.samples:
                labels = ",".join(f'{k}="{_escape_label(v)}"' for k, v in sorted(s.labels.items()))
                f.write(f"{s.name}{{{labels}}} {_fmt(s.value)}{stamp}" if labels else f"{s.name} {_fmt(s.value)}{stamp}")
                self.samples += 1

    def write(self, out: IO[str]) -> None:
        for name, f in self.files.items():
            f.close()
            typ, doc = self.meta[name]
            out.write(f"# TYPE {name} {typ}\n# HELP {name} {_escape_help(doc)}\n")
            with open(f.name, encoding="utf-8") as src:
                shutil.copyfileobj(src, out)
        out.write("# EOF\n")

    def close(self) -> None:
        for f in self.files.values():
            f.close()
        shutil.rmtree(self.dir, ignore_errors=True)


def backfill(events_with_lines, metrics: Metrics, server: str, out: IO[str], step: float = 10.0,
             max_gap: float = MAX_GAP_SECONDS) -> dict:
    """``events_with_lines`` yields ("line", result) and ("event", Event) items in log order.
    ``step`` at least MIN_STEP_SECONDS (the command refuses less)."""
    step = max(step, MIN_STEP_SECONDS)
    spool = OpenMetricsSpool(metrics)
    metrics.add_server(server)
    next_t: float | None = None
    last_ts: float | None = None
    first_ts: float | None = None
    snapshots = 0
    try:
        for what, item in events_with_lines:
            if what == "line":
                metrics.count_line(server, item, now=last_ts if last_ts is not None else 0.0)
                continue
            ts = item.ts if item.ts is not None else last_ts
            if ts is not None and not EARLIEST <= ts <= LATEST:
                ts = last_ts  # (framing gives no such stamp; a caller's event might)
            if ts is not None:
                if first_ts is None:
                    first_ts = ts
                    next_t = math.floor(ts / step) * step + step
                # at most max_gap / step snapshots before a gap is jumped: bounded whatever the stamps
                for _ in range(int(max_gap / step) + 2):
                    if ts < next_t:
                        break
                    metrics.go_idle(next_t, log_time=True)
                    spool.snapshot(next_t)
                    snapshots += 1
                    if ts - next_t > max_gap:
                        next_t = math.floor(ts / step) * step + step  # jump the gap
                    else:
                        next_t += step
                last_ts = max(last_ts or ts, ts)
            metrics.observe(server, item)
        metrics.settle_windows(server)  # the log ended: first stats windows no line decided count now
        if next_t is not None:
            metrics.go_idle(next_t, log_time=True)
            spool.snapshot(next_t)
            snapshots += 1
        spool.write(out)
        return {"first": first_ts, "last": last_ts, "snapshots": snapshots, "samples": spool.samples}
    finally:
        spool.close()
