"""Label values taken from log content, bounded: no log (or attacker writing to it) can make series
without end. ``engine`` and ``gpu`` are 0-63, ``worker`` the first 32 process names of a run,
``status`` a registered HTTP status code, ``method`` and ``endpoint`` fixed sets; anything else is
``other`` (and counted in vllm_log_exporter_label_overflow_total{label})."""

from __future__ import annotations

from http import HTTPStatus

# The routes vLLM's OpenAI server (and its health/metrics endpoints) answer; anything else is
# "other", so a scanner requesting random paths cannot create series.
KNOWN_ENDPOINTS = frozenset(
    """
    /v1/chat/completions /v1/completions /v1/embeddings /v1/models /v1/responses /v1/messages
    /v1/audio/transcriptions /v1/audio/translations /v1/rerank /v2/rerank /rerank /v1/score /score
    /pooling /classify /tokenize /detokenize /health /ping /metrics /version /load /invocations
    /server_info /is_sleeping /sleep /wake_up /reset_prefix_cache /reset_mm_cache
    /v1/load_lora_adapter /v1/unload_lora_adapter /collective_rpc /scale_elastic_ep
    /is_scaling_elastic_ep /generate /docs /openapi.json /redoc /pause /resume /is_paused
    """.split()
)
KNOWN_METHODS = frozenset("GET POST PUT DELETE PATCH HEAD OPTIONS".split())
POSITIONS = tuple(str(i) for i in range(32))
_ENGINES = tuple(str(i) for i in range(64))
MAX_WORKERS = 32
# where the main KV cache lives, as vLLM words it ("GPU KV cache usage", "CPU KV cache size"...)
DEVICES = frozenset({"gpu", "cpu", "xpu", "npu", "hpu", "tpu", "gpu + host"})
_STATUSES = frozenset(int(s) for s in HTTPStatus)


def engine_label(engine) -> str | None:
    """The label of engine (or GPU) number ``engine`` (made once each), None beyond the bound."""
    return _ENGINES[engine] if type(engine) is int and 0 <= engine < 64 else None


def endpoint_label(path: str) -> str:
    return path if path in KNOWN_ENDPOINTS else "other"


def method_label(method: str) -> str:
    m = method.upper()
    return m if m in KNOWN_METHODS else "other"


def status_label(status: int) -> str:
    return str(status) if status in _STATUSES else "other"
