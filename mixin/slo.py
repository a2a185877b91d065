"""Service levels on vLLM's own /metrics: recording rules for the SLIs and burn-rate alerts.

Each SLO of ``config.SLOS`` becomes one rule group: its SLI as the share of bad events,
``slo:sli_error:ratio_rate<window>{slo="<name>"}``, summed over ``config.SLO_BY`` (every engine and
API server of a server in one), for every window an alert reads and for ``SLO_WINDOW`` (the error
budget); then two multi-window, multi-burn-rate alerts under one name (SRE workbook, "Alerting on
SLOs"): the fast burn pages (critical), the slow burn is a ticket (warning). A latency SLO also gets
VllmSloThresholdNotABucket, for a server whose histogram lacks the threshold's bucket.

A latency SLI is read from vLLM's histogram: bad = all observations less those in the bucket
``le=<threshold>``. The error SLI prefers the exporter's access-log counts (every 5xx the API server
answered, a dead engine's included) and falls back, per server, to vLLM's own finished requests.
With no traffic in a window the SLI has no value (0 / 0), so nothing fires on an idle server.
"""

from __future__ import annotations

import re

from mixin import config as C
from mixin.slo_buckets import LATENCY_SLIS

BY = ", ".join(C.SLO_BY)
V = C.VLLM_SELECTOR
RECORD = "slo:sli_error:ratio_rate{}"
BOARD_UID = "vllm-log-slo"

# alert name and what is measured, per SLO
ALERTS = {
    "time_to_first_token": "VllmTimeToFirstTokenBudgetBurn",
    "inter_token_latency": "VllmInterTokenLatencyBudgetBurn",
    "queue_time": "VllmQueueTimeBudgetBurn",
    "request_latency": "VllmRequestLatencyBudgetBurn",
    "errors": "VllmErrorBudgetBurn",
}
TITLES = {
    "time_to_first_token": "Time to first token",
    "inter_token_latency": "Inter-token latency",
    "queue_time": "Queue time",
    "request_latency": "Request latency (end to end)",
    "errors": "Errors",
}
# what in the log usually explains a burn (the runbook's sections say where to look)
CAUSES = {
    "time_to_first_token": "the KV cache full with requests waiting, preemptions, long prompts, a restart",
    "inter_token_latency": "preemptions, long prompts' prefill in the same batches, kernels compiled while serving, "
                           "draft acceptance collapsing",
    "queue_time": "the KV cache full, more requests than --max-num-seqs, a stalled engine",
    "request_latency": "those of the time to first token and the inter-token latency, or longer outputs",
    "errors": "a dead or stalled engine, an OOM, a restart loop, KV loads that failed",
}
BUCKET_ALERT = "VllmSloThresholdNotABucket"
_UNITS = {"m": 60, "h": 3600, "d": 86400, "w": 604800}


def seconds(window: str) -> int:
    m = re.fullmatch(r"(\d+)([mhdw])", window)
    if not m:
        raise ValueError(f"window {window!r}: use a number and one of m, h, d, w")
    return int(m.group(1)) * _UNITS[m.group(2)]


def windows() -> list[str]:
    """Every window a rule reads, shortest first, the SLO window last."""
    ws = {w for long, short, _ in C.SLO_FAST_BURN + C.SLO_SLOW_BURN for w in (long, short)}
    return sorted(ws, key=seconds) + [C.SLO_WINDOW]


def burn_rate(long: str, budget_share: float) -> float:
    """How many times the sustainable rate spends ``budget_share`` of the budget within ``long``:
    14.4 for 2 % in 1 h of a 30-day window."""
    return budget_share * seconds(C.SLO_WINDOW) / seconds(long)


def _num(x: float) -> str:
    return f"{x:.6g}"


