"""GPU memory facts at start-up: the memory split, model-weight loading and CUDA-graph capture.

- V1 (0.9.1+) ``Free memory on device (93.73/94.97 GiB) on startup. Desired GPU memory utilization
  is (0.975, 92.59 GiB). Actual usage is 81.01 GiB for weight (0.27+: ``18.4 GiB for consumed memory (weights +
  non-torch)``, ``consumed_bytes``), 2.45 GiB for peak activation, 0.2 GiB
  for non-torch memory, and 0.14 GiB for CUDAGraph memory. ... Current kv cache memory in use is 8.59 GiB.``
- V0 ``the current vLLM instance can use total_gpu_memory (79.33GiB) x gpu_memory_utilization (0.90)
  = 71.39GiB``, ``model weights take 4.03GiB; non_torch_memory takes 1.39GiB; PyTorch activation peak
  memory takes 0.32GiB; the rest of the memory reserved for KV Cache is 65.65GiB.`` and
  ``Memory profiling takes 20.40 seconds``.
- ``Model loading took 81.01 GiB memory and 40.2 seconds`` (all wordings since 0.3; "GB" there is GiB;
  Gaudi's ``Loading model weights took in total 15.05 GiB of device memory (...)``):
  the whole load, ``seconds``; ``Loading weights took 12.31 seconds``: reading the weights only,
  ``weights_load_seconds``; ``Initializing model took 0.071071 seconds``
  (``model_executor/model_loader/base_loader.py:82`` in 0.32): building the model's modules before
  any weight is read, ``init_seconds``. The last is a part of the first, not the same figure; vLLM's
  CPU backend logs only that one (its runner prints no "Model loading took").
- ``Graph capturing finished in 5 secs, took 0.14 GiB``; 0.31+'s multimodal encoder
  (``v1/worker/mm_encoder_model_runner.py``): ``Encoder graph capturing finished in 12 secs, took 0.52 GiB
  (48 graphs)`` (``graph: encoder``, ``graphs``).
- ``Time spent downloading weights for <model>: 73.125402 seconds`` (``model_executor/model_loader/
  weight_utils.py``, 0.7.3-0.34.0; only when the weights were fetched from the hub, not found cached):
  ``model_load`` with ``download_seconds`` (the model name is not kept).
- 0.18+: ``Estimated CUDA graph memory: X GiB total`` (``cuda_graph_estimate_bytes``), after capture ``CUDA graph
  pool memory: A GiB (actual), E GiB (estimated), difference: ...`` (``cuda_graph_bytes`` A, the estimate E), ``CUDA graph memory
  profiling is enabled ... --gpu-memory-utilization=U is equivalent to --gpu-memory-utilization=E without ...``
  (``equivalent_gpu_memory_utilization``: what the KV cache shrank to); XPU's ``Before memory profiling run,
  total GPU memory: ... MB, model load takes ... MB, free gpu memory is ... MB``; 0.26+'s ``Applying persisted
  startup plan (...): kv_cache_memory_bytes=N`` (``kv_cache_bytes``).
- the extensible KV cache (0.34, ``v1/worker/extensible_kv_cache.py``, on by default on CUDA and ROCm: the
  cache is reserved at start-up and its final size committed after warm-up, once the memory warm-up left is
  measured): ``Memory after warmup: F GiB free, C GiB committed to the KV cache, T GiB kept for transient
  activations (P GiB allocated at peak, R GiB of torch reservation growth); N KV cache blocks (S GiB) fit
  within the requested Q GiB. Torch may reserve up to L GiB.`` (``memory_profile``: ``peak_activation_bytes``
  is P, ``transient_bytes`` T, ``kv_cache_fit_blocks`` N...), then ``Extended KV cache to N blocks (X GiB).``
  (``kv_cache_extended``: the KV cache the server runs with).
"""

from __future__ import annotations

import re

from exporter.parsers.events import Event
from exporter.framing.frame import Frame
from exporter.parsers._values import to_bytes
from exporter.parsers.base import INFO_LEVELS, Parser, lazy_compile, where

_SZ = r"(-?[\d.]+) ?(GiB|GB|MiB|MB)"


def _size(num: str, unit: str) -> float:
    # "GB" in these lines is GiB: vLLM divides by 2**30 and prints "GB".
    return to_bytes(float(num), "MiB" if unit in ("MiB", "MB") else "GiB")


