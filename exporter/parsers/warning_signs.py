"""Warning signs before a hang or a death: an RPC to the workers that timed out, a worker process that
died, a Ray actor that died, a GPU memory fault on ROCm, and the fatal-signal line of vLLM 0.7-0.8.4.

Wordings, read from the released wheels (``pip download vllm==X``) and the runtimes' sources; the
research behind each is in docs/research/issue28-warning-signs.md.

- ``rpc_timeout`` (the engine core waited ``VLLM_EXECUTE_MODEL_TIMEOUT_SECONDS`` for its workers: the
  workers are hung, or a collective is stuck):
  - V1 ``v1/executor/multiproc_executor.py`` ``collective_rpc`` (0.6.6 - 0.34.0, every release read):
    ``raise TimeoutError(f"RPC call to {method} timed out.")``; ``method`` is ``execute_model``,
    ``sample_tokens`` (0.11.1+), ``execute_dummy_batch``, ``take_draft_token_ids``, ``check_health``, ...
    Never logged by itself: it is the last line of the ``EngineCore encountered a fatal error.``
    traceback (``logger.exception`` in ``v1/engine/core.py``, so at ERROR with the header on every
    line). ``method`` may be a pickled callable: then its repr is printed and is kept as ``<callable>``.
  - V0 ``engine/multiprocessing/client.py`` (0.6 - 0.10.x): ``TimeoutError("RPCServer didn't reply
    within " f"{VLLM_RPC_TIMEOUT} ms")`` and ``"MQLLMEngine didn't reply within " f"{VLLM_RPC_TIMEOUT}ms"``:
    ``timeout_seconds`` is read from them.
- ``engine_dead`` with the fatal-signal wording (0.7.0 - 0.8.4; gone from 0.8.5): workers send SIGUSR1
  to their parent on an unrecoverable error. ``v1/executor/multiproc_executor.py`` logs at CRITICAL
  ``"MulitprocExecutor got fatal signal from worker processes, shutting down. See stack trace above
  for root cause issue."`` (sic), ``v1/engine/core_client.py`` logs at CRITICAL ``"Got fatal signal from
  worker processes, shutting down. See stack trace above for root cause issue."`` (capital G: the
  lower-case signature in exporter.parsers.errors misses this one).
- ``worker_died`` (a worker process ended while the executor was not shutting down: an engine death
  follows, unless a stop was asked for):
  - ``v1/executor/multiproc_executor.py`` ERROR: ``"Worker proc %s died unexpectedly, shutting down
    executor."`` (0.8.5 - 0.25.x), ``"Worker proc %s died unexpectedly (exit code: %s), shutting down
    executor."`` (0.26.0 - 0.34.0); the name is ``VllmWorker-{rank}``; the exit code may be ``None``.
  - ``v1/executor/ray_executor_v2.py`` ERROR (0.20.2 - 0.34.0): ``"RayWorkerProc rank=%s died
    unexpectedly, shutting down executor."`` (``%s`` is a list of ranks).
  - ``v1/utils.py`` (multi API server mode; RuntimeError logged by ``"Exception occurred while running
    API servers: %s"``): ``f"Process {proc.name} (PID: {proc.pid}) died with exit code {proc.exitcode}"``
    (0.9.2 - 0.34.0) and ``f"Engine core process {name} died unexpectedly."`` (0.20.2 - 0.34.0).
  - V0 ``executor/multiproc_worker_utils.py`` ERROR (<= 0.10.x): ``"Worker %s pid %s died, exit code:
    %s"``; a negative exit code is the signal that ended it (-15: SIGTERM, usually a consequence of a
    shutdown already under way; -9: SIGKILL, often the kernel's OOM killer; -11: SIGSEGV).
- ``ray_actor_died``: Ray's GCS (``src/ray/gcs/gcs_server/gcs_actor_manager.cc``, ``GenWorkerDiedCause``):
  ``"The actor is dead because its worker process has died. Worker exit type: " <WorkerExitType>
  " Worker exit detail: " <detail>``. The detail of a lost connection lists the OOM killer as one of
  several *possible* causes: ``possible_oom`` says so, and nothing here is an ``oom``.
- ``gpu_memory_fault``: ROCm's HSA runtime (ROCm/ROCR-Runtime ``runtime/hsa-runtime/core/runtime/
  runtime.cpp``, ``VMFaultHandler``; older ``src/core/runtime/runtime.cpp``) writes to stderr and
  aborts the process: ``"Memory access fault by GPU node-%u (Agent handle: %p) on address %p%s.
  Reason: %s.\\n"`` (older runtimes: without the agent handle); ``%s`` after the address is
  ``"(may not be exact address)"`` or empty. Its ``HwExceptionHandler``: ``"HW Exception by GPU
  node-%u (Agent handle: %p) reason :%s\\n"`` (``GPU Hang`` or ``ECC``), also followed by an abort.

Fields are bounded: names of processes, ranks, exit codes, enum-like reasons; no addresses, handles or
free text beyond a short ``message``.
"""

