"""KV capacity found at start-up: cache size in tokens, max concurrency, KV memory, block counts,
and the CPU-offload pool.

- ``GPU KV cache size: 285,336 tokens`` (0.8+; 0.28+ adds ``, Maximum concurrency ...`` on the same
  line; 0.30+ ``XPU``/``GPU + host`` instead of ``GPU``; 0.32's CPU backend ``CPU KV cache size:
  1,048,576 tokens, ...``: the word is ``device_type.upper()``, ``GPU`` for cuda,
  ``v1/core/kv_cache_utils.py:2310-2333``). ``device`` keeps the word as logged, as the stats line's
  ``device`` does (consumers lower-case it for labels, the report prints it).
- ``Maximum concurrency for 262,144 tokens per request: 1.09x`` (V0 prints ``32768``)
- ``Available KV cache memory: 8.59 GiB`` (one per TP worker)
- vLLM's CPU backend sizes its cache in host memory instead (``v1/worker/cpu_worker.py:229-261`` in
  0.32, one per worker and NUMA node, sizes are ``format_gib``: GiB rounded to 2 places):
  ``Explicitly set (1.0/23.54) GiB for KV cache on node 0.`` (``--kv-cache-memory-bytes`` /
  ``VLLM_CPU_KVCACHE_SPACE``) or ``Auto set (X/T) GiB for KV cache on node N, with R GiB requested
  memory for the worker. C GiB memory was consumed by non-kv usages.``; X is the cache, T the node's
  total memory.
- ``# GPU blocks: 28123, # CPU blocks: 2048`` / ``# cuda blocks: ...`` (V0) / ``# GPU blocks: N`` (early V1) /
  ``OpenVINO cpu: # device blocks: N; # swap blocks: M`` (V0's OpenVINO executor)
- ``Overriding num_gpu_blocks=N with num_gpu_blocks_override=M`` (``--num-gpu-blocks-override``, 0.6-0.34):
  the server runs with M blocks (``gpu_blocks``: M, ``profiled_blocks``: N). Not with N 0: releases that log it
  inside ``may_override_num_blocks`` also log the profiling run's minimal cache, sized for no memory
  (``available_memory=0``) and overridden to one block per sequence (``gpu_model_runner.py``'s
  ``_init_minimal_kv_cache_for_profiling``): a look-alike, no capacity
- ``Created mmap file /dev/shm/vllm_offload_....mmap (8.59 GB)`` (native CPU offload pool)
"""

from __future__ import annotations

from exporter.parsers.events import Event
from exporter.framing.frame import Frame
from exporter.parsers._values import to_bytes
from exporter.parsers.base import INFO_LEVELS, Parser, lazy_compile, where

_SIZE = lazy_compile(r"(?:^|\] |: |\s)([A-Za-z]+(?: \+ host)?) KV cache size: ([\d,]+) tokens")
_CONCURRENCY = lazy_compile(r"Maximum concurrency for ([\d,]+) tokens per request: ([\d.]+)x")
_MEMORY = lazy_compile(r"Available KV cache memory: (-?[\d.]+) ?(GiB|GB|MiB)")
_CPU_MEMORY = lazy_compile(r"(Explicitly|Auto) set \(([\d.]+)/([\d.]+)\) GiB for KV cache on node (\d+)"
                         r"(?:, with ([\d.]+) GiB requested memory for the worker\. ([\d.]+) GiB memory was consumed)?")
_BLOCKS = lazy_compile(r"# (\w+) blocks: (\d+)(?:, # CPU blocks: (\d+))?")
# --num-gpu-blocks-override: the count the server runs with is the override, not the one profiled
# (V0 engine/llm_engine.py, V1 v1/core/kv_cache_utils.py and kv_cache_planning.py, 0.6-0.34)
_OVERRIDE = lazy_compile(r"Overriding num_gpu_blocks=(\d+) with num_gpu_blocks_override=(\d+)")
_MMAP = lazy_compile(r"Created mmap file (\S+) \(([\d.]+) ?(GB|GiB|MB|MiB|TB|TiB)\)")


def _kv_size(frame: Frame) -> list[Event] | None:
    msg = frame.message
    out = []
    m = _SIZE.search(" " + msg)
    if m:
        out.append(Event("kv_cache_size", {"tokens": int(m.group(2).replace(",", "")), "device": m.group(1)}))
    m = _CONCURRENCY.search(msg)
    if m:
        out.append(
            Event(
                "max_concurrency",
                {"tokens_per_request": int(m.group(1).replace(",", "")), "concurrency": float(m.group(2))},
            )
        )
    return out or None


def _kv_memory(frame: Frame) -> list[Event] | None:
    m = _MEMORY.search(frame.message)
    if not m:
        return _cpu_kv_memory(frame.message)
    return [Event("kv_cache_memory", {"bytes": to_bytes(float(m.group(1)), "GiB" if m.group(2) == "GiB" else m.group(2))})]


def _cpu_kv_memory(msg: str) -> list[Event] | None:
    # The same fact as the GPU's "Available KV cache memory" (what the cache may hold, per worker),
    # so the same kind: `bytes` means the cache's size whichever memory holds it.
    m = _CPU_MEMORY.search(msg)
    if not m:
        return None
    fields = {"bytes": to_bytes(float(m.group(2)), "GiB"), "total_bytes": to_bytes(float(m.group(3)), "GiB"),
              "node": int(m.group(4)), "sized": "explicit" if m.group(1) == "Explicitly" else "auto"}
    if m.group(5) is not None:
        fields["requested_bytes"] = to_bytes(float(m.group(5)), "GiB")
        fields["non_kv_bytes"] = to_bytes(float(m.group(6)), "GiB")
    return [Event("kv_cache_memory", fields)]


def _blocks(frame: Frame) -> list[Event] | None:
    m = _BLOCKS.search(frame.message)
    if not m:
        m = _OVERRIDE.match(frame.message)
        if m and m.group(1) != "0":
            return [Event("gpu_blocks", {"device": "GPU", "gpu_blocks": int(m.group(2)),
                                         "profiled_blocks": int(m.group(1)), "overridden": True})]
        return None
    fields = {"device": m.group(1), "gpu_blocks": int(m.group(2))}
    if m.group(3) is not None:
        fields["cpu_blocks"] = int(m.group(3))
    return [Event("gpu_blocks", fields)]


def _mmap(frame: Frame) -> list[Event] | None:
    m = _MMAP.search(frame.message)
    if not m:
        return None
    return [Event("offload_pool", {"path": m.group(1), "bytes": to_bytes(float(m.group(2)), m.group(3))})]


# Where vLLM prints them (the trust boundary): start-up INFO records, each fact's words first.
KV_SIZE = Parser("kv_cache_size", (" KV cache size: ", "Maximum concurrency for "), _kv_size, where(
    INFO_LEVELS, start=r"(?:[A-Za-z]+(?: \+ host)? KV cache size: |Maximum concurrency for )"))
KV_MEMORY = Parser("kv_cache_memory", ("Available KV cache memory: ", " GiB for KV cache on node "), _kv_memory, where(
    INFO_LEVELS, start=r"(?:Available KV cache memory: |(?:Explicitly|Auto) set \()"))
GPU_BLOCKS = Parser("gpu_blocks", (" blocks: ", "Overriding num_gpu_blocks="), _blocks, where(
    INFO_LEVELS, start=r"(?:OpenVINO \w+: )?# \w+ blocks: |Overriding num_gpu_blocks=\d+ with "))
OFFLOAD_POOL = Parser("offload_pool", ("Created mmap file ",), _mmap, where(INFO_LEVELS, start="Created mmap file "))
