"""``vllm-log-exporter compare RUN RUN [RUN ...]``: runs side by side, as Markdown, JSON or HTML.

A RUN is a log file (``.gz`` too), optionally named and cut to a stretch of time:

    [NAME=]FILE[@SINCE..UNTIL]

``SINCE`` and ``UNTIL`` are what ``report --since/--until`` take (ISO 8601, local zone unless given,
or unix seconds); either may be left empty (``a.log@2026-08-04T02:45..``). ``--since/--until`` apply
to every run that has no range of its own. NAME labels the run's column (default: the file's name
without .log/.gz).

Each run goes through exactly what ``report`` does with that log (the same pass, the same
``RunStats``, the same ``summary()``), so a run's figures here are its ``report --format json``
figures; ``exporter.offline.report.compare`` only lines them up.
"""

from __future__ import annotations

import os
import sys
import zlib

from typing import TYPE_CHECKING

from exporter.commands.common import UsageError, print_result
from exporter.sources.logfile import LogOpenError

if TYPE_CHECKING:  # the parser imports RUN_HELP from here: the pass's modules load when a run is read
    from exporter.framing.clock import Clock
    from exporter.offline.report.stats import RunStats

RUN_HELP = ("a log file (.gz allowed) as [NAME=]FILE[@SINCE..UNTIL]: NAME labels its column (default: the "
            "file name), SINCE..UNTIL cuts it to that stretch (ISO 8601 like --since, local zone unless given, "
            "or unix seconds; either side may be empty), e.g. r24=a.log@2026-08-04T02:45..2026-08-04T03:10")


class RunError(Exception):
    """A run that cannot be compared: its text says which and why, on one line."""


def parse_run(text: str, tz, since_default: str | None, until_default: str | None) -> dict:
    """``[NAME=]FILE[@SINCE..UNTIL]`` -> {label, path, source, since, until} (times as unix seconds)."""
    from exporter.commands.report import parse_when

    name, rest = None, text
    if "=" in text and not os.path.exists(text):
        name, rest = text.split("=", 1)
    path, since_s, until_s = rest, since_default, until_default
    if "@" in rest and not os.path.exists(rest):
        path, _, rng = rest.rpartition("@")
        if ".." not in rng:
            raise RunError(f"{text}: a range is SINCE..UNTIL (either side may be empty), not {rng!r}")
        since_s, until_s = (part.strip() or None for part in rng.split("..", 1))
    label = name or os.path.basename(path)
    for ext in (".gz", ".log"):
        if label.endswith(ext) and len(label) > len(ext):
            label = label[: -len(ext)]
    try:
        since = parse_when(since_s, tz, f"{text}: since")
        until = parse_when(until_s, tz, f"{text}: until")
    except UsageError as e:  # parse_when's own one-line message
        raise RunError(str(e)) from None
    if since is not None and until is not None and until < since:
        raise RunError(f"{text}: the range ends before it starts")
    return {"label": label, "path": path, "source": rest, "since": since, "until": until}


def load(path: str, clock: Clock, since: float | None, until: float | None,
         max_line: int | None = None, rules=(), price_per_hour: float | None = None) -> tuple[RunStats, dict]:
    """The run's RunStats and its summary: ``report``'s own (exporter.commands.report.read_run), with a
    section per rule of ``rules``."""
    from exporter.commands.report import read_run
    from exporter.framing.lines import MAX_LINE_BYTES

    return read_run(path, clock, since, until, MAX_LINE_BYTES if max_line is None else max_line, rules,
                    price_per_hour=price_per_hour)


def _range_words(spec: dict, tz) -> str:
    from datetime import datetime, timezone

    def when(ts):
        return datetime.fromtimestamp(ts, tz or timezone.utc).isoformat() if ts is not None else "…"

    return f" {when(spec['since'])} .. {when(spec['until'])}"


def _unique(labels: list[str]) -> list[str]:
    out = []
    for i, label in enumerate(labels):
        out.append(label if labels.count(label) == 1 else f"{label} ({i + 1})")
    return out


def run(args, clock: Clock) -> int:
    if len(args.runs) < 2:
        print("vllm-log-exporter: compare: give at least two runs", file=sys.stderr)
        return 2
    from exporter.commands.report import load_rules

    rules = load_rules(getattr(args, "rules", None))
    prices = getattr(args, "price_per_hour", None) or []
    if len(prices) not in (0, 1, len(args.runs)):
        print(f"vllm-log-exporter: compare: --price-per-hour: give one price for every run, or one per run "
              f"({len(args.runs)}), not {len(prices)}", file=sys.stderr)
        return 2
    runs, stats_list = [], []
    try:
        specs = [parse_run(t, clock.tz, args.since, args.until) for t in args.runs]
        for i, spec in enumerate(specs):
            price = prices[i] if len(prices) > 1 else (prices[0] if prices else None)
            try:
                stats, summary = load(spec["path"], clock, spec["since"], spec["until"], args.max_line_bytes, rules,
                                      price)
            except LogOpenError as e:
                raise RunError(str(e)) from None
            except (OSError, EOFError, UnicodeError, zlib.error) as e:  # (Pass turns a corrupt .gz into LogOpenError)
                raise RunError(f"{spec['path']}: cannot read: {e}") from None
            if not stats.events and not stats.http_status:
                if spec["since"] is not None or spec["until"] is not None:
                    raise RunError(f"{spec['source']}: no vLLM log lines in the time range"
                                   f"{_range_words(spec, clock.tz)}")
                raise RunError(f"{spec['source']}: no vLLM log lines ({summary['lines']['unparsed']:,} lines "
                               f"not recognised): not a vLLM server log?")
            runs.append({**spec, "report": summary})
            stats_list.append(stats)
    except RunError as e:
        print(f"vllm-log-exporter: compare: {e}", file=sys.stderr)
        return 2
    for r, label in zip(runs, _unique([r["label"] for r in runs])):
        r["label"] = label
    from exporter.offline.report import compare as cmp_mod

    result = cmp_mod.compare(runs)
    md = cmp_mod.render_markdown(result, clock.tz)
    if args.html:
        from exporter.offline.report import compare_html, html as html_report

        try:
            page = compare_html.render(result, stats_list, md)
        except html_report.ChartsUnavailable as e:
            print(f"vllm-log-exporter: --html: {e}", file=sys.stderr)
            return 2
        with open(args.html, "w", encoding="utf-8") as f:
            f.write(page)
        print(f"{args.html}: HTML comparison written", file=sys.stderr)
        if args.format is None:
            return 0
    return print_result(result, md, args.format)
