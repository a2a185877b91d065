"""Two or more runs side by side (pure: each run's report dict in, one comparison dict out).

Every figure is read out of the dict ``RunStats.summary()`` built for that run, the one
``report --format json`` prints; nothing is computed again here. What this module adds:

- **Configuration rows**, each with its value per run and a status: ``same``, ``differs`` (two runs
  logged different values), ``partly unknown`` (some runs did not log it; those that did agree) or
  ``unknown`` (no run logged it; the Markdown leaves such rows out). A few rows are read from a
  report value rather than copied: the build (``0.11.2.dev280+gilded...`` -> ``gilded...``), the
  model snapshot (``.../snapshots/7872f01b...``), the offload backend (vLLM's native CPU offload
  when a pool or native transfers were logged, LMCache when LMCache moved KV, else none).
- **Result rows**, each with its value per run, the windows (or intervals, or responses) it rests
  on, the difference from the first run and, where the report gives a spread (Tukey hinges of the
  per-window values; for KV copy rates the observed range), a verdict per later run: ``inside
  spread`` when the two spreads overlap (the difference may be noise), ``outside spread`` when they
  do not (clearly a change), ``too few windows`` when either rests on fewer than ``MIN_WINDOWS``.
- **Like with like**: generation throughput at each number of running requests (``Running: 1``
  against ``Running: 1``, 2 against 2 ...), the same verdicts.

``render_markdown`` writes the comparison as Markdown tables; ``exporter.offline.report.compare_html`` the
page with the runs' charts overlaid.
"""

from __future__ import annotations

import re
from typing import Any

from exporter.framing.text import markdown_safe
from exporter.offline.report.markdown import _gib, _time

MIN_WINDOWS = 5  # Tukey hinges of fewer windows say little about the spread
SNAPSHOT = re.compile(r"snapshots/([0-9a-f]{7,64})")


def lookup(report: dict, path: str):
    """The value at a dotted path (``throughput.single_request_iqr``), None where any step is missing."""
    cur: Any = report
    for part in path.split("."):
        if isinstance(cur, dict):
            cur = cur.get(part, cur.get(int(part)) if part.isdigit() else None)
        else:
            return None
    return cur


# -- configuration -----------------------------------------------------------------------------

def _settings(r: dict, key: str):
    return (r["config"].get("settings") or {}).get(key)


def _build(r: dict):
    v = r["config"].get("version")
    if v is None:
        return None
    return v.split("+", 1)[1] if "+" in v else "release"


def _snapshot(r: dict):
    m = SNAPSHOT.search(str(r["config"].get("model") or ""))
    return m.group(1) if m else None


def _spec_depth(r: dict):
    sd = r["spec_decode"]
    if sd.get("depths"):
        return ", ".join(map(str, sd["depths"]))
    n = _settings(r, "num_speculative_tokens")
    if n is not None:
        return str(n)
    return "off" if not sd.get("windows") else "on (depth not logged)"


def offload_backend(r: dict) -> str:
    kv = r["kv_offload"]
    parts = []
    if r["config"].get("offload_pool_bytes") or kv.get("store") or kv.get("load"):
        parts.append("vLLM native CPU offload")
    if kv.get("lmcache"):
        parts.append("LMCache")
    return " + ".join(parts) or "none"


def _offload_pool(r: dict):
    b = r["config"].get("offload_pool_bytes")
    if b:
        return b
    return 0 if offload_backend(r) == "none" else None


