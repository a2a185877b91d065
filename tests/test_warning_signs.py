"""Warning signs before a hang or a death, recoveries and latency causes (exporter.parsers.warning_signs
and exporter.parsers.recovery), against real lines.

Each line is quoted from the public thread or file named above it; where no thread shows a whole line
the comment says so, and the line is vLLM's (or LMCache's, ROCm's) format string filled with values
that a thread shows. Wrappers a thread does not show (journald) are marked as added by the test. The
parsers are not in the registry yet: lines go through framing and ``parse_frame`` with these
parsers, and the registry's current answer is checked where it matters (the Ray line must never be an
``oom``; the capital-G fatal-signal line is missed today).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from exporter.framing.clock import Clock

from exporter.framing.frame import Frame, frame_line
from exporter.parsers import errors, parse_frame, recovery, warning_signs
from exporter.parsers.lmcache import PARSER as LMCACHE_STATS

ALL = warning_signs.PARSERS + recovery.PARSERS
# What the traceback joiner would run a final exception line through once these are registered.
ERRORS_PLUS = errors.ERROR_PARSERS[:-1] + warning_signs.PARSERS + (errors.ENGINE_DEAD,) + (recovery.JIT_DURING_INFERENCE,)
DATA = Path(__file__).resolve().parent.parent / "exporter" / "data"


def ev(line: str, parsers=ALL):
    """(kind, fields) of the single event of one line, framed as the pipeline frames it."""
    f = frame_line(line, Clock(year=2026))
    events = parse_frame(f, parsers) or []
    assert len(events) == 1, (line, events)
    return events[0].kind, events[0].fields


def nothing(line: str, parsers=ALL) -> bool:
    return not parse_frame(frame_line(line, Clock(year=2026)), parsers)


def bare(text: str, parsers=ERRORS_PLUS):
    """A traceback's exception line as the joiner hands it to the error parsers (no framing)."""
    return [(e.kind, e.fields) for e in (parse_frame(Frame(raw=text, message=text), parsers) or [])]


# ---- rpc_timeout ---------------------------------------------------------------------------------

RPC_EXECUTE_MODEL = "TimeoutError: RPC call to execute_model timed out."


def test_rpc_timeout_execute_model():
    # source: vllm v1/executor/multiproc_executor.py collective_rpc, 0.6.6.post1 - 0.34.0:
    #   raise TimeoutError(f"RPC call to {method} timed out.") from e
    # real: the exception line of https://github.com/vllm-project/vllm/issues/19197 (title) and
    # https://github.com/vllm-project/vllm/issues/17965 ("RPC Call to execute_model Timed Out")
    assert bare(RPC_EXECUTE_MODEL) == [("rpc_timeout", {"method": "execute_model", "exception": "TimeoutError"})]


def test_rpc_timeout_sample_tokens_with_the_tracebacks_header():
    # source: same f-string; method "sample_tokens" (0.11.1+). real: https://github.com/eugr/spark-vllm-docker/issues/321
    # ("TimeoutError: RPC call to sample_tokens timed out"); the header is the one that traceback
    # repeats on every line (logger.exception in v1/engine/core.py, NewLineFormatter)
    line = ("(EngineCore pid=171) ERROR 07-16 08:23:49 [core.py:1242] "
            "TimeoutError: RPC call to sample_tokens timed out.")
    assert ev(line) == ("rpc_timeout", {"method": "sample_tokens", "exception": "TimeoutError"})
    f = frame_line(line, Clock(year=2026))
    assert (f.process, f.pid, f.level) == ("EngineCore", 171, "ERROR")


def test_rpc_timeout_of_a_pickled_callable_keeps_no_repr():
    # source: same f-string with a callable method (collective_rpc pickles it; its repr is printed)
    assert bare("TimeoutError: RPC call to <function check at 0x7f52c3f5f000> timed out.") == [
        ("rpc_timeout", {"method": "<callable>", "exception": "TimeoutError"})]


def test_rpc_timeout_v0_mq_client():
    # source: vllm engine/multiprocessing/client.py 0.6.x - 0.10.x:
    #   raise TimeoutError("RPCServer didn't reply within " f"{VLLM_RPC_TIMEOUT} ms")
    #   raise TimeoutError("MQLLMEngine didn't reply within " f"{VLLM_RPC_TIMEOUT}ms")   (VLLM_RPC_TIMEOUT default 10000)
    assert bare("TimeoutError: RPCServer didn't reply within 10000 ms") == [
        ("rpc_timeout", {"method": "RPCServer", "timeout_seconds": 10.0, "exception": "TimeoutError"})]
    assert bare("TimeoutError: MQLLMEngine didn't reply within 10000ms") == [
        ("rpc_timeout", {"method": "MQLLMEngine", "timeout_seconds": 10.0, "exception": "TimeoutError"})]


def test_rpc_timeout_near_misses():
    # the bare TimeoutError raised by shm_broadcast.acquire_read, first in the same chain
    # (https://github.com/vllm-project/vllm/issues/33802: "... [core.py:968] TimeoutError")
    assert nothing("(EngineCore_DP0 pid=18052) ERROR 02-03 22:43:35 [core.py:968] TimeoutError")
    # vLLM's own hang warning is another family (exporter.parsers.shm_broadcast)
    # (https://github.com/OpenPipe/ART/issues/201)
    assert nothing("DEBUG 07-04 17:36:10 [shm_broadcast.py:456] No available shared memory broadcast block found in 60 second.")
    # a traceback frame naming the method is not a timeout (https://github.com/vllm-project/vllm/issues/29636)
    assert nothing('(EngineCore_DP0 pid=185173)     return self.collective_rpc("determine_available_memory")')


