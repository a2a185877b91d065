"""The run summary as Markdown tables, in the order and units of the seed article's Results."""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Any

from exporter.framing.text import markdown_cell, markdown_safe
from exporter.offline.report import cost as cost_section
from exporter.offline.report import engine_ops as engine_ops_section
from exporter.offline.report import rules as rule_sections

GIB = 2**30


def _n(v, fmt="{:,.1f}", none="–") -> str:
    return none if v is None else fmt.format(v)


def _pct(v) -> str:
    return "–" if v is None else f"{v * 100:.1f}%"


def _gib(v) -> str:
    return "–" if v is None else f"{v / GIB:.2f} GiB"


def _time(ts, tz) -> str:
    if ts is None:
        return "–"
    return datetime.fromtimestamp(ts, tz=tz or timezone.utc).strftime("%Y-%m-%d %H:%M:%S %Z").strip()


def _table(rows: list[tuple[str, ...]], head=("Item", "Value")) -> str:
    out = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    out += ["| " + " | ".join(row) + " |" for row in rows]
    return "\n".join(out)


def startup_failure_line(sf: dict, config: dict, tz) -> str:
    """What failed at start-up, with the arithmetic a user needs to fix it."""
    when = _time(sf.get("ts"), tz)
    reason = sf.get("reason")
    # (each key the sentence uses: a number past exporter.parsers._values.LIMIT is left out of its event)
    if reason == "kv_cache_too_small" and all(k in sf for k in ("needed_bytes", "available_bytes", "max_model_len")):
        line = (f"Start-up failed at {when}: one request of max_model_len {sf['max_model_len']:,} tokens needs "
                f"{_gib(sf['needed_bytes'])} of KV cache, the KV cache holds {_gib(sf['available_bytes'])}.")
        if sf.get("estimated_max_model_len"):
            line += f" It would fit with --max-model-len {sf['estimated_max_model_len']:,} (vLLM's estimate)"
        util = config.get("gpu_memory_utilization")
        total = max((w.get("total_bytes") or 0 for w in config.get("workers", {}).values()), default=0)
        if isinstance(util, (int, float)) and total:
            need = util + (sf["needed_bytes"] - sf["available_bytes"]) / total
            line += (f", or with --gpu-memory-utilization {need:.3f} (now {util:g}; "
                     f"{_gib(sf['needed_bytes'] - sf['available_bytes'])} more of {_gib(total)} per GPU)" if need < 1
                     else f"; raising --gpu-memory-utilization cannot make room ({need:.2f} of the GPU would be needed)")
        return line + "."
    if reason == "kv_cache_too_small" and "kv_cache_tokens" in sf and "max_model_len" in sf:
        return (f"Start-up failed at {when}: max_model_len {sf['max_model_len']:,} tokens is more than the KV cache "
                f"holds ({sf['kv_cache_tokens']:,} tokens): set --max-model-len {sf['kv_cache_tokens']:,} or less, or "
                f"raise --gpu-memory-utilization.")
    said = f" (`{sf['message']}`)" if sf.get("message") else ""
    words = {"kv_cache_too_small": "the KV cache cannot hold one request of the configured max_model_len: lower "
                                   "--max-model-len, or raise --gpu-memory-utilization",
             "no_kv_memory": "no memory is left for the KV cache blocks after the weights and activations: raise "
                             "--gpu-memory-utilization, or use a smaller or quantized model",
             "weights_oom": "the model's weights do not fit in GPU memory (a CUDA OOM while loading them): more "
                            "tensor parallelism, a quantized model, or a larger GPU",
             "bad_argument": f"an argument or model vLLM does not accept "
                             f"({sf.get('argument') or sf.get('architecture') or 'see the log'})",
             "model_not_found": f"the model could not be found{said}: vLLM found no such local directory and "
                                f"no such Hugging Face repository; check the path (mounted into the container?) "
                                f"or the repository id, and that the host may download it (HF_TOKEN, HF_HUB_OFFLINE)",
             "model_access": f"the model's repository refused the download{said}: it is gated or private; accept its "
                             f"licence on Hugging Face and give the server a token that may read it (HF_TOKEN)",
             "address_in_use": f"the port vLLM was to listen on is taken by another process{said}: stop that "
                               f"process (`ss -ltnp` names it), or give vLLM another --port",
             "other": "the engine core failed to initialise; the traceback before it has the root cause"}
    if reason == "other" and sf.get("cause"):
        return f"Start-up failed at {when}: the engine core failed to initialise. Root cause: `{sf['cause']}`."
    return f"Start-up failed at {when}: {words.get(reason, words['other'])}."


