"""Dashboard rows for your own rules (exporter.config.rules): the documented way to put a rule's series on
a board, with the same variables, selectors and conventions as ours.

    python -m mixin.rules RULES.yaml [RULES.yaml ...] > dashboards/my-rules.json    # a board, a row per rule
    python -m mixin.rules RULES.yaml --row draft_depth > row.json                  # one row's panels, to paste

The board has our boards' variables (datasource, cluster, job, host, instance, namespace, server...), so its
link menu leads to them and back. In Python, ``rule_row(board, spec)`` adds a rule's row to any
``mixin.dashboards.Board``, ours included.

What each row holds: the rate of lines the rule matched (vllm_log_rule_lines_total), then one panel per
metric: a counter as its rate (``rate(...[$__rate_interval])``; per second of its unit), a gauge as it is,
a histogram as its median and 90th percentile; each summed by ``server`` and the metric's labels, in the
metric's base unit, described by its HELP. Values beyond a label's bound show as ``other``.
"""

from __future__ import annotations

import argparse
import json
import sys

from mixin.dashboards import Board, S

# Grafana's unit for a base unit, and for its rate
UNITS = {"bytes": "bytes", "seconds": "s", "ratio": "percentunit", "bytes_per_second": "Bps", None: "short"}
RATE_UNITS = {"bytes": "Bps", "seconds": "s", "ratio": "percentunit", "bytes_per_second": "Bps", None: "cps"}


def _by(metric) -> tuple[str, str]:
    """(the ``by`` list, the legend) of a metric: per server and per label."""
    labels = [lb.name for lb in metric.labels]
    legend = "{{server}}" + "".join(f" {{{{{name}}}}}" for name in labels)
    return ", ".join(["server"] + labels), legend


def rule_row(b: Board, spec) -> None:
    """A row for one rule: its lines matched, then a panel per metric it feeds."""
    b.row(f"Rule: {spec.name}")
    where = f"Rule {spec.name} (pattern {spec.pattern!r})"
    b.timeseries("Lines matched", [(f'sum by (server) (rate(vllm_log_rule_lines_total{{{S}, rule="{spec.name}"}}'
                                    "[$__rate_interval]))", "{{server}}")], "cps", w=8,
                 description=f"Lines per second that {where} matched. Flat at 0 while the server logs: the pattern, "
                             "needle or origin (logger, level, process) no longer fit its lines; check them with "
                             "`vllm-log-exporter test`.")
    for m in spec.metrics:
        by, legend = _by(m)
        about = f"{m.help} {where}."
        if m.type == "counter":
            b.timeseries(f"{m.name} (per second)", [(f"sum by ({by}) (rate({m.name}{{{S}}}[$__rate_interval]))", legend)],
                         RATE_UNITS[m.dimension], w=8, description=about)
        elif m.type == "gauge":
            b.timeseries(m.name, [(f"max by ({by}) ({m.name}{{{S}}})", legend)], UNITS[m.dimension], w=8,
                         description=about + " The latest value of each server (gone when the server starts again, "
                                             "until its line comes again).")
        else:
            targets = [(f"histogram_quantile({q}, sum by (le, {by}) (rate({m.name}_bucket{{{S}}}[$__rate_interval])))",
                        f"p{int(q * 100)} {legend}") for q in (0.5, 0.9)]
            b.timeseries(f"{m.name} (median, p90)", targets, UNITS[m.dimension], w=8,
                         description=about + " Median and 90th percentile of the values over the rate window, "
                                             "estimated from the histogram's buckets.")


def rules_board(specs, uid: str = "vllm-log-rules", title: str = "vLLM / Your rules") -> dict:
    """A whole board: a row per rule."""
    b = Board(uid, title, "The series of your own rules (vllm-log-exporter's config, rules:), a row per rule.",
              ["vllm-log-exporter", "vllm"])
    for spec in specs:
        rule_row(b, spec)
    return b.model()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m mixin.rules", description=__doc__.split("\n\n")[0])
    ap.add_argument("rules", nargs="+", metavar="RULES.yaml", help="a rules file or a config file holding rules")
    ap.add_argument("--row", metavar="RULE", help="print only this rule's row (its panels, a JSON list)")
    ap.add_argument("--uid", default="vllm-log-rules", help="the board's uid (default vllm-log-rules)")
    ap.add_argument("--title", default="vLLM / Your rules", help="the board's title")
    args = ap.parse_args(argv)
    from exporter.config.rules import load_rule_file
    from exporter.config.settings import ConfigError

    specs: list = []
    try:
        for path in args.rules:
            specs += load_rule_file(path, known=specs)
    except ConfigError as e:
        print(f"python -m mixin.rules: {e}", file=sys.stderr)
        return 2
    if args.row:
        spec = next((s for s in specs if s.name == args.row), None)
        if spec is None:
            print(f"python -m mixin.rules: --row: no rule {args.row!r} (rules: {', '.join(s.name for s in specs)})",
                  file=sys.stderr)
            return 2
        b = Board(args.uid, args.title, "", [])
        rule_row(b, spec)
        out = b.panels
    else:
        out = rules_board(specs, args.uid, args.title)
    json.dump(out, sys.stdout, indent=2, ensure_ascii=False)
    sys.stdout.write("\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
