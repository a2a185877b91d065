"""What happened to a server, decided once for every consumer: started, serving, stopped on
purpose, died, failed to start.

The same error line means different things at different times. vLLM 0.32 stopped with SIGTERM
logs ``AsyncLLM output_handler failed.`` and an ``EngineDeadError`` traceback at ERROR: part of a
stop somebody asked for, not a death. An engine that dies while the server is still starting
(``WorkerProc hit an exception.``) is a failed start, not a dead engine. One death is logged by
several processes; so is one failed start. :class:`Lifecycle` follows one stream's events in
order and adds the events the metrics, the report and the alerts count, so the three agree:

- ``engine_death``: one per death (the first signal's fields), not during a stop or a start-up.
- ``server_stop``: one per stop that was asked for (``[shutdown] API server: shutdown triggered``,
  a signal the engine core received, a ``KeyboardInterrupt``; at WARNING level, where vLLM logs
  none of those, a weak sign (exporter.parsers.lifecycle) from a server that was serving).
- a start that fails is one ``start_failed`` whatever the log gives: a reason vLLM's exception
  names, or an uncaught traceback (printed bare, without a log header: the process died of it)
  while the server was starting.
- ``start_failed``: one per failed start, at its first signal; ``start_failure_reason``: each
  reason the log gives for it, once, and ``other`` (with the root cause's exception line) when the
  failed start is over without one: at the next start, after ``FAILED_START_QUIET_SECONDS`` without
  a further signal, or at the end of the input.
- ``server_state``: the state after each change (``STATES``).

Signals that belong to a stop or a failed start keep their own events (``parse`` shows them) and
get ``fields["during"] = "stop" | "start"``: consumers do not count them as errors.

A death or failed start with no start between is one until its signals are more than
``DEATH_WINDOW_SECONDS`` apart in log time (a log that holds no version banner).

At ERROR level a SIGTERM stop with requests in flight and a killed engine log the same thing first:
``AsyncLLM output_handler failed.`` and an ``EngineDeadError`` traceback, with no stop or death line
before them, then uvicorn's ``Shutting down`` / ``Application shutdown complete.``. Only what follows
tells them apart: uvicorn's ``Finished server process [N]`` after a death (the engine's death ends
uvicorn's serve, which returns), never after a stop (vLLM's launcher cancels the serve). So such a
bare ``EngineDeadError`` is *held* (``_Hold``): the watched events after it wait with it until the
log says which it was. A death: ``Finished server process``, a death signal of another kind, an exit
that is not clean, or no ``Application shutdown complete.`` by the end (a server that hung is a
death too). A stop: a stop line, or ``Application shutdown complete.`` and then nothing more of the
server within ``HOLD_SECONDS`` (wall clock, log time, the end of the input, a clean exit or a new
start). Held events are never lost: at most ``HOLD_MAX_EVENTS`` wait, then the evidence so far
decides. Every death but this one is read at once (at INFO and WARNING vLLM logs
``engine core exited unexpectedly`` first).

A worker's exception (``WorkerProc hit an exception.``, the worker's handler of one call; the worker
lives on) is no death by itself either: the engine core decides what the failed call means, and says
so next. ``Invocation of <method> method failed`` (exporter.parsers.engine_ops' ``engine_call_failed``)
is a call the engine answered with the failure and survived (a client's LoRA adapter that does not
load, profiling, sleep, a reset of the prefix cache): the worker's signal and the tracebacks of both
records get ``during = "call"`` (exporter.stream.calls), and the call is counted by what it was, never
as a death.
``EngineCore encountered a fatal error.`` (the call was the engine's own step) is the death, ``EngineCore
failed to start.`` a failed start. So the worker's exception is held like a bare ``EngineDeadError``;
when nothing decides it (a stop, the server serving on, ``HOLD_SECONDS``), the engine lived through it.

At WARNING level the version banner (INFO) is not logged, so a new start after a stop or a death
is seen by its first start-up failure coming from a process the run before did not have (its pid),
or more than ``RESTART_AFTER_SECONDS`` of log time after the stop.
"""

from __future__ import annotations

import time

from exporter.parsers.events import Event
from exporter.parsers.supervisor import exit_words
from exporter.stream.calls import Calls