def test_rpc_timeout_ends_the_engine_cores_traceback():
    """The joiner keeps the final exception: what the error parsers are handed is the timeout line."""
    from tests.conftest import run_lines

    # real: the first lines of the traceback in https://github.com/vllm-project/vllm/issues/17965
    # (comment of 2025-05-20); the chain's bare TimeoutError and the final line carry the same header
    # (logger.exception repeats it), their text is shm_broadcast's `raise TimeoutError` and the f-string above.
    h = "ERROR 05-16 03:38:10 [core.py:398] "
    lines = [
        h + "EngineCore encountered a fatal error.",
        h + "Traceback (most recent call last):",
        h + '  File "/usr/lib/python3.10/site-packages/vllm/v1/executor/multiproc_executor.py", line 181, in collective_rpc',
        h + "    status, result = w.worker_response_mq.dequeue(",
        h + "TimeoutError",
        h + "",
        h + "The above exception was the direct cause of the following exception:",
        h + "",
        h + "Traceback (most recent call last):",
        h + '  File "/usr/lib/python3.10/site-packages/vllm/v1/executor/multiproc_executor.py", line 189, in collective_rpc',
        h + '    raise TimeoutError(f"RPC call to {method} timed out.") from e',
        h + RPC_EXECUTE_MODEL,
    ]
    _, events = run_lines(lines)
    # (the last traceback: today the joiner splits this chain at its blank "ERROR ... [core.py:398]" lines,
    # whose header lost its trailing space to framing's rstrip -- see docs/research/issue28-warning-signs.md)
    tb = [e for e in events if e.kind == "traceback"][-1]
    assert (tb.fields["exception"], tb.fields["message"]) == ("TimeoutError", "RPC call to execute_model timed out.")
    # the engine_dead of the first line ("EngineCore encountered a fatal error") is already there
    assert any(e.kind == "engine_dead" for e in events)
    # and what the joiner would find once warning_signs is among the error parsers
    assert bare(RPC_EXECUTE_MODEL)[0][0] == "rpc_timeout"


# ---- the fatal signal (0.7.0 - 0.8.4) --------------------------------------------------------------

def test_fatal_signal_core_client_capital_g_is_caught():
    # source: vllm v1/engine/core_client.py 0.7.3 (line 191), 0.8.0 (269), 0.8.4 (359): logger.fatal(
    #   "Got fatal signal from worker processes, shutting " "down. See stack trace above for root cause issue.")
    # real: GHSA-6qc9-v4r8-22xg (https://github.com/vllm-project/vllm/security/advisories/GHSA-6qc9-v4r8-22xg)
    line = ("CRITICAL 03-26 17:25:01 [core_client.py:269] Got fatal signal from worker processes, shutting down. "
            "See stack trace above for root cause issue.")
    f = frame_line(line, Clock(year=2026))
    # errors._ENGINE_DEAD holds only the lower-case "got fatal signal ...": the registry's warning signs take it
    assert [e.kind for e in parse_frame(f)] == ["engine_dead"]
    kind, fields = ev(line)
    assert kind == "engine_dead"
    assert fields["signature"] == "Got fatal signal from worker processes" and fields["source"] == "core_client"


def test_fatal_signal_multiproc_executor():
    # source: vllm v1/executor/multiproc_executor.py 0.7.3 (49), 0.8.0 (49), 0.8.4 (50):
    #   "MulitprocExecutor got fatal signal from worker processes, " "shutting down. See stack trace ..." (sic)
    # real: https://github.com/vllm-project/vllm/issues/14452 (comment of 2025-03-15)
    line = ("CRITICAL 03-15 17:24:18 [multiproc_executor.py:48] MulitprocExecutor got fatal signal from worker "
            "processes, shutting down. See stack trace above for root cause issue.")
    kind, fields = ev(line)
    assert kind == "engine_dead" and fields["source"] == "multiproc_executor"
    assert fields["signature"] == "MulitprocExecutor got fatal signal from worker processes"
    # the registry already calls it a dead engine, with its own lower-case signature
    assert [e.kind for e in parse_frame(frame_line(line, Clock(year=2026)))] == ["engine_dead"]


# ---- worker_died ----------------------------------------------------------------------------------

def test_worker_proc_died_unexpectedly_0_8_5_to_0_25():
    # source: vllm v1/executor/multiproc_executor.py 0.8.5 - 0.25.1 (logger.error):
    #   "Worker proc %s died unexpectedly, " "shutting down executor."
    # real: https://github.com/OpenPipe/ART/issues/201
    assert ev("ERROR 07-04 17:35:16 [multiproc_executor.py:140] Worker proc VllmWorker-1 died unexpectedly, "
              "shutting down executor.") == (
        "worker_died", {"executor": "multiproc", "proc": "VllmWorker-1", "rank": 1, "how": "unknown"})


def test_worker_proc_died_with_exit_code_none():
    # source: vllm v1/executor/multiproc_executor.py 0.26.0 - 0.34.0:
    #   "Worker proc %s died unexpectedly (exit code: %s), " "shutting down executor."
    # real: https://github.com/vllm-project/vllm/issues/50557 (exit code None: the monitor saw the
    # sentinel before the child was reaped)
    line = ("(EngineCore pid=58154) ERROR 07-31 09:09:51 [multiproc_executor.py:284] Worker proc VllmWorker-2 died "
            "unexpectedly (exit code: None), shutting down executor.")
    assert ev(line) == ("worker_died", {"executor": "multiproc", "proc": "VllmWorker-2", "rank": 2, "how": "unknown"})
    # errors.ENGINE_DEAD's needle "died unexpectedly" is hit but no signature matches: the registry's
    # worker_died takes it
    assert [e.kind for e in parse_frame(frame_line(line, Clock(year=2026)))] == ["worker_died"]