MAX_START_COLUMNS = 4  # a restart loop's hundred starts would make a table nobody reads


def _start_name(n: int, started, tz) -> str:
    return f"Start {n}, {_time(started, tz)}" if started is not None else f"Start {n} (before the log)"


def _config_rows(c: dict) -> list[tuple[str, str]]:
    return [
        ("vLLM version", c.get("version", "–")),
        ("Model", c.get("model", "–")),
        ("Tensor parallel", str(c.get("tensor_parallel_size", "–"))),
        ("Maximum sequences", str(c.get("max_num_seqs", "–"))),
        ("Configured context", _n(c.get("max_model_len") or c.get("max_seq_len"), "{:,}")
         + (f" (cut from {c['max_model_len_requested']:,} to fit the KV cache: longer requests get HTTP 400)"
            if c.get("max_model_len_requested") else "")),
        (f"{c.get('kv_cache_device', 'GPU')} KV capacity", _n(c.get("gpu_kv_cache_tokens"), "{:,} tokens")),
        ("Max-length request concurrency", _n(c.get("max_concurrency"), "{:.2f}x")),
        ("Engine init", _n(c.get("init_seconds"), "{:.2f} s") + (
            f" (compilation {c['compile_seconds']:.2f} s)" if c.get("compile_seconds") is not None else "")),
        ("CPU KV offload pool", _n(c.get("offload_pool_bytes"), "{:,.0f} bytes") if c.get("offload_pool_bytes") else "–"),
        ("Speculative decoding", _speculative(c.get("settings") or {})),
    ]


def _speculative(settings: dict) -> str:
    method, depth = settings.get("speculative_method"), settings.get("num_speculative_tokens")
    if method is None and depth is None:
        return "–"
    return ", ".join(p for p in (method, f"{depth} tokens per draft" if depth is not None else None) if p)


def config_at(s: dict[str, Any], ts) -> dict:
    """The configuration of the start that was running at ``ts`` (the last one when unknown)."""
    c = s.get("config", {})
    if ts is None:
        return c
    found = c
    for cfg in c.get("earlier", []) + [c]:
        if cfg.get("started") is None or cfg["started"] <= ts:
            found = cfg
    return found