STARTING, SERVING, STOPPED, DEAD, FAILED = "starting", "serving", "stopped", "dead", "failed"
STATES = (STARTING, SERVING, STOPPED, DEAD, FAILED)
DEATH_WINDOW_SECONDS = 300.0
FAILED_START_QUIET_SECONDS = 10.0
RESTART_AFTER_SECONDS = 60.0
MAX_PIDS = 64  # the processes of one run remembered (a DP server has a few per engine)
# a weak stop sign (exporter.parsers.lifecycle) is a stop only from these states
WEAK_STOP_STATES = (None, SERVING)
# the kinds Lifecycle acts on; every other event passes untouched
# a process of vLLM's ended or a GPU faulted: the engine is gone, as with engine_dead (a worker that
# dies during a stop or a start-up belongs to those)
DEATH_SIGNALS = frozenset({"engine_dead", "worker_died", "ray_actor_died", "gpu_memory_fault"})
WATCHED = frozenset({"version", "ready", "engine_stats", "shutdown", "startup_failure", "traceback",
                     "process_exit", "host_oom_kill", "engine_call_failed", "lora_adapter"}) | DEATH_SIGNALS
# a death signal that a stop at ERROR level logs too (no stop line before it at that level): held
AMBIGUOUS_DEATHS = frozenset({"AsyncLLM output_handler failed", "EngineDeadError"})
# a worker's exception in one call (the worker lives on): what the engine core logs next says whether that
# call's failure was answered (engine_call_failed), killed the engine, or failed its start
START_DEATHS = frozenset({"WorkerProc hit an exception"})

HOLD_SECONDS = 10.0  # after the held signal, the most the log may take to say which it was
HOLD_MAX_EVENTS = 1000  # watched events held at most (a death with many streams logs one per stream)
# the kernel's OOM notice and the exit it caused are logged together; further apart they are two things
OOM_EXIT_SECONDS = 30.0


def cause_line(fields: dict) -> str | None:
    """A traceback's root cause as its exception line: the first exception of a chain."""
    exc = fields.get("root_exception") or fields.get("exception")
    msg = fields.get("root_message") if fields.get("root_exception") else fields.get("message")
    if not exc and not msg:
        return None
    return f"{exc}: {msg}"[:500] if exc and msg else str(exc or msg)[:500]


def death_words(kind: str, f: dict) -> str:
    """What a death signal that carries no message of its own says, for the alert and the report."""
    if kind == "worker_died":
        how = f.get("signal") or (f"exit code {f['exit_code']}" if "exit_code" in f else "no exit code")
        return f"{f.get('proc') or 'a worker'} ({f.get('executor', 'executor')}) died unexpectedly: {how}"
    if kind == "ray_actor_died":
        oom = "; Ray names the OOM killer as a possible cause" if f.get("possible_oom") else ""
        return f"Ray actor died: worker process died, exit type {f.get('exit_type', 'unknown')}{oom}"
    if kind == "gpu_memory_fault":
        return f"GPU node-{f.get('node')} {f.get('fault', 'memory_access').replace('_', ' ')} fault: {f.get('reason')}"
    return kind


class _FailedStart:
    __slots__ = ("reasons", "cause", "last_ts", "touched", "closed", "first")

    def __init__(self, first: Event, cause: str | None):
        self.reasons: set[str] = set()
        self.cause = cause
        self.first = first
        self.last_ts = first.ts
        self.touched = time.monotonic()
        self.closed = False


class _Hold:
    """Death signals waiting for what follows them, and the watched events that came after."""
    __slots__ = ("events", "ts", "touched", "shut", "unseen", "ambiguous", "worker")

    def __init__(self, first: Event, unseen: bool):
        self.events = [first]
        self.ts = first.ts
        self.touched = time.monotonic()  # when it opened: held HOLD_SECONDS of wall clock at most
        self.shut: Event | None = None  # uvicorn's "Application shutdown complete." once seen
        self.unseen = unseen  # no start and no serving seen before: it may be a failed start
        self.ambiguous = first.fields.get("signature") in AMBIGUOUS_DEATHS  # every death signal held
        self.worker = _worker_signal(first)  # a worker's exception in one call: no death until the engine says so


def _finished(ev: Event) -> bool:
    return ev.kind == "shutdown" and bool(ev.fields.get("finished"))


def _worker_signal(ev: Event) -> bool:
    return ev.kind in DEATH_SIGNALS and ev.fields.get("signature") in START_DEATHS