def test_worker_proc_died_with_a_signal_exit_code_under_journald():
    # source: the 0.26+ format above with a negative exit code (multiprocessing: -N = killed by signal N);
    # the thread of https://github.com/vllm-project/vllm/issues/50557 shows the line, journald wrapper added by the test
    line = ("Dec 04 10:11:12 gpu01 vllm[1234]: (EngineCore_DP0 pid=123) ERROR 12-04 10:11:12 [multiproc_executor.py:405] "
            "Worker proc VllmWorker-3 died unexpectedly (exit code: -9), shutting down executor.")
    assert ev(line) == ("worker_died", {"executor": "multiproc", "proc": "VllmWorker-3", "rank": 3, "exit_code": -9,
                                        "how": "signal", "signal": "SIGKILL"})
    f = frame_line(line, Clock(year=2026))
    assert (f.host, f.unit, f.process, f.pid) == ("gpu01", "vllm", "EngineCore_DP0", 123)


def test_v0_worker_died_exit_code():
    # source: vllm executor/multiproc_worker_utils.py 0.5 - 0.10.x (logger.error):
    #   "Worker %s pid %s died, exit code: %s"
    # real: the wording is the title of https://github.com/vllm-project/vllm/issues/15295; the line is
    # quoted from a public vllm-ascend log (find_string "died, exit code: -")
    assert ev("ERROR 05-19 09:38:42 [multiproc_worker_utils.py:120] Worker VllmWorkerProcess pid 6341 died, "
              "exit code: -15") == (
        "worker_died", {"executor": "multiproc_v0", "proc": "VllmWorkerProcess", "pid": 6341, "exit_code": -15,
                        "how": "signal", "signal": "SIGTERM"})
    # 0.7-era header without the bracket (vllm-log-formats.md §1.1); exit -11 = SIGSEGV
    kind, fields = ev("ERROR 03-06 08:47:40 multiproc_worker_utils.py:120] Worker VllmWorkerProcess pid 14538 died, "
                      "exit code: -11")
    assert fields["signal"] == "SIGSEGV"


def test_ray_worker_proc_died():
    # source: vllm v1/executor/ray_executor_v2.py 0.20.2 - 0.34.0 (logger.error):
    #   "RayWorkerProc rank=%s died unexpectedly, shutting down executor."  (%s: a list of ranks)
    # no public thread shows it yet: the format string filled with a list of two ranks
    assert ev("(EngineCore pid=77) ERROR 07-01 10:00:00 [ray_executor_v2.py:523] RayWorkerProc rank=[1, 3] died "
              "unexpectedly, shutting down executor.") == (
        "worker_died", {"executor": "ray", "how": "unknown", "workers": 2, "rank": 1})


def test_process_died_with_exit_code_and_engine_core_process_died():
    # source: vllm v1/utils.py (multi API server mode) 0.9.2 - 0.34.0:
    #   raise RuntimeError(f"Process {proc.name} (PID: {proc.pid}) " f"died with exit code {proc.exitcode}")
    #   0.20.2 - 0.34.0: raise RuntimeError(f"Engine core process {engine_manager.failed_proc_name} " "died unexpectedly.")
    # no public thread shows them: the format strings, as the traceback's final line
    assert bare("RuntimeError: Process ApiServer_1 (PID: 4242) died with exit code -9") == [
        ("worker_died", {"executor": "process_monitor", "proc": "ApiServer_1", "pid": 4242, "exit_code": -9,
                         "how": "signal", "signal": "SIGKILL", "exception": "RuntimeError"})]
    assert bare("RuntimeError: Engine core process EngineCore_DP0 died unexpectedly.") == [
        ("worker_died", {"executor": "process_monitor", "proc": "EngineCore_DP0", "how": "unknown",
                         "exception": "RuntimeError"})]


def test_worker_died_near_misses_stay_with_their_families():
    # the API server's view of a dead engine core is engine_dead (errors._ENGINE_DEAD), not worker_died
    # source: v1/engine/core_client.py 0.10.1.1 - 0.17.1 "Engine core proc %s died unexpectedly, shutting down client."
    # (filled in)
    line = "ERROR 05-01 10:00:00 [core_client.py:563] Engine core proc EngineCore_0 died unexpectedly, shutting down client."
    assert nothing(line, warning_signs.PARSERS)
    assert [e.kind for e in parse_frame(frame_line(line, Clock(year=2026)))] == ["engine_dead"]
    # a worker that logged its own failure is WorkerProc's line (https://github.com/vllm-project/vllm/issues/18577)
    assert nothing("(VllmWorker rank=2 pid=808339) ERROR 06-10 03:43:33 [multiproc_executor.py:487] WorkerProc "
                   "failed to start.")
    # a stop is lifecycle's line (source: entrypoints/launcher.py 0.6.3 - 0.22 "Shutting down FastAPI HTTP server.")
    assert nothing("INFO 05-01 10:00:00 [launcher.py:80] Shutting down FastAPI HTTP server.")


# ---- ray_actor_died -------------------------------------------------------------------------------

RAY_LINE = ("ERROR 07-09 13:21:18 [core.py:396] The actor is dead because its worker process has died. Worker exit "
            "type: SYSTEM_ERROR Worker exit detail: Worker unexpectedly exits with a connection error code 2. End of "
            "file. There are some potential root causes. (1) The process is killed by SIGKILL by OOM killer due to "
            "high memory usage. (2) ray stop --force is called. (3) The worker is crashed unexpectedly due to SIGSEGV "
            "or other unexpected errors.")


