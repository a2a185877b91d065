"""The Service levels board: each SLI of mixin/slo.py against its objective, its burn rate and the
error budget left, beside what the log says about the same minutes.

The SLIs come from the recording rules (``slo:sli_error:ratio_rate<window>``), so the board shows
exactly what the alerts read. Besides every board's annotations (starts, restarts, stops, errors),
this one marks the log's facts that explain a burn: preemptions, a stalled engine, the KV cache
full while requests wait, draft acceptance collapsing.
"""

from __future__ import annotations

from mixin import config as C
from mixin import slo
from mixin.dashboards import BAD, GOOD, NEUTRAL, SE, S, WARN, Board, _annotation, _first_token_acceptance

# the recorded SLIs carry only config.SLO_BY's labels (no job, no instance)
R = 'cluster=~"$cluster", host=~"$host", server=~"$server"'
# vLLM's own series: its scrape job is the vllm_job variable
V = 'cluster=~"$cluster", job=~"$vllm_job", host=~"$host", server=~"$server"'
NATIVE = "no data: vLLM's own metrics are not scraped (the vLLM job variable finds none), or no traffic in the window"


def _sli(name: str, window: str) -> str:
    return f'{slo.RECORD.format(window)}{{{R}, slo="{name}"}}'


def _annotations() -> list[dict]:
    return [
        _annotation("Preemptions", f"sum by (server) (increase(vllm_log_preemptions_total{{{SE}}}[$__interval])) > 0",
                    "orange", "requests preempted (KV cache ran out)"),
        _annotation("Engine stalled", f"max by (server) (vllm_log_engine_stalled{{{SE}}}) == 1", "dark-red",
                    "engine stalled while busy"),
        _annotation("KV cache full, requests waiting",
                    f"max by (server) (vllm_log_kv_cache_usage_ratio{{{SE}}}) > {C.KV_CACHE_FULL_RATIO:g}\n"
                    f"  and on (server) max by (server) (vllm_log_requests_waiting{{{SE}}}) > 0",
                    "purple", "KV cache full with requests waiting"),
        _annotation("Draft acceptance collapsed",
                    f"{_first_token_acceptance(SE, '$__rate_interval')} < {C.DRAFT_ACCEPTANCE_MIN:g}",
                    "yellow", "first drafted token rarely accepted"),
    ]


def _objective_row(b: Board, name: str) -> None:
    objective = C.SLOS[name]["objective"]
    budget = 1 - objective
    fast = max(slo.burn_rate(long, share) for long, _, share in C.SLO_FAST_BURN)
    slow = min(slo.burn_rate(long, share) for long, _, share in C.SLO_SLOW_BURN)
    title = slo.TITLES[name]
    b.row(f"{title}: {objective:.4g} of {slo.events(name)} good over {C.SLO_WINDOW}")
    b.timeseries(f"{title}: good share against the objective", [
        (f"1 - {_sli(name, '5m')}", "5m {{server}}"),
        (f"1 - {_sli(name, '1h')}", "1h {{server}}"),
    ], "percentunit", max_=1, w=10, steps=[(None, BAD), (objective, GOOD)], line=True,
        description=f"The share of {slo.events(name)} that were good, over the last 5 minutes and the last hour "
                    f"(bad: {slo.bad_words(name)}). The dashed line is the objective, {objective:.4g}. From vLLM's own "
                    f"/metrics through the recording rules slo:sli_error:ratio_rate5m and 1h; empty while the "
                    f"server has no traffic.")
    b.panels[-1]["fieldConfig"]["defaults"]["noValue"] = NATIVE
    b.timeseries(f"{title}: burn rate", [
        (f"{_sli(name, '1h')} / {budget:.6g}", "1h {{server}}"),
        (f"{_sli(name, '6h')} / {budget:.6g}", "6h {{server}}"),
        (f"{_sli(name, '1d')} / {budget:.6g}", "1d {{server}}"),
    ], "x", min_=0, w=10, steps=[(None, GOOD), (slow, WARN), (fast, BAD)], line=True,
        description=f"How many times faster than the objective allows the error budget is being spent (1: exactly "
                    f"used up at the end of {C.SLO_WINDOW}). {slo.ALERTS[name]} pages at {fast:.3g}x over 1h (and "
                    f"5m) and opens a ticket at {slow:.3g}x over 3d (and 6h); see the runbook.")
    b.stat(f"{title}: error budget left ({C.SLO_WINDOW})", [
        (f"1 - {_sli(name, C.SLO_WINDOW)} / {budget:.6g}", "{{server}}")], "percentunit", w=4, h=8,
        steps=[(None, BAD), (0, WARN), (0.25, GOOD)], decimals=1,
        description=f"The share of the {C.SLO_WINDOW} error budget ({1 - objective:.4g} of {slo.events(name)}) "
                    f"not yet spent; below 0 the objective is missed for the window.")
    b.panels[-1]["fieldConfig"]["defaults"]["noValue"] = NATIVE


