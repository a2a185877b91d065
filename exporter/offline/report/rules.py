"""The report's section per user rule (exporter.config.rules): lines matched, and for each metric the
per-window figures the built-in families get (a window is one matched line: vLLM prints such lines once
per stats interval or once per event): windows, median, Tukey's IQR, best (the rule says whether higher
or lower is better), last; a counter's total; and the same per label value. Pure: events in, numbers
out, and their Markdown.

Memory grows with the distinct values the rules' fields take (exact multisets, as the built-in figures'),
not with the log's length; label values are kept as the rule bounds them, at most MAX_LABEL_SETS per metric.
"""

from __future__ import annotations

from datetime import datetime, timezone

from exporter.offline.report.series import Tally
from exporter.parsers.rules import line_value

MAX_LABEL_SETS = 20
OTHER = "other"


class _Metric:
    __slots__ = ("spec", "values", "total", "updates", "last", "by_label", "seen")

    def __init__(self, spec):
        self.spec = spec
        self.values = Tally()
        self.total = 0.0
        self.updates = 0
        self.last: float | None = None
        self.by_label: dict[tuple, list] = {}  # label values -> [Tally, total, updates]
        self.seen: dict[str, set] = {}  # label -> values kept (max_values bound)

    def _labels(self, f: dict) -> tuple | None:
        out = []
        for lb in self.spec.labels:
            v = f.get(lb.field)
            if v is None:
                return None
            v = str(v)
            if lb.values is not None:
                v = v if v in lb.values else OTHER
            else:
                kept = self.seen.setdefault(lb.name, set())
                if v not in kept:
                    if len(kept) < lb.max_values and v != OTHER:
                        kept.add(v)
                    else:
                        v = OTHER
            out.append(v)
        return tuple(out)

    def add(self, f: dict) -> None:
        labels = self._labels(f)
        if labels is None:
            return
        value = self.spec.value
        x = line_value(value, f)
        if x is None:
            return
        if self.spec.type == "counter" and x < 0:
            return
        self.updates += 1
        self.total += x
        self.last = x
        if isinstance(value, str):
            self.values.add(x)
        if labels:
            entry = self.by_label.get(labels)
            if entry is None:
                key = labels if len(self.by_label) < MAX_LABEL_SETS else (OTHER,) * len(labels)
                entry = self.by_label.setdefault(key, [Tally(), 0.0, 0])
            if isinstance(value, str):
                entry[0].add(x)
            entry[1] += x
            entry[2] += 1

    def _figures(self, t: Tally) -> dict:
        hinges = t.hinges() if len(t) else None
        higher = self.spec.better == "higher"
        return {"windows": len(t), "median": t.median(), "iqr": list(hinges) if hinges else None,
                "best": t.high if higher else t.low, "worst": t.low if higher else t.high}

    def summary(self) -> dict:
        s = self.spec
        out = {"name": s.name, "type": s.type, "dimension": s.dimension, "better": s.better,
               "updates": self.updates, "last": self.last}
        if isinstance(s.value, str):
            out.update(self._figures(self.values))
        if s.type == "counter":
            out["total"] = self.total
        if s.labels:
            names = [lb.name for lb in s.labels]
            rows = []
            for labels, (t, total, n) in sorted(self.by_label.items(), key=lambda kv: -kv[1][2]):
                row = {"labels": dict(zip(names, labels)), "updates": n}
                if isinstance(s.value, str):
                    row.update(self._figures(t))
                if s.type == "counter":
                    row["total"] = total
                rows.append(row)
            out["by_label"] = rows
        return out


class _Rule:
    __slots__ = ("spec", "lines", "first", "last", "invalid", "metrics")

    def __init__(self, spec):
        self.spec = spec
        self.lines = 0
        self.first: float | None = None
        self.last: float | None = None
        self.invalid: dict[str, int] = {}
        self.metrics = [_Metric(m) for m in spec.metrics]


