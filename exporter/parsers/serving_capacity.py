"""What a running server gave up to keep serving: a data-parallel rank lost to fault tolerance, requests
turned away at the door, a context length vLLM cut to fit its KV cache.

Wordings, from the released wheels (catalogue/vllm-log-calls.jsonl):

- data-parallel fault tolerance (``v1/fault_tolerance/engine_core_sentinel.py``, ``entrypoints/serve/
  fault_tolerance/api_router.py``, 0.27-0.34): ``[FT] Busy loop raised %s. Waiting for recovery.`` (WARNING: an
  engine core's loop failed and, instead of dying, waits), ``[FT] Engine %d status -> %s``, ``[FT] Engine %d
  scale_down complete: removed [..], cumulative dead_dp_ranks=[..]`` (0.34, INFO, logged by every surviving
  engine: the ranks dropped), ``[FT] No recovery within %ds timeout.`` (ERROR), ``[FT] Recovery dispatch
  failed.``, ``[FT] Recovery failed for request %s: %s``, ``[FT] Instruction '%s' failed``. A rank lost is not
  the server's death: the server keeps serving with fewer engines (exporter.stream.lifecycle never sees these
  as deaths).
- requests turned away (``v1/engine/async_llm.py``, ``v1/engine/core.py``; V0's scheduler):
  ``Engine %s - rejecting request %s.`` (0.34, INFO: the engine's fault-tolerance status is not healthy; %s
  is that status), ``Request queue full - rejecting request %s (current=%d, n=%d, max=%d).`` and ``Max queued
  tokens reached - rejecting request %s (current_tokens=%d, max=%d).`` (INFO 0.29-0.31, DEBUG since),
  ``Rejecting request %s (server shutting down)`` (0.18-0.22), V0's ``Input prompt (%d tokens) is too long and
  exceeds limit of %d`` (WARNING) and ``Failing the request %s because there's not enough kv cache blocks to
  run the entire sequence.`` A request's id is in most: read around, never kept.
- the context length cut to fit (``v1/core/kv_cache_utils.py`` 0.14-0.32, ``kv_cache_planning.py`` 0.33-0.34):
  ``Auto-fit max_model_len: reduced from %d to %d to fit in available GPU memory (%s GiB available for KV
  cache)`` / ``... KV cache memory (%s)`` (``--max-model-len -1``/``auto``), and 0.34's ``--max-model-len auto
  reduced max_model_len from %d to %d (%s).`` (INFO) or, with ``Requests longer than %d tokens will be
  rejected.``, WARNING. Requests longer than the new length get HTTP 400.
- the weight-cache daemon (``vllm preload``: ``model_executor/model_loader/weight_cache/daemon.py`` 0.30,
  ``entrypoints/cli/preload.py`` 0.31-0.34): ``Weight cache daemon rank(s) exited during %s (exitcodes=%s);
  shutting down.`` (ERROR; ``startup`` or ``serving``): the daemon that keeps weights ready for vLLM servers
  stopped, so they load their weights without it. Its own process's end, not a server's death.
- in-flight requests at a stop (``v1/engine/core.py``): ``[shutdown] EngineCore: aborting in-flight requests
  count=%d`` or ``... draining in-flight requests count=%d timeout=%ds`` (0.23-0.34; ``Aborting %d requests``,
  ``Draining %d in-flight requests (timeout=%ds)`` 0.18-0.22): what a stop cut off, or waited for
  (``--shutdown-timeout``).
"""

from __future__ import annotations

from exporter.framing.frame import Frame
from exporter.parsers.base import INFO_LEVELS, PROBLEM_LEVELS, Parser, lazy_compile, where
from exporter.parsers.events import Event