def test_ray_actor_died_names_the_oom_killer_only_as_a_possibility():
    # source: ray src/ray/gcs/gcs_server/gcs_actor_manager.cc GenWorkerDiedCause: "The actor is dead because its
    # worker process has died. Worker exit type: " WorkerExitType_Name(...) " Worker exit detail: " detail
    # real: https://github.com/gpustack/gpustack/issues/2415 (vLLM 0.8.5, Ray executor)
    assert ev(RAY_LINE) == ("ray_actor_died", {"exit_type": "SYSTEM_ERROR", "possible_oom": True,
                                               "detail": "connection_error", "connection_error_code": 2})


def test_ray_actor_died_is_not_an_oom():
    f = frame_line(RAY_LINE, Clock(year=2026))
    # the error parsers a traceback's exception lines go through, as they are today
    assert parse_frame(f, errors.ERROR_PARSERS) is None
    assert parse_frame(Frame(raw=f.message, message=f.message), errors.ERROR_PARSERS) is None
    # nor the whole registry: it is a ray_actor_died
    assert [e.kind for e in parse_frame(f)] == ["ray_actor_died"]
    # newer Ray wording (https://github.com/verl-project/verl/issues/4921)
    newer = ("The actor is dead because its worker process has died. Worker exit type: SYSTEM_ERROR Worker exit "
             "detail: Worker unexpectedly exits with a connection error code 2. End of file. Some common causes "
             "include: (1) the process was killed by the OOM killer due to high memory usage, (2) ray stop --force "
             "was called, or (3) the worker crashed unexpectedly due to SIGSEGV or another unexpected error.")
    assert parse_frame(Frame(raw=newer, message=newer), errors.ERROR_PARSERS) is None
    assert ev(newer) == ("ray_actor_died", {"exit_type": "SYSTEM_ERROR", "possible_oom": True,
                                            "detail": "connection_error", "connection_error_code": 2})


def test_ray_actor_died_exit_code_and_user_exit():
    # real: quoted in public verl training logs (found with find_string "The actor is dead because its worker
    # process has"; no thread URL)
    kind, fields = ev("The actor is dead because its worker process has died. Worker exit type: SYSTEM_ERROR Worker "
                      "exit detail: Worker exits unexpectedly. Worker exits with an exit code None. The worker may "
                      "have exceeded K8s pod memory limits.")
    assert fields == {"exit_type": "SYSTEM_ERROR", "possible_oom": True, "detail": "exit_code"}
    # Ray's docs show an intended exit in `ray list actors --detail` output (YAML; its folded lines joined here)
    kind, fields = ev("error_message: 'The actor is dead because its worker process has died. Worker exit type: "
                      "INTENDED_USER_EXIT Worker exit detail: Worker exits by an user request. exit_actor() is called.'")
    assert fields == {"exit_type": "INTENDED_USER_EXIT", "possible_oom": False, "detail": "user_request"}


def test_ray_actor_died_near_miss():
    # the RayActorError's first line is another line (https://github.com/hkust-nlp/simpleRL-reason/issues/98)
    assert nothing("ray.exceptions.RayActorError: The actor died unexpectedly before finishing this task.")


# ---- gpu_memory_fault ------------------------------------------------------------------------------

@pytest.mark.parametrize("line,node,reason", [
    # real: https://github.com/vllm-project/vllm/issues/43605 (gfx950, AITER)
    ("Memory access fault by GPU node-3 (Agent handle: 0x13e852f0) on address 0x77d445e00000. Reason: Unknown.",
     3, "Unknown"),
    # real: https://github.com/vllm-project/vllm/issues/35169 (during CUDA-graph capture)
    ("Memory access fault by GPU node-5 (Agent handle: 0x460e3a50) on address 0x7ec4dfe0e000. Reason: Write access "
     "to a read-only page.", 5, "Write access to a read-only page"),
    # real: https://github.com/nlzy/vllm-gfx906/issues/25
    ("Memory access fault by GPU node-2 (Agent handle: 0x30ea84e0) on address 0x714b4be00000. Reason: Page not "
     "present or supervisor privilege.", 2, "Page not present or supervisor privilege"),
    # real: https://github.com/ROCm/legacy-rocm-build/issues/1339 (address "(nil)")
    ("Memory access fault by GPU node-4 (Agent handle: 0x152e220) on address (nil). Reason: Page not present or "
     "supervisor privilege.", 4, "Page not present or supervisor privilege"),
    # real: https://github.com/lllyasviel/stable-diffusion-webui-forge/issues/2976 (title; older runtime without the
    # handle: ROCR-Runtime src/core/runtime/runtime.cpp "Memory access fault by GPU node-%u on address %p%s. Reason: %s.")
    ("Memory access fault by GPU node-1 on address 0x7f4067e00000. Reason: Page not present or supervisor privilege.",
     1, "Page not present or supervisor privilege"),
])
def test_rocm_memory_access_fault(line, node, reason):
    # source: ROCm/ROCR-Runtime runtime/hsa-runtime/core/runtime/runtime.cpp VMFaultHandler: fprintf(stderr,
    #   "Memory access fault by GPU node-%u (Agent handle: %p) on address %p%s. Reason: %s.\n", ...); then abort()
    assert ev(line) == ("gpu_memory_fault", {"fault": "memory_access", "node": node, "reason": reason,
                                             "imprecise": False})
    assert nothing(line, errors.ERROR_PARSERS)  # nothing in the registry recognises it today