from __future__ import annotations

import re
import signal as _signal

from exporter.parsers.events import Event
from exporter.framing.frame import PROCESS_NAME_P, Frame
from exporter.parsers.base import EXCEPTION_P, NO_LEVEL, PROBLEM_LEVELS, UNREAD_HEADER_P, Parser, lazy_compile, where

_EXC_TYPE = lazy_compile(r"^([A-Za-z_][\w.]*(?:Error|Exception|Exit|Interrupt)):")
_IDENT = lazy_compile(r"^[A-Za-z_]\w*$")


def _exc(fields: dict, msg: str) -> dict:
    m = _EXC_TYPE.match(msg)
    if m:
        fields["exception"] = m.group(1)
    return fields


# --- rpc_timeout -------------------------------------------------------------------------------------

_RPC_V1 = lazy_compile(r"RPC call to (.+?) timed out\.")
_RPC_V0 = lazy_compile(r"\b(RPCServer|MQLLMEngine) didn't reply within (\d+) ?ms\b")


def _rpc_timeout(frame: Frame) -> list[Event] | None:
    msg = frame.message
    m = _RPC_V1.search(msg)
    if m:
        method = m.group(1)
        if not _IDENT.match(method):
            method = "<callable>"
        return [Event("rpc_timeout", _exc({"method": method}, msg))]
    m = _RPC_V0.search(msg)
    if m:
        return [Event("rpc_timeout", _exc({"method": m.group(1), "timeout_seconds": int(m.group(2)) / 1000}, msg))]
    return None


# --- the fatal-signal death of 0.7 - 0.8.4 -------------------------------------------------------------

_FATAL = lazy_compile(r"(?:\b(MulitprocExecutor|MultiprocExecutor) got|\bGot) fatal signal from worker processes")


def _fatal_signal(frame: Frame) -> list[Event] | None:
    msg = frame.message
    m = _FATAL.search(msg)
    if not m:
        return None
    if m.group(1):
        sig, source = "MulitprocExecutor got fatal signal from worker processes", "multiproc_executor"
    else:
        sig, source = "Got fatal signal from worker processes", "core_client"
    return [Event("engine_dead", _exc({"signature": sig, "source": source, "message": msg[:500]}, msg))]


# --- worker_died -------------------------------------------------------------------------------------

_PROC_NAME = PROCESS_NAME_P  # vLLM's process names, as framing reads them in tags
_MP_DIED = lazy_compile(rf"\bWorker proc ({_PROC_NAME}) died unexpectedly(?: \(exit code: (-?\d+|None)\))?, "
                      r"shutting down executor")
_RAY_DIED = lazy_compile(r"\bRayWorkerProc rank=\[?([\d, ]*)\]? died unexpectedly")
_PROC_EXIT = lazy_compile(rf"\bProcess ({_PROC_NAME}) \(PID: (\d+)\) died with exit code (-?\d+)")
_ENGINE_PROC_DIED = lazy_compile(rf"\bEngine core process ({_PROC_NAME}) died unexpectedly\.")
_V0_DIED = lazy_compile(rf"\bWorker ({_PROC_NAME}) pid (\d+) died, exit code: (-?\d+)")
_RANK_OF = lazy_compile(r"(?:-|_TP|_)(\d+)$")


