"""Grafana dashboards for vllm-log-exporter, as plain JSON models built in Python.

Three boards: an overview, speculative decoding, and memory / KV. Each has template variables for
the datasource, ``job`` (the exporters' scrape job), ``host`` (the external label of each host's
Prometheus agent), ``instance`` (the exporter),
``server`` and ``engine`` (multi-select with "All"), stable uids, and on every panel a unit, a
description, thresholds that mean something (never Grafana's default green/red at 80) and, where an
alert watches the figure, the alert's threshold drawn as a line. Server starts, stops and each error
kind are annotations on every board, so a drop in throughput lines up with its cause. The datasource is
the ``${datasource}`` variable, never an import-time ``${DS_...}`` input (provisioning does not
resolve those). tests/test_mixin.py holds grafana/dashboard-linter's rules as a test.
"""

from __future__ import annotations

from mixin import config as C
from mixin.board import (BAD, GOOD, HTTP_COLOURS, NEUTRAL, J, S, SE, STATE_MAPPINGS, TOKS, UP_DOWN, WARN, Board,
                         _annotation, _http_ratio, _server_state)  # (_annotation: mixin.slo_board takes it from here)
from mixin.capacity_board import capacity_row
from mixin.cost import cost_row
from mixin.memory_board import memory_kv

