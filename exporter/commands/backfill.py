"""``vllm-log-exporter backfill LOG -o out.om``: OpenMetrics for ``promtool tsdb create-blocks-from openmetrics``."""

from __future__ import annotations

import sys
from pathlib import Path

from exporter.commands.common import not_vllm_output
from exporter.offline.backfill import MIN_STEP_SECONDS, backfill
from exporter.framing.clock import Clock
from exporter.metrics import Metrics
from exporter.offline.passes import Pass


def run(args, clock: Clock) -> int:
    server = args.server or (Path(args.log).name.split(".")[0] if args.log != "-" else "stdin") or "vllm"
    if not MIN_STEP_SECONDS <= args.step <= 86400:
        print(f"vllm-log-exporter: --step: must be between {MIN_STEP_SECONDS:g} and 86400 seconds", file=sys.stderr)
        return 2
    from exporter.commands.report import load_rules

    rules = load_rules(getattr(args, "rules", None))
    metrics = Metrics(process_metrics=False, stats_interval=args.stats_interval)
    metrics.set_rules(rules)  # the user's rules' series too, as the daemon makes them
    metrics.interval_warning = lambda server, seen, configured: print(
        f"vllm-log-exporter: {server}: the log's stats lines come every {seen:.2f} s, not --stats-interval "
        f"{configured:g} s: token counters use the log's", file=sys.stderr)
    pending: list[str] = []
    scan = Pass(args.log, clock, on_result=pending.append, max_line=args.max_line_bytes, rules=rules,
                neighbour_times=True)

    def items():
        for ev in scan:
            while pending:
                yield "line", pending.pop(0)
            yield "event", ev
        while pending:
            yield "line", pending.pop(0)

    try:  # before the pass: a bad -o is known at once, not after reading the whole log
        out = open(args.output, "w", encoding="utf-8")
    except OSError as e:
        print(f"vllm-log-exporter: -o {args.output}: cannot write: {e.strerror or e}", file=sys.stderr)
        return 2
    with out:
        info = backfill(items(), metrics, server, out, step=args.step)
    if why := not_vllm_output(args.log, scan.results):
        print(f"vllm-log-exporter: backfill: {why}", file=sys.stderr)
        return 1
    print(f"{args.output}: {info['samples']:,} samples at {info['snapshots']:,} instants; next: "
          f"promtool tsdb create-blocks-from openmetrics {args.output} DATA_DIR", file=sys.stderr)
    return 0
