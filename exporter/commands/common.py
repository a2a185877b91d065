"""Options every command shares, worded once."""

from __future__ import annotations

import argparse

from exporter import __version__


def add_version(p: argparse.ArgumentParser) -> None:
    p.add_argument("--version", action="version", version=f"vllm-log-exporter {__version__}")


def add_time_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--year", type=int, default=None,
                   help="year of journald/vLLM timestamps, which print none (default: current year, "
                        "stepping back one when a date would be in the future)")
    p.add_argument("--timezone", default=None,
                   help="IANA zone of year-less timestamps, e.g. Europe/Berlin (default: this machine's)")


def add_line_options(p: argparse.ArgumentParser) -> None:
    from exporter.framing.lines import MAX_LINE_BYTES, MAX_MAX_LINE_BYTES, MIN_LINE_BYTES

    def size(text: str) -> int:
        try:
            n = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not a whole number of bytes") from None
        if not MIN_LINE_BYTES <= n <= MAX_MAX_LINE_BYTES:
            raise argparse.ArgumentTypeError(f"{n} must be in [{MIN_LINE_BYTES}, {MAX_MAX_LINE_BYTES}]")
        return n

    p.add_argument("--max-line-bytes", type=size, default=MAX_LINE_BYTES, metavar="BYTES",
                   help="the longest line read whole; a longer one keeps its first and last parts "
                        f"(default {MAX_LINE_BYTES}, as the daemon's)")


def print_result(result, md: str, fmt: str | None) -> int:
    """What report and compare print: JSON when asked, else the Markdown."""
    import json
    import sys

    if fmt == "json":
        json.dump(result, sys.stdout, indent=2, ensure_ascii=False)
        sys.stdout.write("\n")
    else:
        sys.stdout.write(md)
    return 0
