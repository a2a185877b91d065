"""Error signatures: CUDA OOM, CUDA errors, NCCL errors and dead engines.

Checked in that order, because an OOM message also says "CUDA" (and ``CUDA error: out of memory``
is an OOM). ``NCCL INFO`` chatter and nccl version banners are not errors. These parsers see single
lines; a traceback's final exception line is run through them by the traceback joiner, so an OOM
that ends a traceback is one ``traceback`` and one ``oom`` event.
"""

from __future__ import annotations

from exporter.parsers.events import Event
from exporter.framing.frame import Frame
from exporter.parsers._values import to_bytes
from exporter.parsers.base import EXCEPTION_P, PROBLEM_LEVELS, UNREAD_HEADER_P, Parser, lazy_compile, where

_SZ = r"([\d.]+) ?(B|KiB|MiB|GiB|TiB|KB|MB|GB)"
_OOM = lazy_compile(r"(?:\b(CUDA|XPU|NPU|HIP) out of memory|(?:CUDA|HIP) error: out of memory|OutOfMemoryError"
                  r"|Ran out of memory in memory space)")
_TRIED = lazy_compile(rf"Tried to allocate {_SZ}")
# Every wording PyTorch's CUDA caching allocator has used for the numbers (c10/cuda/CUDACachingAllocator.cpp):
#   <= 2.0: "Tried to allocate X (GPU 0; T total capacity; A already allocated; F free; R reserved in total by PyTorch)"
#   2.1:    "Tried to allocate X. GPU 0 has a total capacty of T of which F is free. Including non-PyTorch memory,
#            this process has U memory in use. Of the allocated memory A is allocated by PyTorch, and R' is
#            reserved by PyTorch but unallocated."  (sic: "capacty")
#   >= 2.2: the same with "capacity", and "Process P has U memory in use." for each process on the GPU
_GPU_NEW = lazy_compile(rf"GPU (\d+) has a total capac(?:i)?ty of {_SZ} of which {_SZ} is free")
# (Ascend's torch_npu and XPU print the old form with their device's name; torch_npu adds "current active")
_GPU_OLD = lazy_compile(rf"\((?:GPU|NPU|XPU) (\d+); {_SZ} total capacity(?:; {_SZ} already allocated)?(?:; {_SZ} current "
                      rf"active)?(?:; {_SZ} free)?(?:; {_SZ} reserved in total by PyTorch)?")
_DEVICE_OOM = lazy_compile(r"\b(CUDA|XPU|NPU|HIP) out of memory")
# XLA on TPU (vLLM's TPU backends): "RESOURCE_EXHAUSTED: XLA:TPU compile permanent error. Ran out of memory in memory
# space hbm. Used 49.34G of 32.00G hbm. Exceeded hbm capacity by 17.34G." (binary units)
_XLA_OOM = lazy_compile(r"Ran out of memory in memory space (\w{1,16})\. Used ([\d.]+)([KMGT]) of ([\d.]+)([KMGT]) \w+\."
                      r"(?: Exceeded \w+ capacity by ([\d.]+)([KMGT])\.)?")
_IN_USE = lazy_compile(rf"this process has {_SZ} memory in use")
# torch >= 2.2 lists every process on the GPU instead: "Process 2684311 has 14.51 GiB memory in use."
_PROCESS_IN_USE = lazy_compile(rf"Process \d+ has {_SZ} memory in use")
_BY_PYTORCH = lazy_compile(rf"Of the allocated memory {_SZ} is allocated by PyTorch, and {_SZ} is reserved by PyTorch "
                         r"but unallocated")
_EXC_TYPE = lazy_compile(r"^([A-Za-z_][\w.]*(?:Error|Exception|Exit|Interrupt)):")

_CUDA_ERROR = lazy_compile(r"(?:CUDA|HIP) error: (.+?)\s*$|(cuMemcpyBatchAsync failed.*)$|(CUBLAS_STATUS_\w+)")
_NCCL = lazy_compile(
    r"NCCL error(?: in)?:? (.+)$|(nccl(?:UnhandledCudaError|SystemError|InternalError|InvalidArgument|InvalidUsage|RemoteError)\b.*)$"
    r"|(Watchdog caught collective operation timeout.*)$"
)
_ENGINE_DEAD = (
    "EngineCore encountered a fatal error",
    "EngineDeadError",
    "AsyncLLM output_handler failed",
    "died unexpectedly, shutting down client",
    "WorkerProc hit an exception",
    "AsyncEngineDeadError",
    "is already dead, terminating server process",
    "Engine background task failed",
    "Engine loop has died",
    "got fatal signal from worker processes",
    "Segfault encountered",
    # 0.32 (v1/engine/core_client.py): the API server's monitor saw the engine core process end
    "engine core exited unexpectedly",
    # 0.7's V1 engine (v1/engine/core.py, v1/engine/async_llm.py 0.7.3): the busy loop raised (the engine
    # core then signals the API server with SIGUSR1), the API server's output handler failed (it then kills
    # its own process tree); later releases log the wordings above
    "EngineCore hit an exception",
    "EngineCore output handler hit an error",
)