def test_rocm_fault_inside_a_process_tag_and_imprecise():
    # source: same fprintf; "%s" after the address is "(may not be exact address)" when imprecise. The process tag
    # is vLLM's decorate_logs prefix on the worker's stderr (0.10.1 - 0.30); no thread shows this combination
    kind, fields = ev("(Worker_TP1 pid=3099) Memory access fault by GPU node-6 (Agent handle: 0x460e3a50) on address "
                      "0x7ec4dfe0e000(may not be exact address). Reason: Unknown.")
    assert fields == {"fault": "memory_access", "node": 6, "reason": "Unknown", "imprecise": True}


def test_rocm_hw_exception():
    # source: ROCR-Runtime runtime.cpp HwExceptionHandler: "HW Exception by GPU node-%u (Agent handle: %p) reason :%s\n"
    # real: quoted in a public GPTQModel report (find_string "Memory access fault by GPU node-") after a fault line
    assert ev("HW Exception by GPU node-1 (Agent handle: 0x563e71f098b0) reason :GPU Hang") == (
        "gpu_memory_fault", {"fault": "hw_exception", "node": 1, "reason": "GPU Hang"})


def test_rocm_near_miss_kernel_page_fault():
    # the kernel's own amdgpu message is not the runtime's line
    # (https://github.com/ROCm/legacy-rocm-build/issues/5051, journal)
    assert nothing("Jan 09 18:55:45 alexpc kernel: amdgpu 0000:0b:00.0: amdgpu: [gfxhub] page fault (src_id:0 ring:24 "
                   "vmid:8 pasid:32792)")


# ---- kv_load_recovered / kv_load_failed ----------------------------------------------------------------

def test_kv_load_recovered():
    # source: vllm v1/core/sched/scheduler.py 0.11.1 - 0.34.0 (logger.warning):
    #   "Recovered from KV load failure: " "%d request(s) rescheduled (%d tokens affected)."
    # no public thread shows a whole line; the numbers are those quoted in a public LMCache test note
    # (find_string "Recovered from KV load failure": "1 request(s) rescheduled (1024 tokens affected)")
    line = ("(EngineCore_DP0 pid=123) WARNING 12-04 10:11:12 [scheduler.py:3925] Recovered from KV load failure: "
            "1 request(s) rescheduled (1024 tokens affected).")
    assert ev(line) == ("kv_load_recovered", {"requests": 1, "tokens": 1024})
    assert [e.kind for e in parse_frame(frame_line(line, Clock(year=2026)))] == ["kv_load_recovered"]


def test_kv_load_failed_policy_fail():
    # source: vllm v1/core/sched/scheduler.py 0.14.1 - 0.34.0 (logger.error):
    #   "Failing %d request(s) due to KV load failure " "(failure_policy=fail, %d tokens affected). Request IDs: %s"
    # no public thread shows it: the format string filled in
    assert ev("(EngineCore_DP0 pid=123) ERROR 12-04 10:11:12 [scheduler.py:3916] Failing 2 request(s) due to KV load "
              "failure (failure_policy=fail, 512 tokens affected). Request IDs: {'cmpl-a', 'cmpl-b'}") == (
        "kv_load_failed", {"requests": 2, "tokens": 512})


def test_kv_load_near_miss_and_unmerged_wording():
    # source: vllm v1/core/sched/scheduler.py 0.34.0, the same function's RuntimeError for hybrid models:
    #   "A KV connector reported block-level load failures " "(invalid_block_ids) which is not supported for models ..."
    assert bare("RuntimeError: A KV connector reported block-level load failures (invalid_block_ids) which is not "
                "supported for models with multiple KV cache groups.", recovery.PARSERS) == []
    # the wording proposed by the unmerged https://github.com/vllm-project/vllm/pull/40976 (no token count)
    assert ev("ERROR 12-04 10:11:12 [scheduler.py:2214] Failing 1 request(s) due to KV load failure Request IDs: "
              "{'cmpl-a'}") == ("kv_load_failed", {"requests": 1})


# ---- LMCache -----------------------------------------------------------------------------------------

def test_lmcache_retrieve_fewer_tokens_pair():
    # source: LMCache lmcache/integration/vllm/vllm_v1_adapter.py 0.3.1 - 0.5.6 (logger.error x2):
    #   "The number of retrieved tokens is less than the " "expected number of tokens! This should not happen!"
    #   "Num retrieved tokens: %d, num expected tokens: %d"
    # real: https://github.com/LMCache/LMCache/issues/889 (the paste lost a "[" and the space after "ERROR:")
    first = ("(VllmWorker rank=4 engine_index=0 pid=31778)2025-06-21 20:59:57,675] LMCache ERROR:The number of "
             "retrieved tokens is less than the expected number of tokens! This should not happen! "
             "(vllm_v1_adapter.py:554:lmcache.integration.vllm.vllm_v1_adapter)")
    second = ("(VllmWorker rank=4 engine_index=0 pid=31778)[2025-06-21 20:59:57,675] LMCache ERROR:Num retrieved "
              "tokens: 0, num expected tokens: 253 (vllm_v1_adapter.py:558:lmcache.integration.vllm.vllm_v1_adapter)")
    assert ev(first) == ("lmcache_retrieve_failed", {"reason": "fewer_tokens", "part": "summary"})
    assert ev(second) == ("lmcache_retrieve_failed", {"reason": "fewer_tokens", "part": "counts",
                                                      "retrieved_tokens": 0, "expected_tokens": 253,
                                                      "missing_tokens": 253})


