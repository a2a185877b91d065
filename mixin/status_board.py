"""The Service status board: for the people who use the vLLM servers, not those who run them. Per
server, whether it serves (Online, Starting, Sleeping, Down, Failed to start) and, when it does not, the
log's reason in plain words; and over the last hour its median time to first token, its success rate
and its requests per minute.

The status is the exporter's (vllm_log_server_state: what the log last said of the server) with vLLM's
own sleep state (vllm:engine_sleep_state, where its /metrics is scraped): a serving engine put to sleep
(sleep mode) is Sleeping. The reason is the log's: the most frequent start-up failure's reason in the
time range, the last of a dead engine's errors, or a stop that was asked for.
"""

from __future__ import annotations

from mixin import config as C
from mixin.board import BAD, GOOD, NEUTRAL, WARN, Board, S

BOARD_UID = "vllm-log-status"
# vLLM's own series (its scrape job is the vllm_job variable); the recorded SLIs carry config.SLO_BY's labels
V = 'cluster=~"$cluster", job=~"$vllm_job", host=~"$host", server=~"$server"'
R = 'cluster=~"$cluster", host=~"$host", server=~"$server"'
SLEEPING_COLOUR = "purple"
# status number -> (word, colour)
STATUSES = {1: ("Online", GOOD), 2: ("Starting", NEUTRAL), 3: ("Sleeping", SLEEPING_COLOUR), 4: ("Down", BAD),
            5: ("Failed to start", BAD)}
# the log's reasons in plain words (exporter.parsers.events: STARTUP_FAILURE_REASONS, ERROR_KINDS)
FAILED_WORDS = {
    "kv_cache_too_small": "not enough GPU memory for the context length it was given",
    "no_kv_memory": "no GPU memory left for its cache after loading the model",
    "weights_oom": "the model does not fit in GPU memory",
    "bad_argument": "a setting it was started with is wrong",
    "model_not_found": "the model could not be found",
    "address_in_use": "its network port is taken by another program",
    "other": "an error while starting (the log has it)",
}
DEAD_WORDS = {
    "oom": "it ran out of GPU memory",
    "engine_dead": "its engine crashed",
    "cuda_error": "a GPU error",
    "nccl_error": "a failure between its GPUs",
}


def _state(states: str) -> str:
    return f'(max by (server) (vllm_log_server_state{{{S}, state=~"{states}"}}) == 1)'


SLEEPING = f'(max by (server) (vllm:engine_sleep_state{{{V}, sleep_state="awake"}}) == 0)'


def status() -> str:
    """Per server, the number of its status (STATUSES)."""
    return (f"5 * {_state('failed')}\n or on (server) 4 * {_state('stopped|dead')}\n"
            f" or on (server) 3 * ({_state('serving')} and on (server) {SLEEPING})\n"
            f" or on (server) 2 * {_state('starting')}\n or on (server) {_state('serving')}")


def _words(expr: str, label: str, words: dict[str, str]) -> str:
    """``expr`` with a ``why`` label: the plain words of its ``label``'s value."""
    for value, text in words.items():
        expr = f'label_replace({expr}, "why", "{text}", "{label}", "{value}")'
    return expr


def _said(expr: str, number: int, text: str) -> str:
    return f'label_replace(0 * {expr} + {number}, "why", "{text}", "", "")'


def reasons() -> str:
    """Per server, its status number with a ``why`` label: what the log says, in plain words."""
    failed = _words(f"topk by (server) (1, max by (server, reason) (increase(vllm_log_startup_failures_total{{{S}}}"
                    f"[$__range])) > 0)", "reason", FAILED_WORDS)
    kinds = "|".join(DEAD_WORDS)
    dead = _words(f'topk by (server) (1, max by (server, kind) (vllm_log_last_error_timestamp_seconds{{{S}, '
                  f'kind=~"{kinds}"}}))', "kind", DEAD_WORDS)
    branches = [
        f"max by (server, why) (0 * ({failed} and on (server) {_state('failed')}) + 5)",
        _said(_state("failed"), 5, "failed to start"),
        f"max by (server, why) (0 * ({dead} and on (server) {_state('dead')}) + 4)",
        _said(_state("dead"), 4, "its engine died"),
        _said(_state("stopped"), 4, "stopped on purpose (an update or a restart)"),
        _said(f"({_state('serving')} and on (server) {SLEEPING})", 3, "asleep: requests wait until it is woken"),
        _said(_state("starting"), 2, "starting up"),
        _said(_state("serving"), 1, "serving"),
    ]
    return "\n or on (server) ".join(branches)


