"""Recoveries and latency causes: a KV load that failed and was recovered (or failed the requests),
LMCache retrieves that came back short and allocations that found no memory, and kernels compiled
while serving.

Wordings, read from the released wheels (``pip download vllm==X`` / ``lmcache==X``); the research
behind each is in docs/research/issue28-warning-signs.md.

- ``kv_load_recovered`` (WARNING, ``v1/core/sched/scheduler.py``, 0.11.1 - 0.34.0): ``"Recovered from
  KV load failure: " "%d request(s) rescheduled (%d tokens affected)."``: a KV connector could not load
  some blocks and the scheduler recomputes them (``kv_load_failure_policy=recompute``, the default).
  Requests survive; the tokens are prefill done again (a latency cost).
- ``kv_load_failed`` (ERROR, same file, 0.14.1 - 0.34.0): ``"Failing %d request(s) due to KV load
  failure " "(failure_policy=fail, %d tokens affected). Request IDs: %s"``: the requests end in error.
- ``lmcache_retrieve_failed`` (LMCache's own logger, ``[%(asctime)s] LMCache %(levelname)s: %(message)s
  (%(filename)s:%(lineno)d:%(name)s)``, inside vLLM's process tag):
  - ERROR, ``integration/vllm/vllm_v1_adapter.py`` (0.3.1 - 0.5.6): ``"The number of retrieved tokens is
    less than the " "expected number of tokens! This should not happen!"`` (from about 0.4 prefixed by
    ``"Request %s"``, with no space), then ``"Num retrieved tokens: %d, num expected tokens: %d"``. The
    first line is ``part: "summary"``, the second ``part: "counts"`` with the numbers: count incidents
    by the summary, tokens by the counts.
  - WARNING, same file (0.4.1 - 0.5.6): ``"Request %s failed to load %d tokens across %d blocks"`` (the
    blocks are then reported to vLLM, which logs ``kv_load_recovered`` or ``kv_load_failed``).
  - WARNING, ``v1/cache_engine.py`` (0.4.1 - 0.5.6): ``"LMCache is unhealthy, skipping retrieve
    operation"`` / ``"... skipping retrieve_layer operation"``.
- ``lmcache_memory_unavailable`` (LMCache's allocators and backends found no free memory; stores are
  dropped or loads fall back to recompute):
  - ``v1/memory_management.py``: ``f"Failed to allocate memory for " f"tensor({shape}, {dtype}) because
    " "no memory is available"`` (DEBUG in 0.3.x, WARNING in the 0.2 ``experimental`` tree whose format
    is ``WARNING LMCache: <msg> [<time>] -- <path>:<line>``); ``"... because no free blocks is available"``
    (DEBUG, paged allocator); ``"Failed to allocate memory block of size %d " "because no memory is
    available"`` (WARNING, 0.4.1 - 0.5.6): ``bytes``.
  - WARNING ``"Failed to allocate memory during remote receive"`` (remote connectors, 0.3.1 - 0.5.6).
  - WARNING ``"Failed to allocate memory object, retrying..."`` (PD backend / nixl_connector_v3,
    0.3.9 - 0.5.6; repeats while a transfer waits: a stall sign).
  - ``"Memory allocation failed during sync disk load."`` (DEBUG 0.3.x, ERROR 0.4.7+) / ``"... async
    disk load."`` (DEBUG).
  - WARNING ``"Failed to allocate memory for the KV cache."`` (``v1/cache_engine.py`` store, 0.3.x).
  - WARNING ``"Local cpu memory under pressure so" " choosing to store only " " %d total chunks of KV
    cache."`` / ``"... choosing to not store the KV cache."`` (0.3.9 - 0.5.6).
  - ERROR ``"Memory allocation failed during get_blocking for %s"`` (GPUDirect Storage backends, 0.3.7 -
    0.5.6): ``disk_load``.
  Framing reads LMCache's header (its level and file); vLLM prints none of these words, and its own copy
  of the adapter (``kv_connector/v1/lmcache_integration/vllm_v1_adapter.py``, 0.11.2 - 0.34.0, the path
  ``LMCacheConnectorV1`` takes with ``use_native``) logs the two short-retrieve lines under vLLM's header.
- ``jit_during_inference`` (a kernel compiled after warm-up: the latency spike's cause; WARNING,
  ``logger.warning_once`` unless ``--jit-monitor-verbose``):
  - ``triton_utils/jit_monitor.py`` 0.21.0 - 0.24.0: ``"Triton kernel JIT compilation during inference:
    %s. " "This causes a latency spike; consider extending warmup " "to cover this shape/config."``;
    0.24.0 verbose: ``"Triton %sJIT compilation during inference: %s (key=%s)."`` (``%s`` is ``"kernel "``
    or ``"autotune/warmup candidate "``).
  - ``utils/jit_monitor.py`` 0.25.1 - 0.34.0: ``"%s %s during inference: %s%s. " ...`` with backend
    ``Triton`` / ``CuTeDSL`` / ``FlyDSL`` (0.30+) / ``TileLang`` (0.26+) and event ``kernel JIT
    compilation`` (Triton) or ``JIT compilation``; the last ``%s`` is `` (<verbose details>)`` or empty.
    With ``--jit-monitor-mode=error`` the same text is raised as a ``RuntimeError`` (the end of a
    traceback, and the engine's death): ``mode: "error"``.
  The monitor's own INFO line, ``"Kernel JIT monitor activated; monitored JIT compilations during
  inference will use mode=%s."``, is not one.
"""

