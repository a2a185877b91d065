"""Command line: ``vllm-log-exporter [serve] ...``, ``parse``."""

from __future__ import annotations

import argparse
import difflib
import gc
import os
import sys
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from exporter import __version__
from exporter.framing.clock import Clock
from exporter.commands.common import UsageError, add_line_options, add_time_options, add_version
from exporter.sources.logfile import LogOpenError

COMMANDS = ("serve", "parse", "report", "compare", "backfill", "healthcheck", "test")


def clock_from(args: argparse.Namespace) -> Clock:
    tz = None
    if args.timezone:
        try:
            tz = ZoneInfo(args.timezone)
        except (ZoneInfoNotFoundError, ValueError):
            raise UsageError(f"--timezone: unknown time zone {args.timezone!r}") from None
    return Clock(year=args.year, tz=tz)


def _price(text: str) -> float:
    """A price per hour: a finite number of 0 or more."""
    import math

    try:
        v = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not math.isfinite(v) or v < 0:
        raise argparse.ArgumentTypeError(f"{text!r}: a price is a number of 0 or more")
    return v


def build_parser(with_serve: bool = True) -> argparse.ArgumentParser:
    """The parser; without ``with_serve`` the serve command's options are left out (they import the
    daemon, which the offline commands do not need)."""
    ap = argparse.ArgumentParser(
        prog="vllm-log-exporter", allow_abbrev=False,
        description="Prometheus metrics, reports and events from a vLLM server's log.",
        epilog="Without a command, serve is meant: `vllm-log-exporter --source /var/log/vllm.log` or "
               "`vllm-log-exporter --demo`; its options: `vllm-log-exporter serve --help`.",
    )
    ap.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    sub = ap.add_subparsers(dest="command")

    p = sub.add_parser("parse", allow_abbrev=False, help="print one JSON event per recognised line")
    add_version(p)
    p.add_argument("log", help="log file (.gz allowed) or - for stdin")
    p.add_argument("--stats", action="store_true",
                   help="print line counts per result and kind, and the most common unparsed line shapes")
    p.add_argument("--explain", action="store_true",
                   help="print every line with what it became: its event kinds, or why it gave none "
                        "(LINE, RESULT, WHAT, TEXT, WRAPPER separated by tabs; WRAPPER: what stood before vLLM's "
                        "record and where the line's time came from)")
    p.add_argument("--rules", action="append", metavar="FILE",
                   help="your own line families (a rules file or a config file holding rules): their events too")
    add_time_options(p)
    add_line_options(p)

    p = sub.add_parser("report", allow_abbrev=False, help="the tables of a whole run from a saved log")
    add_version(p)
    p.add_argument("log", help="log file (.gz allowed) or - for stdin")
    p.add_argument("--format", choices=("markdown", "json"), default=None,
                   help="what to print: markdown (default) or json; with --html, nothing unless asked")
    p.add_argument("--html", metavar="FILE",
                   help="write a self-contained HTML page with charts to FILE (then nothing is printed unless "
                        "--format is given; the charts need matplotlib: the `report` extra)")
    p.add_argument("--since", metavar="TIME",
                   help="first time to include (ISO 8601, e.g. 2026-08-04T02:45; local zone unless given)")
    p.add_argument("--until", metavar="TIME", help="last time to include")
    p.add_argument("--rules", action="append", metavar="FILE",
                   help="your own line families (a rules file or a config file holding rules): a section each")
    p.add_argument("--price-per-hour", type=_price, metavar="PRICE",
                   help="what the server costs per hour (GPU-hour price times GPUs, or a flat rate): adds a Cost "
                        "section, the run's cost and its price per 1 M tokens")
    add_time_options(p)
    add_line_options(p)

    p = sub.add_parser(
        "compare", allow_abbrev=False, help="two or more runs side by side: configuration, results, like with like",
        description="Compare runs: the configuration rows that differ marked, every result with its difference "
                    "from the first run, the windows it rests on and whether it lies inside both runs' spread, and "
                    "generation throughput at the same number of running requests. A RUN is "
                    "[NAME=]FILE[@SINCE..UNTIL].",
        epilog="examples: vllm-log-exporter compare k5.log.gz k3.log.gz;  vllm-log-exporter compare "
               "before=a.log@2026-08-04T02:45..2026-08-04T03:10 after=b.log --html cmp.html")
    add_version(p)
    from exporter.commands.compare import RUN_HELP

    p.add_argument("runs", nargs="+", metavar="RUN", help=RUN_HELP)
    p.add_argument("--format", choices=("markdown", "json"), default=None,
                   help="what to print: markdown (default) or json; with --html, nothing unless asked")
    p.add_argument("--html", metavar="FILE",
                   help="write a self-contained HTML page to FILE, the runs' charts overlaid (then nothing is printed "
                        "unless --format is given)")
    p.add_argument("--since", metavar="TIME",
                   help="first time to include in every run without a range of its own (as report's)")
    p.add_argument("--until", metavar="TIME", help="last time to include in every run without a range of its own")
    p.add_argument("--rules", action="append", metavar="FILE",
                   help="your own line families (a rules file or a config file holding rules): each run's "
                        "report (--format json) gets their sections")
    p.add_argument("--price-per-hour", type=_price, action="append", metavar="PRICE",
                   help="what the servers cost per hour: once for every run, or once per run in order; adds the "
                        "price per 1 M tokens to the results, with its verdict")
    add_time_options(p)
    add_line_options(p)

    p = sub.add_parser("backfill", allow_abbrev=False, help="the daemon's metrics with the log's own timestamps, as OpenMetrics")
    add_version(p)
    p.add_argument("log", help="log file (.gz allowed) or - for stdin")
    p.add_argument("-o", "--output", required=True, metavar="FILE",
                   help="OpenMetrics file for `promtool tsdb create-blocks-from openmetrics`")
    p.add_argument("--server", default=None, metavar="NAME", help="the `server` label (default: the log file's stem)")
    p.add_argument("--step", type=float, default=10.0, metavar="SECONDS", help="seconds between samples (default 10)")
    p.add_argument("--stats-interval", type=float, default=10.0, metavar="SECONDS",
                   help="seconds between vLLM stats lines (default 10)")
    p.add_argument("--rules", action="append", metavar="FILE",
                   help="your own line families (a rules file or a config file holding rules): their series too")
    add_time_options(p)
    add_line_options(p)

    p = sub.add_parser(
        "test", allow_abbrev=False, help="check your own rules: what lines become, or a file of expectations (for CI)",
        description="Load the rules of FILE (each mistake a one-line error naming the rule and key), then show "
                    "what each line of LINES becomes (the built-in families' events, each rule's fields, the series "
                    "moved), and/or check the expectations of --expect (exit 1 when one fails).",
        epilog="example: vllm-log-exporter test --rules examples/custom-build.rules.yaml --expect examples/custom-build.rules-test.yaml")
    add_version(p)
    p.add_argument("--rules", action="append", required=True, metavar="FILE",
                   help="a rules file (rules: [...]) or a config file holding rules; repeatable")
    p.add_argument("lines", nargs="?", metavar="LINES", help="log lines to explain: a file (.gz allowed) or - for stdin")
    p.add_argument("--expect", metavar="EXPECT.yaml", help="lines and what they must give (tests: [...])")
    p.add_argument("--server", default="test", metavar="NAME", help="the `server` label of the series shown (default test)")
    add_time_options(p)

    p = sub.add_parser("healthcheck", allow_abbrev=False, help="exit 0 if the exporter answers HTTP (for container health checks)")
    add_version(p)
    p.add_argument("--web.listen-address", dest="web_listen_address", default=None, metavar="[HOST]:PORT",
                   help="where the exporter listens (default: $VLLM_LOG_EXPORTER_WEB_LISTEN_ADDRESS, else :10825)")
    p.add_argument("--timeout", type=float, default=3.0, metavar="SECONDS", help="seconds to wait for an answer (default 3)")

    p = sub.add_parser("serve", allow_abbrev=False, help="follow logs and serve /metrics (the default)")
    add_version(p)
    if with_serve:
        from exporter.commands import serve

        serve.add_arguments(p)
    return ap