def le_matcher(threshold: float) -> str:
    """The bucket's `le` as vLLM's client writes it (1.0) and as Prometheus 3 normalises it (1)."""
    text = repr(float(threshold))
    if text.endswith(".0"):
        return f'le=~"{text[:-2]}(\\\\.0)?"'
    return f'le="{text}"'


def _sum(expr: str) -> str:
    return f"sum by ({BY}) ({expr})"


def _rate(selector: str, window: str, fn: str = "rate") -> str:
    return _sum(f"{fn}({selector}[{window}])")


def _http(extra: str = "") -> str:
    return f'vllm_log_http_requests_total{{endpoint=~"{C.SLO_HTTP_ENDPOINTS}"{extra}}}'


def _finished(extra: str) -> str:
    return f"vllm:request_success_total{{{V}, {extra}}}"


def bad_ratio(name: str, w: str) -> str:
    """The SLI: the share of bad events in window ``w``, per server."""
    if name in LATENCY_SLIS:
        histogram = LATENCY_SLIS[name][0]
        good = _rate(f"{histogram}_bucket{{{V}, {le_matcher(C.SLOS[name]['threshold_seconds'])}}}", w)
        return f"1 - {good}\n  / {_rate(f'{histogram}_count{{{V}}}', w)}"
    # errors: each source misses failures the other sees (the access log a stream that failed after
    # its 200 header, vLLM the requests that never reached its engine, a dead engine's 500s among
    # them), and both see most: the larger of the two counts, over the requests of the access log
    # where the exporter reads it, else over those vLLM finished
    log_total, log_bad = _rate(_http(), w), _rate(_http(', status=~"5.."'), w)
    failed = _rate(_finished('finished_reason="error"'), w)
    every = _rate(f"vllm:request_success_total{{{V}}}", w)
    refused = f"({_rate(f'vllm:admission_rejections_total{{{V}}}', w)} or 0 * {every})"
    finished = _rate(_finished('finished_reason!="abort"'), w)
    return (f"max by ({BY}) (\n"
            f"  label_replace({log_bad} or 0 * {log_total}, \"source\", \"log\", \"\", \"\")\n"
            f"  or label_replace({failed} + {refused}, \"source\", \"vllm\", \"\", \"\")\n)\n"
            f"/ ({log_total}\n   or {finished} + {refused})")


def requests(name: str, w: str) -> str:
    """Requests in window ``w`` per server: the alerts' minimum traffic."""
    if name == "errors":
        finished = _rate(_finished('finished_reason!="abort"'), w, "increase")
        return f"({_rate(_http(), w, 'increase')}\n     or {finished})"
    # inter-token gaps are not requests: count the requests that finished
    histogram = LATENCY_SLIS[name][0] if name != "inter_token_latency" else "vllm:e2e_request_latency_seconds"
    return _rate(f"{histogram}_count{{{V}}}", w, "increase")


def _threshold_text(name: str) -> str:
    return f"{C.SLOS[name]['threshold_seconds']:g} s"


def events(name: str) -> str:
    return LATENCY_SLIS[name][2] if name in LATENCY_SLIS else "requests"


def bad_words(name: str) -> str:
    """What a bad event is, in a sentence."""
    if name == "time_to_first_token":
        return f"requests whose first token came after more than {_threshold_text(name)}"
    if name == "inter_token_latency":
        return f"gaps between two streamed tokens longer than {_threshold_text(name)}"
    if name == "queue_time":
        return f"requests that waited more than {_threshold_text(name)} in the queue"
    if name == "request_latency":
        return f"requests that took more than {_threshold_text(name)} from arrival to their last token"
    return ("requests that failed: answered with a 5xx in the access log, or ended with an error or refused by vLLM "
            "(its own counters), whichever counts more")


def _pct(x: float) -> str:
    return f"{x * 100:.6g}%"