def overview() -> dict:
    b = Board("vllm-log-overview", "vLLM / Overview",
              "Throughput, queue, KV cache, HTTP status and errors of vLLM servers, from their logs.",
              ["vllm-log-exporter", "vllm"])
    b.row("Health")
    b.stat("Exporter up", [(f"up{{{J}}}", "{{instance}}")], "none", mappings=UP_DOWN,
           steps=[(None, BAD), (1, GOOD)], description="Prometheus can scrape the exporter (the `up` series of its job).")
    b.stat("Log source up", [(f"vllm_log_exporter_source_up{{{S}}}", "{{server}}")], "none", mappings=UP_DOWN,
           steps=[(None, BAD), (1, GOOD)],
           description="The exporter has the server's log open (file, container, journal).")
    b.stat("Server state", [(_server_state(), "{{server}}")], "none", mappings=STATE_MAPPINGS,
           steps=[(None, NEUTRAL)], decimals=0,
           description="What the log last said of the server: starting (version banner), serving (ready or a stats "
                       "window), stopped (a stop that was asked for: SIGTERM, Ctrl-C, a deploy), dead (its engine "
                       "died) or failed (its start failed). Empty until the log says any of these.")
    b.stat("Last log line", [(f"time() - vllm_log_last_line_timestamp_seconds{{{S}}}", "{{server}}")], "s",
           steps=[(None, GOOD), (300, WARN), (C.LOG_STALE_MINUTES * 60, BAD)], decimals=0,
           description="Seconds since the exporter last read a line; red from the VllmLogStale alert's "
                       f"{C.LOG_STALE_MINUTES} minutes. An idle vLLM that nobody scrapes is quiet.")
    b.stat("Engines stalled", [(f"sum by (server) (vllm_log_engine_stalled{{{SE}}})", "{{server}}")], "none",
           steps=[(None, GOOD), (1, BAD)], decimals=0,
           description="Engines whose last stats window was busy and that logged none for 3 intervals since: hung "
                       "or died without a word (VllmEngineStalled).")
    b.stat("vLLM version", [(f"vllm_log_build_info{{{S}}}", "{{version}}")], "none",
           options={"reduceOptions": {"calcs": ["lastNotNull"], "fields": "", "values": False},
                    "textMode": "name", "colorMode": "none", "graphMode": "none"},
           description="The version in the last start-up banner of each server.")
    b.stat("Server starts", [(f"sum by (server) (round(increase(vllm_log_server_starts_total{{{S}}}[$__range])))",
                              "{{server}}")],
           "none", steps=[(None, GOOD), (2, WARN)], decimals=0, w=8,
           description="Start-up banners in the time range: more than one means restarts.")
    b.stat("Stops (asked for)", [(f"sum by (server) (round(increase(vllm_log_server_stops_total{{{S}}}[$__range])))",
                                  "{{server}}")],
           "none", decimals=0, w=8,
           description="Stops that were asked for in the time range (SIGTERM or SIGINT: a deploy, a restart, Ctrl-C), "
                       "from vLLM's shutdown lines. Not deaths: those are in Errors. A start with no stop before it "
                       "followed a death or a kill.")
    b.stat("Errors in range", [(f"sum(round(increase(vllm_log_errors_total{{{S}}}[$__range])))", "errors")], "none",
           steps=[(None, GOOD), (1, BAD)], decimals=0, w=8,
           description="OOMs, CUDA/NCCL errors, dead engines and other tracebacks in the time range.")
    b.row("Throughput and queue")
    b.timeseries("Generation throughput", [(f"vllm_log_generation_throughput_tokens_per_second{{{SE}}}", "{{server}} e{{engine}}")],
                 TOKS, min_=0, description="Average generation throughput of each stats window; 0 two intervals "
                                           "after the last window (vLLM logs nothing while idle).")
    b.timeseries("Prompt throughput", [(f"vllm_log_prompt_throughput_tokens_per_second{{{SE}}}", "{{server}} e{{engine}}")],
                 TOKS, min_=0, description="Average prompt (prefill) throughput of each stats window: the prompt tokens "
                                           "the engine computed, as the log counts them since vLLM 0.16 (prefix-cache "
                                           "hits and KV transferred in are not in it).")
    b.timeseries("Requests running and waiting", [
        (f"vllm_log_requests_running{{{SE}}}", "running {{server}} e{{engine}}"),
        (f"vllm_log_requests_waiting{{{SE}}}", "waiting {{server}} e{{engine}}"),
    ], "short", min_=0, decimals=0,
        description="Requests in the batch and in the queue at each stats window. Waiting with a full KV cache: "
                    "the server is at capacity.")
    b.timeseries("KV cache usage", [(f"vllm_log_kv_cache_usage_ratio{{{SE}}}", "{{server}} e{{engine}} {{device}}")],
                 "percentunit", min_=0, max_=1, steps=[(None, GOOD), (C.KV_CACHE_FULL_RATIO, BAD)], line=True,
                 description=f"Share of the main KV cache in use: GPU memory, or host memory on vLLM's CPU backend "
                             f"(the device in the legend; V0's CPU swap space is not this). The dashed line is "
                             f"VllmKvCacheFull's {C.KV_CACHE_FULL_RATIO:.0%}.")
    b.timeseries("Prefix cache hit rate", [
        (f"vllm_log_prefix_cache_hit_ratio{{{SE}}}", "{{server}} e{{engine}}"),
        (f"vllm_log_external_prefix_cache_hit_ratio{{{SE}}}", "external {{server}} e{{engine}}"),
        (f"vllm_log_mm_cache_hit_ratio{{{SE}}}", "multimodal {{server}} e{{engine}}"),
    ], "percentunit", min_=0, max_=1, description="As vLLM logs them: over the most recent requests, not per window; "
                                                  "multimodal is its encoder cache, for vision models.")
    b.timeseries("Tokens per second (from window counters)", [
        (f"sum by (server) (rate(vllm_log_generation_tokens_total{{{SE}}}[$__rate_interval]))", "generated {{server}}"),
        (f"sum by (server) (rate(vllm_log_computed_prompt_tokens_total{{{SE}}}[$__rate_interval]))",
         "computed prompt {{server}}"),
    ], TOKS, min_=0, description="Window average x window length, summed over engines: what the windows add up to. "
                                 "Prompt tokens are those the engine computed: prefix-cache hits and KV transferred in "
                                 "are not counted (compare with vLLM's "
                                 "vllm:prompt_tokens_by_source_total{source=\"local_compute\"}).")
    b.timeseries("Preemptions", [
        (f"sum by (server) (increase(vllm_log_preemptions_total{{{SE}}}[$__rate_interval]))", "{{server}}")],
        "short", min_=0, decimals=0, custom={"drawStyle": "bars", "fillOpacity": 80},
        description="Requests preempted (their KV cache freed, to be recomputed): the KV cache ran out. Empty for "
                    "vLLM 0.11-0.32 (V1): its stats line never prints 'Preemptions:' (the logger resets the count "
                    "before it checks it), so the log cannot tell; vLLM's vllm:num_preemptions_total can. Requests "
                    "waiting beside a full KV cache are the sign the log gives.")
    b.timeseries("Expert load balance (EPLB) and data-parallel size", [
        (f"vllm_log_eplb_balancedness{{{S}}}", "{{server}} EPLB balancedness"),
        (f"vllm_log_data_parallel_size{{{S}}}", "{{server}} data-parallel size")], "percentunit", min_=0,
        overrides=[{"matcher": {"id": "byRegexp", "options": "/data-parallel/"},
                    "properties": [{"id": "unit", "value": "short"}, {"id": "decimals", "value": 0},
                                   {"id": "custom.axisPlacement", "value": "right"}]}],
        description="EPLB's last logged balance of the experts' load (avg_tokens / max_tokens, 1 is even: at 0.5 the "
                    "busiest expert's GPU does twice the average work and every step waits for it; needs "
                    "--eplb-config.log_balancedness), and the data-parallel size after the last elastic scaling "
                    "(absent until one). Empty without expert parallelism's EPLB or elastic EP.")
    b.timeseries("Engine operations: sleep mode, expert rearrangements, scaling", [
        (f"sum by (server, action) (increase(vllm_log_sleep_mode_transitions_total{{{S}}}[$__rate_interval]))",
         "{{server}} {{action}}"),
        (f"sum by (server, mode) (increase(vllm_log_eplb_rearrangements_total{{{S}}}[$__rate_interval]))",
         "{{server}} experts rearranged ({{mode}})"),
        (f"sum by (server) (increase(vllm_log_eplb_rearrangements_skipped_total{{{S}}}[$__rate_interval]))",
         "{{server}} rearrangement skipped"),
        (f"sum by (server, direction) (increase(vllm_log_dp_scalings_total{{{S}}}[$__rate_interval]))",
         "{{server}} scaled {{direction}}"),
        (f"sum by (server, method) (increase(vllm_log_engine_call_failures_total{{{S}}}[$__rate_interval]))",
         "{{server}} failed call {{method}}")], "short", min_=0, decimals=0,
        custom={"drawStyle": "bars", "fillOpacity": 70},
        overrides=[{"matcher": {"id": "byRegexp", "options": "/failed call/"},
                    "properties": [{"id": "color", "value": {"mode": "fixed", "fixedColor": WARN}}]}],
        description="What was done to the running engines: sleep-mode transitions (an RL trainer freeing the GPU "
                    "between rollouts: sleep, wake_up, discard; their mean time is vllm_log_sleep_mode_seconds_total "
                    "over the transitions), EPLB moving experts (each pauses serving for "
                    "vllm_log_eplb_rearrangement_seconds_total's share) or judging it not worth it, elastic "
                    "data-parallel scale-ups and scale-downs, and calls to the engine that failed and that it "
                    "answered, serving on (a LoRA adapter that would not load, profiling, sleep, collective_rpc, "
                    "by the engine's method): the caller got an error, the engine did not die.")
    b.timeseries("Estimated compute and memory traffic per device (MFU)", [
        (f"vllm_log_estimated_flops_per_second_per_device{{{SE}}}", "FLOP/s {{server}} e{{engine}}"),
        (f"vllm_log_estimated_memory_bytes_per_second_per_device{{{SE}}}", "bytes/s {{server}} e{{engine}}"),
    ], "flops", min_=0,
        overrides=[{"matcher": {"id": "byRegexp", "options": "/bytes/"},
                    "properties": [{"id": "unit", "value": "Bps"}, {"id": "custom.axisPlacement", "value": "right"}]}],
        description="vLLM's own analytic estimate per device for each window (its 'MFU: x TF/s/device y GB/s/device' "
                    "line, vLLM 0.34+ with --enable-mfu-metrics): the FLOPs and the bytes read and written that the "
                    "model's shapes imply, not a hardware counter. Divide by the GPU's peak for utilisation. Empty "
                    "without that flag.")
    capacity_row(b)
    cost_row(b)
    b.row("Requests and engine steps (request log, iteration details)")
    b.timeseries("Requests by LoRA adapter (request log)", [
        (f"sum by (server, lora) (rate(vllm_log_requests_logged_total{{{S}}}[$__rate_interval]))",
         "{{server}} {{lora}}")], "reqps", min_=0,
        description="Requests vLLM's request logger logged, by LoRA adapter (blank: the base model), which vLLM's "
                    "/metrics does not break down. Needs --enable-log-requests (off by default since 0.10); the "
                    "prompt and the request id are never read. Beyond 32 adapter names per server: `other`.")
    b.timeseries("Responses by finish reason (request log)", [
        (f"sum by (server, finish_reason) (rate(vllm_log_responses_logged_total{{{S}}}[$__rate_interval]))",
         "{{server}} {{finish_reason}}"),
        (f"sum by (server) (rate(vllm_log_request_aborts_total{{{S}}}[$__rate_interval]))", "{{server}} abort calls")],
        "reqps", min_=0,
        description="Finished responses by why they ended (stop, length: cut at max_tokens, abort, tool_calls), "
                    "from --enable-log-outputs; abort calls from --enable-log-requests (a client gone, a shutdown; "
                    "one call may name several requests). The output text is never read.")
    b.timeseries("Engine step time by batch (iteration details)", [
        (f"histogram_quantile({q}, sum by (server, batch, le) (rate(vllm_log_iteration_seconds_bucket{{{SE}}}"
         f"[$__rate_interval])))", f"p{int(q * 100)} {{{{server}}}} {{{{batch}}}}") for q in (0.5, 0.99)],
        "s", min_=0,
        description="Each engine step's time, by what its batch held: prefill (prompts only), decode (generation "
                    "only), mixed (a chunked prefill beside decodes: the steps that stretch inter-token latency). The "
                    "only per-step latency in the log: needs --enable-logging-iteration-details (vLLM 0.14+), one "
                    "line per step. A data-parallel rank's padding steps are left out.")
    b.timeseries("LoRA adapters loaded and unloaded", [
        (f"sum by (server, event) (increase(vllm_log_lora_adapter_events_total{{{S}}}[$__rate_interval]))",
         "{{server}} {{event}}")], "short", min_=0, decimals=0, custom={"drawStyle": "bars", "fillOpacity": 70},
        overrides=[{"matcher": {"id": "byRegexp", "options": "/load_failed/"},
                    "properties": [{"id": "color", "value": {"mode": "fixed", "fixedColor": BAD}}]}],
        description="LoRA adapters loaded at run time (/v1/load_lora_adapter, a resolver), reloaded in place, "
                    "unloaded, and loads that failed (load_failed: the engine could not load the adapter, a path "
                    "that is not there; the server serves on). Their names are not kept.")
    b.timeseries("Tool-call parser failures", [
        (f"sum by (server, parser) (increase(vllm_log_tool_call_parser_failures_total{{{S}}}[$__rate_interval]))",
         "{{server}} {{parser}}")], "short", min_=0, decimals=0, custom={"drawStyle": "bars", "fillOpacity": 70},
        description="WARNING and ERROR records of vLLM's tool-call parsers: the model wrote a tool call the parser "
                    "could not read, and the client got it as text. A steady stream usually means the wrong "
                    "--tool-call-parser for the model. Their tracebacks are counted here, not as errors; the "
                    "model's output they quote is not kept.")
    b.row("HTTP and errors")
    b.stat("Access log off", [(f"max by (server) (vllm_log_access_log_disabled{{{S}}})", "{{server}}")], "none",
           mappings=[{"type": "value", "options": {"1": {"text": "off: no HTTP counts", "index": 0}}}],
           steps=[(None, WARN)], decimals=0, w=24, h=3,
           description="Servers started with uvicorn's access log switched off (--disable-uvicorn-access-log, or "
                       "--uvicorn-log-level above info): the HTTP panels below read nothing for them. Empty when "
                       "every server logs its responses. To quiet /metrics and /health polling, use "
                       "--disable-access-log-for-endpoints instead.")
    b.panels[-1]["fieldConfig"]["defaults"]["noValue"] = "no server switched it off"
    b.timeseries("HTTP responses by status", [
        (f"sum by (status) (rate(vllm_log_http_requests_total{{{S}}}[$__rate_interval]))", "{{status}}")], "reqps",
        min_=0, overrides=HTTP_COLOURS, description="Every response in vLLM's access log: 5xx red, 4xx orange.")
    b.timeseries("HTTP responses by endpoint", [
        (f"sum by (method, endpoint) (rate(vllm_log_http_requests_total{{{S}}}[$__rate_interval]))", "{{method}} {{endpoint}}")],
        "reqps", min_=0, description="vLLM's known routes by name; any other path is `other`.")
    b.timeseries("5xx share", [(_http_ratio("5.."), "{{server}}")], "percentunit", min_=0,
                 steps=[(None, GOOD), (C.HTTP_5XX_RATIO, BAD)], line=True,
                 description=f"Share of responses that are 5xx; the dashed line is VllmHigh5xxRatio's {C.HTTP_5XX_RATIO:.0%}.")
    b.timeseries("429 share", [(_http_ratio("429"), "{{server}}")], "percentunit", min_=0,
                 steps=[(None, GOOD), (C.HTTP_429_RATIO, WARN)], line=True,
                 description=f"Share of responses that are 429 (rate limited); the dashed line is VllmRateLimited's "
                             f"{C.HTTP_429_RATIO:.0%}.")
    b.timeseries("Errors", [(f"sum by (server, kind) (increase(vllm_log_errors_total{{{S}}}[$__rate_interval]))", "{{server}} {{kind}}")],
                 "short", min_=0, decimals=0, custom={"drawStyle": "bars", "fillOpacity": 80},
                 steps=[(None, BAD)],
                 description="OOMs, CUDA/NCCL errors, engine deaths (one per death) and tracebacks that are none of those.")
    b.timeseries("Requests refused as invalid (log and vLLM)", [
        (f"sum by (server) (increase(vllm_log_request_validation_failures_total{{{S}}}[$__rate_interval]))",
         "refused (log) {{server}}"),
        (f'sum by (server) (increase(vllm:request_success_total{{cluster=~"$cluster", job=~"$vllm_job", '
         f'host=~"$host", server=~"$server", finished_reason="error"}}[$__rate_interval]))', "ended with an error (vLLM) {{server}}"),
    ], "short", min_=0, decimals=0, custom={"drawStyle": "bars", "fillOpacity": 70},
        description="Requests vLLM's engine core refused as invalid ('Request ... failed validation', 0.33+: a "
                    "parameter out of range, a prompt longer than the context) beside vLLM's own count of requests "
                    "that ended with an error, which holds them: what is left of that count failed for another reason.")
    b.timeseries("Exits and restarts (supervisor)", [
        (f"sum by (server, how, status) (increase(vllm_log_process_exits_total{{{S}}}[$__rate_interval]))",
         "{{server}} {{how}} {{status}}"),
        (f"sum by (server) (increase(vllm_log_restarts_total{{{S}}}[$__rate_interval]))", "{{server}} restarted")],
        "short", min_=0, decimals=0, custom={"drawStyle": "bars", "fillOpacity": 80},
        overrides=[{"matcher": {"id": "byRegexp", "options": "/restarted/"},
                    "properties": [{"id": "color", "value": {"mode": "fixed", "fixedColor": WARN}}]}],
        description="What systemd or docker compose logged of the vLLM process: its exits by how (exited, killed by a "
                    "signal, dumped core) and status (exit code, or signal), and the restarts it made on its own "
                    f"(Restart=, a restart policy). {C.RESTART_LOOP_COUNT} restarts within {C.RESTART_LOOP_WINDOW} "
                    "fire VllmRestartLoop. Empty when the log holds no supervisor lines (journald:NAME sources "
                    "read them for the unit; a file needs `journalctl -u UNIT` output).")
    b.timeseries("Warning signs and recoveries", [
        (f"sum by (server, method) (increase(vllm_log_rpc_timeouts_total{{{S}}}[$__rate_interval]))",
         "{{server}} RPC timeout {{method}}"),
        (f"sum by (server, source) (increase(vllm_log_engine_hangs_total{{{S}}}[$__rate_interval]))",
         "{{server}} engine hang ({{source}})"),
        (f"sum by (server) (increase(vllm_log_shm_broadcast_waits_total{{{S}}}[$__rate_interval]))",
         "{{server}} shm broadcast wait"),
        (f"sum by (server, executor) (increase(vllm_log_worker_deaths_total{{{S}}}[$__rate_interval]))",
         "{{server}} worker died ({{executor}})"),
        (f"sum by (server, outcome) (increase(vllm_log_kv_load_failures_total{{{S}}}[$__rate_interval]))",
         "{{server}} KV load failure {{outcome}}"),
        (f"sum by (server, backend) (increase(vllm_log_jit_compilations_during_inference_total{{{S}}}[$__rate_interval]))",
         "{{server}} {{backend}} JIT while serving"),
    ], "short", min_=0, decimals=0, custom={"drawStyle": "bars", "fillOpacity": 70},
        description="What vLLM says before a hang or a death, and what it recovered from: RPCs to the workers that "
                    "timed out, V0's engine iteration timeout and shared-memory broadcast waits (they mark a serving "
                    "engine stalled), 0.33+'s watchdog finding the engine loop unfed (its stack dump says where), worker "
                    "processes that died, KV loads a connector failed (recovered: prefill computed again; failed: "
                    "the requests ended in error), kernels compiled while serving (a latency spike's cause).")
    b.timeseries("Capacity given up while serving", [
        (f"sum by (server) (increase(vllm_log_dp_ranks_lost_total{{{S}}}[$__rate_interval]))",
         "{{server}} data-parallel ranks dropped"),
        (f"sum by (server, reason) (increase(vllm_log_requests_rejected_total{{{S}}}[$__rate_interval]))",
         "{{server}} requests turned away ({{reason}})"),
        (f"sum by (server) (increase(vllm_log_weight_cache_daemon_exits_total{{{S}}}[$__rate_interval]))",
         "{{server}} weight-cache daemon exited"),
        (f"sum by (server) (increase(vllm_log_stop_requests_total{{action=\"aborted\", {S}}}[$__rate_interval]))",
         "{{server}} requests aborted by a stop"),
    ], "short", min_=0, decimals=0, custom={"drawStyle": "bars", "fillOpacity": 70},
        description="What the server gave up to keep serving: data-parallel ranks vLLM's fault tolerance dropped (it "
                    "serves on with fewer engines: VllmDataParallelRankLost), requests refused before serving (an "
                    "unhealthy engine, a full queue, a prompt too long), the weight-cache daemon shutting down, and "
                    "requests in flight that a stop aborted (a deploy without --shutdown-timeout to drain them).")
    b.timeseries("Warning and error log lines", [
        (f"sum by (server, level) (increase(vllm_log_messages_total{{{S}}}[$__rate_interval]))", "{{server}} {{level}}")],
        "short", min_=0, decimals=0, custom={"drawStyle": "bars", "fillOpacity": 60},
        overrides=[{"matcher": {"id": "byRegexp", "options": pattern},
                    "properties": [{"id": "color", "value": {"mode": "fixed", "fixedColor": colour}}]}
                   for pattern, colour in (("/warning/", WARN), ("/error|critical/", BAD))],
        description="vLLM WARNING, ERROR and CRITICAL lines that are not one of the errors above.")
    V = 'cluster=~"$cluster", job=~"$vllm_job", host=~"$host", server=~"$server"'
    native = "no data: vLLM's own metrics are not scraped (the vLLM job variable finds none)"
    b.timeseries("vLLM's own: requests finished", [
        (f"sum by (server, finished_reason) (rate(vllm:request_success_total{{{V}}}[$__rate_interval]))",
         "{{server}} {{finished_reason}}")], "reqps", min_=0,
        options={"legend": {"displayMode": "list", "placement": "bottom", "showLegend": True},
                 "tooltip": {"mode": "multi", "sort": "desc"}},
        description="From vLLM's own /metrics (the vLLM job variable; " + C.VLLM_JOB + " in the shipped Prometheus "
                    "config), beside the log's view above: requests finished "
                    "by reason. Empty when that job is not scraped.")
    b.panels[-1]["fieldConfig"]["defaults"]["noValue"] = native
    b.timeseries("vLLM's own: time to first token (p95)", [
        (f"histogram_quantile(0.95, sum by (server, le) (rate(vllm:time_to_first_token_seconds_bucket{{{V}}}"
         f"[$__rate_interval])))", "{{server}}")], "s", min_=0,
        description="From vLLM's own /metrics: the 95th percentile of the time to first token.")
    b.panels[-1]["fieldConfig"]["defaults"]["noValue"] = native
    b.timeseries("Log lines by result", [
        (f"sum by (result) (rate(vllm_log_exporter_lines_total{{{S}}}[$__rate_interval]))", "{{result}}")], "short",
        min_=0, description="unparsed lines are vLLM output the exporter does not understand: see `parse --stats`.")
    return b.model()