# (key, label, kind, getter or report path); kinds say how the Markdown prints a value
CONFIG_ROWS: list[tuple[str, str, str, Any]] = [
    ("version", "vLLM version", "text", lambda r: (r["config"].get("version") or "").split("+")[0] or None),
    ("build", "Build (after the version's +)", "text", _build),
    ("model", "Model", "text", "config.model"),
    ("snapshot", "Model snapshot", "text", _snapshot),
    ("served_model_name", "Served model name", "text", lambda r: _settings(r, "served_model_name")),
    ("quantization", "Quantization", "text", "config.quantization"),
    ("dtype", "Activation dtype", "text", lambda r: _settings(r, "dtype")),
    ("tensor_parallel_size", "Tensor parallel", "int", "config.tensor_parallel_size"),
    ("data_parallel_size", "Data parallel", "int", lambda r: _settings(r, "data_parallel_size")),
    ("pipeline_parallel_size", "Pipeline parallel", "int", lambda r: _settings(r, "pipeline_parallel_size")),
    ("decode_context_parallel_size", "Decode context parallel", "int",
     lambda r: _settings(r, "decode_context_parallel_size")),
    ("max_model_len", "Max model len", "int", lambda r: r["config"].get("max_model_len") or r["config"].get("max_seq_len")),
    ("max_num_seqs", "Max num seqs", "int", "config.max_num_seqs"),
    ("max_num_batched_tokens", "Max num batched tokens", "int", lambda r: _settings(r, "max_num_batched_tokens")),
    ("gpu_memory_utilization", "GPU memory utilization", "float", lambda r: _settings(r, "gpu_memory_utilization")),
    ("kv_cache_dtype", "KV cache dtype", "text", "config.kv_cache_dtype"),
    ("kv_cache_device", "KV cache device", "text", "config.kv_cache_device"),
    ("gpu_kv_cache_tokens", "KV capacity (tokens)", "int", "config.gpu_kv_cache_tokens"),
    ("gpu_blocks", "KV blocks (V0)", "int", "config.gpu_blocks"),
    ("max_concurrency", "Max-length request concurrency", "x", "config.max_concurrency"),
    ("enable_prefix_caching", "Prefix caching", "text", lambda r: _settings(r, "enable_prefix_caching")),
    ("enforce_eager", "Enforce eager", "text", lambda r: _settings(r, "enforce_eager")),
    ("speculative_method", "Speculative method", "text",
     lambda r: _settings(r, "speculative_method") or ("off" if not r["spec_decode"].get("windows") else None)),
    ("speculative_depth", "Speculative depth (tokens drafted per step)", "text", _spec_depth),
    ("offload_backend", "KV offload backend", "text", offload_backend),
    ("offload_pool_bytes", "KV offload pool", "bytes", _offload_pool),
    ("init_seconds", "Engine init (profile, KV cache, warm-up)", "seconds", "config.init_seconds"),
    ("compile_seconds", "Compilation", "seconds", "config.compile_seconds"),
]

WORKER_FIELDS = [("weights_bytes", "weights", "bytes"), ("kv_cache_bytes", "KV cache", "bytes"),
                 ("peak_activation_bytes", "peak activation", "bytes"), ("non_torch_bytes", "non-torch", "bytes"),
                 ("cuda_graph_bytes", "CUDA graph", "bytes"), ("load_seconds", "model load time", "seconds")]


def _status(values: list) -> str:
    known = [v for v in values if v is not None]
    if not known:
        return "unknown"
    if len(set(map(repr, known))) > 1:
        return "differs"
    return "partly unknown" if len(known) < len(values) else "same"


def config_rows(reports: list[dict]) -> list[dict]:
    rows = []
    for key, label, kind, get in CONFIG_ROWS:
        values = [lookup(r, get) if isinstance(get, str) else get(r) for r in reports]
        rows.append({"key": key, "label": label, "kind": kind, "values": values, "status": _status(values)})
    workers: list[str] = []
    for r in reports:
        workers += [w for w in r["config"].get("workers", {}) if w not in workers]
    for w in workers:
        for field, what, kind in WORKER_FIELDS:
            values = [r["config"].get("workers", {}).get(w, {}).get(field) for r in reports]
            rows.append({"key": f"workers.{w}.{field}", "label": f"{w}: {what}", "kind": kind, "values": values,
                         "status": _status(values)})
    return rows


# -- results -----------------------------------------------------------------------------------

