"""The report as one self-contained HTML page: the Markdown tables, each section with its chart.

Charts are drawn by matplotlib (the optional extra ``vllm-log-exporter[report]``) as SVG written
into the page: no script and no external file, so the page renders the same offline, in a mail
client or an archive. Every chart has a wall-clock time axis, one unit per axis (generation and
prompt throughput apart, so a prompt spike does not flatten generation), gaps where the server
restarted or the log went quiet, a dashed line at each server start and a marker at each error.
Series longer than the chart is wide are reduced to per-pixel min/max, so the page stays small (the
statistics keep them decimated already: exporter.offline.report.series).
"""

from __future__ import annotations

import html
import io
import math
import re
from datetime import datetime, timezone

from exporter.framing.text import markdown_unescape
from exporter.offline.report.stats import RunStats

WIDTH_PX = 900
ERROR_COLOURS = {"oom": "#d62728", "engine_dead": "#7f0000", "cuda_error": "#9467bd", "nccl_error": "#ff7f0e",
                 "traceback": "#8c564b"}


class ChartsUnavailable(RuntimeError):
    """matplotlib is not installed."""


def install_hint() -> str:
    """The command that installs the charts' requirement into the Python that runs this (a venv's, pipx's):
    the package's own `report` extra as its metadata gives it."""
    import shlex
    import sys
    from importlib import metadata

    try:
        reqs = [r.split(";")[0].strip() for r in metadata.requires("vllm-log-exporter") or ()
                if 'extra == "report"' in r.replace("'", '"')]
    except metadata.PackageNotFoundError:
        reqs = []
    return f"{shlex.quote(sys.executable)} -m pip install " + " ".join(shlex.quote(r) for r in reqs or ["matplotlib"])


def _reduce(trace, width: int = WIDTH_PX):
    pts = trace.points()
    if len(pts) <= width * 2:
        return pts
    t0, t1 = pts[0][0], pts[-1][0]
    span = (t1 - t0) or 1.0
    buckets: dict[int, list] = {}
    for t, v in pts:
        b = int((t - t0) / span * (width - 1))
        lo_hi = buckets.setdefault(b, [(t, v), (t, v)])
        if v < lo_hi[0][1]:
            lo_hi[0] = (t, v)
        if v > lo_hi[1][1]:
            lo_hi[1] = (t, v)
    out = []
    for b in sorted(buckets):
        out.extend(sorted(buckets[b]))
    return out


def _gapped(pts, starts: list[float], quiet: float):
    """Points with a NaN wherever a server start falls between two of them, or they are more than
    ``quiet`` seconds apart: matplotlib leaves a gap there instead of a line across the crash."""
    out = []
    starts = sorted(t for t in starts if t is not None)
    for i, (t, v) in enumerate(pts):
        if i:
            prev = pts[i - 1][0]
            if t - prev > quiet or any(prev < s <= t for s in starts):
                out.append((float("nan"), float("nan")))
        out.append((t, v))
    return out


def figure_svg(plt, fig, title: str) -> str:
    """A finished figure as an inline SVG <figure>, its title at the top left."""
    fig.suptitle(title, x=0.01, ha="left", fontsize=10, fontweight="bold")
    fig.tight_layout()
    buf = io.StringIO()
    fig.savefig(buf, format="svg")
    plt.close(fig)
    svg = buf.getvalue()
    return '<figure class="chart">' + svg[svg.index("<svg"):] + "</figure>"


def y_axis(ax, ylabel: str, fmt, ratio: bool = False) -> None:
    """Y from 0, with headroom above the data for the legend (a ratio: ticks up to 100 % only)."""
    ax.set_ylabel(ylabel)
    ax.yaxis.set_major_formatter(fmt)
    if ratio:
        ax.set_ylim(0, 1.3)
        ax.set_yticks([0, 0.25, 0.5, 0.75, 1.0])
    else:
        ax.set_ylim(0, max(ax.get_ylim()[1], 1e-9) * 1.3)