from __future__ import annotations

from exporter.parsers.events import Event
from exporter.framing.frame import Frame
from exporter.parsers.base import EXCEPTION_P, PROBLEM_LEVELS, Parser, lazy_compile, where

# --- vLLM's KV load failure handling ------------------------------------------------------------------

_KV_RECOVERED = lazy_compile(r"Recovered from KV load failure: (\d+) request\(s\) rescheduled \((\d+) tokens affected\)")
_KV_FAILED = lazy_compile(r"Failing (\d+) request\(s\) due to KV load failure(?: \(failure_policy=(\w+), (\d+) tokens affected\))?")


def _kv_load(frame: Frame) -> list[Event] | None:
    msg = frame.message
    m = _KV_RECOVERED.search(msg)
    if m:
        return [Event("kv_load_recovered", {"requests": int(m.group(1)), "tokens": int(m.group(2))})]
    m = _KV_FAILED.search(msg)
    if m:
        fields: dict = {"requests": int(m.group(1))}
        if m.group(3):
            fields["tokens"] = int(m.group(3))
        return [Event("kv_load_failed", fields)]
    return None


# --- LMCache ----------------------------------------------------------------------------------------

_LMC_SHORT = "The number of retrieved tokens is less than the expected number of tokens"
_LMC_COUNTS = lazy_compile(r"Num retrieved tokens: (\d+), num expected tokens: (\d+)")
_LMC_BLOCKS = lazy_compile(r"failed to load (\d+) tokens across (\d+) blocks")
_LMC_UNHEALTHY = lazy_compile(r"LMCache is unhealthy, skipping (retrieve(?:_layer)?) operation")


def _lmcache_retrieve(frame: Frame) -> list[Event] | None:
    msg = frame.message
    if _LMC_SHORT in msg:
        return [Event("lmcache_retrieve_failed", {"reason": "fewer_tokens", "part": "summary"})]
    m = _LMC_COUNTS.match(msg)
    if m:
        got, want = int(m.group(1)), int(m.group(2))
        return [Event("lmcache_retrieve_failed", {"reason": "fewer_tokens", "part": "counts", "retrieved_tokens": got,
                                                  "expected_tokens": want, "missing_tokens": max(want - got, 0)})]
    m = _LMC_BLOCKS.search(msg)
    if m:
        return [Event("lmcache_retrieve_failed", {"reason": "blocks_failed", "tokens": int(m.group(1)),
                                                  "blocks": int(m.group(2))})]
    m = _LMC_UNHEALTHY.match(msg)
    if m:
        return [Event("lmcache_retrieve_failed", {"reason": "unhealthy", "op": m.group(1)})]
    return None


_LMC_BLOCK_SIZE = lazy_compile(r"Failed to allocate memory block of size (\d+) because no memory is available")
_LMC_TENSOR = lazy_compile(r"Failed to allocate memory for tensor\(.*?\) because no (?:memory|free blocks) is available")
_LMC_PRESSURE = lazy_compile(r"Local cpu memory under pressure so\s+choosing to (?:store only\s+(\d+) total chunks|not store)")
# substring -> where the allocation failed
_LMC_WHERE = (
    ("Failed to allocate memory during remote receive", "remote_receive"),
    ("Failed to allocate memory object, retrying", "transfer_receive"),
    ("Memory allocation failed during sync disk load", "disk_load"),
    ("Memory allocation failed during async disk load", "disk_load"),
    # GPUDirect Storage backends reading an object back (gds_backend.py 0.3.15+, weka_gds_backend.py 0.3.7)
    ("Memory allocation failed during get_blocking", "disk_load"),
    ("Failed to allocate memory for the KV cache", "store"),
)


