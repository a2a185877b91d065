"""Options every command shares, worded once."""

from __future__ import annotations

import argparse

from exporter import __version__


class UsageError(Exception):
    """A mistake on the command line found after argparse (a time, a zone, a rules file): one line, exit 2."""


def not_vllm_output(path: str, results: dict[str, int]) -> str | None:
    """Why a saved log gives nothing, when none of its lines was vLLM output (``results``: lines by
    result, exporter.stream.pipeline.RESULTS); None for a vLLM log."""
    if results.get("parsed", 0) or results.get("ignored", 0):
        return None
    name = "stdin" if path == "-" else path
    total = sum(results.values())
    if not total:
        return f"{name}: no lines"
    return (f"{name}: 0 of {total:,} lines were vLLM output: is it a vLLM log? "
            f"(vllm-log-exporter parse --stats {name} shows its commonest lines)")


def add_version(p: argparse.ArgumentParser) -> None:
    p.add_argument("--version", action="version", version=f"vllm-log-exporter {__version__}")


def add_time_options(p: argparse.ArgumentParser, env=None) -> None:
    """``env(key)``: the words naming the option's environment variable (serve's), else none."""
    say = env or (lambda key: "")
    p.add_argument("--year", type=int, default=None, metavar="YEAR",
                   help="year of journald/vLLM timestamps, which print none (default: current year, "
                        "stepping back one when a date would be in the future)" + say("YEAR"))
    p.add_argument("--timezone", default=None, metavar="ZONE",
                   help="IANA zone of year-less timestamps, e.g. Europe/Berlin (default: this machine's)"
                        + say("TIMEZONE"))


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


class Visible:
    """A text stream whose writes show every control character but newline and tab as U+FFFD
    (exporter.framing.text): log text a command prints acts on no terminal (a title, a clipboard
    write, a cursor move), JSON's C1 characters included."""

    def __init__(self, out):
        self.out = out

    def write(self, text: str) -> int:
        from exporter.framing.text import visible

        return self.out.write(visible(text, keep_newlines=True))

    def flush(self) -> None:
        self.out.flush()


def print_result(result, md: str, fmt: str | None) -> int:
    """What report and compare print: JSON when asked, else the Markdown."""
    import json
    import sys

    out = Visible(sys.stdout)
    if fmt == "json":
        out.write(json.dumps(result, indent=2, ensure_ascii=False))
        out.write("\n")
    else:
        out.write(md)
    return 0