def _sizes(*names: str):
    def conv(m: re.Match) -> dict:
        g = m.groups()
        return {n: _size(g[2 * i], g[2 * i + 1]) for i, n in enumerate(names)}

    return conv


_PROFILE_PATTERNS = (
    (lazy_compile(r"Free memory on device \((-?[\d.]+)/([\d.]+) ?(?:GiB|GB)\)"),
     lambda m: {"free_bytes": _size(m.group(1), "GiB"), "total_bytes": _size(m.group(2), "GiB")}),
    (lazy_compile(rf"Desired GPU memory utilization is \(([\d.]+), {_SZ}\)"),
     lambda m: {"gpu_memory_utilization": float(m.group(1)), "requested_bytes": _size(m.group(2), m.group(3))}),
    (lazy_compile(rf"{_SZ} for weight"), _sizes("weights_bytes")),
    # 0.27+ counts weights and non-torch memory together: "Actual usage is 18.4 GiB for consumed memory (weights +
    # non-torch), ..."
    (lazy_compile(rf"{_SZ} for consumed memory"), _sizes("consumed_bytes")),
    (lazy_compile(rf"{_SZ} for peak activation"), _sizes("peak_activation_bytes")),
    (lazy_compile(rf"{_SZ} for non-torch memory"), _sizes("non_torch_bytes")),
    (lazy_compile(rf"{_SZ} for CUDAGraph memory"), _sizes("cuda_graph_bytes")),
    (lazy_compile(rf"Current kv cache memory in use is {_SZ}"), _sizes("kv_cache_bytes")),
    (lazy_compile(rf"total_gpu_memory \({_SZ}\) x gpu_memory_utilization \(([\d.]+)\) = {_SZ}"),
     lambda m: {"total_bytes": _size(m.group(1), m.group(2)), "gpu_memory_utilization": float(m.group(3)),
                "requested_bytes": _size(m.group(4), m.group(5))}),
    (lazy_compile(rf"model weights take {_SZ}"), _sizes("weights_bytes")),
    (lazy_compile(rf"non_torch_memory takes {_SZ}"), _sizes("non_torch_bytes")),
    (lazy_compile(rf"activation peak memory takes {_SZ}"), _sizes("peak_activation_bytes")),
    (lazy_compile(rf"reserved for KV Cache is {_SZ}"), _sizes("kv_cache_bytes")),
    (lazy_compile(r"Memory profiling takes ([\d.]+) seconds"), lambda m: {"profiling_seconds": float(m.group(1))}),
    # V0 0.6.x, one line: "Memory profiling results: total_gpu_memory=79.15GiB initial_memory_usage=15.74GiB
    # peak_torch_memory=16.40GiB memory_usage_post_profile=15.86GiB non_torch_memory=0.86GiB
    # kv_cache_size=54.75GiB gpu_memory_utilization=0.90"
    (lazy_compile(rf"total_gpu_memory={_SZ}"), _sizes("total_bytes")),
    (lazy_compile(rf"initial_memory_usage={_SZ}"), _sizes("initial_bytes")),
    (lazy_compile(rf"peak_torch_memory={_SZ}"), _sizes("peak_torch_bytes")),
    (lazy_compile(rf"non_torch_memory={_SZ}"), _sizes("non_torch_bytes")),
    (lazy_compile(rf"kv_cache_size={_SZ}"), _sizes("kv_cache_bytes")),
    (lazy_compile(r"Memory profiling results: .*gpu_memory_utilization=([\d.]+)"),
     lambda m: {"gpu_memory_utilization": float(m.group(1))}),
    # the KV cache sized by hand (0.11+): "Initial free memory 76.61 GiB, reserved 8.00 GiB memory for KV Cache
    # as specified by kv_cache_memory_bytes config and skipped memory profiling. ..."
    (lazy_compile(rf"Initial free memory {_SZ}, reserved {_SZ} memory for KV Cache as specified by kv_cache_memory_bytes"),
     lambda m: {"free_bytes": _size(m.group(1), m.group(2)), "kv_cache_bytes": _size(m.group(3), m.group(4)),
                "kv_cache_memory_bytes_set": True}),
    # 0.18-0.33's estimate before capture (gpu_model_runner.py): "Estimated CUDA graph memory: 0.58 GiB total"
    (lazy_compile(r"^Estimated CUDA graph memory: ([\d.]+) GiB total"),
     lambda m: {"cuda_graph_estimate_bytes": _size(m.group(1), "GiB")}),
    # 0.18+ (gpu_worker.py), after capture: "CUDA graph pool memory: 0.61 GiB (actual), 0.58 GiB (estimated), difference:
    # 0.03 GiB (4.9%)." (format_gib's values)
    (lazy_compile(r"^CUDA graph pool memory: (-?[\d.]+) GiB \(actual\), (-?[\d.]+) GiB \(estimated\)"),
     lambda m: {"cuda_graph_bytes": _size(m.group(1), "GiB"), "cuda_graph_estimate_bytes": _size(m.group(2), "GiB")}),
    # 0.18+ (gpu_worker.py): what the CUDA graph estimate did to --gpu-memory-utilization
    (lazy_compile(r"^CUDA graph memory profiling is enabled .*?The current --gpu-memory-utilization=([\d.]+) is "
                r"equivalent to --gpu-memory-utilization=([\d.]+) without CUDA graph memory profiling"),
     lambda m: {"gpu_memory_utilization": float(m.group(1)), "equivalent_gpu_memory_utilization": float(m.group(2))}),
    # XPU (0.9-0.15, xpu_worker.py): "Before memory profiling run, total GPU memory: 65536.00 MB, model load takes
    # 2400.00 MB, free gpu memory is 60000.00 MB."
    (lazy_compile(r"^Before memory profiling run, total GPU memory: ([\d.]+) MB, model load takes ([\d.]+) MB, free gpu "
                r"memory is ([\d.]+) MB"),
     lambda m: {"total_bytes": _size(m.group(1), "MB"), "weights_bytes": _size(m.group(2), "MB"),
                "free_bytes": _size(m.group(3), "MB")}),
    # 0.26+ (startup_plan.py): a persisted start-up plan sizes the KV cache without profiling
    (lazy_compile(r"^Applying persisted startup plan \(fingerprint [^)\s]{1,128}\): kv_cache_memory_bytes=(\d+) "),
     lambda m: {"kv_cache_bytes": float(int(m.group(1))), "kv_cache_memory_bytes_set": True}),
)
# 0.34's extensible KV cache, after warm-up (format_gib: GiB to two places)
_AFTER_WARMUP = lazy_compile(
    r"Memory after warmup: ([\d.]+) GiB free, ([\d.]+) GiB committed to the KV cache, ([\d.]+) GiB kept for transient "
    r"activations \(([\d.]+) GiB allocated at peak, ([\d.]+) GiB of torch reservation growth\); (\d+) KV cache blocks "
    r"\(([\d.]+) GiB\) fit within the requested ([\d.]+) GiB\.(?: Torch may reserve up to ([\d.]+) GiB)?")