def _lmcache_memory(frame: Frame) -> list[Event] | None:
    msg = frame.message
    m = _LMC_BLOCK_SIZE.search(msg)
    if m:
        return [Event("lmcache_memory_unavailable", {"where": "allocator", "bytes": int(m.group(1))})]
    if _LMC_TENSOR.search(msg):
        return [Event("lmcache_memory_unavailable", {"where": "allocator"})]
    for needle, where in _LMC_WHERE:
        if needle in msg:
            return [Event("lmcache_memory_unavailable", {"where": where})]
    m = _LMC_PRESSURE.search(msg)
    if m:
        fields: dict = {"where": "store_pressure"}
        if m.group(1):
            fields["stored_chunks"] = int(m.group(1))
        return [Event("lmcache_memory_unavailable", fields)]
    return None


# --- kernels compiled while serving ---------------------------------------------------------------------

_JIT = lazy_compile(r"\b(Triton|CuTeDSL|FlyDSL|TileLang) (?:kernel |autotune/warmup candidate )?JIT compilation "
                  r"during inference: ([^\s()]+?)(?: \(|\.(?:\s|$)|$)")
_JIT_CANDIDATE = "autotune/warmup candidate JIT compilation"


def _jit(frame: Frame) -> list[Event] | None:
    msg = frame.message
    m = _JIT.search(msg)
    if not m:
        return None
    fields = {"backend": m.group(1), "kernel": m.group(2)[:120],
              "mode": "error" if msg.lstrip().startswith("RuntimeError:") else "warn"}
    if _JIT_CANDIDATE in msg:
        fields["autotune_candidate"] = True
    return [Event("jit_during_inference", fields)]


# Where each is printed (the trust boundary): the scheduler's WARNING and ERROR records, LMCache's own
# lines (its header first), the JIT monitor's WARNING or the RuntimeError it raises.
KV_LOAD = Parser("kv_load", ("Recovered from KV load failure", "due to KV load failure"), _kv_load, where(
    PROBLEM_LEVELS, ("scheduler", "async_scheduler"),
    start=r"(?:Recovered from KV load failure: |Failing \d+ request\(s\) due to KV load failure)"))
# LMCache's short retrieves come from its vLLM adapter (and vLLM's own copy of it, under vLLM's header, whose
# lines hold no "LMCache") and its engine; "Request %s" before two of them is a request's id.
LMCACHE_RETRIEVE_FAILED = Parser(
    "lmcache_retrieve_failed",
    ("number of retrieved tokens is less", "Num retrieved tokens", "tokens across", "skipping retrieve"),
    _lmcache_retrieve,
    where(("WARNING", "ERROR", "CRITICAL"), ("vllm_v1_adapter", "cache_engine"),
          start=r"(?:Request .*)?The number of retrieved tokens is less than the expected|Num retrieved tokens: |"
                r"Request .* failed to load \d+ tokens across \d+ blocks$|LMCache is unhealthy, skipping retrieve"),
)
# LMCache's allocators and storage backends (a dozen files; vLLM prints none of these words): at any level
# LMCache's header gives, never on a bare line
LMCACHE_MEMORY_UNAVAILABLE = Parser(
    "lmcache_memory_unavailable",
    ("Failed to allocate memory", "Memory allocation failed during", "memory under pressure"),
    _lmcache_memory,
    where(("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL"),
          start=r"Failed to allocate memory |Memory allocation failed during |Local cpu memory under pressure"),
)
JIT_DURING_INFERENCE = Parser("jit_during_inference", ("JIT compilation during inference: ",), _jit, where(
    PROBLEM_LEVELS, ("jit_monitor",), start=EXCEPTION_P + r"(?:Triton|CuTeDSL|FlyDSL|TileLang) (?:kernel |autotune/"
                                            r"warmup candidate )?JIT compilation during inference: "))

# In trying order; none of their needles overlaps another family's message. JIT_DURING_INFERENCE also
# ends tracebacks (--jit-monitor-mode=error), so it belongs among the error parsers too.
PARSERS = (KV_LOAD, LMCACHE_RETRIEVE_FAILED, LMCACHE_MEMORY_UNAVAILABLE, JIT_DURING_INFERENCE)
KINDS = ("kv_load_recovered", "kv_load_failed", "lmcache_retrieve_failed", "lmcache_memory_unavailable",
         "jit_during_inference")