_RANKS = r"\[([\d, ]*)\]"
_FT = (
    (lazy_compile(r"\[FT\] Busy loop raised (\w+)\. Waiting for recovery"), "engine_fault"),
    (lazy_compile(rf"\[FT\] Engine (\d+) scale_down complete: removed {_RANKS}, cumulative dead_dp_ranks={_RANKS}"),
     "scale_down"),
    (lazy_compile(r"\[FT\] Engine (\d+) status -> (\w+)"), "status"),
    (lazy_compile(r"\[FT\] No recovery within (\d+)s timeout"), "recovery_timeout"),
    (lazy_compile(r"\[FT\] (?:Recovery dispatch failed|Recovery failed for request )"), "recovery_failed"),
    (lazy_compile(r"\[FT\] Instruction '\w+' failed"), "instruction_failed"),
)


def _ranks(text: str) -> list[int]:
    return [int(x) for x in text.replace(" ", "").split(",") if x.isdigit()][:1024]


def _ft(frame: Frame) -> list[Event] | None:
    msg = frame.message
    for rx, event in _FT:
        m = rx.match(msg)
        if not m:
            continue
        fields: dict = {"event": event}
        if event == "engine_fault":
            fields["exception"] = m.group(1)[:80]
        elif event == "scale_down":
            fields.update(engine=int(m.group(1)), removed=_ranks(m.group(2)), dead_ranks=_ranks(m.group(3)))
        elif event == "status":
            fields.update(engine=int(m.group(1)), status=m.group(2)[:40])
        elif event == "recovery_timeout":
            fields["seconds"] = float(m.group(1))
        return [Event("dp_fault_tolerance", fields)]
    return None


# (start, reason, pattern of what follows the request's id, whole; the id is the client's and is skipped)
_REJECTED = (
    ("Request queue full - rejecting request ", "queue_full", lazy_compile(r".* \(current=(\d+), n=(\d+), max=(\d+)\)\.")),
    ("Max queued tokens reached - rejecting request ", "queued_tokens",
     lazy_compile(r".* \(current_tokens=(\d+), max=(\d+)\)\.")),
    ("Rejecting request ", "shutting_down", lazy_compile(r".* \(server shutting down\)")),
    ("Failing the request ", "no_kv_blocks", lazy_compile(r".* because there's not enough kv cache blocks to run the "
                                                         r"entire sequence\.?")),
)
_ENGINE_STATUS = lazy_compile(r"Engine (\w+) - rejecting request ")
_PROMPT_TOO_LONG = lazy_compile(r"Input prompt \((\d+) tokens\)(?: \+ lookahead slots \(\d+\))? is too long and exceeds "
                              r"(?:the capacity of block_manager|limit of (\d+))")


def _rejected(frame: Frame) -> list[Event] | None:
    msg = frame.message
    m = _ENGINE_STATUS.match(msg)
    if m:
        return [Event("request_rejected", {"reason": "engine_status", "status": m.group(1)[:40]})]
    m = _PROMPT_TOO_LONG.match(msg)
    if m:
        fields: dict = {"reason": "prompt_too_long", "prompt_tokens": int(m.group(1))}
        if m.group(2):
            fields["limit_tokens"] = int(m.group(2))
        return [Event("request_rejected", fields)]
    for start, reason, rest in _REJECTED:
        if msg.startswith(start):
            m = rest.fullmatch(msg, len(start))
            if m is None:
                return None
            fields = {"reason": reason}
            if reason == "queue_full":
                fields.update(queued=int(m.group(1)), max_requests=int(m.group(3)))
            elif reason == "queued_tokens":
                fields.update(queued_tokens=int(m.group(1)), max_tokens=int(m.group(2)))
            return [Event("request_rejected", fields)]
    return None


_REDUCED = lazy_compile(r"(?:Auto-fit max_model_len: reduced from|--max-model-len auto reduced max_model_len from) (\d+) "
                      r"to (\d+)")


def _reduced(frame: Frame) -> list[Event] | None:
    m = _REDUCED.match(frame.message)
    if not m:
        return None
    fields = {"from_tokens": int(m.group(1)), "to_tokens": int(m.group(2))}
    if "Requests longer than" in frame.message:
        fields["warned"] = True
    return [Event("max_model_len_reduced", fields)]