# (key, label, kind, value path, windows path, spread path or None)
T, S = "throughput", "spec_decode"
RESULT_ROWS: list[tuple[str, str, str, str, str, str | None]] = [
    ("generation_peak", "Peak generation throughput", "tok/s", f"{T}.generation_peak", f"{T}.windows", None),
    ("single_request_median", "Single-active-request median (IQR)", "tok/s", f"{T}.single_request_median",
     f"{T}.single_request_windows", f"{T}.single_request_iqr"),
    ("nonzero_mean", "Nonzero-window mean", "tok/s", f"{T}.nonzero_mean", f"{T}.nonzero_windows", None),
    ("prompt_peak", "Peak prompt throughput", "tok/s", f"{T}.prompt_peak", f"{T}.windows", None),
    ("kv_usage_peak", "Peak KV cache usage", "ratio", f"{T}.gpu_kv_usage_peak", f"{T}.windows", None),
    ("prefix_cache_hit_peak", "Peak prefix cache hit rate", "ratio", f"{T}.prefix_cache_hit_peak", f"{T}.windows", None),
    ("acceptance_length_median", "Acceptance length median (IQR)", "num", f"{S}.acceptance_length.median",
     f"{S}.spread.acceptance_length.windows", f"{S}.spread.acceptance_length.iqr"),
    ("acceptance_length_mean", "Acceptance length mean of windows", "num", f"{S}.acceptance_length.mean",
     f"{S}.spread.acceptance_length.windows", None),
    ("acceptance_length_best", "Acceptance length best", "num", f"{S}.acceptance_length.best",
     f"{S}.spread.acceptance_length.windows", None),
    ("run_acceptance_length", "Acceptance length over the run (1 + accepted / drafts)", "num",
     f"{S}.run_acceptance_length", f"{S}.windows", None),
    ("draft_acceptance_median", "Draft acceptance median (IQR)", "ratio", f"{S}.draft_acceptance.median",
     f"{S}.spread.draft_acceptance.windows", f"{S}.spread.draft_acceptance.iqr"),
    ("draft_acceptance_mean", "Draft acceptance mean of windows", "ratio", f"{S}.draft_acceptance.mean",
     f"{S}.spread.draft_acceptance.windows", None),
    ("draft_acceptance_best", "Draft acceptance best", "ratio", f"{S}.draft_acceptance.best",
     f"{S}.spread.draft_acceptance.windows", None),
    ("run_draft_acceptance", "Draft acceptance over the run (accepted / drafted)", "ratio",
     f"{S}.run_draft_acceptance", f"{S}.windows", None),
    ("accepted_throughput_median", "Accepted speculative throughput median (IQR)", "tok/s",
     f"{S}.accepted_throughput.median", f"{S}.spread.accepted_throughput.windows", f"{S}.spread.accepted_throughput.iqr"),
    ("accepted_throughput_best", "Accepted speculative throughput best", "tok/s", f"{S}.accepted_throughput.best",
     f"{S}.spread.accepted_throughput.windows", None),
    ("kv_store_gb_per_s", "KV copy GPU to host (store), weighted (range)", "GB/s",
     "kv_offload.store.weighted_gb_per_s", "kv_offload.store.intervals", "kv_offload.store"),
    ("kv_load_gb_per_s", "KV copy host to GPU (load), weighted (range)", "GB/s",
     "kv_offload.load.weighted_gb_per_s", "kv_offload.load.intervals", "kv_offload.load"),
    ("cpu_cache_usage_peak", "Peak CPU offload cache usage", "ratio", "kv_offload.cpu_cache_usage_peak",
     "kv_offload.store.intervals", None),
    ("lmcache_store_gb_per_s", "LMCache store rate", "GB/s", "kv_offload.lmcache.store.gb_per_s",
     "kv_offload.lmcache.store.moves", None),
    ("lmcache_retrieve_gb_per_s", "LMCache retrieve rate", "GB/s", "kv_offload.lmcache.retrieve.gb_per_s",
     "kv_offload.lmcache.retrieve.moves", None),
    ("lmcache_hit_ratio", "LMCache hit ratio (of looked-up tokens)", "ratio", "kv_offload.lmcache.hit_ratio",
     "kv_offload.lmcache.lookups", None),
    # with --price-per-hour (exporter.offline.report.cost): the price over the tokens
    ("cost_busy_per_million_generated", "Cost per 1 M generated tokens while busy, median (IQR)", "price",
     "cost.busy_per_million_generated", "cost.busy_windows", "cost.busy_per_million_generated_iqr"),
    ("cost_per_million_generated", "Cost per 1 M generated tokens over the run (idle time included)", "price",
     "cost.per_million_generated", "cost.busy_windows", None),
    ("cost_per_million_prompt", "Cost per 1 M prompt tokens computed, over the run", "price",
     "cost.per_million_prompt", "cost.busy_windows", None),
    ("cost_of_run", "Cost of the run", "price", "cost.cost", "cost.busy_windows", None),
]