def test_lmcache_failed_blocks_and_unhealthy():
    # source: LMCache vllm_v1_adapter.py 0.4.1 - 0.5.6 logger.warning("Request %s failed to load %d tokens across
    #   %d blocks", ...); cache_engine.py 0.4.1 - 0.5.6 logger.warning("LMCache is unhealthy, skipping retrieve
    #   operation"). No public thread shows them: the format (lmcache/logging.py build_format) filled in
    assert ev("(Worker_TP0 pid=264) [2026-01-29 04:52:51,168] LMCache WARNING: Request cmpl-1 failed to load 512 "
              "tokens across 2 blocks (vllm_v1_adapter.py:965:lmcache.integration.vllm.vllm_v1_adapter)") == (
        "lmcache_retrieve_failed", {"reason": "blocks_failed", "tokens": 512, "blocks": 2})
    assert ev("[2026-01-29 04:52:51,168] LMCache WARNING: LMCache is unhealthy, skipping retrieve operation "
              "(cache_engine.py:834:lmcache.v1.cache_engine)") == (
        "lmcache_retrieve_failed", {"reason": "unhealthy", "op": "retrieve"})


@pytest.mark.parametrize("line,fields", [
    # real: https://github.com/LMCache/LMCache/issues/1337 (pd / nixl_connector_v3; repeats while the request hangs)
    ("[2025-08-14 00:31:05,973] LMCache WARNING: Failed to allocate memory object, retrying... "
     "(nixl_connector_v3.py:567:lmcache.v1.storage_backend.connector.nixl_connector_v3)", {"where": "transfer_receive"}),
    # real: https://github.com/LMCache/LMCache/issues/391 (0.2 "experimental" tree, the old format)
    ("WARNING LMCache: Failed to allocate memory for tensor(torch.Size([2, 64, 64, 1024]), torch.bfloat16) because no "
     "memory is available [2025-03-14 16:51:35,318] -- /LMCache/lmcache/experimental/memory_management.py:409",
     {"where": "allocator"}),
    ("WARNING LMCache: Failed to allocate memory during remote receive [2025-03-14 16:51:35,318] -- "
     "/LMCache/lmcache/experimental/storage_backend/connector/lm_connector.py:54", {"where": "remote_receive"}),
    # real: https://github.com/LMCache/LMCache/issues/969 (DEBUG in 0.3.x)
    ("[2025-08-21 21:56:03,155] LMCache DEBUG: Failed to allocate memory for tensor(torch.Size([2, 32, 256, 1024]), "
     "torch.bfloat16) because no memory is available (memory_management.py:672:lmcache.v1.memory_management)",
     {"where": "allocator"}),
    ("[2025-08-21 21:56:03,155] LMCache DEBUG: Memory allocation failed during sync disk load. "
     "(gds_backend.py:519:lmcache.v1.storage_backend.gds_backend)", {"where": "disk_load"}),
    # real: https://github.com/LMCache/LMCache/issues/1285 (0.3.x cache_engine store)
    ("[2025-08-09 17:55:57,778] LMCache WARNING: Failed to allocate memory for the KV cache.", {"where": "store"}),
])
def test_lmcache_memory_unavailable(line, fields):
    assert ev(line) == ("lmcache_memory_unavailable", fields)
    assert nothing(line, errors.ERROR_PARSERS)


def test_lmcache_memory_block_size_and_pressure():
    # source: LMCache v1/memory_management.py 0.4.1 - 0.5.6 logger.warning("Failed to allocate memory block of size
    #   %d " "because no memory is available", size) (https://github.com/LMCache/LMCache/issues/3187 shows it 17k
    #   times in 4 h; its size is cut in the public excerpt, so the size here is an example)
    assert ev("(Worker_TP0 pid=264) [2026-05-03 10:00:00,000] LMCache WARNING: Failed to allocate memory block of size "
              "15728640 because no memory is available (memory_management.py:1454:lmcache.v1.memory_management)") == (
        "lmcache_memory_unavailable", {"where": "allocator", "bytes": 15728640})
    # source: LMCache v1/cache_engine.py 0.3.9 - 0.5.6 logger.warning("Local cpu memory under pressure so"
    #   " choosing to store only " " %d total chunks of KV cache.", n) and "... choosing to not store the KV cache."
    assert ev("[2026-05-03 10:00:00,000] LMCache WARNING: Local cpu memory under pressure so choosing to store only "
              "  3 total chunks of KV cache. (cache_engine.py:520:lmcache.v1.cache_engine)") == (
        "lmcache_memory_unavailable", {"where": "store_pressure", "stored_chunks": 3})
    assert ev("[2026-05-03 10:00:00,000] LMCache WARNING: Local cpu memory under pressure so choosing to not store "
              "the KV cache. (cache_engine.py:716:lmcache.v1.cache_engine)") == (
        "lmcache_memory_unavailable", {"where": "store_pressure"})


def test_lmcache_near_misses():
    # LMCache's normal traffic is the lmcache family, not a failure (https://github.com/LMCache/LMCache/issues/955)
    line = ("[2025-07-02 16:41:43,868] LMCache INFO: Reqid: 861, Total tokens 1558, LMCache hit tokens: 0, need to "
            "load: 0 (vllm_v1_adapter.py:745:lmcache.integration.vllm.vllm_v1_adapter)")
    assert nothing(line)
    assert parse_frame(frame_line(line, Clock(year=2026)), (LMCACHE_STATS,))[0].kind == "lmcache"
    # vLLM's own allocation warnings are not LMCache's. source: vllm models/deepseek_v41/common/engram.py 0.34.0
    #   logger.warning("Engram huge-page allocation failed (%s); using pinned memory.", exc)  (filled in)
    assert nothing("WARNING 12-04 10:11:12 [engram.py:864] Engram huge-page allocation failed ([Errno 12] Cannot "
                   "allocate memory); using pinned memory.")