class _Plot:
    def __init__(self, stats: RunStats, tz):
        try:
            import matplotlib
        except ImportError:
            raise ChartsUnavailable(f"the HTML report draws its charts with matplotlib, which this Python lacks: "
                                    f"{install_hint()}") from None
        matplotlib.use("Agg")
        import matplotlib.dates as mdates
        import matplotlib.pyplot as plt
        from matplotlib import ticker

        self.plt, self.mdates, self.ticker = plt, mdates, ticker
        matplotlib.rcParams.update({"svg.fonttype": "none", "font.size": 9, "axes.spines.top": False,
                                    "axes.spines.right": False, "axes.grid": True, "grid.alpha": 0.3})
        self.stats = stats
        self.tz = tz or datetime.now().astimezone().tzinfo or timezone.utc
        self.starts = [t for t in stats.starts if t is not None]
        self.quiet = 3 * max(10.0, _median_step([t for t, _ in stats.gen.points()]))

    def _x(self, ts):
        return [self.mdates.date2num(datetime.fromtimestamp(t, self.tz)) if not math.isnan(t) else float("nan")
                for t in ts]

    def figure(self, rows: int):
        fig, axes = self.plt.subplots(rows, 1, figsize=(WIDTH_PX / 100, 1.9 * rows + 0.6), sharex=True, squeeze=False)
        return fig, [a[0] for a in axes]

    def line(self, ax, pts, label: str, colour: str, gaps: bool = True, **kw):
        if gaps:
            pts = _gapped(pts, self.starts, self.quiet)
        ax.plot(self._x([t for t, _ in pts]), [v for _, v in pts], color=colour, label=label, linewidth=1.2, **kw)

    def axis(self, ax, ylabel: str, fmt, ratio: bool = False) -> None:
        y_axis(ax, ylabel, fmt, ratio)

    def marks(self, axes) -> None:
        """A dashed line at each server start on every axis; a marker at each error on the first."""
        for ax in axes:
            for t in self.starts:
                ax.axvline(self._x([t])[0], color="#555", linestyle="--", linewidth=0.8)
        if self.starts:
            axes[0].plot([], [], color="#555", linestyle="--", linewidth=0.8, label="server start")
        top = axes[0]
        seen = set()
        for t, kind in self.stats.error_times:
            x = self._x([t])[0]
            top.plot([x], [1.0], marker="v", markersize=7, color=ERROR_COLOURS.get(kind, "k"), linestyle="none",
                     transform=top.get_xaxis_transform(), clip_on=False,
                     label=kind.replace("_", " ") if kind not in seen else None)
            seen.add(kind)

    def finish(self, fig, axes, title: str) -> str:
        if self.stats.first_ts is not None and self.stats.last_ts is not None:  # one time range for every chart
            axes[-1].set_xlim(*self._x([self.stats.first_ts, self.stats.last_ts]))
        locator = self.mdates.AutoDateLocator(tz=self.tz)
        axes[-1].xaxis.set_major_locator(locator)
        axes[-1].xaxis.set_major_formatter(self.mdates.ConciseDateFormatter(locator, tz=self.tz))
        for ax in axes:
            handles, labels = ax.get_legend_handles_labels()
            if handles:
                ax.legend(loc="upper left", fontsize=8, frameon=False, ncol=min(6, len(handles)))
        return figure_svg(self.plt, fig, title)