def _spread(report: dict, path: str | None):
    """[low, high] of a figure's spread: Tukey hinges, or (KV copy rates) the observed range."""
    if path is None:
        return None
    v = lookup(report, path)
    if isinstance(v, dict):
        return [v["min_gb_per_s"], v["max_gb_per_s"]] if "min_gb_per_s" in v else None
    return list(v) if v else None


def verdict(base: dict, other: dict) -> str | None:
    """Inside or outside the spread, for two cells holding value, windows and spread."""
    if base["value"] is None or other["value"] is None or base["spread"] is None or other["spread"] is None:
        return None
    if min(base["windows"] or 0, other["windows"] or 0) < (MIN_WINDOWS if base["spread_kind"] == "IQR" else 2):
        return "too few windows"
    if base["value"] == other["value"]:
        return "same"
    (a_lo, a_hi), (b_lo, b_hi) = base["spread"], other["spread"]
    return "inside spread" if a_lo <= b_hi and b_lo <= a_hi else "outside spread"


def _diff(base, value, kind: str) -> dict | None:
    if not isinstance(base, (int, float)) or not isinstance(value, (int, float)) or isinstance(base, bool):
        return None
    d = {"abs": value - base, "rel": (value - base) / base if base else None}
    if kind == "ratio":
        d["points"] = (value - base) * 100  # percentage points
    return d


def _row(key: str, label: str, kind: str, cells: list[dict]) -> dict:
    base = cells[0]
    return {"key": key, "label": label, "kind": kind, "cells": cells,
            "diffs": [_diff(base["value"], c["value"], kind) for c in cells[1:]],
            "verdicts": [verdict(base, c) for c in cells[1:]]}


def result_rows(reports: list[dict]) -> list[dict]:
    rows = []
    for key, label, kind, path, wpath, spath in RESULT_ROWS:
        cells = [{"value": lookup(r, path), "windows": lookup(r, wpath), "spread": _spread(r, spath),
                  "spread_kind": "range" if spath and spath.startswith("kv_offload") else "IQR", "path": path}
                 for r in reports]
        if all(c["value"] is None for c in cells):
            continue
        rows.append(_row(key, label, kind, cells))
    return rows


def by_running_rows(reports: list[dict]) -> list[dict]:
    """Generation throughput at each number of running requests (1 and up; a window with none running
    still reports what finished in it, which is no concurrency to compare)."""
    counts = sorted({b["running"] for r in reports for b in r["throughput"].get("by_running", []) if b["running"] >= 1})
    rows = []
    for n in counts:
        cells = []
        for r in reports:
            b = next((b for b in r["throughput"].get("by_running", []) if b["running"] == n), None)
            cells.append({"value": b["median"] if b else None, "windows": b["windows"] if b else 0,
                          "spread": b["iqr"] if b else None, "spread_kind": "IQR"})
        rows.append(_row(f"running_{n}", f"Running: {n}", "tok/s", cells))
    return rows


def event_rows(reports: list[dict]) -> list[dict]:
    """HTTP responses by status, errors by kind, deaths, stops, starts, stalls: counts, compared as such."""
    def count_row(key, label, values, kind="count"):
        cells = [{"value": v, "windows": None, "spread": None, "spread_kind": None} for v in values]
        return _row(key, label, kind, cells)

    rows = [count_row("http_responses", "HTTP responses", [r["http"]["responses"] for r in reports]),
            count_row("http_share_200", "HTTP 200 share", [r["http"]["share_200"] for r in reports], "ratio")]
    codes = sorted({int(c) for r in reports for c in r["http"]["by_status"]})
    for code in codes:
        rows.append(count_row(f"http_{code}", f"HTTP {code}",
                              [lookup(r, f"http.by_status.{code}") or 0 for r in reports]))
    rows.append(count_row("starts", "Server starts", [r["range"]["starts"] for r in reports]))
    rows.append(count_row("stops", "Stops asked for", [r["range"].get("stops", 0) for r in reports]))
    rows.append(count_row("deaths", "Engine deaths", [r["errors"]["engine_dead"]["count"] for r in reports]))
    for kind in reports[0]["errors"]:
        if kind != "engine_dead":
            rows.append(count_row(f"errors_{kind}", f"Errors: {kind.replace('_', ' ')}",
                                  [r["errors"].get(kind, {}).get("count", 0) for r in reports]))
    rows.append(count_row("stalls", "Stalled engines", [len(r.get("stalls", [])) for r in reports]))
    return rows


