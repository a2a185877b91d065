"""What was done to a running engine: sleep mode (RL trainers put the engine to sleep to free its GPU
memory between rollouts and wake it for the next), expert-parallel load balancing (EPLB), elastic data
parallel scaling, V0's per-preemption warning, and the signs of an engine loop that hangs.

Wordings, read from the released wheels (``pip download vllm==X``; catalogue/vllm-log-calls.jsonl):

- ``sleep_mode`` (INFO, ``executor/executor_base.py`` 0.7.3-0.10.2, ``v1/executor/abstract.py`` 0.11.2-0.34.0):
  ``"It took %.6f seconds to fall asleep."``, ``"It took %.6f seconds to wake up tags %s."`` (0.7.3:
  ``"... to wake up."``), 0.31+ ``"It took %.6f seconds to discard tags %s."``: ``action`` (sleep, wake_up,
  discard) and ``seconds``. The tags (``['weights']``, ``['kv_cache']``, ``None``) are not kept.
- ``eplb`` (INFO, ``distributed/eplb/eplb_state.py``, rank 0 of the expert-parallel group):
  ``"EPLB step: avg_tokens=%.2f, max_tokens=%d, balancedness=%.4f"`` (0.9.2-0.10.2), from 0.11.2
  ``"EPLB step: %d for model %s: avg_tokens=..., max_tokens=..., balancedness=..."`` and from 0.14.1
  ``", steps until the next rearrangement: %d"`` (op ``step``: the experts' load over the last window,
  balancedness = avg_tokens / max_tokens, 1 is even); ``"Rearranged experts%sin %.2f seconds."``
  (0.9.2-0.13.0) / ``"Rearranged experts %s in %.2f s."`` (0.14.1+), ``%s`` `` (profile) `` for the start-up
  profile run (op ``rearranged``, ``profile``); 0.34's async worker ``"Async EPLB rearranged %d/%d layers of
  %s in %.2f s."`` (op ``rearranged``, ``mode: async``); 0.27.1+ ``"[EPLB] Skip rearrange: imbalance %.4f ->
  %.4f (no material gain)"`` (op ``skipped``). The model name is not kept (a label vLLM users do not bound).
- ``dp_scale`` (INFO, ``v1/engine/core_client.py`` 0.10.2-0.34.0): ``"[Elastic EP] Scale up completed, new
  data parallel size: %s"`` / ``"... Scale down completed, ..."``: ``direction`` and ``size``. (The
  coordinator's ``"DPCoordinator scaled up from %s to %s engines"`` says the same scaling again and is not
  read, so each scaling counts once.)
- ``preemption`` (WARNING, V0 ``core/scheduler.py`` 0.6.6-0.10.2, logged for the 1st, 51st, 101st...
  preemption only): ``"Sequence group %s is preempted by %s mode because there is not enough KV cache space.
  ... total_num_cumulative_preemption=%d"`` (``%s`` the enum, ``PreemptionMode.RECOMPUTE``): ``mode``
  (recompute, swap) and ``cumulative``, the engine's preemptions so far (the request id is not kept).
- ``engine_hang``: V0's ``engine/async_llm_engine.py`` (ERROR, 0.6.6-0.10.2) ``"Engine iteration timed out.
  This should never happen!"`` (an engine step took longer than VLLM_ENGINE_ITERATION_TIMEOUT_S; the engine
  is marked errored, so its death follows: ``source: iteration_timeout``); 0.33+'s watchdog
  (``utils/watch_dog.py``, INFO, on when ``dump_dir`` is set) ``"[Watchdog]Dumped stack to %s due to %s"``
  (the watched loop was not fed within its timeout; reason ``feed timeout``: ``source: watchdog``; the
  path is not kept).
- ``engine_call_failed`` (ERROR, ``v1/engine/core.py`` ``_invoke_utility_method``, 0.7.3-0.34.0): ``"Invocation
  of %s method failed"``, a ``logger.exception``: a call the engine client made to the engine core (a
  utility call: a LoRA adapter loaded, profiling started, the prefix cache reset, sleep...) raised; the
  engine answers the caller with the failure and serves on. ``method``: the engine core's method, one of
  ``ENGINE_CALLS`` (every name vLLM's clients call in 0.29-0.34, docs/engine-calls.md), else ``other``. A
  worker's exception inside the call (``WorkerProc hit an exception.`` before it) is that call's failure,
  not a death: exporter.stream.lifecycle decides.
"""