# ---- jit_during_inference ------------------------------------------------------------------------------

@pytest.mark.parametrize("line,backend,kernel", [
    # real: https://github.com/noonghunna/club-3090/issues/142 (utils/jit_monitor.py:103 build)
    ("(Worker_TP0 pid=119) WARNING 05-15 16:04:22 [jit_monitor.py:103] Triton kernel JIT compilation during "
     "inference: _zero_kv_blocks_kernel. This causes a latency spike; consider extending warmup to cover this "
     "shape/config.", "Triton", "_zero_kv_blocks_kernel"),
    # real: https://github.com/vllm-project/vllm/issues/49349 (DP/TP/EP worker name)
    ("(Worker_DP0_TP0_EP0 pid=2157) WARNING 08-17 21:04:25 [jit_monitor.py:141] Triton kernel JIT compilation during "
     "inference: _prepare_dflash_inputs_kernel. This causes a latency spike; consider extending warmup to cover this "
     "shape/config.", "Triton", "_prepare_dflash_inputs_kernel"),
    # real: https://github.com/vllm-project/vllm/pull/45631 (a nightly's "(key=...)" detail)
    ("(EngineCore pid=1022665) WARNING 06-15 01:59:47 [jit_monitor.py:97] Triton kernel JIT compilation during "
     "inference: _zero_kv_blocks_kernel (key=[('*u64', 'D'), ('*i64', 'D'), ('i32', ''), ('constexpr', 6), "
     "('constexpr', 278528), ('constexpr', 1024)]{'debug': False, 'instrumentation_mode': ''}). This causes a latency "
     "spike; consider extending warmup to cover this shape/config.", "Triton", "_zero_kv_blocks_kernel"),
    # real: https://github.com/vllm-project/vllm/pull/46167 (CuTeDSL backend, 0.25.1+)
    ("(EngineCore pid=2275828) WARNING 06-19 16:22:25 [jit_monitor.py:124] CuTeDSL JIT compilation during inference: "
     "FlashAttentionForwardSm100. This causes a latency spike; consider extending warmup to cover this shape/config.",
     "CuTeDSL", "FlashAttentionForwardSm100"),
    # real: https://github.com/vllm-project/vllm/issues/43009 -- "(EngineCore) " has no pid: framing does not peel
    # it (exporter.framing.frame._PROCESS wants "pid="), the parser still finds the wording
    ("(EngineCore) WARNING 05-18 19:12:27 [jit_monitor.py:103] Triton kernel JIT compilation during inference: "
     "_causal_conv1d_update_kernel. This causes a latency spike; consider extending warmup to cover this "
     "shape/config.", "Triton", "_causal_conv1d_update_kernel"),
])
def test_jit_during_inference(line, backend, kernel):
    # source: vllm triton_utils/jit_monitor.py 0.21.0 - 0.24.0 "Triton kernel JIT compilation during inference: %s. "
    #   "This causes a latency spike; ..."; utils/jit_monitor.py 0.25.1 - 0.34.0 "%s %s during inference: %s%s. ..."
    assert ev(line) == ("jit_during_inference", {"backend": backend, "kernel": kernel, "mode": "warn"})


def test_jit_verbose_details_and_error_mode():
    # real: https://github.com/vllm-project/vllm/issues/48809 (--jit-monitor-verbose, details cut here after
    # the signature; the parser reads only up to " (")
    kind, fields = ev("(Worker_TP1 pid=387) WARNING 07-14 11:09:35 [jit_monitor.py:126] Triton kernel JIT compilation "
                      "during inference: _build_c128a_topk_metadata_kernel (constexprs={BLOCK_SIZE=1024}; "
                      "signature={BLOCK_SIZE='constexpr', block_size='i32'}). This causes a latency spike; consider "
                      "extending warmup to cover this shape/config.")
    assert fields["kernel"] == "_build_c128a_topk_metadata_kernel"
    # 0.24.0 verbose autotune candidate (source: "Triton %sJIT compilation during inference: %s (key=%s).")
    kind, fields = ev("WARNING 06-01 10:00:00 [jit_monitor.py:99] Triton autotune/warmup candidate JIT compilation "
                      "during inference: fused_moe_kernel (key=None).")
    assert fields == {"backend": "Triton", "kernel": "fused_moe_kernel", "mode": "warn", "autotune_candidate": True}
    # --jit-monitor-mode=error raises it: the end of a traceback (real: https://github.com/vllm-project/vllm/pull/46167
    # shows "... [core.py:1231] RuntimeError: Triton kernel JIT compilation during inference: fused_moe_kernel ...")
    assert bare("RuntimeError: Triton kernel JIT compilation during inference: fused_moe_kernel. This causes a latency "
                "spike; consider extending warmup to cover this shape/config.") == [
        ("jit_during_inference", {"backend": "Triton", "kernel": "fused_moe_kernel", "mode": "error"})]


def test_jit_monitor_activation_is_not_a_compile():
    # source: utils/jit_monitor.py logger.info("Kernel JIT monitor activated; monitored JIT compilations during "
    #   "inference will use mode=%s.", mode); real: https://github.com/vllm-project/vllm/pull/46167
    assert nothing("(EngineCore pid=2386340) INFO 06-19 16:20:00 [jit_monitor.py:71] Kernel JIT monitor activated; "
                   "monitored JIT compilations during inference will use mode=warn.")


# ---- the shipped sample logs hold these families only where the demo's story puts them ------------------

