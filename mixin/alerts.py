"""Prometheus alert rules for vLLM servers watched by vllm-log-exporter.

Every alert carries ``severity`` (critical: the server stopped serving, or burns an SLO's error
budget fast; warning: it serves badly) and ``summary``/``description`` annotations that say what
happened and where to look. Every alert has a promtool unit test in
deploy/prometheus/rules/vllm-log-exporter.rules_test.yml (the service levels' groups, rendered by
mixin/slo.py and appended here, in vllm-log-exporter-slo.rules_test.yml).
"""

from __future__ import annotations

from mixin import config as C
from mixin import capacity, cost, slo


def _pct(x: float) -> str:
    return f"{x * 100:g}%"


# The last OOM's own numbers, from the exporter's gauges, where the message gave them.
OOM_NUMBERS = (
    '{{ with printf "vllm_log_oom_requested_bytes{server=\\"%s\\",instance=\\"%s\\"}" $labels.server $labels.instance'
    ' | query }}{{ with first . }}'
    " The last one on GPU {{ .Labels.gpu }} asked for {{ .Value | humanize1024 }}B{{ end }}{{ end }}"
    '{{ with printf "vllm_log_oom_free_bytes{server=\\"%s\\",instance=\\"%s\\"}" $labels.server $labels.instance'
    ' | query }}{{ with first . }}'
    " with {{ .Value | humanize1024 }}B free.{{ end }}{{ end }}"
)


def _by(*labels: str) -> str:
    return ", ".join([*C.KEEP_LABELS, *labels])


# The last state the log put a server in (vllm_log_server_state): a stop that was asked for (SIGTERM,
# a deploy), or a dead engine, which VllmEngineDead reports.
STOPPED = 'vllm_log_server_state{state="stopped"} == 1'
STOPPED_OR_DEAD = 'vllm_log_server_state{state=~"stopped|dead"} == 1'


# The board each alert is looked at on (the rest: the Overview)
ALERT_BOARDS = {"VllmDraftAcceptanceCollapsed": "vllm-log-spec-decode", "VllmKvCacheFull": "vllm-log-memory-kv",
                "VllmKvOffloadSlow": "vllm-log-memory-kv", "VllmKvTransferFailing": "vllm-log-memory-kv",
                "VllmMaxModelLenReduced": "vllm-log-memory-kv",
                "VllmKvCacheFillingUp": "vllm-log-memory-kv", **{name: slo.BOARD_UID for name in slo.alert_names()}}

# The length a server serves now, for VllmMaxModelLenReduced's description.
SERVED_LENGTH = (
    '{{ with printf "vllm_log_max_model_len_tokens{server=\\"%s\\",instance=\\"%s\\",engine=\\"%s\\"}" $labels.server '
    '$labels.instance $labels.engine | query }}{{ with first . }} to {{ .Value | printf "%.0f" }}{{ end }}{{ end }}'
)


def _new_or_increased(counter: str, by: str, window: str = "10m") -> str:
    """Counts of ``counter`` within ``window``, per ``by``, also when its series first appears in it (a failure
    counter is made by its first failure, which increase() alone does not see)."""
    return (f"(sum by ({by}) (increase({counter}[{window}])) > 0\n"
            f"  or sum by ({by}) ({counter}) unless sum by ({by}) ({counter} offset {window}))")


def dashboard_url(alert: str, exporter_level: bool) -> str:
    """The alert's board, filtered to its server (the exporter-level alerts: to its exporter)."""
    board = ALERT_BOARDS.get(alert, "vllm-log-overview")
    var = "var-instance={{ $labels.instance }}" if exporter_level else "var-server={{ $labels.server }}"
    return f"{C.GRAFANA_URL}/d/{board}?{var}"