def _exc_type(msg: str) -> str | None:
    m = _EXC_TYPE.match(msg)
    return m.group(1) if m else None


def _oom(frame: Frame) -> list[Event] | None:
    msg = frame.message
    m = _OOM.search(msg)
    if not m:
        return None
    d = _DEVICE_OOM.search(msg)  # (torch.OutOfMemoryError: HIP out of memory: the device's words, not the type's)
    fields: dict = {"device": (d.group(1) if d else m.group(1) or "CUDA").lower(), "message": msg[:500]}
    x = _XLA_OOM.search(msg)
    if x:
        fields["device"] = "tpu" if "TPU" in msg else "xla"
        fields["in_use_bytes"] = to_bytes(float(x.group(2)), x.group(3) + "iB")
        fields["total_capacity_bytes"] = to_bytes(float(x.group(4)), x.group(5) + "iB")
        if x.group(6):
            fields["exceeded_bytes"] = to_bytes(float(x.group(6)), x.group(7) + "iB")
    t = _exc_type(msg)
    if t:
        fields["exception"] = t
    m = _TRIED.search(msg)
    if m:
        fields["tried_to_allocate_bytes"] = to_bytes(float(m.group(1)), m.group(2))
    m = _GPU_NEW.search(msg)
    if m:
        fields["gpu"] = int(m.group(1))
        fields["total_capacity_bytes"] = to_bytes(float(m.group(2)), m.group(3))
        fields["free_bytes"] = to_bytes(float(m.group(4)), m.group(5))
        m = _IN_USE.search(msg)
        if m:
            fields["in_use_bytes"] = to_bytes(float(m.group(1)), m.group(2))
        else:
            # every process's use on this GPU, summed (this process among them): what was not free
            used = [to_bytes(float(a), u) for a, u in _PROCESS_IN_USE.findall(msg)]
            if used:
                fields["in_use_bytes"] = sum(used)
                fields["processes_on_gpu"] = len(used)
        m = _BY_PYTORCH.search(msg)
        if m:
            fields["allocated_bytes"] = to_bytes(float(m.group(1)), m.group(2))
            # what PyTorch reserved = what it allocated + what it holds unallocated
            fields["reserved_bytes"] = fields["allocated_bytes"] + to_bytes(float(m.group(3)), m.group(4))
    else:
        m = _GPU_OLD.search(msg)
        if m:
            fields["gpu"] = int(m.group(1))
            fields["total_capacity_bytes"] = to_bytes(float(m.group(2)), m.group(3))
            if m.group(4):
                fields["allocated_bytes"] = to_bytes(float(m.group(4)), m.group(5))
            if m.group(6):
                fields["active_bytes"] = to_bytes(float(m.group(6)), m.group(7))
            if m.group(8):
                fields["free_bytes"] = to_bytes(float(m.group(8)), m.group(9))
            if m.group(10):
                fields["reserved_bytes"] = to_bytes(float(m.group(10)), m.group(11))
    return [Event("oom", fields)]


def _cuda(frame: Frame) -> list[Event] | None:
    msg = frame.message
    m = _CUDA_ERROR.search(msg)
    if not m or "out of memory" in msg:
        return None
    fields = {"error": next(g for g in m.groups() if g)[:300], "message": msg[:500]}
    t = _exc_type(msg)
    if t:
        fields["exception"] = t
    return [Event("cuda_error", fields)]


# PyTorch's process-group watchdog (NCCL, and the other platforms' backends: HCCL, XCCL...): "[PG ID 0 PG GUID
# 0(default_pg) Rank 3] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=1203, OpType=ALLREDUCE,
# NumelIn=1048576, NumelOut=1048576, Timeout(ms)=600000) ran for 600012 milliseconds before timing out."
_WATCHDOG = lazy_compile(
    r"(?:Rank (\d+)\] )?Watchdog caught collective operation timeout: Work(\w{1,16})\(SeqNum=(\d+), OpType=([A-Z_]{1,32})"
    r"(?:[^)]*?Timeout\(ms\)=(\d+))?\) ran for (\d+) milliseconds")


def _watchdog(msg: str) -> dict:
    m = _WATCHDOG.search(msg)
    if not m:
        return {}
    rank, backend, seq, op, timeout_ms, ran_ms = m.groups()
    fields = {"backend": backend.lower(), "seq_num": int(seq), "op": op, "elapsed_seconds": int(ran_ms) / 1000.0}
    if rank is not None:
        fields["rank"] = int(rank)
    if timeout_ms is not None:
        fields["timeout_seconds"] = int(timeout_ms) / 1000.0
    return fields


def _nccl(frame: Frame) -> list[Event] | None:
    msg = frame.message
    if "NCCL INFO" in msg:
        return None
    m = _NCCL.search(msg)
    if not m:
        return None
    # (V0's worker-method record has the traceback's first line after the error: ", Traceback (most recent call last):")
    fields = {"error": next(g for g in m.groups() if g).partition(", Traceback (most recent")[0][:300], "message": msg[:500]}
    if m.group(3):  # the watchdog's timeout: which collective, how long it ran, the timeout it broke
        fields.update(_watchdog(msg))
    t = _exc_type(msg)
    if t:
        fields["exception"] = t
    return [Event("nccl_error", fields)]