from __future__ import annotations

from exporter.parsers.events import Event
from exporter.framing.frame import Frame
from exporter.parsers.base import INFO_LEVELS, PROBLEM_LEVELS, Parser, lazy_compile, where

_SLEEP = lazy_compile(r"It took (\d+(?:\.\d+)?) seconds to (fall asleep|wake up|discard)\b")
_ACTIONS = {"fall asleep": "sleep", "wake up": "wake_up", "discard": "discard"}


def _sleep(frame: Frame) -> list[Event] | None:
    m = _SLEEP.match(frame.message)
    if not m:
        return None
    return [Event("sleep_mode", {"action": _ACTIONS[m.group(2)], "seconds": float(m.group(1))})]


_F = r"(\d+(?:\.\d+)?)"
_STEP = lazy_compile(rf"EPLB step: (?:(\d+) for model .{{0,200}}?: )?avg_tokens={_F}, max_tokens=(\d+), "
                   rf"balancedness={_F}(?:, steps until the next rearrangement: (-?\d+))?")
_REARRANGED = lazy_compile(rf"Rearranged experts *(\(profile\))? *in {_F} s(?:econds)?\.")
_ASYNC = lazy_compile(rf"Async EPLB rearranged (\d+)/(\d+) layers of .{{0,200}}? in {_F} s\.")
_SKIPPED = lazy_compile(rf"\[EPLB\] Skip rearrange: imbalance {_F} -> {_F} \(no material gain\)")


def _eplb(frame: Frame) -> list[Event] | None:
    msg = frame.message
    m = _STEP.match(msg)
    if m:
        fields: dict = {"op": "step", "avg_tokens": float(m.group(2)), "max_tokens": int(m.group(3)),
                        "balancedness": float(m.group(4))}
        if m.group(1) is not None:
            fields["step"] = int(m.group(1))
        if m.group(5) is not None:
            fields["steps_to_rearrangement"] = int(m.group(5))
        return [Event("eplb", fields)]
    m = _REARRANGED.match(msg)
    if m:
        return [Event("eplb", {"op": "rearranged", "mode": "sync", "profile": m.group(1) is not None,
                               "seconds": float(m.group(2))})]
    m = _ASYNC.match(msg)
    if m:
        return [Event("eplb", {"op": "rearranged", "mode": "async", "profile": False, "layers": int(m.group(1)),
                               "num_layers": int(m.group(2)), "seconds": float(m.group(3))})]
    m = _SKIPPED.match(msg)
    if m:
        return [Event("eplb", {"op": "skipped", "imbalance": float(m.group(1)),
                               "proposed_imbalance": float(m.group(2))})]
    return None


_SCALE = lazy_compile(r"\[Elastic EP\] Scale (up|down) completed, new data parallel size: (\d+)$")


def _dp_scale(frame: Frame) -> list[Event] | None:
    m = _SCALE.match(frame.message)
    if not m:
        return None
    return [Event("dp_scale", {"direction": m.group(1), "size": int(m.group(2))})]


_PREEMPTED = lazy_compile(r"Sequence group \S{1,256} is preempted by PreemptionMode\.(RECOMPUTE|SWAP) mode because there "
                        r"is not enough KV cache space\..*?total_num_cumulative_preemption=(\d+)")


def _preemption(frame: Frame) -> list[Event] | None:
    m = _PREEMPTED.match(frame.message)
    if not m:
        return None
    return [Event("preemption", {"mode": m.group(1).lower(), "cumulative": int(m.group(2))})]