def _run_level_acceptance_length(sel: str, window: str, fn: str) -> str:
    """1 + accepted / drafts from the counters: vLLM's mean acceptance length over every draft in the window."""
    return (f"1 + sum by (server) ({fn}(vllm_log_spec_decode_accepted_tokens_total{{{sel}}}[{window}]))"
            f" / sum by (server) ({fn}(vllm_log_spec_decode_drafts_total{{{sel}}}[{window}]))")


def _first_token_acceptance(sel: str, window: str) -> str:
    """Position 0's accepted tokens over the drafts that proposed at least one token (all drafts, less
    those of length 0 when the log gives draft lengths): VllmDraftAcceptanceCollapsed's measure."""
    drafts = f"sum by (server) (rate(vllm_log_spec_decode_drafts_total{{{sel}}}[{window}]))"
    return (f'sum by (server) (rate(vllm_log_spec_decode_position_accepted_tokens_total{{{sel}, position="0"}}[{window}]))'
            f' / ({drafts} - (sum by (server) (rate(vllm_log_spec_decode_drafts_by_length_total{{{sel}, '
            f'draft_length="0"}}[{window}])) or 0 * {drafts}))')


def spec_decode() -> dict:
    b = Board("vllm-log-spec-decode", "vLLM / Speculative decoding",
              "Acceptance of drafted tokens: per window, per position, and weighted by tokens.",
              ["vllm-log-exporter", "vllm"])
    b.row("Acceptance")
    b.stat("Mean acceptance length over the range (1 + accepted / drafts)",
           [(_run_level_acceptance_length(SE, "$__range", "increase"), "{{server}}")], "none", w=4, h=8, decimals=2,
           description="The run-level mean acceptance length: tokens emitted per draft, bonus token included, "
                       "from the counters over the whole time range (1 + accepted tokens / drafts), so every "
                       "draft weighs the same. Not the mean of the windows' logged means.")
    b.timeseries("Mean acceptance length", [
        (f"vllm_log_spec_decode_mean_acceptance_length{{{SE}}}", "window {{server}} e{{engine}}"),
        (_run_level_acceptance_length(SE, "$__rate_interval", "rate"), "1 + accepted / drafts {{server}}"),
    ], "short", min_=1, w=10,
        description="Tokens emitted per draft, including the bonus token. window: the gauge, the mean vLLM logged "
                    "for each engine's last stats window. 1 + accepted / drafts: the ratio of the counters over the "
                    "rate interval, summed over engines, so busy and quiet windows weigh by their drafts.")
    b.timeseries("Draft acceptance", [
        (f"vllm_log_spec_decode_draft_acceptance_ratio{{{SE}}}", "window {{server}} e{{engine}}"),
        (f"sum by (server) (rate(vllm_log_spec_decode_accepted_tokens_total{{{SE}}}[$__rate_interval]))"
         f" / sum by (server) (rate(vllm_log_spec_decode_drafted_tokens_total{{{SE}}}[$__rate_interval]))",
         "token-weighted {{server}}"),
        (_first_token_acceptance(SE, "$__rate_interval"), "first token {{server}}"),
    ], "percentunit", min_=0, max_=1, steps=[(None, BAD), (C.DRAFT_ACCEPTANCE_MIN, GOOD)], line=True, w=10,
        description=f"Drafted tokens accepted, per window and weighted by tokens, and how often the first drafted "
                    f"token is accepted (position 0, among drafts that proposed a token). With dynamic draft lengths "
                    f"the token-weighted share falls as drafts grow longer on a healthy server; the first token's does "
                    f"not. First token below the dashed line ({C.DRAFT_ACCEPTANCE_MIN:.0%}, "
                    f"VllmDraftAcceptanceCollapsed): drafting costs more than it gives.")
    b.heatmap("Mean acceptance length per window",
              f"sum by (le) (increase(vllm_log_spec_decode_window_mean_acceptance_length_bucket{{{SE}}}[$__rate_interval]))",
              "short", description="How the windows' mean acceptance lengths spread over time.")
    b.heatmap("Draft acceptance per window",
              f"sum by (le) (increase(vllm_log_spec_decode_window_draft_acceptance_ratio_bucket{{{SE}}}[$__rate_interval]))",
              "percentunit", description="How the windows' draft acceptance spreads over time.")
    b.row("Positions and tokens")
    b.bargauge("Acceptance by draft position (last window)",
               [(f"vllm_log_spec_decode_position_acceptance_ratio{{{SE}}}", "{{server}} position {{position}}")],
               "percentunit", min_=0, max_=1, w=8, steps=[(None, BAD), (C.DRAFT_ACCEPTANCE_MIN, WARN), (0.8, GOOD)],
               description="Acceptance at each draft position: later positions are accepted less often.")
    b.stat("Speculative depth", [(f"vllm_log_spec_decode_depth{{{SE}}}", "{{server}} e{{engine}}")], "none", w=4, h=8,
           decimals=0, description="The configured number of draft tokens per step (num_speculative_tokens).")
    b.stat("Drafted tokens per draft", [
        (f"sum by (server) (increase(vllm_log_spec_decode_drafted_tokens_total{{{SE}}}[$__range]))"
         f" / sum by (server) (increase(vllm_log_spec_decode_drafts_total{{{SE}}}[$__range]))", "{{server}}")],
        "none", w=4, h=8, decimals=2,
        description="Draft tokens proposed per draft over the time range (drafted / drafts), beside the configured "
                    "depth: the depth when every draft is full length, less when the proposer drafts fewer. Drafts "
                    "are derived from each window's line (accepted / sum of the per-position rates): within 2 % of vLLM's "
                    "own vllm:spec_decode_num_drafts_total (equal in the runs against a real vLLM).")
    b.timeseries("Accepted vs drafted tokens", [
        (f"sum by (server) (rate(vllm_log_spec_decode_accepted_tokens_total{{{SE}}}[$__rate_interval]))", "accepted {{server}}"),
        (f"sum by (server) (rate(vllm_log_spec_decode_drafted_tokens_total{{{SE}}}[$__rate_interval]))", "drafted {{server}}"),
    ], TOKS, min_=0, w=8, description="Draft tokens proposed and accepted per second, summed over engines.")
    b.row("Draft lengths and the drafter's confidence")
    b.bargauge("Drafts by draft length (range)", [
        (f"sum by (draft_length) (round(increase(vllm_log_spec_decode_drafts_by_length_total{{{SE}}}[$__range])))",
         "{{draft_length}} tokens")], "none", min_=0, w=8, decimals=0,
        description="How many drafts proposed each number of tokens over the time range, from vLLM's draft length "
                    "histogram (dynamic draft lengths; 0: the drafter proposed nothing that step). Empty at a fixed "
                    "depth, whose drafts all have the depth's length.")
    b.bargauge("Acceptance by the drafter's confidence (range)", [
        (f"sum by (confidence) (increase(vllm_log_spec_decode_confidence_accepted_tokens_total{{{SE}}}[$__range]))"
         f" / sum by (confidence) (increase(vllm_log_spec_decode_confidence_drafted_tokens_total{{{SE}}}[$__range]))",
         "{{confidence}}")], "percentunit", min_=0, max_=1, w=8,
        description="DSpark's STS calibration bins: of the tokens drafted with a confidence in each bin, the share "
                    "accepted. A calibrated drafter is accepted about as often as it is confident (see the mean "
                    "confidence beside it).")
    b.bargauge("Mean confidence per bin (range)", [
        (f"sum by (confidence) (increase(vllm_log_spec_decode_confidence_sum_total{{{SE}}}[$__range]))"
         f" / sum by (confidence) (increase(vllm_log_spec_decode_confidence_drafted_tokens_total{{{SE}}}[$__range]))",
         "{{confidence}}")], "percentunit", min_=0, max_=1, w=8,
        description="DSpark: the drafter's mean confidence in each bin. Acceptance well below it: the drafter is "
                    "over-confident, and its confidence-based stopping drafts too long.")
    b.row("Diffusion decoding")
    b.timeseries("Tokens committed per denoising step", [
        (f"sum by (server, engine) (rate(vllm_log_diffusion_committed_tokens_total{{{SE}}}[$__rate_interval])) / "
         f"sum by (server, engine) (rate(vllm_log_diffusion_denoising_steps_total{{{SE}}}[$__rate_interval]))",
         "{{server}} e{{engine}}")], "short", min_=0, w=12,
        description="A diffusion language model's decoding (vLLM 0.24+, its 'DiffusionDecoding metrics' line): output "
                    "tokens committed per denoising step, the parallelism it gets over one token per step. Empty for "
                    "autoregressive models.")
    b.timeseries("Diffusion committed tokens and positions evaluated", [
        (f"sum by (server) (rate(vllm_log_diffusion_committed_tokens_total{{{SE}}}[$__rate_interval]))",
         "committed {{server}}"),
        (f"sum by (server) (rate(vllm_log_diffusion_canvas_positions_total{{{SE}}}[$__rate_interval]))",
         "evaluated {{server}}")], TOKS, min_=0, w=12,
        description="Tokens committed and canvas positions evaluated per second: the gap is the compute that was "
                    "denoised and not yet committed.")
    return b.model()


DASHBOARDS = {"overview.json": overview, "spec-decode.json": spec_decode, "memory-kv.json": memory_kv}