def render(s: dict[str, Any], title: str = "vLLM run report", tz=None) -> str:
    # every string of the log's (a model name, an error's words, a rule's label) as text, never markup: a
    # "|" adds no column, "<img onerror>" is no HTML, a terminal escape is U+FFFD (exporter.framing.text)
    s, title = markdown_safe(s), markdown_cell(title)
    c, t, sd, kv, cap, http, err = (s["config"], s["throughput"], s["spec_decode"], s["kv_offload"],
                                     s["capacity"], s["http"], s["errors"])
    parts = [f"# {title}", ""]
    rng = s["range"]
    parts.append(f"From {_time(rng['first'], tz)} to {_time(rng['last'], tz)}; {rng['starts']} server start(s), "
                 f"{rng.get('stops', 0)} stop(s) asked for (not counted as errors).")
    parts.append("")

    parts += ["## Configuration", ""]
    configs = c.get("earlier", []) + [c]
    if len(configs) == 1:
        parts += [_table(_config_rows(c)), ""]
    else:
        # several starts: each one's own configuration in its column, never a mix or the last unsaid
        shown = configs[-MAX_START_COLUMNS:]
        first = len(configs) - len(shown) + 1
        said = f"the last {len(shown)} of them shown" if len(shown) < len(configs) else "each in its column"
        parts += [f"{len(configs)} starts logged a configuration, {said}; the last is the server as the log "
                  "leaves it. ≠ marks what differs between the starts shown.", ""]
        head = ("Item", *(_start_name(first + i, cfg.get("started"), tz) for i, cfg in enumerate(shown)))
        columns = [_config_rows(cfg) for cfg in shown]
        rows = []
        for i, (label, _) in enumerate(columns[-1]):
            values = [col[i][1] for col in columns]
            rows.append(("≠ " + label if len(set(values)) > 1 else label, *values))
        parts += [_table(rows, head), ""]
    if c.get("workers"):
        if len(configs) > 1:
            parts += [f"Memory per worker at the last start ({_time(c.get('started'), tz)}):", ""]
        parts += ["| Worker | Weights | KV cache | Peak activation | Non-torch | CUDA graph |", "|---|---|---|---|---|---|"]
        for name, w in c["workers"].items():
            parts.append(f"| {name} | {_gib(w.get('weights_bytes'))} | {_gib(w.get('kv_cache_bytes'))} | "
                         f"{_gib(w.get('peak_activation_bytes'))} | {_gib(w.get('non_torch_bytes'))} | "
                         f"{_gib(w.get('cuda_graph_bytes'))} |")
        parts.append("")

    parts += ["## Generation throughput", ""]
    iqr = t["single_request_iqr"]
    rows = [
        ("Stats windows", str(t["windows"])),
        ("Peak generation throughput", _n(t["generation_peak"], "{:,.1f} tok/s")),
        (f"Single-active-request median ({t['single_request_windows']} windows)", _n(t["single_request_median"], "{:,.1f} tok/s")),
        ("Single-active-request IQR (Tukey hinges)", f"{iqr[0]:,.1f}-{iqr[1]:,.1f} tok/s" if iqr else "–"),
        (f"Nonzero-window mean ({t['nonzero_windows']} windows)", _n(t["nonzero_mean"], "{:,.1f} tok/s")),
        ("Peak prompt throughput (computed tokens: not prefix-cache hits)", _n(t["prompt_peak"], "{:,.1f} tok/s")),
        (f"Peak {t.get('kv_cache_device', 'GPU')} KV usage", _pct(t["gpu_kv_usage_peak"])),
        ("Peak prefix cache hit rate", _pct(t["prefix_cache_hit_peak"])),
        ("Peak external prefix cache hit rate", _pct(t["external_prefix_cache_hit_peak"])),
    ]
    parts += [_table(rows, ("Metric", "Value")), ""]

    parts += ["## Speculative decoding", ""]
    if sd["windows"]:
        al, da, at = sd["acceptance_length"], sd["draft_acceptance"], sd["accepted_throughput"]
        rows = [
            ("Windows with spec-decode metrics", str(sd["windows"])),
            ("Speculative depth", ", ".join(map(str, sd["depths"])) or "–"),
            ("Acceptance length over the run (1 + accepted / drafts, vLLM's definition)", _n(sd.get("run_acceptance_length"), "{:.2f}")),
            ("Acceptance length per window: median / mean of windows / best", f"{_n(al['median'], '{:.2f}')} / {_n(al['mean'], '{:.2f}')} / {_n(al['best'], '{:.2f}')}"),
            ("Draft acceptance over the run (accepted / drafted tokens)", _pct(sd.get("run_draft_acceptance"))),
            ("Draft acceptance per window: median / mean of windows / best", f"{_pct(da['median'])} / {_pct(da['mean'])} / {_pct(da['best'])}"),
            ("Drafts / drafted tokens per draft", f"{sd.get('drafts', 0):,} / " + _n(sd.get("drafted_per_draft"), "{:.2f}")),
            ("Draft acceptance range", f"{_pct(da['worst'])}-{_pct(da['best'])}"),
            ("Accepted speculative throughput median / best", f"{_n(at['median'])} / {_n(at['best'])} tok/s"),
            ("Per-position acceptance (mean)", ", ".join(f"{p:.3f}" for p in sd["per_position_mean"]) or "–"),
            ("First drafted token accepted (drafts that proposed one)", _pct(sd.get("first_token_acceptance"))),
        ]
        if sd.get("drafts_by_length"):
            rows.append(("Drafts by draft length, in the windows that log it (tokens: drafts)",
                         ", ".join(f"{k}: {v:,}" for k, v in sd["drafts_by_length"].items())))
        parts += [_table(rows, ("Metric", "Value")), ""]
        if sd.get("calibration"):
            parts += ["DSpark's confidence calibration (all positions): a calibrated drafter is accepted about as "
                      "often as it is confident.", ""]
            parts += [_table([(b["confidence"], f"{b['drafted']:,}", f"{b['accepted']:,}", _pct(b["acceptance"]),
                               _pct(b["mean_confidence"])) for b in sd["calibration"] if b["drafted"]],
                             ("Confidence", "Drafted", "Accepted", "Acceptance", "Mean confidence")), ""]
    else:
        parts += ["No spec-decode metrics in this range.", ""]

    given = s.get("given_up")
    if given:
        parts += ["## Capacity given up, KV that did not arrive", "", "| What | Count |", "|---|---|"]
        parts += [f"| {what} | {n:,} |" for what, n in given.items()] + [""]
    rl, steps = s.get("request_log") or {}, s.get("steps") or {}
    if rl.get("why_empty") and not steps:
        parts += ["## Request log", "", f"Nothing counted: {rl['why_empty']}.", ""]
    elif rl or steps:
        parts += ["## Request log and engine steps", ""]
        titles = {"lora": "Requests by LoRA adapter", "finish_reason": "Responses by finish reason",
                  "aborts": "Aborts", "lora_events": "LoRA adapters (run time)"}
        for key, title in titles.items():
            if rl.get(key):
                parts += [f"| {title} | Count |", "|---|---|"] + [f"| {k} | {n:,} |" for k, n in rl[key].items()] + [""]
        if steps:
            parts += ["| Engine steps (batch) | Steps | Mean | Longest |", "|---|---|---|---|"]
            parts += [f"| {b} | {v['count']:,} | {v['mean_seconds'] * 1000:.2f} ms | {v['max_seconds'] * 1000:.2f} ms |"
                      for b, v in steps.items()] + [""]
    if s.get("engine_ops"):
        parts += engine_ops_section.markdown(s["engine_ops"], tz)
    if s.get("cost"):  # only with --price-per-hour
        parts += cost_section.markdown(s["cost"])
    parts += ["## KV offload", ""]
    if kv.get("store") or kv.get("load"):
        parts += ["| Direction | Weighted rate | Observed range | Largest interval | Intervals |", "|---|---|---|---|---|"]
        for d, label in (("store", "GPU to host RAM (store)"), ("load", "Host RAM to GPU (load)")):
            x = kv.get(d)
            if not x:
                parts.append(f"| {label} | – | – | – | 0 |")
                continue
            big = x["largest_interval"]
            parts.append(f"| {label} | {x['weighted_gb_per_s']:.2f} GB/s | {x['min_gb_per_s']:.2f}-{x['max_gb_per_s']:.2f} GB/s | "
                         f"{big['bytes']:,.0f} bytes in {big['ms']:.2f} ms | {x['intervals']} |")
        parts += ["", f"Peak CPU offload cache usage: {_pct(kv['cpu_cache_usage_peak'])}.", ""]
    elif not kv.get("lmcache"):
        parts += ["No KV offload transfers in this range.", ""]
    lm = kv.get("lmcache")
    if lm:
        parts += ["| LMCache | Moves | Tokens | Bytes | Rate (bytes / recorded time) |", "|---|---|---|---|---|"]
        for d, label in (("store", "Stored (GPU to LMCache)"), ("retrieve", "Retrieved (LMCache to GPU)")):
            x = lm[d]
            rate = f"{x['gb_per_s']:.2f} GB/s" if x["gb_per_s"] else "–"
            parts.append(f"| {label} | {x['moves']:,} | {x['tokens']:,} | {_gib(x['bytes'])} | {rate} |")
        if lm["requested_tokens"]:
            parts += ["", f"LMCache hit {lm['hit_tokens']:,} of {lm['requested_tokens']:,} looked-up prompt tokens "
                          f"({_pct(lm['hit_ratio'])})."]
        parts.append("")

    parts += ["## Capacity", ""]
    if cap.get("gpu_kv_tokens"):
        # where the main KV cache lives, as the log words it (a CPU build's is host memory, not a GPU's)
        device = s.get("config", {}).get("kv_cache_device") or s.get("throughput", {}).get("kv_cache_device") or "GPU"
        rows = [
            (f"{device} KV tokens", f"{cap['gpu_kv_tokens']:,}"),
            ("KV memory across workers", _gib(cap.get("kv_cache_bytes_total"))),
            ("KV bytes per token", _n(cap.get("kv_bytes_per_token"), "{:,.0f}")),
            (f"Peak {device} KV usage in tokens", _n(cap.get("peak_kv_usage_tokens"), "{:,}")),
        ]
        pool = cap.get("offload_pool")
        if pool:
            rows.append(("CPU offload pool, token equivalents", f"{pool['token_equivalents']:,.0f}"))
            if pool.get("max_length_histories") is not None:
                rows.append(("CPU offload pool, max-length histories", f"{pool['max_length_histories']:.2f}"))
        parts += [_table(rows), "", "| Active sequences | Tokens per sequence |", "|---|---|"]
        parts += [f"| {b['sequences']} | {b['tokens_each']:,} |" for b in cap["sequence_budget"]]
        parts += ["", "Tokens per sequence are prompt plus generated output, capped at the configured context.", ""]
    else:
        parts += ["No KV capacity line in this range.", ""]

    parts += ["## HTTP", ""]
    if http["responses"]:
        parts += ["| Status | Responses |", "|---|---|"]
        parts += [f"| {code} | {n:,} |" for code, n in http["by_status"].items()]
        parts += ["", f"{http['responses']:,} responses, {_pct(http['share_200'])} HTTP 200.", "",
                  "| Method | Endpoint | Responses |", "|---|---|---|"]
        parts += [f"| {e['method']} | {e['path']} | {e['count']:,} |" for e in http["by_endpoint"][:20]]
        parts.append("")
    elif http.get("why_empty"):
        parts += [f"No HTTP responses counted: {http['why_empty']}.", ""]
    else:
        parts += ["No access-log lines in this range.", ""]

    parts += ["## Errors", "", "| Kind | Count | First seen | First message |", "|---|---|---|---|"]
    for kind, e in err.items():
        msg = e["first_message"] or ""
        parts.append(f"| {kind} | {e['count']} | {_time(e['first'], tz) if e['count'] else '–'} | {msg if e['count'] else ''} |")
    parts.append("")
    for st in s.get("stalls", []):
        parts += [f"Engine {st['engine']} stalled at {_time(st['ts'], tz)}: a busy stats window, then none for "
                  f"{st['silent_seconds']:,.0f} s with no start or death in between (hung, or died without a word).", ""]
    for sf in s.get("startup_failures", []):
        parts += [startup_failure_line(sf, config_at(s, sf.get("ts")), tz), ""]
    ooms = [o for o in s.get("ooms", []) if "tried_to_allocate_bytes" in o or "free_bytes" in o or "exceeded_bytes" in o]
    if ooms:
        parts += ["| OOM at | GPU | Asked for | Free | Total | In use by the process | Allocated by PyTorch | Reserved by PyTorch |",
                  "|---|---|---|---|---|---|---|---|"]
        for o in ooms:
            parts.append(f"| {_time(o['ts'], tz)} | {o.get('gpu', '–')} | {_gib(o.get('tried_to_allocate_bytes'))} | "
                         f"{_gib(o.get('free_bytes'))} | {_gib(o.get('total_capacity_bytes'))} | {_gib(o.get('in_use_bytes'))} | "
                         f"{_gib(o.get('allocated_bytes'))} | {_gib(o.get('reserved_bytes'))} |")
        o = ooms[-1]
        if "tried_to_allocate_bytes" in o and "free_bytes" in o:
            short = o["tried_to_allocate_bytes"] - o["free_bytes"]
            parts += ["", f"The last OOM asked for {_gib(o['tried_to_allocate_bytes'])} with {_gib(o['free_bytes'])} free: "
                          f"{_gib(max(0, short))} short on GPU {o.get('gpu', '?')}."]
        elif "exceeded_bytes" in o:  # XLA (TPU): what the compiled program needed beyond the device's memory
            parts += ["", f"The last OOM ({o.get('device', 'xla')}) needed {_gib(o.get('in_use_bytes'))} of "
                          f"{_gib(o.get('total_capacity_bytes'))}: {_gib(o['exceeded_bytes'])} over."]
        parts.append("")
    if s.get("rules"):
        parts += rule_sections.markdown(s["rules"], tz)
    return "\n".join(parts)