def tune_gc() -> None:
    """Collect cycles less often. Each parsed line makes a few short-lived containers (frame, event,
    fields) and almost never a cycle, yet CPython's default (a young-generation pass every 700 of
    them) spent ~6-15 % of a pass over a busy log (bench/compare.py). What start-up built is frozen
    out of every later collection; memory stays flat (bench/memory.py)."""
    gc.freeze()
    gc.set_threshold(10_000, 50, 100)


def _looks_like_a_path(word: str) -> bool:
    return "/" in word or word.endswith((".log", ".gz", ".txt", ".json")) or os.path.exists(word)


def _parse(argv: list[str]) -> argparse.Namespace:
    """The arguments, or one usage error (exit 2) that names the mistake: a command that does not exist
    (the closest one offered), a bare path given to serve (``--source PATH`` meant), an option the
    command does not take (the closest offered, in that command's own usage). No abbreviations: a
    mistyped ``--sourc`` must not start a daemon."""
    ap = build_parser(with_serve=argv[0] not in ("parse", "report", "compare", "backfill", "healthcheck", "test"))
    sub = next(a for a in ap._actions if isinstance(a, argparse._SubParsersAction))
    args, extra = ap.parse_known_args(argv)
    if not extra:
        return args
    p = sub.choices[args.command]
    options = sorted(p._option_string_actions)
    flag = next((w for w in extra if w.startswith("-") and w != "-"), None)
    if flag is not None:
        near = difflib.get_close_matches(flag.split("=", 1)[0], options, n=1, cutoff=0.6)
        p.error(f"unrecognized option: {flag}" + (f" (did you mean {near[0]}?)" if near else ""))
    if args.command == "serve":
        word = extra[0]
        p.error(f"{word}: serve takes its logs as --source: did you mean --source {word}?")
    p.error(f"unrecognized arguments: {' '.join(extra)}")
    raise AssertionError("unreachable: error() exits")


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv and not argv[0].startswith("-") and argv[0] not in COMMANDS:
        word = argv[0]
        ap = build_parser(with_serve=False)
        if _looks_like_a_path(word):
            ap.error(f"{word} is no command: did you mean --source {word}? (a saved log's tables: report {word})")
        near = difflib.get_close_matches(word, COMMANDS, n=1, cutoff=0.6)
        ap.error(f"unknown command {word!r}" + (f" (did you mean {near[0]}?)" if near else "")
                 + f"; the commands: {', '.join(COMMANDS)}")
    # `serve` is the default command: `vllm-log-exporter --source x` means `serve --source x`.
    if not argv or (argv[0] not in COMMANDS and argv[0] not in ("-h", "--help", "--version")):
        argv.insert(0, "serve")
    args = _parse(argv)
    tune_gc()
    try:
        if args.command == "parse":
            from exporter.commands import parse

            from exporter.commands.report import load_rules

            return parse.run(args.log, clock_from(args), args.stats, explain_lines=args.explain,
                             max_line=args.max_line_bytes, rules=load_rules(args.rules))
        if args.command == "report":
            from exporter.commands import report

            return report.run(args, clock_from(args))
        if args.command == "compare":
            from exporter.commands import compare

            return compare.run(args, clock_from(args))
        if args.command == "test":
            from exporter.commands import testing

            return testing.run(args, clock_from(args))
        if args.command == "healthcheck":
            from exporter.commands import healthcheck

            return healthcheck.run(args)
        if args.command == "backfill":
            from exporter.commands import backfill

            return backfill.run(args, clock_from(args))
        from exporter.commands import serve

        return serve.run(args)
    except (LogOpenError, UsageError) as e:
        print(f"vllm-log-exporter: {e}", file=sys.stderr)
        return 2
    except BrokenPipeError:
        return 0
    except OSError as e:  # a file named on the command line, as one line rather than a traceback
        where = f"{e.filename}: " if e.filename else ""
        print(f"vllm-log-exporter: {where}{e.strerror or e}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130