_AFTER_WARMUP_FIELDS = ("free_bytes", "kv_cache_committed_bytes", "transient_bytes", "peak_activation_bytes",
                        "torch_reserve_growth_bytes", "kv_cache_fit_blocks", "kv_cache_fit_bytes", "requested_bytes",
                        "torch_limit_bytes")
_EXTENDED = lazy_compile(r"Extended KV cache to (\d+) blocks(?: \(([\d.]+) GiB\))?\.")
_KV_BYTES_HINT = lazy_compile(r"--kv-cache-memory-bytes=(\d+)`? \([\d.]+ GiB\) to (fit|fully)")

# Gaudi's runner (HabanaAI/vllm-fork hpu_model_runner.py, vllm-gaudi): "Loading model weights took in total
# 15.05 GiB of device memory (15.05 GiB/30.15 GiB used) and 1.134 GiB of host memory (...)", in MiB or KiB for
# a small model; its "Pre-loading model weights on hpu:0 took ..." (one device) is left to that total
_MODEL_LOAD = lazy_compile(r"(?:Model loading|Loading model weights) took (?:in total )?([\d.]+) ?(GiB|GB|MiB|KiB)"
                         r"(?: memory| of device memory)?(?: and ([\d.]+) seconds)?")
_WEIGHTS_IO = lazy_compile(r"Loading weights took ([\d.]+) seconds")
_MODEL_INIT = lazy_compile(r"^Initializing model took ([\d.]+) seconds")
_GRAPH = lazy_compile(r"(Encoder g|G)raph capturing finished in ([\d.]+) secs?(?:, took (-?[\d.]+) ?(GiB|GB|MiB))?"
                    r"(?: \((\d+) graphs\))?")
