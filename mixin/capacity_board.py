"""The Overview's Capacity row: how many more requests each server can take now, its free KV cache,
where its KV usage is heading, and the engine's heartbeat (vLLM's step count beside the requests the
log shows admitted). Read from the recording rules of mixin/capacity.py, so the board shows what
VllmKvCacheFillingUp and VllmEngineNoSteps read."""

from __future__ import annotations

from mixin import config as C
from mixin.board import BAD, GOOD, NEUTRAL, SE, WARN, Board

# the capacity rules keep config.KEEP_LABELS, server and engine (no job)
R = 'cluster=~"$cluster", host=~"$host", instance=~"$instance", server=~"$server", engine=~"$engine"'
# the heartbeat's carry config.SLO_BY's (no job, no instance)
H = 'cluster=~"$cluster", host=~"$host", server=~"$server"'


def capacity_row(b: Board) -> None:
    w = C.HEARTBEAT_WINDOW
    b.row("Capacity (start-up facts and stats windows) and the engine's heartbeat")
    b.stat("Room for more requests (full length)", [
        (f"vllm_log:capacity_headroom_requests{{{R}}}", "{{server}} e{{engine}}")], "short", w=6, decimals=1,
        steps=[(None, BAD), (1, WARN), (4, GOOD)],
        description="How many more requests of the configured maximum length the KV cache holds now: the maximum "
                    "concurrency vLLM logged at start-up times the share of the KV cache free, less the requests "
                    "waiting (vllm_log:capacity_headroom_requests). The worst case: shorter requests fit more. "
                    "Negative: more requests wait than fit.")
    b.stat("Room for more requests (like those running)", [
        (f"vllm_log:capacity_headroom_typical_requests{{{R}}}", "{{server}} e{{engine}}")], "short", w=6,
        decimals=1, steps=[(None, BAD), (1, WARN), (4, GOOD)],
        description="How many more requests the size of those running now fit in the free KV cache, less those "
                    "waiting (vllm_log:capacity_headroom_typical_requests). Empty while nothing runs.")
    b.timeseries("Free KV cache", [(f"vllm_log:kv_cache_free_tokens{{{R}}}", "{{server}} e{{engine}}")], "short",
                 min_=0, w=12, decimals=0,
                 description="Tokens the KV cache still has room for: its size from the start-up line (\"KV cache "
                             "size: N tokens\") times the share free in the last stats window "
                             "(vllm_log:kv_cache_free_tokens).")
    b.timeseries("KV cache usage, now and in 1 h at its trend", [
        (f"max by (server, engine) (vllm_log_kv_cache_usage_ratio{{{SE}}})", "now {{server}} e{{engine}}"),
        (f"clamp(max by (server, engine) (predict_linear(vllm_log_kv_cache_usage_ratio{{{SE}}}"
         f"[{C.CAPACITY_TREND_WINDOW}], 3600)), 0, 1)", "in 1 h {{server}} e{{engine}}"),
    ], "percentunit", min_=0, max_=1, steps=[(None, GOOD), (1, BAD)], line=True,
        description=f"The KV cache's usage and where its trend over the last {C.CAPACITY_TREND_WINDOW} puts it in "
                    f"an hour (predict_linear). VllmKvCacheFillingUp warns when that reaches 100 % while the cache "
                    f"is at least {C.CAPACITY_MIN_USAGE:.0%} full.")
    b.timeseries("Engine steps (vLLM) and requests admitted (log)", [
        (f"vllm_log:engine_steps:increase{w}{{{H}}}", "steps {{server}}"),
        (f"vllm_log:requests_admitted:increase{w}{{{H}}}", "admitted {{server}}"),
    ], "short", min_=0,
        description=f"Over the last {w}: the engine steps vLLM counted (its vllm:iteration_tokens_total histogram's "
                    f"count, from its /metrics) and the requests the log shows admitted (the access log's 2xx answers "
                    f"to the inference endpoints, or the request logger's records). Requests and no step: the engine "
                    f"is wedged (VllmEngineNoSteps), whatever /health answers. Empty without vLLM's /metrics.")
    b.panels[-1]["fieldConfig"]["defaults"]["noValue"] = "no data: vLLM's own /metrics are not scraped"
