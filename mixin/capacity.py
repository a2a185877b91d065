"""How much more a server can take, and whether its engine still steps: recording rules and two alerts.

Capacity comes from what only the log has, the start-up facts (the KV cache's size in tokens, the maximum
concurrency at the configured context, per engine), with the running and waiting requests and the KV
cache's usage of each stats window:

- ``vllm_log:kv_cache_free_tokens``: the tokens the KV cache still has room for now;
- ``vllm_log:capacity_headroom_requests``: how many more requests of the configured maximum length it
  holds (the maximum concurrency times the free share), less those already waiting: the worst case;
- ``vllm_log:capacity_headroom_typical_requests``: the same with requests the size of those running now;
- ``vllm_log:kv_cache_full_in_seconds``: when the KV cache is full at its current trend (absent when it
  is not filling).

VllmKvCacheFillingUp warns when ``predict_linear`` puts the usage at 100 % within the horizon.

The heartbeat: vLLM's ``vllm:iteration_tokens_total`` histogram gains one observation per engine step, so
its count stands still only when the engine makes no step. Keyed on the requests the log shows admitted
(the access log's 2xx answers to the inference endpoints, the request logger's records), not on
``vllm:num_requests_running``, which reads 0 on a wedged engine: VllmEngineNoSteps fires when requests
come in and no step is made. It confirms VllmEngineStalled (the log's own stall), or stands in for it when
the log has no stats lines; Alertmanager holds it back while that one fires (deploy/alertmanager).
"""

from __future__ import annotations

from mixin import config as C
from mixin.slo import BY as SLO_BY

V = C.VLLM_SELECTOR


def _by(*labels: str) -> str:
    return ", ".join([*C.KEEP_LABELS, *labels])


BS, BSE = _by("server"), _by("server", "engine")
STOPPED_OR_DEAD = 'vllm_log_server_state{state=~"stopped|dead"} == 1'
USAGE = f"max by ({BSE}) (vllm_log_kv_cache_usage_ratio)"
HEADROOM_ALERT, HEARTBEAT_ALERT = "VllmKvCacheFillingUp", "VllmEngineNoSteps"
# the inference endpoints of the access log (the SLOs' own), answered 2xx: requests the engine must step for
ADMITTED = (f'increase(vllm_log_http_requests_total{{endpoint=~"{C.SLO_HTTP_ENDPOINTS}", status=~"2.."}}'
            f"[{C.HEARTBEAT_WINDOW}])")
LOGGED = f"increase(vllm_log_requests_logged_total[{C.HEARTBEAT_WINDOW}])"


def _query(metric: str, fmt: str, labels: str = "server") -> str:
    """An alert template's look-up of one series of the alert's server (and engine), printed with ``fmt``."""
    keys = ", ".join(f'{k}=\\"%s\\"' for k in labels.split())
    args = " ".join(f"$labels.{k}" for k in labels.split())
    return (f'{{{{ with printf "{metric}{{{keys}}}" {args} | query }}}}{{{{ with first . }}}}'
            f"{fmt}{{{{ end }}}}{{{{ end }}}}")


def capacity_rules() -> list[dict]:
    tokens = f"max by ({BSE}) (vllm_log_kv_cache_tokens)"
    running = f"max by ({BSE}) (vllm_log_requests_running)"
    waiting = f"max by ({BSE}) (vllm_log_requests_waiting)"
    free = "vllm_log:kv_cache_free_tokens"
    return [
        {"record": free, "expr": f"{tokens}\n  * on ({BSE}) (1 - {USAGE})"},
        {"record": "vllm_log:capacity_headroom_requests",
         "expr": f"max by ({BSE}) (vllm_log_max_concurrency) * on ({BSE}) (1 - {USAGE})\n"
                 f"  - on ({BSE}) ({waiting} or 0 * {USAGE})"},
        {"record": "vllm_log:capacity_headroom_typical_requests",
         # (tokens in use per running request; none when nothing runs or nothing is in use)
         "expr": f"{free}\n  / on ({BSE}) ({tokens} * on ({BSE}) {USAGE} / on ({BSE}) ({running} > 0) > 0)\n"
                 f"  - on ({BSE}) ({waiting} or 0 * {USAGE})"},
        {"record": "vllm_log:kv_cache_full_in_seconds",
         "expr": f"(1 - {USAGE})\n  / on ({BSE}) (max by ({BSE}) "
                 f"(deriv(vllm_log_kv_cache_usage_ratio[{C.CAPACITY_TREND_WINDOW}])) > 0)"},
    ]