def _engine_dead(frame: Frame) -> list[Event] | None:
    msg = frame.message
    for sig in _ENGINE_DEAD:
        if sig in msg:
            fields = {"signature": sig, "message": msg[:500]}
            t = _exc_type(msg)
            if t:
                fields["exception"] = t
            return [Event("engine_dead", fields)]
    return None


# Where each is printed (the trust boundary): at the start of an exception's line (after its type and
# the types wrapping it), or as the whole message of a WARNING/ERROR/CRITICAL record or of stderr
# output; never at INFO or DEBUG, never after other words.
# V0's worker loop logs a method's failure with the exception's text on the record's first line (multiproc_worker_utils.py:
# "Exception in worker VllmWorkerProcess while processing method init_device: NCCL error: unhandled system error ...,
# Traceback (most recent call last):", vllm-project/vllm#7810)
_WORKER_METHOD = r"(?:Exception in worker [\w.-]{1,64} while processing method \w{1,64}: )?"
_EXC = UNREAD_HEADER_P + _WORKER_METHOD + EXCEPTION_P
# V0's model runner wraps the error: "Error in model execution (input dumped to /tmp/x.pkl): CUDA error: ..."
_MODEL_EXECUTION = r"(?:Error in model execution(?: \(input dumped to [^)]*\))?: )?"
# torch's c10 log line (glog), "[rank1]:[E1202 14:07:47.123456 ProcessGroupNCCL.cpp:1895] [PG ID 0 ...] ..."
# PyTorch's glog prefix: "[rank0]:[E1202 14:07:47.123456 ProcessGroupNCCL.cpp:632] [Rank 0] ", and the older
# form without the date (PyTorch 2.3 and before, as vLLM 0.5 printed it: "[rank0]:[E ProcessGroupNCCL.cpp:563] ")
GLOG_P = r"(?:\[rank\d+\]:)?\[[WEF](?:\d{4} [\d:.]+ (?:\d+ )?| )[\w.-]+:\d+\] (?:\[[^\]]*\] )*"
OOM = Parser("oom", ("out of memory", "OutOfMemoryError"), _oom, where(
    PROBLEM_LEVELS, start=_EXC + _MODEL_EXECUTION + r"(?:(?:CUDA|XPU|NPU|HIP) out of memory|(?:CUDA|HIP) error: out of memory"
                          r"|[\w.]*OutOfMemoryError\b|(?:Bad StatusOr access: )?RESOURCE_EXHAUSTED: (?:XLA:TPU compile "
                          r"permanent error\. )?Ran out of memory in memory space )"))
# (ROCm's torch says HIP where CUDA's says CUDA: "RuntimeError: HIP error: invalid argument", vllm-project/vllm#10855)
CUDA_ERROR = Parser("cuda_error", ("CUDA error", "HIP error", "cuMemcpyBatchAsync", "CUBLAS_STATUS"), _cuda, where(
    PROBLEM_LEVELS, start=_EXC + _MODEL_EXECUTION + r"(?:(?:CUDA|HIP) error: |cuMemcpyBatchAsync failed|CUBLAS_STATUS_)"))
NCCL_ERROR = Parser("nccl_error", ("NCCL error", "nccl", "Watchdog caught"), _nccl, where(
    PROBLEM_LEVELS, start=_EXC + r"(?:NCCL error|nccl[A-Z]\w*Error\b|nccl(?:InvalidArgument|InvalidUsage)\b|"
                          + GLOG_P + r"(?:Process group watchdog thread terminated with exception: (?:\[[^\]]*\] )*)?"
                          r"Watchdog caught collective operation timeout)"))
ENGINE_DEAD = Parser(
    "engine_dead",
    ("EngineCore", "EngineDead", "AsyncLLM", "died unexpectedly", "WorkerProc", "already dead",
     "Engine background", "Engine loop", "fatal signal", "Segfault", "exited unexpectedly"),
    _engine_dead,
    where(PROBLEM_LEVELS, start=_EXC + r"(?:EngineCore encountered a fatal error|[\w.]*EngineDeadError\b|"
                                r"AsyncLLM output_handler failed|Engine core proc \S+ died unexpectedly|"
                                r"WorkerProc hit an exception|\w+ is already dead, terminating server process|"
                                r"Engine background task failed|Engine loop has died|\w+ got fatal signal from worker|"
                                r"!+ Segfault encountered|(?:\[shutdown\] \w+: )?engine core exited unexpectedly|"
                                r"EngineCore hit an exception: |EngineCore output handler hit an error: )"),
)

from exporter.parsers import startup_failure  # noqa: E402 - one family of its own, checked among the errors

# A failed start-up before a dead engine: "Engine core initialization failed" is how a start fails.
ERROR_PARSERS = (OOM, CUDA_ERROR, NCCL_ERROR, startup_failure.PARSER, ENGINE_DEAD)
