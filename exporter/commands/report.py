"""``vllm-log-exporter report LOG``: the tables of a whole run, as Markdown, JSON or HTML."""

from __future__ import annotations

import sys
from datetime import datetime

from exporter.commands.common import UsageError, not_vllm_output, print_result
from exporter.framing.clock import Clock
from exporter.framing.lines import MAX_LINE_BYTES
from exporter.offline.passes import Pass
from exporter.offline.report import markdown
from exporter.offline.report.stats import RunStats


def parse_when(text: str | None, tz, flag: str) -> float | None:
    """``2026-08-04 02:45``, ``2026-08-04T02:45:00``, with or without a zone; or unix seconds."""
    if text is None:
        return None
    try:
        return float(text)
    except ValueError:
        pass
    try:
        dt = datetime.fromisoformat(text.strip().replace(" ", "T", 1))
    except ValueError:
        raise UsageError(f"{flag}: {text!r} is not a time (e.g. 2026-08-04T02:45:00)") from None
    if dt.tzinfo is None and tz is not None:
        dt = dt.replace(tzinfo=tz)
    return dt.timestamp()


def read_run(path: str, clock: Clock, since: float | None, until: float | None,
             max_line: int = MAX_LINE_BYTES, rules=(), price_per_hour: float | None = None) -> tuple[RunStats, dict]:
    """A log's RunStats and summary: what ``report`` prints and ``compare`` lines up, one code path.
    ``rules``: the user's rules (a section each); ``price_per_hour``: the Cost section's price."""
    stats = RunStats(since, until, rules=rules, window_tokens=price_per_hour is not None)
    scan = Pass(path, clock, max_line=max_line, rules=rules, neighbour_times=True)
    if since is None and until is None:
        for events, access, span in scan.batches():
            for ev in events:
                stats.add(ev)
            stats.add_access(access, span)
    else:  # a time range needs every access line's own timestamp
        for ev in scan:
            stats.add(ev)
    summary = stats.summary()
    if price_per_hour is not None:
        from exporter.offline.report import cost

        summary["cost"] = cost.summary(stats, price_per_hour)
    summary["lines"] = scan.results
    return stats, summary


def load_rules(paths) -> list:
    """The rules of ``--rules FILE`` (repeatable), or a one-line error naming the rule and key."""
    from exporter.config.rules import load_rule_file
    from exporter.config.settings import ConfigError

    specs: list = []
    try:
        for path in paths or ():
            specs += load_rule_file(path, known=specs)
    except ConfigError as e:
        raise UsageError(str(e)) from None
    return specs


def run(args, clock: Clock) -> int:
    since = parse_when(args.since, clock.tz, "--since")
    until = parse_when(args.until, clock.tz, "--until")
    stats, summary = read_run(args.log, clock, since, until, args.max_line_bytes,
                              load_rules(getattr(args, "rules", None)), getattr(args, "price_per_hour", None))
    if why := not_vllm_output(args.log, summary["lines"]):  # not a report of zeros for /etc/passwd
        print(f"vllm-log-exporter: report: {why}", file=sys.stderr)
        return 1
    title = f"vLLM run report: {'stdin' if args.log == '-' else args.log}"
    md = markdown.render(summary, title, clock.tz)
    if args.html:
        from exporter.offline.report import html as html_report

        try:
            page = html_report.render(stats, md, clock.tz)
        except html_report.ChartsUnavailable as e:
            print(f"vllm-log-exporter: --html: {e}", file=sys.stderr)
            return 2
        with open(args.html, "w", encoding="utf-8") as f:
            f.write(page)
        print(f"{args.html}: HTML report written", file=sys.stderr)
        if args.format is None:  # the page was asked for; print the tables too only when asked
            return 0
    return print_result(summary, md, args.format)