def _median_step(ts) -> float:
    steps = sorted(b - a for a, b in zip(ts, ts[1:]) if not (math.isnan(a) or math.isnan(b)) and b > a)
    return steps[len(steps) // 2] if steps else 10.0


def charts(stats: RunStats, tz=None) -> dict[str, str]:
    """Section heading -> the <figure> drawn for it (a section without data has none)."""
    p = _Plot(stats, tz)
    t = p.ticker
    out: dict[str, str] = {}
    eng = t.EngFormatter

    if len(stats.gen) or len(stats.prompt):
        fig, (a, b) = p.figure(2)
        p.line(a, _reduce(stats.gen), "generation", "#1f77b4")
        p.axis(a, "generation", eng(unit="tok/s"))
        p.line(b, _reduce(stats.prompt), "prompt", "#ff7f0e")
        p.axis(b, "prompt", eng(unit="tok/s"))
        p.marks([a, b])
        out["Generation throughput"] = p.finish(fig, [a, b], "Throughput per stats window")

    if len(stats.accept_len) or len(stats.accept_ratio):
        fig, (a, b) = p.figure(2)
        p.line(a, _reduce(stats.accept_len), "mean acceptance length", "#9467bd")
        p.axis(a, "tokens / step", t.FormatStrFormatter("%.1f"))
        p.line(b, _reduce(stats.accept_ratio), "draft acceptance", "#2ca02c")
        p.axis(b, "accepted", t.PercentFormatter(1.0), ratio=True)
        p.marks([a, b])
        out["Speculative decoding"] = p.finish(fig, [a, b], "Speculative decoding per window")

    if any(len(x.rates) for x in stats.transfers.values()):
        fig, (a,) = p.figure(1)
        for direction, colour in (("store", "#1f77b4"), ("load", "#d62728")):
            rates = stats.transfers[direction].rates
            if len(rates):
                label = "store (GPU to host)" if direction == "store" else "load (host to GPU)"
                p.line(a, _reduce(rates), label, colour, marker=".", markersize=3)
        p.axis(a, "rate", eng(unit="B/s"))
        p.marks([a])
        out["KV offload"] = p.finish(fig, [a], "KV offload rate per interval (bytes / recorded copy time)")

    if len(stats.kv_usage):
        fig, (a,) = p.figure(1)
        p.line(a, _reduce(stats.kv_usage), f"{stats.kv_device} KV cache usage", "#d62728")
        p.axis(a, "used", t.PercentFormatter(1.0), ratio=True)
        p.marks([a])
        out["Capacity"] = p.finish(fig, [a], f"{stats.kv_device} KV cache usage per stats window")

    if stats.http_minutes:
        fig, (a,) = p.figure(1)
        buckets = stats.http_minutes.items()
        width = stats.http_minutes.width  # a minute, or more on a long run
        for cls, colour in (("2xx", "#2ca02c"), ("3xx", "#17becf"), ("4xx", "#ff7f0e"), ("5xx", "#d62728"),
                            ("other", "#7f7f7f")):
            if any(cls in counts for _, counts in buckets):
                pts = [(start + width / 2, counts.get(cls, 0) * 60.0 / width) for start, counts in buckets]
                p.line(a, pts, cls, colour, gaps=False, drawstyle="steps-mid")
        p.axis(a, "responses / min", t.FuncFormatter(lambda v, _: f"{v:,.0f}"))
        p.marks([a])
        out["HTTP"] = p.finish(fig, [a], "HTTP responses per minute, by status class")

    if stats.error_times:
        fig, (a,) = p.figure(1)
        kinds = [k for k in ERROR_COLOURS if any(kind == k for _, kind in stats.error_times)]
        for i, k in enumerate(kinds):
            xs = p._x([tt for tt, kind in stats.error_times if kind == k])
            a.plot(xs, [i] * len(xs), marker="v", markersize=8, linestyle="none", color=ERROR_COLOURS[k],
                   label=k.replace("_", " "))
        a.set_yticks(range(len(kinds)), [k.replace("_", " ") for k in kinds])
        a.set_ylim(-0.7, len(kinds) - 0.3)
        for t0 in p.starts:
            a.axvline(p._x([t0])[0], color="#555", linestyle="--", linewidth=0.8)
        out["Errors"] = p.finish(fig, [a], "Errors over time (dashed: server starts)")
    return out


def _markdown_to_html(md: str, figures: dict[str, str]) -> str:
    """Just enough Markdown for the report: headings, pipe tables, paragraphs; each section's figure
    goes at the end of its section, beside its table."""
    out, table = [], []
    section = None

    def flush_table():
        if not table:
            return
        rows = [r for r in table if not re.fullmatch(r"\|(?:-+\|)+", r)]
        cells = [[html.escape(markdown_unescape(c.strip())) for c in r.strip("|").split(" | ")] for r in rows]
        head = "".join(f"<th>{c}</th>" for c in cells[0])
        body = "".join("<tr>" + "".join(f"<td>{c}</td>" for c in r) + "</tr>" for r in cells[1:])
        out.append(f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>")
        table.clear()

    def end_section():
        if section in figures:
            out.append(figures[section])

    for line in md.splitlines():
        if line.startswith("|"):
            table.append(line)
            continue
        flush_table()
        if line.startswith("## "):
            end_section()
            section = line[3:].strip()
            out.append(f"<h2>{html.escape(markdown_unescape(section))}</h2>")
        elif line.startswith("# "):
            out.append(f"<h1>{html.escape(markdown_unescape(line[2:]))}</h1>")
        elif line.strip():
            out.append(f"<p>{html.escape(markdown_unescape(line))}</p>")
    flush_table()
    end_section()
    return "\n".join(out)


def render(stats: RunStats, markdown: str, tz=None) -> str:
    figures = charts(stats, tz)
    style = ("body{font-family:sans-serif;max-width:960px;margin:2em auto;color:#222}"
             "table{border-collapse:collapse;margin:.5em 0}td,th{border:1px solid #ccc;padding:3px 8px;text-align:left}"
             "figure.chart{margin:1em 0}figure.chart svg{width:100%;height:auto}")
    return ('<!DOCTYPE html>\n<html><head><meta charset="utf-8"><title>vLLM run report</title>'
            f"<style>{style}</style></head><body>\n{_markdown_to_html(markdown, figures)}\n</body></html>\n")
