"""The comparison as one self-contained HTML page: its Markdown tables, each section with its charts,
every chart with the runs overlaid on time since each run's start, one colour per run.

Drawn as ``exporter.offline.report.html`` draws a single run's report (matplotlib SVG written into the page, no
script, no external file; per-pixel min/max reduction, gaps at restarts and quiet stretches), from the
same ``RunStats`` objects whose summaries the tables compare. Charts:

- Throughput: generation, prompt and KV cache usage per stats window;
- Like with like: per number of running requests, each run's median with its IQR as an error bar;
- Speculative decoding: acceptance length and draft acceptance per window;
- KV offload: store and load copy rates per interval;
- HTTP, errors, deaths and stops: responses per minute, and each run's errors and starts on its own row.
"""

from __future__ import annotations


from exporter.offline.report import html as single
from exporter.offline.report.html import ERROR_COLOURS, ChartsUnavailable, _gapped, _median_step, _reduce, figure_svg, y_axis
from exporter.offline.report.stats import RunStats

COLOURS = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22",
           "#17becf")

__all__ = ["render", "charts", "ChartsUnavailable"]


class _Overlay:
    def __init__(self, stats_list: list[RunStats], labels: list[str]):
        try:
            import matplotlib
        except ImportError:
            raise ChartsUnavailable("the HTML report draws its charts with matplotlib: "
                                    "pip install 'vllm-log-exporter[report]'") from None
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        from matplotlib import ticker

        self.plt, self.ticker = plt, ticker
        matplotlib.rcParams.update({"svg.fonttype": "none", "font.size": 9, "axes.spines.top": False,
                                    "axes.spines.right": False, "axes.grid": True, "grid.alpha": 0.3})
        self.stats, self.labels = stats_list, labels
        self.colours = [COLOURS[i % len(COLOURS)] for i in range(len(stats_list))]
        self.t0 = [s.first_ts or 0.0 for s in stats_list]
        longest = max(((s.last_ts or 0) - (s.first_ts or 0) for s in stats_list), default=0)
        self.unit, self.scale = ("hours", 3600.0) if longest > 3 * 3600 else ("minutes", 60.0)
        self.span = longest / self.scale
        self.quiet = [3 * max(10.0, _median_step([t for t, _ in s.gen.points()])) for s in stats_list]

    def figure(self, rows: int):
        fig, axes = self.plt.subplots(rows, 1, figsize=(single.WIDTH_PX / 100, 1.9 * rows + 0.8), sharex=True,
                                      squeeze=False)
        return fig, [a[0] for a in axes]

    def x(self, i: int, ts):
        return [(t - self.t0[i]) / self.scale for t in ts]

    def overlay(self, ax, series, gaps: bool = True, **kw) -> None:
        """``series``: one list of (time, value) per run (empty lists are skipped)."""
        for i, pts in enumerate(series):
            if not pts:
                continue
            if gaps:
                pts = _gapped(pts, [t for t in self.stats[i].starts if t is not None], self.quiet[i])
            ax.plot(self.x(i, [t for t, _ in pts]), [v for _, v in pts], color=self.colours[i],
                    label=self.labels[i], linewidth=1.3, alpha=0.9, **kw)

    def axis(self, ax, ylabel: str, fmt, ratio: bool = False) -> None:
        y_axis(ax, ylabel, fmt, ratio)

    def restarts(self, axes) -> None:
        """A dashed line, in the run's colour, at each server start after the run's first point."""
        for i, s in enumerate(self.stats):
            for t in s.starts:
                if t is not None and t > self.t0[i]:
                    for ax in axes:
                        ax.axvline(self.x(i, [t])[0], color=self.colours[i], linestyle="--", linewidth=0.8, alpha=0.7)

    def finish(self, fig, axes, title: str, time_axis: bool = True,
               note: str = " (dashed: a restart, in the run's colour)") -> str:
        if time_axis:
            axes[-1].set_xlim(0, max(self.span, 1e-9))
            axes[-1].set_xlabel(f"{self.unit} since the run's first line{note}")
        for ax in axes:
            if ax.get_legend_handles_labels()[0]:
                ax.legend(loc="upper left", fontsize=8, frameon=False, ncol=min(6, len(self.labels) + 1))
        return figure_svg(self.plt, fig, title)


def _panel(p: _Overlay, ax, traces, ylabel: str, fmt, ratio: bool = False, **kw) -> None:
    p.overlay(ax, [_reduce(t) if len(t) else [] for t in traces], **kw)
    p.axis(ax, ylabel, fmt, ratio)