class RuleStats:
    """Per rule: the lines it matched and what its metrics were fed, from its ``rule`` events."""

    def __init__(self, specs):
        self.rules = {s.name: _Rule(s) for s in specs}

    def add(self, ev) -> None:
        f = ev.fields
        r = self.rules.get(f.get("rule"))
        if r is None:
            return
        r.lines += 1
        if ev.ts is not None:
            r.first = ev.ts if r.first is None else min(r.first, ev.ts)
            r.last = ev.ts if r.last is None else max(r.last, ev.ts)
        for name in f.get("_invalid", ()):
            r.invalid[name] = r.invalid.get(name, 0) + 1
        for m in r.metrics:
            m.add(f)

    def summary(self) -> list[dict]:
        return [{"rule": name, "help": r.spec.help, "lines": r.lines, "first": r.first, "last": r.last,
                 "invalid_values": dict(r.invalid), "metrics": [m.summary() for m in r.metrics]}
                for name, r in self.rules.items()]


# -- Markdown ---------------------------------------------------------------------------------------

def value_text(v, dimension: str | None) -> str:
    """A value in its base unit, as a person reads it (GB, ms, %, GB/s)."""
    if v is None:
        return "–"
    if dimension == "bytes":
        return next((f"{v / f:.2f} {u}" for f, u in ((1e12, "TB"), (1e9, "GB"), (1e6, "MB"), (1e3, "kB"))
                     if abs(v) >= f), f"{v:,.0f} B")
    if dimension == "bytes_per_second":
        return next((f"{v / f:.2f} {u}" for f, u in ((1e9, "GB/s"), (1e6, "MB/s"), (1e3, "kB/s")) if abs(v) >= f),
                    f"{v:,.0f} B/s")
    if dimension == "seconds":
        return f"{v:.3g} s" if abs(v) >= 1 else f"{v * 1000:.3g} ms"
    if dimension == "ratio":
        return f"{v * 100:.1f}%"
    return f"{v:,.0f}" if float(v).is_integer() and abs(v) < 1e15 else f"{v:,.4g}"


def _time(ts, tz) -> str:
    if ts is None:
        return "–"
    return datetime.fromtimestamp(ts, tz=tz or timezone.utc).strftime("%Y-%m-%d %H:%M:%S %Z").strip()


def _row(series: str, m: dict, dim) -> str:
    iqr = m.get("iqr")
    cells = [series, f"{m['updates']:,}"]
    if "median" in m:
        cells += [value_text(m["median"], dim),
                  f"{value_text(iqr[0], dim)} – {value_text(iqr[1], dim)}" if iqr else "–",
                  value_text(m["best"], dim)]
    else:
        cells += ["–", "–", "–"]
    cells.append(value_text(m["total"], dim) if "total" in m else "–")
    return "| " + " | ".join(cells) + " |"  # (the log's text escaped by markdown.render's markdown_safe)


def markdown(rules: list[dict], tz=None) -> list[str]:
    """The section of each rule, as Markdown lines."""
    parts: list[str] = []
    for r in rules:
        parts += [f"## Rule: {r['rule']}", ""]
        said = f"{r['help'].rstrip('.')}. " if r["help"] else ""
        if not r["lines"]:
            parts += [f"{said}No line matched in this range.", ""]
            continue
        parts += [f"{said}{r['lines']:,} lines matched, from {_time(r['first'], tz)} to {_time(r['last'], tz)}.", ""]
        parts += ["| Series | Windows | Median | IQR | Best | Total |", "|---|---|---|---|---|---|"]
        for m in r["metrics"]:
            dim = m["dimension"]
            if "by_label" in m:
                for row in m["by_label"]:
                    labels = ",".join(f'{k}="{v}"' for k, v in row["labels"].items())
                    parts.append(_row(f"{m['name']}{{{labels}}}", row, dim))
                if not m["by_label"]:
                    parts.append(_row(m["name"], m, dim))
            else:
                parts.append(_row(m["name"], m, dim))
        parts.append("")
        if r["invalid_values"]:
            bad = ", ".join(f"{k} ({n:,})" for k, n in r["invalid_values"].items())
            parts += [f"Captured values that were no number (left out): {bad}.", ""]
    parts.append("A window is one matched line; best is the highest value, or the lowest where the rule says "
                 "better: lower; IQR is Tukey's hinges.")
    parts.append("")
    return parts