def _exit_fields(fields: dict, code: str | None) -> dict:
    """``how``: "exited" (an exit code >= 0), "signal" (a negative code: killed by that signal), or
    "unknown" (no code printed, or ``None``: the process had not been reaped yet)."""
    if code is None or code == "None":
        fields["how"] = "unknown"
        return fields
    n = int(code)
    fields["exit_code"] = n
    if n < 0:
        fields["how"] = "signal"
        try:
            fields["signal"] = _signal.Signals(-n).name
        except ValueError:
            fields["signal"] = f"SIG{-n}"
    else:
        fields["how"] = "exited"
    return fields


def _rank(name: str) -> int | None:
    m = _RANK_OF.search(name)
    return int(m.group(1)) if m else None


def _worker_died(frame: Frame) -> list[Event] | None:
    msg = frame.message
    m = _MP_DIED.search(msg)
    if m:
        fields: dict = {"executor": "multiproc", "proc": m.group(1)[:64]}
        r = _rank(m.group(1))
        if r is not None:
            fields["rank"] = r
        return [Event("worker_died", _exit_fields(fields, m.group(2)))]
    m = _RAY_DIED.search(msg)
    if m:
        ranks = [int(x) for x in re.findall(r"\d+", m.group(1))]
        fields = {"executor": "ray", "how": "unknown", "workers": len(ranks)}
        if ranks:
            fields["rank"] = ranks[0]
        return [Event("worker_died", fields)]
    m = _V0_DIED.search(msg)
    if m:
        fields = {"executor": "multiproc_v0", "proc": m.group(1)[:64], "pid": int(m.group(2))}
        return [Event("worker_died", _exit_fields(fields, m.group(3)))]
    m = _PROC_EXIT.search(msg)
    if m:
        fields = {"executor": "process_monitor", "proc": m.group(1)[:64], "pid": int(m.group(2))}
        return [Event("worker_died", _exc(_exit_fields(fields, m.group(3)), msg))]
    m = _ENGINE_PROC_DIED.search(msg)
    if m:
        fields = {"executor": "process_monitor", "proc": m.group(1)[:64], "how": "unknown"}
        return [Event("worker_died", _exc(fields, msg))]
    return None


# --- ray_actor_died ------------------------------------------------------------------------------------

_RAY_ACTOR = lazy_compile(r"The actor is dead because its worker process has died\.(?: Worker exit type: ([A-Z_]+))?")
# "(1) The process is killed by SIGKILL by OOM killer due to high memory usage." (older Ray) /
# "(1) the process was killed by the OOM killer due to high memory usage" (newer): one of several causes
_RAY_OOM_HINT = lazy_compile(r"OOM killer|exceeded K8s pod memory limits", re.IGNORECASE)
_RAY_CONN = lazy_compile(r"connection error code (\d+)")
_RAY_EXIT_CODE = lazy_compile(r"exits with an exit code (-?\d+|None)")


def _ray_actor_died(frame: Frame) -> list[Event] | None:
    msg = frame.message
    m = _RAY_ACTOR.search(msg)
    if not m:
        return None
    fields: dict = {"exit_type": m.group(1) or "unknown", "possible_oom": bool(_RAY_OOM_HINT.search(msg))}
    c = _RAY_CONN.search(msg)
    if c:
        fields["detail"] = "connection_error"
        fields["connection_error_code"] = int(c.group(1))
    else:
        c = _RAY_EXIT_CODE.search(msg)
        if c:
            fields["detail"] = "exit_code"
            if c.group(1) != "None":
                fields["exit_code"] = int(c.group(1))
        elif "exit_actor() is called" in msg or "by an user request" in msg:
            fields["detail"] = "user_request"
    return [Event("ray_actor_died", fields)]


# --- gpu_memory_fault ------------------------------------------------------------------------------------