# Where vLLM prints them (the trust boundary): the sentinel's and API router's records (their "[FT] "
# first), the engine client's and scheduler's records, the KV planner's; their words first. The
# rejections' INFO records hold a request's id after vLLM's own words, never before them.
DP_FAULT_TOLERANCE = Parser("dp_fault_tolerance", ("[FT] ",), _ft, where(
    INFO_LEVELS | PROBLEM_LEVELS, ("engine_core_sentinel", "api_router"), start=r"\[FT\] "))
REQUEST_REJECTED = Parser(
    "request_rejected",
    ("rejecting request ", "Rejecting request ", "Input prompt (", "Failing the request "),
    _rejected,
    where(INFO_LEVELS | PROBLEM_LEVELS, ("async_llm", "core", "scheduler"),
          start=r"(?:Engine \w+ - rejecting request |Request queue full - rejecting request |Max queued tokens reached "
                r"- rejecting request |Rejecting request |Input prompt \(\d+ tokens\)|Failing the request )"),
)
MAX_MODEL_LEN_REDUCED = Parser(
    "max_model_len_reduced", ("max_model_len: reduced from", "reduced max_model_len from"), _reduced,
    where(INFO_LEVELS | {"WARNING"}, ("kv_cache_utils", "kv_cache_planning"),
          start=r"(?:Auto-fit max_model_len: reduced from|--max-model-len auto reduced max_model_len from) \d"),
)
_WEIGHT_CACHE = lazy_compile(r"Weight cache daemon rank\(s\) exited during (\w+) \(exitcodes=\[([-\d, ]*)\]\)")


def _weight_cache(frame: Frame) -> list[Event] | None:
    m = _WEIGHT_CACHE.match(frame.message)
    if not m:
        return None
    codes = [int(x) for x in m.group(2).replace(" ", "").split(",") if x.lstrip("-").isdigit()][:64]
    return [Event("weight_cache_daemon_exit", {"during": m.group(1)[:20], "exit_codes": codes})]


WEIGHT_CACHE_DAEMON_EXIT = Parser("weight_cache_daemon_exit", ("Weight cache daemon rank",), _weight_cache, where(
    PROBLEM_LEVELS, ("preload", "daemon"), start=r"Weight cache daemon rank\(s\) exited during "))
# in-flight requests at a stop (v1/engine/core.py): 0.23-0.34 "[shutdown] EngineCore: aborting in-flight requests
# count=%d" / "... draining in-flight requests count=%d timeout=%ds"; 0.18-0.22 "Aborting %d requests" / "Draining
# %d in-flight requests (timeout=%ds)"
_STOP_REQUESTS = lazy_compile(r"(?:\[shutdown\] EngineCore: (aborting|draining) in-flight requests count=(\d+)"
                            r"|(Aborting) (\d+) requests$|(Draining) (\d+) in-flight requests)")


def _stop_requests(frame: Frame) -> list[Event] | None:
    m = _STOP_REQUESTS.match(frame.message)
    if not m:
        return None
    g = m.groups()
    action, n = (g[0], g[1]) if g[0] else (g[2], g[3]) if g[2] else (g[4], g[5])
    return [Event("stop_requests", {"action": "aborted" if action.lower() == "aborting" else "drained",
                                    "requests": int(n)})]


STOP_REQUESTS = Parser("stop_requests", ("in-flight requests", "Aborting "), _stop_requests, where(
    INFO_LEVELS, ("core",), start=r"(?:\[shutdown\] EngineCore: (?:aborting|draining) in-flight requests count=\d|"
                                 r"Aborting \d+ requests$|Draining \d+ in-flight requests)"))
PARSERS = (DP_FAULT_TOLERANCE, REQUEST_REJECTED, MAX_MODEL_LEN_REDUCED, WEIGHT_CACHE_DAEMON_EXIT, STOP_REQUESTS)
KINDS = ("dp_fault_tolerance", "request_rejected", "max_model_len_reduced", "weight_cache_daemon_exit", "stop_requests")