def _mappings() -> list[dict]:
    return [{"type": "value", "options": {str(n): {"text": word, "color": colour, "index": n - 1}
                                          for n, (word, colour) in STATUSES.items()}}]


def status_board() -> dict:
    b = Board(BOARD_UID, "vLLM / Service status",
              "For the people who use the vLLM servers: is each one serving, and if not why, in plain words; "
              "how fast it answers and how often it fails over the last hour.", ["vllm-log-exporter", "vllm"])
    steps = [(None, GOOD), (2, NEUTRAL), (3, SLEEPING_COLOUR), (4, BAD)]
    b.row("Now")
    b.stat("Status", [(status(), "{{server}}")], "none", w=12, h=5, mappings=_mappings(), steps=steps, decimals=0,
           description="Online: serving. Starting: loading its model (minutes for a large one). Sleeping: put to "
                       "sleep to lend its GPU memory (sleep mode); requests wait until it is woken. Down: it stopped "
                       "or its engine died. Failed to start: it could not start. From what the server's log last "
                       "said (vllm_log_server_state) and vLLM's own sleep state.")
    b.stat("What the log says", [(reasons(), "{{server}}: {{why}}")], "none", w=12, h=5, steps=steps, decimals=0,
           options={"reduceOptions": {"calcs": ["lastNotNull"], "fields": "", "values": False},
                    "textMode": "name", "colorMode": "background", "graphMode": "none"},
           description="Each server's status in words, and for one that is down or failed to start, why: the "
                       "reason of its failed start (the most frequent in the time range), the last error of an "
                       "engine that died (out of GPU memory, a crash, a GPU error), or a stop that was asked for.")
    b.row("The last hour")
    b.stat("Median time to first token", [
        (f"histogram_quantile(0.5, sum by (server, le) (increase(vllm:time_to_first_token_seconds_bucket{{{V}}}[1h])))",
         "{{server}}")], "s", w=8, decimals=2,
        steps=[(None, GOOD), (C.SLOS.get("time_to_first_token", {}).get("threshold_seconds", 2.5), WARN)],
        description="Half the requests of the last hour got their first token within this time (vLLM's own "
                    "histogram, from its /metrics). Orange from the time-to-first-token objective's threshold.")
    b.panels[-1]["fieldConfig"]["defaults"]["noValue"] = "no request in the last hour"
    b.stat("Success rate", [(f'1 - slo:sli_error:ratio_rate1h{{{R}, slo="errors"}}', "{{server}}")], "percentunit",
           w=8, decimals=2, steps=[(None, BAD), (C.SLOS.get("errors", {}).get("objective", 0.999), GOOD)],
           description="The share of requests of the last hour that did not fail: the errors objective's measure "
                       "(a 5xx in the access log, or ended with an error or refused by vLLM, whichever counts "
                       "more). Green from the objective.")
    b.panels[-1]["fieldConfig"]["defaults"]["noValue"] = "no request in the last hour"
    b.stat("Requests per minute", [
        (f'(sum by (server) (increase(vllm_log_http_requests_total{{{S}, endpoint=~"{C.SLO_HTTP_ENDPOINTS}"}}[1h]))\n'
         f" or sum by (server) (increase(vllm:request_success_total{{{V}}}[1h]))) / 60", "{{server}}")],
        "reqpm", w=8, decimals=1, steps=[(None, NEUTRAL)],
        description="Requests a minute, averaged over the last hour: those the access log answered on the "
                    "inference endpoints, or those vLLM finished where the access log is off.")
    return b.model()


DASHBOARDS = {"status.json": status_board}