def capacity_alert() -> dict:
    return {
        "alert": HEADROOM_ALERT,
        "expr": f"max by ({BSE}) (predict_linear(vllm_log_kv_cache_usage_ratio[{C.CAPACITY_TREND_WINDOW}], "
                f"{_seconds(C.CAPACITY_HORIZON)})) >= 1\n"
                f"  and on ({BSE}) max by ({BSE}) (predict_linear(vllm_log_kv_cache_usage_ratio"
                f"[{C.CAPACITY_RECENT_WINDOW}], {_seconds(C.CAPACITY_HORIZON)})) >= 1\n"
                f"  and on ({BSE}) {USAGE} >= {C.CAPACITY_MIN_USAGE:g}\n"
                f"  and on ({BS}) max by ({BS}) (vllm_log_exporter_source_up) == 1\n"
                f"  unless on ({BS}) {STOPPED_OR_DEAD}",
        "for": "15m",
        "labels": {"severity": "warning"},
        "annotations": {
            "summary": "The KV cache of {{ $labels.server }} (engine {{ $labels.engine }}) will be full within "
                       f"{C.CAPACITY_HORIZON} at its trend",
            "description": "Its KV cache is "
                           + _query("vllm_log_kv_cache_usage_ratio", "{{ .Value | humanizePercentage }}",
                                    "server instance engine")
                           + f" full and has grown for {C.CAPACITY_TREND_WINDOW}; at that pace it is full "
                           + _query("vllm_log:kv_cache_full_in_seconds", "in {{ .Value | humanizeDuration }}",
                                    "server instance engine")
                           + f" (within {C.CAPACITY_HORIZON}). Capacity from start-up: "
                           + _query("vllm_log_kv_cache_tokens", "{{ .Value | printf \"%.0f\" }} tokens of KV cache, ",
                                    "server instance engine")
                           + _query("vllm_log_max_concurrency", "{{ .Value | printf \"%.1f\" }} requests at the "
                                    "full context, ", "server instance engine")
                           + _query("vllm_log:capacity_headroom_requests", "room for {{ .Value | printf \"%.1f\" }} "
                                    "more now", "server instance engine")
                           + ". Once full, requests wait and get preempted (VllmKvCacheFull): add a replica or KV "
                             "memory, or lower --max-num-seqs or the context before it is.",
        },
    }


def heartbeat_rules() -> list[dict]:
    return [
        {"record": f"vllm_log:requests_admitted:increase{C.HEARTBEAT_WINDOW}",
         "expr": f"sum by ({SLO_BY}) ({ADMITTED}) > 0\n  or sum by ({SLO_BY}) ({LOGGED})"},
        {"record": f"vllm_log:engine_steps:increase{C.HEARTBEAT_WINDOW}",
         "expr": f"sum by ({SLO_BY}) (increase(vllm:iteration_tokens_total_count{{{V}}}[{C.HEARTBEAT_WINDOW}]))"},
    ]


def heartbeat_alert() -> dict:
    w = C.HEARTBEAT_WINDOW
    return {
        "alert": HEARTBEAT_ALERT,
        "expr": f"vllm_log:requests_admitted:increase{w} > 0\n"
                f"  and on ({SLO_BY}) vllm_log:engine_steps:increase{w} == 0\n"
                # a server stopped or dead is the log's to say; a sleeping engine makes no step on purpose;
                # within a window of a start the admissions may be the last process's (a request answered as it
                # was stopped) and the steps the new one's, which has made none yet
                f"  unless on ({SLO_BY}) max by ({SLO_BY}) ({STOPPED_OR_DEAD})\n"
                f"  unless on ({SLO_BY}) max by ({SLO_BY}) "
                f"(time() - vllm_log_last_start_timestamp_seconds < {_seconds(w)})\n"
                f'  unless on ({SLO_BY}) max by ({SLO_BY}) (vllm:engine_sleep_state{{{V}, sleep_state="awake"}} == 0)',
        "for": "2m",
        "labels": {"severity": "critical"},
        "annotations": {
            "summary": "vLLM on {{ $labels.server }} admits requests and its engine makes no step",
            "description": f"The log shows {{{{ $value | printf \"%.0f\" }}}} requests admitted in the last {w} (the "
                           "access log's answers, the request logger's records) and vLLM's own "
                           "vllm:iteration_tokens_total, which counts every engine step, has not moved: the engine "
                           "is wedged. /health still answers 200 and vllm:num_requests_running may read 0. Restart "
                           "the server; vLLM 0.33+'s watchdog (--watchdog-config with a dump_dir) dumps the stacks "
                           "of a wedged loop, which the exporter reads.",
        },
    }


def _seconds(window: str) -> int:
    from mixin.slo import seconds

    return seconds(window)


def groups() -> list[dict]:
    return [
        {"name": "vllm-log-capacity", "rules": capacity_rules() + [capacity_alert()]},
        {"name": "vllm-log-heartbeat", "rules": heartbeat_rules() + [heartbeat_alert()]},
    ]


def alert_names() -> set[str]:
    return {HEADROOM_ALERT, HEARTBEAT_ALERT}