def compare(runs: list[dict]) -> dict:
    """``runs``: [{"label", "source", "since", "until", "report": RunStats.summary()}, ...] -> the comparison."""
    reports = [r["report"] for r in runs]
    out_runs = []
    for r in runs:
        rng = r["report"]["range"]
        dur = rng["last"] - rng["first"] if rng["first"] is not None and rng["last"] is not None else None
        out_runs.append({"label": r["label"], "source": r["source"], "since": r.get("since"), "until": r.get("until"),
                         "first": rng["first"], "last": rng["last"], "seconds": dur, "report": r["report"]})
    return {"runs": out_runs, "baseline": runs[0]["label"], "config": config_rows(reports),
            "results": result_rows(reports), "by_running": by_running_rows(reports), "events": event_rows(reports)}


# -- Markdown ----------------------------------------------------------------------------------

def fmt(v, kind: str) -> str:
    if v is None:
        return "–"
    if isinstance(v, bool) or kind == "text":
        return str(v)  # (escaped by render_markdown's markdown_safe)
    if kind == "int":
        return f"{v:,}"
    if kind == "count":
        return f"{v:,}"
    if kind == "float":
        return f"{v:g}"
    if kind == "x":
        return f"{v:.2f}x"
    if kind == "bytes":
        return "none" if v == 0 else _gib(v)
    if kind == "seconds":
        return f"{v:.2f} s"
    if kind == "ratio":
        return f"{v * 100:.1f}%"
    if kind == "num":
        return f"{v:.2f}"
    if kind == "price":
        return f"{v:,.4g}"
    return f"{v:,.1f} {kind}" if kind in ("tok/s",) else f"{v:,.2f} {kind}"


def _cell(c: dict, kind: str) -> str:
    s = fmt(c["value"], kind)
    if c["value"] is not None and c.get("spread"):
        lo, hi = c["spread"]
        f = (lambda v: f"{v * 100:.1f}%") if kind == "ratio" else (lambda v: f"{v:,.1f}" if kind == "tok/s" else f"{v:,.2f}")
        s += f" ({f(lo)}-{f(hi)})"
    return s


def _fmt_diff(d: dict | None, kind: str) -> str:
    if d is None:
        return "–"
    if kind == "ratio":
        return f"{d['points']:+.1f} pp"
    if kind == "count":
        out = f"{d['abs']:+,}"
    elif kind == "num":
        out = f"{d['abs']:+.2f}"
    else:
        out = f"{d['abs']:+,.1f}" if kind == "tok/s" else f"{d['abs']:+,.2f}"
    return out + (f" ({d['rel'] * 100:+.1f}%)" if d["rel"] is not None and d["abs"] else "")


def _results_table(rows: list[dict], labels: list[str], with_windows: bool = True) -> list[str]:
    others = labels[1:]
    head = ["Figure", *labels, *[f"{o} − {labels[0]}" for o in others]]
    if with_windows:
        head.append("Windows (KV: intervals)")
    head.append("Verdict")
    out = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for row in rows:
        cells = [row["label"], *[_cell(c, row["kind"]) for c in row["cells"]],
                 *[_fmt_diff(d, row["kind"]) for d in row["diffs"]]]
        if with_windows:
            cells.append(" / ".join("–" if c["windows"] is None else f"{c['windows']:,}" for c in row["cells"]))
        vs = row["verdicts"]
        cells.append("; ".join(f"{o}: {v}" for o, v in zip(others, vs) if v) if len(others) > 1
                     else (vs[0] or ""))
        out.append("| " + " | ".join(cells) + " |")
    return out