_WATCHDOG = lazy_compile(r"\[Watchdog\]Dumped stack to \S.{0,4096}? due to (.{1,64})$")


def _engine_hang(frame: Frame) -> list[Event] | None:
    msg = frame.message
    if msg.startswith("Engine iteration timed out."):
        return [Event("engine_hang", {"source": "iteration_timeout"})]
    m = _WATCHDOG.match(msg)
    if m and m.group(1).strip() == "feed timeout":
        return [Event("engine_hang", {"source": "watchdog", "reason": "feed timeout"})]
    # 0.34's watchdog also dumps the stacks at a stop, "due to SIGTERM" (the engine core's signal handler)
    # or "due to shutdown" (a worker whose parent exited): a routine stop, not a hang
    return None


# Where vLLM prints them (the trust boundary): INFO records of the executor, EPLB and the engine client, the
# words first; V0's preemption warning from its scheduler, its iteration timeout from the async engine.
SLEEP_MODE = Parser("sleep_mode", ("It took ",), _sleep, where(
    INFO_LEVELS, ("executor_base", "abstract"), start=r"It took \d"))
EPLB = Parser("eplb", ("EPLB", "Rearranged experts"), _eplb, where(
    INFO_LEVELS, ("eplb_state", "async_worker"),
    start=r"(?:EPLB step: |Rearranged experts|Async EPLB rearranged |\[EPLB\] Skip rearrange: )"))
DP_SCALE = Parser("dp_scale", ("[Elastic EP] Scale ",), _dp_scale, where(
    INFO_LEVELS, ("core_client",), start=r"\[Elastic EP\] Scale (?:up|down) completed, "))
PREEMPTION = Parser("preemption", ("is preempted by ",), _preemption, where(
    {"WARNING", ""}, ("scheduler",), start=r"Sequence group \S+ is preempted by "))
ENGINE_HANG = Parser("engine_hang", ("Engine iteration timed out", "[Watchdog]Dumped stack"), _engine_hang, where(
    INFO_LEVELS | PROBLEM_LEVELS, ("async_llm_engine", "watch_dog"),
    start=r"(?:Engine iteration timed out\.|\[Watchdog\]Dumped stack to )"))


# The engine core's methods its clients call (``call_utility*`` in v1/engine/core_client.py, 0.29-0.34):
# a bounded label, and the list docs/engine-calls.md explains
ENGINE_CALLS = frozenset({
    "add_lora", "remove_lora", "pin_lora", "list_loras", "profile", "reset_prefix_cache", "reset_mm_cache",
    "reset_encoder_cache", "sleep", "wake_up", "is_sleeping", "release_kv_cache_memory", "pause_scheduler",
    "resume_scheduler", "is_scheduler_paused", "pause_generation", "execute_dummy_batch", "collective_rpc",
    "save_sharded_state", "get_supported_tasks", "set_weight_version", "get_weight_version",
    "reinitialize_distributed", "commit_prepared_elastic_ep", "checkpoint_prepare", "checkpoint_restore",
    "checkpoint_state",
})
_CALL_FAILED = lazy_compile(r"Invocation of (\w{1,64}) method failed$")


def _engine_call(frame: Frame) -> list[Event] | None:
    m = _CALL_FAILED.match(frame.message)
    if not m:
        return None
    return [Event("engine_call_failed", {"method": m.group(1) if m.group(1) in ENGINE_CALLS else "other"})]


ENGINE_CALL = Parser("engine_call_failed", ("Invocation of ",), _engine_call, where(
    PROBLEM_LEVELS, ("core",), start=r"Invocation of \w+ method failed$"))

PARSERS = (SLEEP_MODE, EPLB, DP_SCALE, PREEMPTION, ENGINE_HANG, ENGINE_CALL)
KINDS = ("sleep_mode", "eplb", "dp_scale", "preemption", "engine_hang", "engine_call_failed")