class Lifecycle:
    def __init__(self) -> None:
        self.state: str | None = None  # None: no start seen (the exporter joined a running server)
        self._death_ts: float | None = None  # log time of the open death's last signal
        self._fail: _FailedStart | None = None
        self._cause: str | None = None  # the first unexplained traceback since the start
        self._oom_ts: float | None = None  # the host OOM killer's last notice (log time)
        self._pids: set[int] = set()  # processes of the current run (a later pid: a new start)
        self._end_ts: float | None = None  # log time of the stop or death that ended the run
        self._hold: _Hold | None = None  # a bare EngineDeadError: a stop or a death, not known yet
        self.calls = Calls()  # failed calls the engine answered: their records, the LoRA events they repeat

    # -- feeding --------------------------------------------------------------------------------

    def feed(self, events: list[Event]) -> list[Event]:
        """The events with the derived ones added after the signal that made them."""
        out: list[Event] | None = None
        pids = self._pids
        for i, ev in enumerate(events):
            pid = ev.pid
            if pid is not None and pid not in pids and len(pids) < MAX_PIDS and self.state not in (STOPPED, DEAD):
                pids.add(pid)
            if self._fail is not None and not self._fail.closed and ev.ts is not None \
                    and self._fail.last_ts is not None and ev.ts - self._fail.last_ts > FAILED_START_QUIET_SECONDS:
                out = events[:i] if out is None else out
                self._close(out)
            if self._hold is not None and ev.ts is not None and self._hold.ts is not None \
                    and ev.ts - self._hold.ts > HOLD_SECONDS:
                out = events[:i] if out is None else out
                self._release(out)  # the log went on: what it said by then decides
            if ev.kind not in WATCHED:
                if out is not None:
                    out.append(ev)
                continue
            if out is None:
                out = events[:i]
            if self._hold is not None and self._held(ev, out):
                continue
            if self._hold is None and self._holds(ev):
                self._hold = _Hold(ev, self.state is None)
                continue
            out.append(ev)
            self._step(ev, out)
        return events if out is None else out

    def tick(self, idle_seconds: float | None = None) -> list[Event]:
        """A failed start quiet for FAILED_START_QUIET_SECONDS (wall clock), or any open one when
        ``idle_seconds`` is None (the end of the input), is over."""
        out: list[Event] = []
        h = self._hold
        if h is not None and (idle_seconds is None or time.monotonic() - h.touched > HOLD_SECONDS):
            self._release(out)
        f = self._fail
        if f is not None and not f.closed and (
                idle_seconds is None or time.monotonic() - f.touched > FAILED_START_QUIET_SECONDS):
            self._close(out)
        return out

    # -- a bare EngineDeadError: held until the log says stop or death ---------------------------

    def _holds(self, ev: Event) -> bool:
        """Whether ``ev`` opens a hold: a bare EngineDeadError while serving or before anything was seen,
        or a worker's exception then (what the engine core logs next decides it; at ERROR level a failed
        start's first words are a worker's exception too, ``EngineCore failed to start.`` follows)."""
        if ev.kind not in DEATH_SIGNALS:
            return False
        sig = ev.fields.get("signature")
        return (sig in AMBIGUOUS_DEATHS or sig in START_DEATHS) and self.state in (None, SERVING)

    def _held(self, ev: Event, out: list[Event]) -> bool:
        """Take ``ev`` into the open hold (True), or settle the hold and let ``ev`` be stepped (False)."""
        h = self._hold
        f = ev.fields
        kind = ev.kind
        if _finished(ev):  # uvicorn's serve returned: the engine's death ended it
            self._release(out, death=True)
            return False
        if kind == "engine_call_failed" and h.worker:  # the engine answered the call with its failure
            self._release(out, call=ev)
            return False
        if kind == "shutdown" and not f.get("weak"):  # a stop line (vLLM logs it at INFO)
            if h.worker and not any(e.kind in DEATH_SIGNALS and not _worker_signal(e) for e in h.events):
                self._release(out)  # the worker's exception killed nothing; the stop is stepped
                return False
            if not h.ambiguous:  # a death vLLM names as one came first: a stop after it changes nothing
                self._release(out, death=True)
                return False
            self._hold = None
            out.append(ev)
            self._step(ev, out)
            self._hold = h
            self._release(out)
            return True
        if kind == "startup_failure" and h.unseen and not self._far(h.ts, ev.ts):
            self._release(out, start=True)  # the server was starting: a failed start, not a death
            return False
        if _worker_signal(ev) and h.worker:
            pass  # another worker's exception in the same call (one per tensor-parallel rank)
        elif kind in DEATH_SIGNALS and f.get("signature") not in AMBIGUOUS_DEATHS:
            if not h.unseen:
                self._release(out, death=True)
                return False
            h.ambiguous = False
        elif (kind == "process_exit" and not f.get("clean")) or kind in ("version", "process_exit", "ready", "engine_stats") \
                or (ev.ts is not None and h.ts is not None and ev.ts - h.ts > HOLD_SECONDS):
            # an exit, a new start, a server that serves, or time gone by: what was seen decides
            self._release(out, death=kind == "process_exit" and not f.get("clean"))
            return False
        if kind == "shutdown" and f.get("message") == "Application shutdown complete.":
            h.shut = ev
        h.events.append(ev)
        if len(h.events) >= HOLD_MAX_EVENTS:
            self._release(out)
        return True

    def _release(self, out: list[Event], death: bool = False, start: bool = False, call: Event | None = None) -> None:
        """Settle the hold, then step the held events in their order: a failed start (``start``), a
        stop when the state says so already (a stop line came) or when every signal held was a bare
        EngineDeadError and uvicorn's shutdown completed with no ``Finished server process`` after
        it, else a death. A worker's exception that no death or failed start follows is none: the
        failure of ``call`` (the engine's engine_call_failed) when it came, else one the engine lived
        through."""
        h, self._hold = self._hold, None
        if h is None:
            return
        if start and self.state is None:
            self._to(STARTING, h.events[0], out)
        elif not death and self.state in (None, SERVING) and h.ambiguous and h.shut is not None:
            sign = h.shut
            self._stop(Event("shutdown", {"signature": "uvicorn: Shutting down", "message": (
                "Application shutdown complete. after EngineDeadError, and no 'Finished server process':"
                " a stop (vLLM at ERROR level)")}, sign.ts if sign.ts is not None else h.ts,
                sign.process, sign.pid, sign.line), out)
        survived = h.worker and not death and not start
        for ev in h.events:
            out.append(ev)
            if survived and _worker_signal(ev):
                if call is not None:  # its record's traceback (held here, or still to come) is the call's too
                    ev.fields["during"] = "call"
                    self.calls.failed(ev, call.fields.get("method"))
                continue
            self._step(ev, out)

    # -- the states -----------------------------------------------------------------------------

    def _step(self, ev: Event, out: list[Event]) -> None:
        kind, f, state = ev.kind, ev.fields, self.state
        if kind == "version":
            self._start(ev, out)
        elif kind in ("ready", "engine_stats"):
            if state in (None, STARTING):
                self._to(SERVING, ev, out)
        elif kind == "shutdown":
            if not f.get("weak") or state in WEAK_STOP_STATES:
                self._stop(ev, out)
        elif kind in DEATH_SIGNALS:
            if "message" not in f:
                f["message"] = death_words(kind, f)
            if state == STOPPED:
                f["during"] = "stop"
            elif state in (STARTING, FAILED):
                f["during"] = "start"
                self._failed(ev, "other", out)
            else:
                self._death(ev, out)
        elif kind == "startup_failure":
            if state in (STOPPED, DEAD) and self._new_run(ev):
                self._start(ev, out)  # a start whose banner was not logged (WARNING level)
                state = self.state
            if state == STOPPED:
                f["during"] = "stop"
            elif state == DEAD and not self._far(self._death_ts, ev.ts):
                f["during"] = "death"
            else:
                self._failed(ev, f.get("reason") or "other", out)
        elif kind == "host_oom_kill":
            self._oom_ts = ev.ts if ev.ts is not None else -1.0
        elif kind == "process_exit":
            self._exit(ev, out)
        elif kind == "engine_call_failed":
            self.calls.answered(ev)
        elif kind == "lora_adapter":
            self.calls.lora(ev)
        elif kind == "traceback" and self.calls.traceback(ev):
            pass
        elif kind == "traceback" and not f.get("kinds"):
            if f.get("exception") in ("KeyboardInterrupt", "SystemExit") and state in (None, STARTING, SERVING):
                self._stop(ev, out)  # Ctrl-C, or sys.exit from a signal handler
            if self.state == STOPPED:
                f["during"] = "stop"
            elif self.state == FAILED and self._fail is not None:
                f["during"] = "start"
                if self._fail.cause is None:
                    self._fail.cause = cause_line(f)
            elif self.state == DEAD and not self._far(self._death_ts, ev.ts):
                f["during"] = "death"  # the death's aftermath (cleanup errors), not a new error
            elif self.state == STARTING and f.get("uncaught"):
                # printed by Python itself as the process died of it: the start failed; the
                # exception line is the reason's words
                cause = cause_line(f)
                if self._cause is None:
                    self._cause = cause
                self._failed(Event(ev.kind, {**f, "message": cause or ""}, ev.ts, ev.process, ev.pid, ev.line),
                             "other", out)
                f["during"] = "start"
            elif self.state == STARTING and self._cause is None:
                self._cause = cause_line(f)

    def _exit(self, ev: Event, out: list[Event]) -> None:
        """The supervisor saw the process end. After a stop, a death or a failed start it is their
        end; otherwise it is the only word there is: a clean exit is a stop, any other a death (or a
        failed start while starting), as when the kernel's OOM killer sends SIGKILL and vLLM says
        nothing."""
        f, state = ev.fields, self.state
        if state == STOPPED:
            f["during"] = "stop"
            return
        if state == DEAD and not self._far(self._death_ts, ev.ts):
            f["during"] = "death"
            return
        if state == FAILED:
            f["during"] = "start"
            return
        words = exit_words(f)
        oom, self._oom_ts = self._oom_ts, None
        if oom is not None and (oom < 0 or ev.ts is None or abs(ev.ts - oom) <= OOM_EXIT_SECONDS):
            words += " (a process of the unit was killed by the kernel's OOM killer: host memory)"
        fields = {"signature": "clean exit" if f.get("clean") else "process exit", "message": words}
        if not f.get("clean"):
            fields["exit_status"] = str(f.get("status"))
        signal = Event(ev.kind, fields, ev.ts, ev.process, ev.pid, ev.line)
        if f.get("clean"):
            self._stop(signal, out)
        elif state == STARTING:
            f["during"] = "start"
            self._failed(signal, "other", out)
        else:
            self._death(signal, out)

    def _start(self, ev: Event, out: list[Event]) -> None:
        self._close(out)
        self._fail, self._death_ts, self._cause, self._end_ts = None, None, None, None
        self._pids.clear()  # (the same set: feed holds it)
        if ev.pid is not None:
            self._pids.add(ev.pid)
        self._to(STARTING, ev, out)

    def _new_run(self, ev: Event) -> bool:
        """Whether a start-up failure after a stop or death comes from a later start."""
        if ev.pid is not None and self._pids and ev.pid not in self._pids:
            return True
        return self._end_ts is not None and ev.ts is not None and ev.ts - self._end_ts > RESTART_AFTER_SECONDS

    def _to(self, state: str, ev: Event, out: list[Event]) -> None:
        if state != self.state:
            self.state = state
            out.append(_derived("server_state", ev, {"state": state}))

    def _stop(self, ev: Event, out: list[Event]) -> None:
        if self.state in (None, STARTING, SERVING):
            out.append(_derived("server_stop", ev, {k: v for k, v in ev.fields.items() if k not in ("kinds", "weak")}))
            self._end_ts = ev.ts
            self._to(STOPPED, ev, out)

    def _death(self, ev: Event, out: list[Event]) -> None:
        new = self.state != DEAD or self._far(self._death_ts, ev.ts)
        if ev.ts is not None:
            self._death_ts = ev.ts if new or self._death_ts is None else max(self._death_ts, ev.ts)
        if new:
            self._end_ts = ev.ts
            out.append(_derived("engine_death", ev, dict(ev.fields)))
            self.state = None  # a new death is a change even from DEAD
            self._to(DEAD, ev, out)

    def _failed(self, ev: Event, reason: str, out: list[Event]) -> None:
        fs = self._fail
        if fs is not None and self._far(fs.last_ts, ev.ts):
            self._close(out)
            fs = None
        if fs is None or (fs.closed and self.state != FAILED):
            fs = self._fail = _FailedStart(ev, self._cause)
            fields = {"reason": reason, "message": str(ev.fields.get("message") or "")[:500]}
            out.append(_derived("start_failed", ev, fields))
            self.state = None
            self._to(FAILED, ev, out)
        if ev.ts is not None:
            fs.last_ts = ev.ts if fs.last_ts is None else max(fs.last_ts, ev.ts)
        fs.touched = time.monotonic()
        if fs.closed:
            return  # over already: what the log still says of it changes nothing
        if reason != "other" and reason not in fs.reasons:
            fs.reasons.add(reason)
            out.append(_derived("start_failure_reason", ev, {k: v for k, v in ev.fields.items() if k != "during"}))

    def _close(self, out: list[Event]) -> None:
        fs = self._fail
        if fs is None or fs.closed:
            return
        fs.closed = True
        if not fs.reasons:
            fields = {"reason": "other", "message": fs.cause or str(fs.first.fields.get("message") or "")[:500]}
            if fs.cause:
                fields["cause"] = fs.cause
            ev = _derived("start_failure_reason", fs.first, fields)
            if fs.last_ts is not None:
                ev.ts = fs.last_ts
            out.append(ev)

    @staticmethod
    def _far(last: float | None, ts: float | None) -> bool:
        return last is not None and ts is not None and abs(ts - last) > DEATH_WINDOW_SECONDS


def _derived(kind: str, ev: Event, fields: dict) -> Event:
    return Event(kind, fields, ev.ts, ev.process, ev.pid, ev.line)