def groups() -> list[dict]:
    BS, BSE, BSD = _by("server"), _by("server", "engine"), _by("server", "direction")
    errors = [
        {
            "alert": "VllmCudaOutOfMemory",
            "expr": 'increase(vllm_log_errors_total{kind="oom"}[10m]) > 0',
            "labels": {"severity": "critical"},
            "annotations": {
                "summary": "CUDA out of memory on vLLM server {{ $labels.server }}",
                "description": "vLLM on {{ $labels.server }} logged {{ $value | printf \"%.0f\" }} CUDA OOM(s) in the last 10 minutes."
                               + OOM_NUMBERS +
                               " Lower --gpu-memory-utilization, --max-num-seqs or --max-num-batched-tokens, or the context length; "
                               "`vllm-log-exporter report` on the log shows the memory split found at start-up.",
            },
        },
        {
            "alert": "VllmEngineDead",
            # over once the server starts again (as the exporter's pushed copy is resolved then)
            "expr": 'increase(vllm_log_errors_total{kind="engine_dead"}[10m]) > 0\n'
                    f"  unless on ({BS}) (max by ({BS}) (vllm_log_last_start_timestamp_seconds)\n"
                    f"    > on ({BS}) max by ({BS}) (vllm_log_last_error_timestamp_seconds{{kind=\"engine_dead\"}}))",
            "labels": {"severity": "critical"},
            "annotations": {
                "summary": "vLLM engine died on {{ $labels.server }}",
                "description": "The engine core of {{ $labels.server }} died (EngineDeadError, fatal error or a worker that hit an "
                               "exception). Requests fail until the server restarts; the traceback before it in the log has the cause.",
            },
        },
        {
            "alert": "VllmStartupFailed",
            "expr": 'increase(vllm_log_errors_total{kind="startup_failure"}[10m]) > 0',
            "labels": {"severity": "critical"},
            "annotations": {
                "summary": "vLLM server {{ $labels.server }} failed to start",
                "description": "vLLM on {{ $labels.server }} did not start"
                               '{{ with printf "topk(1, increase(vllm_log_startup_failures_total{server=\\"%s\\",'
                               'instance=\\"%s\\"}[10m]) > 0)" $labels.server $labels.instance | query }}'
                               "{{ with first . }} ({{ .Labels.reason }}){{ end }}{{ end }}. "
                               "kv_cache_too_small: one max-length request needs more KV cache than there is; lower "
                               "--max-model-len or raise --gpu-memory-utilization. `vllm-log-exporter report` on the log "
                               "gives the numbers and the setting that would fit.",
            },
        },
        {
            # Only restarts the supervisor made on its own count (systemd's "Scheduled restart job",
            # compose's "(restarting)"): a `systemctl restart`, a deploy or an auto-update logs none.
            "alert": "VllmRestartLoop",
            "expr": f"increase(vllm_log_restarts_total[{C.RESTART_LOOP_WINDOW}]) >= {C.RESTART_LOOP_COUNT}\n"
                    f"  or increase(vllm_log_start_limit_hits_total[{C.RESTART_LOOP_WINDOW}]) > 0",
            "labels": {"severity": "critical"},
            "annotations": {
                "summary": "vLLM on {{ $labels.server }} is restarting in a loop",
                "description": "The supervisor of {{ $labels.server }} restarted it after exits again and again in the last "
                               f"{C.RESTART_LOOP_WINDOW}, or gave up (systemd's start limit)"
                               '{{ with printf "topk(1, increase(vllm_log_process_exits_total{server=\\"%s\\",'
                               f'instance=\\"%s\\"}}[{C.RESTART_LOOP_WINDOW}]) > 0)" $labels.server $labels.instance | query }}}}'
                               "{{ with first . }}; most exits: {{ .Labels.how }} with status {{ .Labels.status }}{{ end }}{{ end }}"
                               '{{ with printf "topk(1, increase(vllm_log_unit_failures_total{server=\\"%s\\",'
                               f'instance=\\"%s\\"}}[{C.RESTART_LOOP_WINDOW}]) > 0)" $labels.server $labels.instance | query }}}}'
                               "{{ with first . }}, systemd result {{ .Labels.result }}{{ end }}{{ end }}. "
                               "Each start dies the same way: restarting will not fix it. Read why the first run ended "
                               "(VllmEngineDead, VllmStartupFailed, `vllm-log-exporter report` on the log).",
            },
        },
        {
            # the log says the engine is gone while vLLM's API still answers its scrape: clients get
            # errors from a server that looks up (vllm-project/vllm#39863)
            "alert": "VllmEngineDeadApiUp",
            "expr": f'(max by (host, server) (increase(vllm_log_errors_total{{kind="engine_dead"}}[10m])) > 0\n'
                    f"   or max by (host, server) (vllm_log_engine_stalled) == 1)\n"
                    f'  and on (host, server) max by (host, server) (up{{job="{C.VLLM_JOB}"}}) == 1',
            "for": "1m",
            "labels": {"severity": "critical"},
            "annotations": {
                "summary": "vLLM on {{ $labels.server }} answers its API while its engine is dead or stalled",
                "description": "The log says the engine of {{ $labels.server }} died or stopped while busy, and vLLM's own "
                               "/metrics still answers (job " + C.VLLM_JOB + "): health checks see a live server, "
                               "requests fail. Restart it.",
            },
        },
        {
            "alert": "VllmEngineStalled",
            # The exporter zeroes the stalled gauge at a stop or death and lets no window logged after
            # it (in-flight requests at SIGTERM) arm it again; the rule says the same from the state,
            # so a stopped or dead server never reads as stalled whatever the exporter's version.
            "expr": f"max by ({BSE}) (vllm_log_engine_stalled) == 1\n"
                    f"  and on ({BS}) max by ({BS}) (vllm_log_exporter_source_up) == 1\n"
                    f"  unless on ({BS}) {STOPPED_OR_DEAD}",
            "for": "1m",
            "labels": {"severity": "critical"},
            "annotations": {
                "summary": "vLLM engine {{ $labels.engine }} on {{ $labels.server }} stopped logging while busy",
                "description": "Its last stats window had requests running, and no window came for 3 stats intervals "
                               "since (vLLM logs one every interval while it works). The engine is hung or died without "
                               "a word, as after some OOMs; the API server may still answer. Unlike VllmLogStale (the "
                               "whole log silent for long), this watches one busy engine and fires within a minute or two.",
            },
        },
        {
            "alert": "VllmGpuError",
            "expr": 'increase(vllm_log_errors_total{kind=~"cuda_error|nccl_error"}[10m]) > 0',
            "labels": {"severity": "critical"},
            "annotations": {
                "summary": "{{ $labels.kind }} on vLLM server {{ $labels.server }}",
                "description": "{{ $labels.server }} logged a {{ $labels.kind }} (illegal memory access, NCCL failure or timeout). "
                               "These usually end the engine; check the GPU (nvidia-smi, dmesg Xid) and the interconnect.",
            },
        },
        {
            "alert": "VllmTraceback",
            "expr": 'increase(vllm_log_errors_total{kind="traceback"}[10m]) > 0',
            "labels": {"severity": "warning"},
            "annotations": {
                "summary": "Python traceback in the log of {{ $labels.server }}",
                "description": "{{ $value | printf \"%.0f\" }} traceback(s) in 10 minutes on {{ $labels.server }}. Not every "
                               "traceback is fatal (a bad request can log one); `vllm-log-exporter parse` shows the exception.",
            },
        },
    ]
    http = [
        {
            "alert": "VllmHigh5xxRatio",
            "expr": (
                f'sum by ({BS}) (rate(vllm_log_http_requests_total{{status=~"5.."}}[5m]))\n'
                f"  / sum by ({BS}) (rate(vllm_log_http_requests_total[5m]))\n"
                f"  > {C.HTTP_5XX_RATIO:g}"
            ),
            "for": "5m",
            "labels": {"severity": "warning"},
            "annotations": {
                "summary": "{{ $labels.server }} answers {{ $value | humanizePercentage }} of requests with 5xx",
                "description": f"More than {_pct(C.HTTP_5XX_RATIO)} of the responses in vLLM's access log on {{{{ $labels.server }}}} "
                               "have been server errors for 5 minutes. Look for a dead engine or OOM alert on the same server.",
            },
        },
        {
            "alert": "VllmRateLimited",
            "expr": (
                f'sum by ({BS}) (rate(vllm_log_http_requests_total{{status="429"}}[5m]))\n'
                f"  / sum by ({BS}) (rate(vllm_log_http_requests_total[5m]))\n"
                f"  > {C.HTTP_429_RATIO:g}"
            ),
            "for": "10m",
            "labels": {"severity": "warning"},
            "annotations": {
                "summary": "{{ $labels.server }} rate-limits {{ $value | humanizePercentage }} of requests (HTTP 429)",
                "description": "Clients are being turned away with 429 Too Many Requests for 10 minutes. The server is at "
                               "capacity: add capacity, raise --max-num-seqs if KV cache allows, or slow the clients.",
            },
        },
    ]
    engine = [
        {
            "alert": "VllmDraftAcceptanceCollapsed",
            # How often the first drafted token is accepted, among drafts that proposed one: with
            # dynamic draft lengths the share of all drafted tokens accepted falls as drafts grow
            # longer on a healthy server, and zero-length drafts (the drafter chose not to propose)
            # lower position 0's rate over all drafts. Logs without per-position rates (V0) fall back
            # to the share of drafted tokens, which is what their fixed depth makes meaningful.
            "expr": (
                f'(\n'
                f'  sum by ({BSE}) (rate(vllm_log_spec_decode_position_accepted_tokens_total{{position="0"}}[10m]))\n'
                f'    / (sum by ({BSE}) (rate(vllm_log_spec_decode_drafts_total[10m]))\n'
                f'       - (sum by ({BSE}) (rate(vllm_log_spec_decode_drafts_by_length_total{{draft_length="0"}}[10m]))\n'
                f'          or 0 * sum by ({BSE}) (rate(vllm_log_spec_decode_drafts_total[10m]))))\n'
                f'  or\n'
                f'  sum by ({BSE}) (rate(vllm_log_spec_decode_accepted_tokens_total[10m]))\n'
                f'    / sum by ({BSE}) (rate(vllm_log_spec_decode_drafted_tokens_total[10m]))\n'
                f'    unless on ({BSE}) group by ({BSE}) (vllm_log_spec_decode_position_accepted_tokens_total)\n'
                f') < {C.DRAFT_ACCEPTANCE_MIN:g}'
            ),
            "for": "10m",
            "labels": {"severity": "warning"},
            "annotations": {
                "summary": "Drafts on {{ $labels.server }} are accepted {{ $value | humanizePercentage }} of the time",
                "description": f"For 10 minutes the first drafted token has been accepted less than {_pct(C.DRAFT_ACCEPTANCE_MIN)} "
                               "of the time on engine {{ $labels.engine }} (among drafts that proposed a token; without "
                               "per-position rates, V0: of all drafted tokens). Speculative decoding now costs more than it "
                               "saves on this traffic; consider a lower speculative depth or a better draft model.",
            },
        },
        {
            "alert": "VllmKvCacheFull",
            "expr": (
                f"max by ({BSE}, device) (vllm_log_kv_cache_usage_ratio) > {C.KV_CACHE_FULL_RATIO:g}\n"
                f"  and on ({BSE}) max by ({BSE}) (vllm_log_requests_waiting) > 0"
            ),
            "for": "5m",
            "labels": {"severity": "warning"},
            "annotations": {
                "summary": "KV cache of {{ $labels.server }} is {{ $value | humanizePercentage }} full with requests waiting",
                "description": "The KV cache (device {{ $labels.device }}) has been nearly full for 5 minutes while requests "
                               "queue (engine {{ $labels.engine }}). "
                               "Requests wait or get preempted; shorten contexts, lower --max-num-seqs, or add KV memory.",
            },
        },
        {
            "alert": "VllmKvOffloadSlow",
            "expr": (
                f"sum by ({BSD}) (rate(vllm_log_kv_offload_bytes_total[10m]))\n"
                f"  / sum by ({BSD}) (rate(vllm_log_kv_offload_seconds_total[10m]))\n"
                f"  < {C.KV_OFFLOAD_MIN_BYTES_PER_SECOND:g}"
            ),
            "for": "10m",
            "labels": {"severity": "warning"},
            "annotations": {
                "summary": "KV offload {{ $labels.direction }} on {{ $labels.server }} runs at {{ $value | humanize }}B/s",
                "description": f"CPU KV offload has moved data below {C.KV_OFFLOAD_MIN_BYTES_PER_SECOND / 1e9:g} GB/s for 10 minutes. "
                               "A PCIe 5.0 x16 link sustains ~50 GB/s: check the link width and generation (nvidia-smi -q, lspci -vv) "
                               "and whether /dev/shm is backed by RAM.",
            },
        },
        {
            "alert": "VllmKvTransferFailing",
            "expr": (
                f'sum by ({BS}) (increase(vllm_log_kv_connector_failures_total{{reason=~"transfer|handshake|timeout|sender_exit"}}[10m]))\n'
                f"  >= {C.KV_TRANSFER_FAILURES_10M}\n"
                f'or sum by ({BS}) (increase(vllm_log_kv_offload_failures_total{{reason=~"transfer|io|tier_poll_stopped|tier_poll_failed|peer_down"}}[10m]))\n'
                f"  >= {C.KV_TRANSFER_FAILURES_10M}"
            ),
            "for": "5m",
            "labels": {"severity": "warning"},
            "annotations": {
                "summary": "KV transfers of {{ $labels.server }} keep failing ({{ $value | printf \"%.0f\" }} in 10 minutes)",
                "description": "A KV connector (NIXL, Mooncake, MoRIIO, LMCache's multiprocess adapter, hf3fs...) or a KV "
                               "offload tier logged failed transfers, "
                               "handshakes or tier polls for 5 minutes. KV that does not arrive is computed again (a "
                               "prefill's cost) or fails the request. The memory board's \"KV that did not arrive\" row "
                               "says which connector and why: a peer or its link down, a bootstrap server gone, a full disk.",
            },
        },
        {
            "alert": "VllmMaxModelLenReduced",
            "expr": f"max by ({BSE}) (vllm_log_max_model_len_requested_tokens)",
            "labels": {"severity": "warning"},
            "annotations": {
                "summary": "vLLM cut the context length of {{ $labels.server }} to fit its KV cache",
                "description": "At start-up vLLM reduced max_model_len (engine {{ $labels.engine }}) from {{ $value | printf \"%.0f\" }} "
                               "tokens" + SERVED_LENGTH + " (--max-model-len auto): requests longer than that get HTTP 400. "
                               "Give the KV cache more memory (--gpu-memory-utilization, fewer --max-num-seqs, a smaller "
                               "model or more GPUs) or set --max-model-len to the length you mean to serve.",
            },
        },
        {
            "alert": "VllmDataParallelRankLost",
            "expr": f"max by ({BS}) (vllm_log_dp_dead_ranks) > 0",
            "labels": {"severity": "warning"},
            "annotations": {
                "summary": "{{ $labels.server }} serves without {{ $value | printf \"%.0f\" }} data-parallel rank(s)",
                "description": "vLLM's fault tolerance dropped data-parallel ranks ([FT] ... scale_down complete): the server "
                               "keeps serving with that much less capacity. Find why the rank's engine failed (the "
                               "traceback before its \"[FT] Busy loop raised\"), then restart the server to get the ranks back.",
            },
        },
        {
            "alert": "VllmToolCallParserFailing",
            "expr": (f"sum by ({_by('server', 'parser')}) (increase(vllm_log_tool_call_parser_failures_total[15m]))\n"
                     f"  >= {C.TOOL_PARSER_FAILURES_15M}"),
            "for": "10m",
            "labels": {"severity": "warning"},
            "annotations": {
                "summary": "Tool calls on {{ $labels.server }} keep failing to parse ({{ $labels.parser }}: "
                           "{{ $value | printf \"%.0f\" }} in 15 minutes)",
                "description": "vLLM's {{ $labels.parser }} tool-call parser could not read the tool calls the model "
                               "wrote, for 10 minutes: clients get them as text and agents stall. Usually the wrong "
                               "--tool-call-parser for the model (Qwen3-Coder writes XML: qwen3_xml or qwen3_coder, "
                               "not hermes), a chat template without tool support, or a model quantised too far. "
                               "`vllm-log-exporter parse` shows the exceptions (the model's text is not kept).",
            },
        },
        {
            "alert": "VllmWeightCacheDaemonExited",
            "expr": _new_or_increased("vllm_log_weight_cache_daemon_exits_total", BS),
            "labels": {"severity": "warning"},
            "annotations": {
                "summary": "The weight-cache daemon of {{ $labels.server }} shut down",
                "description": "Ranks of the weight-cache daemon (vllm preload) exited and it shut down: servers that "
                               "use it now load their weights from storage at start (slower restarts). Its log before "
                               "this line says why the ranks exited; start the daemon again.",
            },
        },
    ]
    exporter = [
        {
            "alert": "VllmLogExporterDown",
            "expr": f"up{{{C.EXPORTER_SELECTOR}}} == 0",
            "for": "1m",
            "labels": {"severity": "critical"},
            "annotations": {
                "summary": "vllm-log-exporter {{ $labels.instance }} is down",
                "description": "Prometheus cannot scrape vllm-log-exporter at {{ $labels.instance }}: no vLLM log metric or "
                               "alert works for the servers it follows.",
            },
        },
        {
            # A central Prometheus fed by per-host agents: a host whose agent died sends no `up` at
            # all, so VllmLogExporterDown (up == 0) cannot fire for it.
            "alert": "VllmLogExporterGone",
            "expr": f"max_over_time(up{{{C.EXPORTER_SELECTOR}}}[1h]) unless up{{{C.EXPORTER_SELECTOR}}}",
            "for": "5m",
            "labels": {"severity": "critical"},
            "annotations": {
                "summary": "vllm-log-exporter {{ $labels.instance }}{{ with $labels.host }} on {{ . }}{{ end }} is no longer scraped",
                "description": "Its up series was there in the last hour and is gone: the host, or the Prometheus agent "
                               "that scrapes it and writes to this store, stopped. Nothing else fires for a target "
                               "nobody scrapes; this resolves an hour after it went, or when it is back.",
            },
        },
        {
            "alert": "VllmLogSourceDown",
            # a container source goes down on every deploy: not when the server was stopped on purpose
            "expr": f"vllm_log_exporter_source_up == 0\n  unless on ({BS}) {STOPPED}",
            "for": "5m",
            "labels": {"severity": "warning"},
            "annotations": {
                "summary": "vllm-log-exporter lost the log of {{ $labels.server }}",
                "description": "The exporter has not had the log of {{ $labels.server }} open for 5 minutes (file missing, "
                               "container gone, journalctl failing). The exporter's own log says why.",
            },
        },
        {
            "alert": "VllmLogStale",
            "expr": (
                f"time() - vllm_log_last_line_timestamp_seconds > {C.LOG_STALE_MINUTES * 60}\n"
                f"  and on ({BS}) vllm_log_exporter_source_up == 1\n"
                f"  unless on ({BS}) {STOPPED}"  # a server stopped on purpose logs nothing more
            ),
            "labels": {"severity": "warning"},
            "annotations": {
                "summary": f"No log line from {{{{ $labels.server }}}} for {C.LOG_STALE_MINUTES} minutes",
                "description": "The log is open but nothing has been written to it. An idle vLLM that nobody scrapes is quiet "
                               "(its stats go to DEBUG when idle); a hung one is too. Check that the server answers /health.",
            },
        },
        {
            "alert": "VllmLogLinesNotUnderstood",
            "expr": (
                f'sum by ({BS}) (rate(vllm_log_exporter_lines_total{{result="unparsed"}}[15m]))\n'
                f"  / sum by ({BS}) (rate(vllm_log_exporter_lines_total[15m])) > 0.2"
            ),
            "for": "15m",
            "labels": {"severity": "warning"},
            "annotations": {
                "summary": "{{ $value | humanizePercentage }} of the log lines of {{ $labels.server }} are not understood",
                "description": "A new vLLM build or a different log wrapper may have changed the format. "
                               "`vllm-log-exporter parse --stats LOG` lists the most common line shapes that were not recognised.",
            },
        },
    ]
    slo_groups = slo.groups()
    more_groups = capacity.groups() + cost.groups() + slo_groups
    more_alerts = [r for g in more_groups for r in g["rules"] if "alert" in r]
    for rule in errors + http + engine + exporter + more_alerts:
        rule["annotations"]["runbook_url"] = f"{C.RUNBOOK_BASE_URL}#{rule['alert'].lower()}"
        rule["annotations"]["dashboard_url"] = dashboard_url(rule["alert"], rule in exporter)
        for key, value in C.ALERT_OVERRIDES.get(rule["alert"], {}).items():
            if key == "severity":
                rule["labels"]["severity"] = value
            else:
                rule[key] = value
    return [
        {"name": "vllm-log-errors", "rules": errors},
        {"name": "vllm-log-http", "rules": http},
        {"name": "vllm-log-engine", "rules": engine},
        {"name": "vllm-log-exporter", "rules": exporter},
        *more_groups,
    ]