def slo_board() -> dict:
    b = Board(slo.BOARD_UID, "vLLM / Service levels",
              "Latency and error objectives on vLLM's own histograms and the access log, their burn rates and "
              "error budgets, beside the log's facts that explain a burn (mixin/config.py SLOS).",
              ["vllm-log-exporter", "vllm"])
    for name in C.SLOS:
        _objective_row(b, name)
    b.row("Traffic, and what the log says about the same minutes")
    b.timeseries("Requests", [
        (f"sum by (server) (rate(vllm:e2e_request_latency_seconds_count{{{V}}}[$__rate_interval]))",
         "finished (vLLM) {{server}}"),
        (f'sum by (server) (rate(vllm_log_http_requests_total{{{S}, endpoint=~"{C.SLO_HTTP_ENDPOINTS}"}}'
         f"[$__rate_interval]))", "answered (access log) {{server}}"),
    ], "reqps", min_=0, w=8,
        description="The traffic the SLIs are taken over: requests vLLM finished (its own /metrics) and requests "
                    "to the inference endpoints in the access log. Without traffic the SLIs have no value, and no "
                    "alert fires.")
    b.timeseries("KV cache usage (the fullest engine)", [
        (f"max by (server) (vllm_log_kv_cache_usage_ratio{{{SE}}})", "KV cache {{server}}"),
    ], "percentunit", min_=0, max_=1, w=8, steps=[(None, GOOD), (C.KV_CACHE_FULL_RATIO, BAD)], line=True,
        description=f"From the log's stats windows: the fullest engine's KV cache. Above the dashed line "
                    f"({C.KV_CACHE_FULL_RATIO:.0%}) with requests waiting, requests queue and get preempted: the "
                    f"usual cause of a time-to-first-token or queue-time burn.")
    b.timeseries("Requests waiting and preemptions", [
        (f"sum by (server) (vllm_log_requests_waiting{{{SE}}})", "waiting {{server}}"),
        (f"sum by (server) (increase(vllm_log_preemptions_total{{{SE}}}[$__rate_interval]))", "preempted {{server}}"),
    ], "short", min_=0, w=8, decimals=0,
        description="From the log: requests in the queue at each stats window, and requests preempted (their KV "
                    "cache freed, to be computed again), which lengthens both their first token and their "
                    "inter-token gaps.")
    b.timeseries("Engines stalled, deaths and restarts", [
        (f"sum by (server) (vllm_log_engine_stalled{{{SE}}})", "stalled {{server}}"),
        (f'sum by (server) (increase(vllm_log_errors_total{{{S}, kind="engine_dead"}}[$__rate_interval]))',
         "died {{server}}"),
        (f"sum by (server) (increase(vllm_log_server_starts_total{{{S}}}[$__rate_interval]))", "started {{server}}"),
    ], "short", min_=0, w=8, decimals=0, custom={"drawStyle": "bars", "fillOpacity": 70},
        description="From the log: engines that stopped logging while busy, engine deaths and server starts. "
                    "Requests fail (5xx) or wait through each: an error or latency burn that begins here is "
                    "explained by it (VllmEngineStalled, VllmEngineDead, VllmRestartLoop).")
    b.timeseries("First drafted token accepted", [
        (_first_token_acceptance(SE, "$__rate_interval"), "{{server}}"),
    ], "percentunit", min_=0, max_=1, w=8, steps=[(None, BAD), (C.DRAFT_ACCEPTANCE_MIN, GOOD)], line=True,
        description=f"From the log's spec-decode lines: how often the first drafted token is accepted. Below the "
                    f"dashed line ({C.DRAFT_ACCEPTANCE_MIN:.0%}, VllmDraftAcceptanceCollapsed) speculative decoding "
                    f"costs time instead of saving it, and inter-token latency rises. Empty without speculative "
                    f"decoding.")
    b.timeseries("vLLM's own: time to first token and inter-token latency (p99)", [
        (f"histogram_quantile(0.99, sum by (server, le) (rate(vllm:time_to_first_token_seconds_bucket{{{V}}}"
         f"[$__rate_interval])))", "TTFT {{server}}"),
        (f"histogram_quantile(0.99, sum by (server, le) (rate(vllm:inter_token_latency_seconds_bucket{{{V}}}"
         f"[$__rate_interval])))", "ITL {{server}}"),
    ], "s", min_=0, w=8,
        description="The 99th percentiles from vLLM's histograms, interpolated inside a bucket (the SLIs above are "
                    "exact: they count the requests at or under a bucket bound).")
    b.panels[-1]["fieldConfig"]["defaults"]["noValue"] = NATIVE
    m = b.model()
    m["annotations"]["list"] += _annotations()
    return m


DASHBOARDS = {"slo.json": slo_board}