_DOWNLOAD = lazy_compile(r"Time spent downloading weights for .{0,1024}?: ([\d.]+) seconds$")


def _profile(frame: Frame) -> list[Event] | None:
    msg = frame.message
    if msg.startswith("Memory after warmup: "):
        m = _AFTER_WARMUP.match(msg)
        if not m:
            return None
        fields = {name: (int(v) if name.endswith("blocks") else _size(v, "GiB"))
                  for name, v in zip(_AFTER_WARMUP_FIELDS, m.groups()) if v is not None}
        return [Event("memory_profile", fields)]
    fields: dict = {}
    for rx, conv in _PROFILE_PATTERNS:
        m = rx.search(msg)
        if m:
            fields.update(conv(m))
    for m in _KV_BYTES_HINT.finditer(msg):
        fields["kv_cache_bytes_to_fit" if m.group(2) == "fit" else "kv_cache_bytes_to_fill"] = int(m.group(1))
    return [Event("memory_profile", fields)] if fields else None


def _model_load(frame: Frame) -> list[Event] | None:
    msg = frame.message
    m = _MODEL_LOAD.search(msg)
    if m:
        unit = m.group(2)
        fields = {"weights_bytes": to_bytes(float(m.group(1)), "GiB" if unit == "GB" else unit)}
        if m.group(3):
            fields["seconds"] = float(m.group(3))
        return [Event("model_load", fields)]
    m = _WEIGHTS_IO.search(msg)
    if m:
        return [Event("model_load", {"weights_load_seconds": float(m.group(1))})]
    m = _MODEL_INIT.search(msg)
    if m:
        return [Event("model_load", {"init_seconds": float(m.group(1))})]
    m = _DOWNLOAD.match(msg)
    if m:
        return [Event("model_load", {"download_seconds": float(m.group(1))})]
    return None


def _extended(frame: Frame) -> list[Event] | None:
    m = _EXTENDED.match(frame.message)
    if not m:
        return None
    fields: dict = {"blocks": int(m.group(1))}
    if m.group(2) is not None:
        fields["bytes"] = _size(m.group(2), "GiB")
    return [Event("kv_cache_extended", fields)]


def _graph(frame: Frame) -> list[Event] | None:
    m = _GRAPH.search(frame.message)
    if not m:
        return None
    fields: dict = {"seconds": float(m.group(2))}
    if m.group(3):
        fields["bytes"] = to_bytes(float(m.group(3)), "MiB" if m.group(4) == "MiB" else "GiB")
    if m.group(1) == "Encoder g":
        fields["graph"] = "encoder"
        if m.group(5):
            fields["graphs"] = int(m.group(5))
    return [Event("cuda_graph", fields)]


MEMORY_PROFILE = Parser(
    "memory_profile",
    ("Free memory on device", "total_gpu_memory (", "model weights take ", "Memory profiling takes ",
     "Memory profiling results: ", "as specified by kv_cache_memory_bytes", "Memory after warmup: ",
     "Estimated CUDA graph memory: ", "CUDA graph memory profiling is enabled", "Before memory profiling run, ",
     "Applying persisted startup plan ", "CUDA graph pool memory: "),
    _profile,
    # (the trust boundary: start-up INFO records, the words first; V0 prints its profile as lines of one record)
    where(INFO_LEVELS, start=r"(?:Free memory on device|the current vLLM instance can use total_gpu_memory|model weights "
                             r"take |Memory profiling takes |Memory profiling results: |Initial free memory |Memory after warmup: "
                             r"|Estimated CUDA graph memory: |CUDA graph memory profiling is enabled |Before memory profiling "
                             r"run, |Applying persisted startup plan |CUDA graph pool memory: )"),
)
MODEL_LOAD = Parser("model_load", (" took ", "Time spent downloading weights for "), _model_load, where(
    INFO_LEVELS, start=r"(?:Model loading took |Loading model weights took |Loading weights took |Initializing model took "
                       r"|Time spent downloading weights for )"))
CUDA_GRAPH = Parser("cuda_graph", ("raph capturing finished",), _graph, where(
    INFO_LEVELS, start="(?:Encoder g|G)raph capturing finished in "))
KV_CACHE_EXTENDED = Parser("kv_cache_extended", ("Extended KV cache to ",), _extended, where(
    INFO_LEVELS, ("extensible_kv_cache", "gpu_model_runner", "model_runner"), start="Extended KV cache to "))