def _alert(name: str, speed: str, conditions: list[tuple[str, str, float]]) -> dict:
    objective = C.SLOS[name]["objective"]
    budget = 1 - objective
    branches = []
    for long, short, share in conditions:
        limit = _num(burn_rate(long, share) * budget)
        branches.append(
            f"(\n  {RECORD.format(long)}{{slo=\"{name}\"}} > {limit}\n"
            f"  and {RECORD.format(short)}{{slo=\"{name}\"}} > {limit}\n"
            f"  and on ({BY}) {requests(name, long)} >= {C.SLO_MIN_REQUESTS}\n)")
    burns = "; or ".join(
        f"{_num(burn_rate(long, share))}x over {long} and {short} ({share:.0%} of the budget in {long})"
        for long, short, share in conditions)
    lasts = seconds(C.SLO_WINDOW) / burn_rate(conditions[0][0], conditions[0][2]) / 86400
    return {
        "alert": ALERTS[name],
        "expr": "\n or\n".join(branches),
        "labels": {"severity": "critical" if speed == "fast" else "warning", "slo": name},
        "annotations": {
            "summary": f"{TITLES[name]} on {{{{ $labels.server }}}}: error budget burning {speed} "
                       f"({{{{ $value | humanizePercentage }}}} bad)",
            "description": f"Objective: {_pct(objective)} of {events(name)} good over {C.SLO_WINDOW}; bad are "
                           f"{bad_words(name)}. On {{{{ $labels.server }}}} they came faster than the objective "
                           f"allows: {burns}. At {_num(burn_rate(conditions[0][0], conditions[0][2]))}x the whole "
                           f"{C.SLO_WINDOW} budget is gone in {lasts:.3g} days. What the log says of the same minutes "
                           f"is on the Service levels board; the usual causes: {CAUSES[name]}.",
        },
    }


def _bucket_alert(name: str) -> dict:
    histogram, family, _ = LATENCY_SLIS[name]
    t = C.SLOS[name]["threshold_seconds"]
    return {
        "alert": BUCKET_ALERT,
        "expr": f"{_rate(f'{histogram}_count{{{V}}}', '1h')} > 0\n"
                f"  unless on ({BY}) group by ({BY}) ({histogram}_bucket{{{V}, {le_matcher(t)}}})",
        "for": "15m",
        "labels": {"severity": "warning", "slo": name},
        "annotations": {
            "summary": f"{{{{ $labels.server }}}} has no {t:g} s bucket in {histogram}: its {TITLES[name].lower()} "
                       f"SLO has no data",
            "description": f"vLLM on {{{{ $labels.server }}}} serves requests, but its {histogram} histogram has no "
                           f"bucket with the upper bound {t:g} s, the SLO's threshold, so the SLI cannot be read "
                           f"and {ALERTS[name]} can never fire. vLLM 0.29-0.34 have it by default; the server "
                           f"was started with --custom-histogram-buckets replacing the {family!r} family. Add "
                           f"{t:g} to that list, or set threshold_seconds in mixin/config.py to one of its bounds.",
        },
    }


def groups() -> list[dict]:
    """One rule group per SLO: its recording rules, then its alerts (a group evaluates in order)."""
    out = []
    for name in C.SLOS:
        if name not in ALERTS:
            raise ValueError(f"mixin/config.py: SLOS[{name!r}]: unknown SLO (known: {', '.join(ALERTS)})")
        rules: list[dict] = [{"record": RECORD.format(w), "expr": bad_ratio(name, w), "labels": {"slo": name}}
                             for w in windows()]
        rules.append(_alert(name, "fast", C.SLO_FAST_BURN))
        rules.append(_alert(name, "slow", C.SLO_SLOW_BURN))
        if name in LATENCY_SLIS:
            rules.append(_bucket_alert(name))
        out.append({"name": f"vllm-slo-{name.replace('_', '-')}", "rules": rules})
    return out


def alert_names() -> set[str]:
    return {ALERTS[name] for name in C.SLOS} | ({BUCKET_ALERT} if set(C.SLOS) & set(LATENCY_SLIS) else set())