# Every reason ROCR-Runtime prints; anything else is kept as "other".
_ROCM_REASONS = (
    "Page not present or supervisor privilege",
    "Write access to a read-only page",
    "Execute access to a page marked NX",
    "Host access only",
    "ECC failure (if supported by HW)",
    "DRAM ECC failure",
    "SRAM ECC failure",
    "Generic hang recovery",
    "Unknown",
)
_VM_FAULT = lazy_compile(r"Memory access fault by GPU node-(\d+)(?: \(Agent handle: [^)]*\))? on address \S+?"
                       r"(\(may not be exact address\))?\. Reason: (.+?)\.?\s*$")
_HW_EXCEPTION = lazy_compile(r"HW Exception by GPU node-(\d+)(?: \(Agent handle: [^)]*\))? reason ?:\s*(GPU Hang|ECC)")


def _gpu_fault(frame: Frame) -> list[Event] | None:
    msg = frame.message
    m = _VM_FAULT.search(msg)
    if m:
        reason = m.group(3).strip()
        if reason not in _ROCM_REASONS:
            reason = next((r for r in _ROCM_REASONS if reason.startswith(r)), "other")
        fields = {"fault": "memory_access", "node": int(m.group(1)), "reason": reason,
                  "imprecise": m.group(2) is not None}
        return [Event("gpu_memory_fault", fields)]
    m = _HW_EXCEPTION.search(msg)
    if m:
        return [Event("gpu_memory_fault", {"fault": "hw_exception", "node": int(m.group(1)), "reason": m.group(2)})]
    return None


# Where each is printed (the trust boundary): an exception's line (its type first), a WARNING or worse
# record's message, or the HSA runtime's own stderr line; each at the start of the message.
_EXC = UNREAD_HEADER_P + EXCEPTION_P
RPC_TIMEOUT = Parser("rpc_timeout", ("RPC call to", "didn't reply within"), _rpc_timeout, where(
    PROBLEM_LEVELS, start=_EXC + r"(?:RPC call to |(?:RPCServer|MQLLMEngine) didn't reply within )"))
FATAL_SIGNAL = Parser("fatal_signal", ("fatal signal from worker processes",), _fatal_signal, where(
    PROBLEM_LEVELS, start=_EXC + r"(?:Mul\w*Executor got|Got) fatal signal from worker processes"))
WORKER_DIED = Parser("worker_died", ("died unexpectedly", "died with exit code", "died, exit code"), _worker_died, where(
    PROBLEM_LEVELS, start=_EXC + rf"(?:Exception occurred while running API servers: )?(?:Worker proc |RayWorkerProc "
                          rf"rank=|Process {_PROC_NAME} \(PID: \d+\) died|Engine core process |Worker {_PROC_NAME} "
                          rf"pid \d+ died)"))
# (Ray's error also reaches a log as ``ray list actors --detail``'s YAML, "error_message: '...'")
RAY_ACTOR_DIED = Parser("ray_actor_died", ("The actor is dead because",), _ray_actor_died, where(
    PROBLEM_LEVELS, start=_EXC + r"(?:error_message: ')?The actor is dead because its worker process has died"))
GPU_MEMORY_FAULT = Parser("gpu_memory_fault", ("Memory access fault by GPU", "HW Exception by GPU"), _gpu_fault, where(
    PROBLEM_LEVELS, start=r"(?:Memory access fault|HW Exception) by GPU node-"))

# In trying order. RPC_TIMEOUT, FATAL_SIGNAL, WORKER_DIED (its "Process ... died with exit code" and
# "Engine core process ... died unexpectedly." forms) and RAY_ACTOR_DIED also end tracebacks, so they
# belong among the error parsers a traceback's exception lines are run through. No line is both a
# worker_died and one of errors.ENGINE_DEAD's (parse_frame passes a line that a family declines on to
# the next one); FATAL_SIGNAL and ENGINE_DEAD both take the "MulitprocExecutor got fatal signal" line,
# as engine_dead either way: placed before ENGINE_DEAD it adds ``source`` and the exact signature.
PARSERS = (RPC_TIMEOUT, FATAL_SIGNAL, WORKER_DIED, RAY_ACTOR_DIED, GPU_MEMORY_FAULT)
# The event kinds these parsers emit (engine_dead is an existing kind).
KINDS = ("rpc_timeout", "worker_died", "ray_actor_died", "gpu_memory_fault")