def charts(cmp: dict, stats_list: list[RunStats]) -> dict[str, str]:
    """Section heading -> its figures (a section no run has data for gets none)."""
    p = _Overlay(stats_list, [r["label"] for r in cmp["runs"]])
    t = p.ticker
    eng = t.EngFormatter
    out: dict[str, str] = {}

    if any(len(s.gen) or len(s.prompt) for s in stats_list):
        has_kv = any(len(s.kv_usage) for s in stats_list)
        fig, axes = p.figure(3 if has_kv else 2)
        _panel(p, axes[0], [s.gen for s in stats_list], "generation", eng(unit="tok/s"))
        _panel(p, axes[1], [s.prompt for s in stats_list], "prompt", eng(unit="tok/s"))
        if has_kv:
            _panel(p, axes[2], [s.kv_usage for s in stats_list], "KV cache used", t.PercentFormatter(1.0), ratio=True)
        p.restarts(axes)
        out["Throughput"] = p.finish(fig, axes, "Throughput" + (" and KV cache usage" if has_kv else "") +
                                     " per stats window")

    rows = cmp["by_running"]
    if rows:
        fig, (a,) = p.figure(1)
        n = len(stats_list)
        for i in range(n):
            xs, ys, lo, hi = [], [], [], []
            for j, row in enumerate(rows):
                c = row["cells"][i]
                if c["value"] is None:
                    continue
                xs.append(j + (i - (n - 1) / 2) * 0.8 / max(n, 1))
                ys.append(c["value"])
                spread = c["spread"] or [c["value"], c["value"]]
                lo.append(c["value"] - spread[0])
                hi.append(spread[1] - c["value"])
            if xs:
                a.errorbar(xs, ys, yerr=[lo, hi], fmt="o", color=p.colours[i], capsize=3, markersize=5,
                           label=p.labels[i])
                for x, y, c in zip(xs, ys, [r["cells"][i] for r in rows if r["cells"][i]["value"] is not None]):
                    a.annotate(f"{c['windows']}", (x, y), textcoords="offset points", xytext=(4, 3), fontsize=7,
                               color=p.colours[i])
        a.set_xticks(range(len(rows)), [r["label"] for r in rows])
        a.set_xlim(-0.6, len(rows) - 0.4)
        p.axis(a, "generation", eng(unit="tok/s"))
        out["Like with like: generation throughput at the same number of running requests"] = p.finish(
            fig, [a], "Generation throughput by running requests: median, IQR bar, windows beside each point",
            time_axis=False)

    if any(len(s.accept_len) or len(s.accept_ratio) for s in stats_list):
        fig, (a, b) = p.figure(2)
        _panel(p, a, [s.accept_len for s in stats_list], "tokens / step", t.FormatStrFormatter("%.1f"))
        _panel(p, b, [s.accept_ratio for s in stats_list], "draft accepted", t.PercentFormatter(1.0), ratio=True)
        p.restarts([a, b])
        out["Speculative decoding"] = p.finish(fig, [a, b], "Acceptance length and draft acceptance per window")

    if any(len(x.rates) for s in stats_list for x in s.transfers.values()):
        fig, (a, b) = p.figure(2)
        _panel(p, a, [s.transfers["store"].rates for s in stats_list], "store (GPU to host)", eng(unit="B/s"),
               marker=".", markersize=3)
        _panel(p, b, [s.transfers["load"].rates for s in stats_list], "load (host to GPU)", eng(unit="B/s"),
               marker=".", markersize=3)
        p.restarts([a, b])
        out["KV offload"] = p.finish(fig, [a, b], "KV offload copy rate per interval (bytes / recorded copy time)")

    figs = []
    if any(s.http_minutes for s in stats_list):
        fig, (a,) = p.figure(1)
        series = []
        for s in stats_list:
            w = s.http_minutes.width
            series.append([(start + w / 2, sum(c.values()) * 60.0 / w) for start, c in s.http_minutes.items()])
        p.overlay(a, series, gaps=False, drawstyle="steps-mid")
        p.axis(a, "responses / min", t.FuncFormatter(lambda v, _: f"{v:,.0f}"))
        figs.append(p.finish(fig, [a], "HTTP responses per minute", note=""))
    if any(s.error_times or len(s.starts) > 1 for s in stats_list):
        fig, (a,) = p.figure(1)
        seen = set()
        for i, s in enumerate(stats_list):
            starts = [x for x in s.starts if x is not None]
            a.plot(p.x(i, starts), [i] * len(starts), marker="|", markersize=14, linestyle="none", color="#555",
                   label="server start" if "start" not in seen and starts else None)
            seen.add("start") if starts else None
            for kind, colour in ERROR_COLOURS.items():
                ts = [tt for tt, k in s.error_times if k == kind]
                if ts:
                    a.plot(p.x(i, ts), [i] * len(ts), marker="v", markersize=8, linestyle="none", color=colour,
                           label=kind.replace("_", " ") if kind not in seen else None)
                    seen.add(kind)
        a.set_yticks(range(len(stats_list)), p.labels)
        a.set_ylim(-0.7, len(stats_list) - 0.3 + 0.6)
        a.grid(axis="y", alpha=0)
        figs.append(p.finish(fig, [a], "Errors and server starts, one row per run", note=""))
    if figs:
        out["HTTP, errors, deaths and stops"] = "".join(figs)
    return out


def render(cmp: dict, stats_list: list[RunStats], markdown: str) -> str:
    figures = charts(cmp, stats_list)
    labels = [r["label"] for r in cmp["runs"]]
    key = " ".join(f'<span style="color:{COLOURS[i % len(COLOURS)]}">&#9632;</span> {single.html.escape(label)}'
                   for i, label in enumerate(labels))
    body = single._markdown_to_html(markdown, figures)
    body = body.replace("</h1>", f'</h1>\n<p class="key">Colours: {key}</p>', 1)
    style = ("body{font-family:sans-serif;max-width:1280px;margin:2em auto;color:#222}"
             "table{border-collapse:collapse;margin:.5em 0}td,th{border:1px solid #ccc;padding:3px 8px;text-align:left;overflow-wrap:break-word}"
             "table{display:block;overflow-x:auto;max-width:100%}"
             "figure.chart{margin:1em 0}figure.chart svg{width:100%;height:auto}")
    return ('<!DOCTYPE html>\n<html><head><meta charset="utf-8"><title>vLLM runs compared</title>'
            f"<style>{style}</style></head><body>\n{body}\n</body></html>\n")