# tools/make_sample_log.py: the seed's server's fatal-signal line (its second death), and the LMCache
# server's retrieve two blocks short that vLLM recovers, and its store cut by memory pressure
SAMPLE_KINDS = {"sample.log": ["engine_dead"], "sample-v0.log": [],
                "sample-lmcache.log": ["lmcache_retrieve_failed", "kv_load_recovered", "lmcache_memory_unavailable"]}


@pytest.mark.parametrize("name", sorted(SAMPLE_KINDS))
def test_the_sample_logs_hold_these_families_only_where_the_demo_story_puts_them(name):
    """Each such line is one event of its kind, the same whichever parsers are asked."""
    clock = Clock(year=2026)
    found = []
    for line in (DATA / name).read_text(encoding="utf-8").splitlines():
        f = frame_line(line, clock)
        mine = parse_frame(f, ALL)
        if mine:
            assert len(mine) == 1 and [e.kind for e in parse_frame(f) or []] == [mine[0].kind], line
            found.append(mine[0].kind)
    assert found == SAMPLE_KINDS[name]


def test_needles_are_cheap_substrings_of_every_line_they_parse():
    """Each parser's needles must be found in the lines it recognises (else parse_frame never calls it)."""
    samples = [RAY_LINE, "TimeoutError: RPC call to execute_model timed out.",
               "Memory access fault by GPU node-1 on address 0x1. Reason: Unknown.",
               "[x] LMCache WARNING: Failed to allocate memory object, retrying..."]
    for s in samples:
        f = frame_line(s, Clock(year=2026))  # (framing reads LMCache's header: its level)
        assert parse_frame(f, ALL), s


# ---- what they mean: the lifecycle and the series (wired into the registry) ---------------------------

from exporter.metrics import Metrics  # noqa: E402
from tests.conftest import run_lines  # noqa: E402
from tests.helpers import samples, value  # noqa: E402

_BANNER = "(APIServer pid=1) INFO 12-04 10:00:00 [api_server.py:1] vLLM API server version 0.32.0"
_READY = "(APIServer pid=1) INFO 12-04 10:00:50 [launcher.py:1] Application startup complete."
_STOP = "(APIServer pid=1) INFO 12-04 10:04:00 [launcher.py:1] [shutdown] API server: shutdown triggered"
_WORKER_DIED = ("(EngineCore pid=7) ERROR 12-04 10:05:00 [multiproc_executor.py:284] Worker proc VllmWorker-2 died "
                "unexpectedly (exit code: -9), shutting down executor.")
_BUSY = ("(APIServer pid=1) INFO 12-04 10:01:00 [loggers.py:1] Engine 000: Avg prompt throughput: 0.0 tokens/s, "
         "Avg generation throughput: 50.0 tokens/s, Running: 3 reqs, Waiting: 0 reqs, GPU KV cache usage: 5.0%, "
         "Prefix cache hit rate: 0.0%")


def _metrics(lines):
    m = Metrics(process_metrics=False)
    m.add_server("s")
    _, events = run_lines(lines, derived=True)
    for e in events:
        m.observe("s", e)
    return events, samples(m.render().decode())


@pytest.mark.parametrize("signal", [_WORKER_DIED, RAY_LINE,
                                    "Memory access fault by GPU node-3 (Agent handle: 0x13e852f0) on address "
                                    "0x77d445e00000. Reason: Unknown."])
def test_a_worker_a_ray_actor_or_a_gpu_fault_while_serving_is_one_death_with_words(signal):
    events, s = _metrics([_BANNER, _READY, signal])
    (death,) = [e for e in events if e.kind == "engine_death"]
    assert death.fields["message"]  # what the pushed VllmEngineDead says
    assert value(s, "vllm_log_errors_total", server="s", kind="engine_dead") == 1


def test_a_worker_that_dies_during_a_stop_is_part_of_it():
    events, s = _metrics([_BANNER, _READY, _STOP, _WORKER_DIED])
    assert not [e for e in events if e.kind == "engine_death"]
    assert value(s, "vllm_log_errors_total", server="s", kind="engine_dead") == 0
    assert value(s, "vllm_log_worker_deaths_total", server="s", executor="multiproc") == 1


def test_an_rpc_timeout_while_serving_marks_the_engines_stalled():
    line = "(EngineCore pid=7) WARNING 12-04 10:02:00 [core.py:1] TimeoutError: RPC call to sample_tokens timed out."
    _, s = _metrics([_BANNER, _READY, _BUSY, line])
    assert value(s, "vllm_log_rpc_timeouts_total", server="s", method="sample_tokens") == 1
    assert value(s, "vllm_log_engine_stalled", server="s", engine="0") == 1


def test_recoveries_and_jit_are_counted_with_bounded_labels():
    lines = (DATA.parent.parent / "tests" / "fixtures" / "warning_signs.log").read_text().splitlines()
    _, s = _metrics(lines)
    assert value(s, "vllm_log_kv_load_failure_tokens_total", server="s", outcome="recovered") == 1024
    assert value(s, "vllm_log_kv_load_failure_requests_total", server="s", outcome="failed") == 2
    assert value(s, "vllm_log_lmcache_retrieve_failures_total", server="s", reason="unhealthy") == 1
    assert value(s, "vllm_log_lmcache_memory_unavailable_total", server="s", where="store") == 1
    assert value(s, "vllm_log_jit_compilations_during_inference_total", server="s", backend="Triton") == 1
    assert value(s, "vllm_log_gpu_memory_faults_total", server="s", fault="memory_access") == 1
    assert value(s, "vllm_log_ray_actor_deaths_total", server="s", possible_oom="true") == 1
