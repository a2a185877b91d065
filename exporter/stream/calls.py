"""Calls to the engine core that failed and that the engine answered: which records belong to them, and
which LoRA adapter events another one counted already. exporter.stream.lifecycle holds one ``Calls`` per
stream and asks it of the events it watches; whether a worker's exception is such a call's failure or a
death is the lifecycle's to decide (its hold), what belongs to the call once decided is this module's.

A failed call logs up to four records, each marked ``during = "call"`` (with ``call``: the engine core's
method), so that it is counted once, by the engine's ``engine_call_failed``, and never as an error or a
death (vLLM 0.32's ``POST /v1/load_lora_adapter`` of a path that is not there, captured in
tests/fixtures/vllm-0.32-cpu/lora_tools):

- the worker's ``WorkerProc hit an exception.`` (v1/executor/multiproc_executor.py) and its traceback,
- the engine core's ``Invocation of add_lora method failed`` (v1/engine/core.py) and its traceback,
- the caller's traceback, where the endpoint let the failure through (uvicorn's ``Exception in ASGI
  application`` ending ``Exception: Call to collective_rpc method failed: ...``: the engine client
  raises the failure message v1/engine/core.py wrote, v1/engine/core_client.py).

And two LoRA records that repeat what another said (v1 entrypoints/openai/models/serving.py, 0.31-0.34):
the API server's ``Failed to load LoRA '%s' resolved by %s`` after the engine's failed add_lora (one
failure), and the ``Loaded new LoRA adapter`` that follows ``Reloaded LoRA adapter '%s' in place`` (one
reload, not also a load).
"""

from __future__ import annotations

from exporter.parsers.events import Event

# a failed call's own traceback (the worker's, the engine core's) begins this soon after its first line
CALL_TRACEBACK_SECONDS = 2.0
# the caller's traceback and the API server's "Failed to load LoRA" come this soon after the engine's line
CALL_ECHO_SECONDS = 10.0
# "Reloaded LoRA adapter ... in place" and its "Loaded new LoRA adapter" are one coroutine's two records
RELOAD_SECONDS = 1.0
MAX_KEYS = 64  # processes and methods remembered (a log naming endless ones forgets, never grows)
_CALL_WORDS = "Call to "
_FAILED_WORDS = " method failed: "


class Calls:
    def __init__(self) -> None:
        # (process, pid) -> (line, log time, method) of a failed call's first line whose traceback is to come
        self._tracebacks: dict[tuple, tuple] = {}
        self._methods: dict = {}  # method -> log time (-1: none) of the engine's latest failed call of it
        self._reload: tuple | None = None  # (process, pid, log time) of the last in-place reload

    def failed(self, ev: Event, method) -> None:
        """``ev`` (a worker's exception, or the engine's engine_call_failed) is the first line of a failed
        call's record: the traceback that comes next from the same process is the call's."""
        tbs = self._tracebacks
        if len(tbs) >= MAX_KEYS and (ev.process, ev.pid) not in tbs:
            tbs.clear()
        tbs[(ev.process, ev.pid)] = (ev.line, ev.ts, method)

    def answered(self, ev: Event) -> None:
        """The engine's engine_call_failed: the call failed and the engine answered it."""
        method = ev.fields.get("method")
        self.failed(ev, method)
        if len(self._methods) >= MAX_KEYS:
            self._methods.clear()
        self._methods[method] = ev.ts if ev.ts is not None else -1.0

    def traceback(self, ev: Event) -> bool:
        """Whether the traceback ``ev`` belongs to a failed call (then marked ``during = "call"``)."""
        if not self._tracebacks and not self._methods:
            return False
        f = ev.fields
        c = self._tracebacks.pop((ev.process, ev.pid), None) if self._tracebacks else None
        if c is None or (c[0] is not None and ev.line is not None and ev.line <= c[0]) \
                or (c[1] is not None and ev.ts is not None and ev.ts - c[1] > CALL_TRACEBACK_SECONDS):
            method = self._caller(f)
            when = self._methods.get(method)
            if when is None or (when >= 0 and ev.ts is not None and ev.ts - when > CALL_ECHO_SECONDS):
                return False
            c = (None, None, method)
        f["during"], f["call"] = "call", c[2]
        return True

    @staticmethod
    def _caller(f: dict) -> str | None:
        """The method a caller's traceback names: ``Exception: Call to <method> method failed: ...``."""
        words = f.get("message")
        if f.get("exception") != "Exception" or not isinstance(words, str) or not words.startswith(_CALL_WORDS):
            return None
        end = words.find(_FAILED_WORDS)
        return words[len(_CALL_WORDS):end] if end > 0 else None

    def lora(self, ev: Event) -> None:
        """A LoRA adapter event another record counted already gets ``during``: ``call`` (the engine's failed
        add_lora said it), ``reload`` (the in-place reload said it)."""
        f = ev.fields
        event = f.get("event")
        if event == "load_failed":
            when = self._methods.get("add_lora")
            if when is not None and (when < 0 or ev.ts is None or abs(ev.ts - when) <= CALL_ECHO_SECONDS):
                del self._methods["add_lora"]  # (one API-server record per failed add_lora)
                f["during"] = "call"
        elif event == "reloaded":
            self._reload = (ev.process, ev.pid, ev.ts)
        elif event == "loaded" and self._reload is not None:
            (process, pid, when), self._reload = self._reload, None
            if (process, pid) == (ev.process, ev.pid) and (
                    when is None or ev.ts is None or abs(ev.ts - when) <= RELOAD_SECONDS):
                f["during"] = "reload"