def cost_verdict(row: dict, labels: list[str]) -> list[str]:
    """Each later run's price per generated token against the first, in a sentence, with the verdict."""
    out = []
    base = row["cells"][0]["value"]
    for label, c, v in zip(labels[1:], row["cells"][1:], row["verdicts"]):
        if base is None or c["value"] is None or not base:
            continue
        rel = (c["value"] - base) / base
        how = "the same" if abs(rel) < 0.005 else f"{abs(rel) * 100:.0f} % {'less' if rel < 0 else 'more'}"
        said = {"inside spread": "within the spread (may be noise)", "outside spread": "outside the spread (a change)",
                "too few windows": "too few windows to tell", "same": "the same"}.get(v, "no spread to judge by")
        out.append(f"- {label} costs {how} per generated token than {labels[0]} while busy, {said}.")
    return out + ([""] if out else [])


def render_markdown(cmp: dict, tz=None) -> str:
    cmp = markdown_safe(cmp)  # the log's text as text, never markup (exporter.framing.text)
    runs = cmp["runs"]
    labels = [r["label"] for r in runs]
    parts = [f"# vLLM runs compared: {', '.join(labels)}", ""]
    parts += ["| Run | Log | From | To | Duration | Starts |", "|---|---|---|---|---|---|"]
    for r in runs:
        dur = "–" if r["seconds"] is None else f"{r['seconds'] / 60:,.1f} min"
        parts.append(f"| {r['label']} | {r['source']} | {_time(r['first'], tz)} | {_time(r['last'], tz)} | {dur} | "
                     f"{r['report']['range']['starts']} |")
    parts += ["", f"Differences are against the first run, {labels[0]}. A figure with a spread shows it in brackets "
                  f"(Tukey hinges of its windows; for KV copy rates, the observed range): 'inside spread' when the "
                  f"two runs' spreads overlap (the difference may be noise), 'outside spread' when they do not; "
                  f"fewer than {MIN_WINDOWS} windows on either side is 'too few windows'.", ""]

    parts += ["## Configuration", "", "≠: the runs logged different values; ?: some runs did not log it.", ""]
    head = ["", "Setting", *labels]
    parts += ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for row in cmp["config"]:
        if row["status"] == "unknown":
            continue
        mark = {"differs": "≠", "partly unknown": "?"}.get(row["status"], "")
        parts.append("| " + " | ".join([mark, row["label"], *[fmt(v, row["kind"]) for v in row["values"]]]) + " |")
    parts.append("")

    keys = [k for k, *_ in RESULT_ROWS]
    spec = tuple(k for k in keys if "accept" in k)
    offload = tuple(k for k in keys if k.startswith(("kv_store", "kv_load", "cpu_", "lmcache")))
    cost = tuple(k for k in keys if k.startswith("cost_"))
    sections = (("Throughput", tuple(k for k in keys if k not in spec and k not in offload and k not in cost)),
                ("Speculative decoding", spec), ("KV offload", offload))
    by_key = {r["key"]: r for r in cmp["results"]}
    for title, keys in sections:
        rows = [by_key[k] for k in keys if k in by_key]
        parts += [f"## {title}", ""]
        if title == "Throughput":
            parts += ["Tok/s per stats window; windows: the stats windows each figure rests on.", ""]
        if rows:
            parts += _results_table(rows, labels) + [""]
        else:
            parts += [f"No run logged {title.lower()} figures.", ""]
        if title == "Throughput":
            parts += ["## Like with like: generation throughput at the same number of running requests", ""]
            if cmp["by_running"]:
                parts += ["Median tok/s (IQR) of the windows with exactly that many requests running.", ""]
                parts += _results_table(cmp["by_running"], labels) + [""]
            else:
                parts += ["No window with a request running.", ""]

    rows = [by_key[k] for k in cost if k in by_key]
    if rows:  # only with --price-per-hour
        parts += ["## Cost", "", "At the price per hour given for each run (`--price-per-hour`, in your currency): "
                  "the run's price per million tokens, and each busy window's (its hour's price over its hour's "
                  "tokens) with their spread.", ""]
        if "cost_busy_per_million_generated" in by_key:
            parts += cost_verdict(by_key["cost_busy_per_million_generated"], labels)
        parts += _results_table(rows, labels) + [""]
    parts += ["## HTTP, errors, deaths and stops", ""]
    parts += _results_table(cmp["events"], labels, with_windows=False) + [""]
    return "\n".join(parts)
