"""The report as one self-contained HTML page: the Markdown tables plus inline SVG charts.

No script and no external file: the page renders the same offline, in a mail client or an archive.
Series longer than the chart is wide are reduced to per-pixel min/max, so the page stays small.
"""

from __future__ import annotations

import html
import math
import re

from exporter.report.stats import RunStats

W, H, PAD = 900, 220, 40


def _reduce(ts, vs, width: int):
    pts = [(t, v) for t, v in zip(ts, vs) if not math.isnan(t)]
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


def chart(title: str, series: list[tuple[str, str, object]], unit: str = "", y_max: float | None = None) -> str:
    """``series``: (label, colour, Series). Returns an <svg> element with one polyline per series."""
    all_pts = [(label, colour, _reduce(s.ts, s.v, W - 2 * PAD)) for label, colour, s in series]
    flat = [p for _, _, pts in all_pts for p in pts]
    if not flat:
        return f'<p class="empty">{html.escape(title)}: no data</p>'
    t0 = min(p[0] for p in flat)
    t1 = max(p[0] for p in flat)
    vmax = y_max if y_max is not None else max(p[1] for p in flat) or 1.0
    sx = (W - 2 * PAD) / ((t1 - t0) or 1.0)
    sy = (H - 2 * PAD) / (vmax or 1.0)
    lines = []
    legend = []
    for i, (label, colour, pts) in enumerate(all_pts):
        coords = " ".join(f"{PAD + (t - t0) * sx:.1f},{H - PAD - max(0.0, v) * sy:.1f}" for t, v in pts)
        lines.append(f'<polyline class="series" data-points="{len(pts)}" fill="none" stroke="{colour}" '
                     f'stroke-width="1.5" points="{coords}"/>')
        legend.append(f'<text x="{PAD + 160 * i}" y="{H - 8}" fill="{colour}">{html.escape(label)}</text>')
    axis = (f'<line x1="{PAD}" y1="{H - PAD}" x2="{W - PAD}" y2="{H - PAD}" stroke="#999"/>'
            f'<line x1="{PAD}" y1="{PAD}" x2="{PAD}" y2="{H - PAD}" stroke="#999"/>'
            f'<text x="2" y="{PAD + 4}">{vmax:,.3g}{html.escape(unit)}</text><text x="2" y="{H - PAD}">0</text>')
    return (f'<figure><figcaption>{html.escape(title)}</figcaption>'
            f'<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{H}" viewBox="0 0 {W} {H}">'
            f'{axis}{"".join(lines)}{"".join(legend)}</svg></figure>')


def _markdown_to_html(md: str) -> str:
    """Just enough Markdown for the report: headings, pipe tables, paragraphs."""
    out, table = [], []

    def flush_table():
        if not table:
            return
        rows = [r for r in table if not re.fullmatch(r"\|(?:-+\|)+", r)]
        cells = [[html.escape(c.strip().replace("\\|", "|")) for c in r.strip("|").split(" | ")] for r in rows]
        head = "".join(f"<th>{c}</th>" for c in cells[0])
        body = "".join("<tr>" + "".join(f"<td>{c}</td>" for c in r) + "</tr>" for r in cells[1:])
        out.append(f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>")
        table.clear()

    for line in md.splitlines():
        if line.startswith("|"):
            table.append(line)
            continue
        flush_table()
        if line.startswith("## "):
            out.append(f"<h2>{html.escape(line[3:])}</h2>")
        elif line.startswith("# "):
            out.append(f"<h1>{html.escape(line[2:])}</h1>")
        elif line.strip():
            out.append(f"<p>{html.escape(line)}</p>")
    flush_table()
    return "\n".join(out)


def render(stats: RunStats, markdown: str) -> str:
    charts = [
        chart("Generation and prompt throughput (tok/s)", [("generation", "#1f77b4", stats.gen),
                                                           ("prompt", "#ff7f0e", stats.prompt)], " tok/s"),
        chart("Draft acceptance (0-1)", [("draft acceptance", "#2ca02c", stats.accept_ratio)], "", 1.0),
        chart("Mean acceptance length", [("acceptance length", "#9467bd", stats.accept_len)]),
        chart("GPU KV cache usage (0-1)", [("GPU KV usage", "#d62728", stats.kv_usage)], "", 1.0),
    ]
    style = ("body{font-family:sans-serif;max-width:960px;margin:2em auto;color:#222}"
             "table{border-collapse:collapse;margin:.5em 0}td,th{border:1px solid #ccc;padding:3px 8px;text-align:left}"
             "figure{margin:1em 0}figcaption{font-weight:bold}svg text{font-size:11px}")
    return ('<!DOCTYPE html>\n<html><head><meta charset="utf-8"><title>vLLM run report</title>'
            f"<style>{style}</style></head><body>\n{_markdown_to_html(markdown)}\n<h2>Charts</h2>\n"
            + "\n".join(charts) + "\n</body></html>\n")
