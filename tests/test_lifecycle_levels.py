"""What a stream of events means when vLLM logs at WARNING (no INFO stop lines, no banner), and when a
start dies of an uncaught exception: the edges the real captures (tests/test_real_vllm_captures.py)
do not hold. Lines are vLLM's format strings filled in by us (0.32's, named in each test)."""

from __future__ import annotations

from tests.conftest import run_lines

BANNER = "(APIServer pid=10) INFO 12-04 10:00:00 [api_utils.py:347]  ▄▄ ▄█ █     █     █ ▀▄▀ █  version 0.32.0"
READY = "INFO:     Application startup complete."
# 0.32 v1/utils.py: WARNING "[shutdown] Process manager: force killing remaining processes count=%d"
FORCE_KILL = "(APIServer pid=10) WARNING 12-04 10:05:00 [utils.py:648] [shutdown] Process manager: force killing remaining processes count=1"
DEATH = ("(APIServer pid=10) WARNING 12-04 10:04:00 [core_client.py:817] [shutdown] MPClient: engine core exited "
         "unexpectedly; starting cleanup")


def derived(lines):
    _, events = run_lines(lines, derived=True)
    return [e.kind for e in events if e.kind in ("server_stop", "engine_death", "start_failed")], \
        [e.fields["state"] for e in events if e.kind == "server_state"]


def test_a_stop_at_warning_level_is_seen_from_the_force_kill_or_uvicorn():
    for stop in ([FORCE_KILL, "INFO:     Shutting down"], ["INFO:     Shutting down", "INFO:     Application shutdown complete."]):
        kinds, states = derived([READY, *stop])
        assert kinds == ["server_stop"] and states == ["serving", "stopped"], stop


def test_uvicorn_s_shutdown_after_a_death_is_no_stop():
    kinds, states = derived([READY, DEATH, "INFO:     Shutting down", FORCE_KILL])
    assert kinds == ["engine_death"] and states[-1] == "dead"


def test_a_force_kill_while_a_start_fails_is_no_stop():
    """A failed start's cleanup force-kills what it started; the failure before it stays a failed start."""
    lines = [BANNER, "(EngineCore pid=11) ERROR 12-04 10:01:00 [core.py:1510] EngineCore failed to start.",
             FORCE_KILL.replace("10:05:00", "10:01:01")]
    kinds, states = derived(lines)
    assert kinds == ["start_failed"] and states[-1] == "failed"
    kinds, states = derived([BANNER, FORCE_KILL])  # starting: no stop either
    assert kinds == [] and states == ["starting"]


def test_an_uncaught_traceback_while_starting_is_a_failed_start_with_its_exception():
    tb = ["Traceback (most recent call last):", '  File "/x/vllm/entrypoints/cli/main.py", line 120, in main',
          "    args.dispatch_function(args)", "RuntimeError: something vLLM does not name"]
    _, events = run_lines([BANNER, *tb], derived=True)
    (sf,) = [e for e in events if e.kind == "start_failed"]
    assert sf.fields["message"] == "RuntimeError: something vLLM does not name"
    (reason,) = [e for e in events if e.kind == "start_failure_reason"]
    assert reason.fields["reason"] == "other"
    # logged by vLLM (a header on every line) while serving: an error, not a failed start
    logged = [f"(APIServer pid=10) ERROR 12-04 10:02:00 [x.py:1] {t}" for t in tb]
    kinds, _ = derived([BANNER, READY, *logged])
    assert kinds == []


def test_a_failed_start_after_a_stop_at_warning_level_is_one_when_a_new_process_says_it():
    """No banner at WARNING: the start-up failure of a later start comes after the last run's stop."""
    port = ("(APIServer pid=20) ERROR 12-04 10:06:00 [launcher.py:1] OSError: [Errno 98] Address already in use")
    kinds, states = derived([READY, FORCE_KILL, port])
    assert kinds == ["server_stop", "start_failed"] and states[-1] == "failed"
    # the same process's words during its stop are the stop's
    same = port.replace("pid=20", "pid=10").replace("10:06:00", "10:05:01")
    kinds, states = derived([READY, FORCE_KILL, same])
    assert kinds == ["server_stop"] and states[-1] == "stopped"


# ---- VLLM_LOGGING_LEVEL=ERROR: a bare EngineDeadError is held until the log says stop or death ----------
# 0.32 v1/engine/async_llm.py: logger.exception("AsyncLLM output_handler failed.") with EngineDeadError
DEAD_HANDLER = [
    "(APIServer pid=10) ERROR 12-04 10:04:00 [async_llm.py:906] AsyncLLM output_handler failed.",
    "(APIServer pid=10) ERROR 12-04 10:04:00 [async_llm.py:906] Traceback (most recent call last):",
    '(APIServer pid=10) ERROR 12-04 10:04:00 [async_llm.py:906]   File "/x/vllm/v1/engine/async_llm.py", line 862, in output_handler',
    "(APIServer pid=10) ERROR 12-04 10:04:00 [async_llm.py:906] vllm.v1.engine.exceptions.EngineDeadError: EngineCore "
    "encountered an issue. See stack trace (above) for the root cause.",
]
# uvicorn's own loggers (INFO whatever vLLM's level); "Finished server process" only when serve returned
UVICORN_DOWN = ["INFO:     Shutting down", "INFO:     Waiting for application shutdown.",
                "INFO:     Application shutdown complete."]
FINISHED = "INFO:     Finished server process [10]"


def _fed(lines, flush_idle=None):
    """The derived kinds and states a pipeline gives line by line, before any end-of-input flush."""
    from exporter.framing.clock import Clock
    from exporter.stream.pipeline import Pipeline

    pipe = Pipeline(Clock(year=2026))
    events = []
    for line in lines:
        events.extend(pipe.feed(line)[1])
    return pipe, events


def _kinds(events):
    return [e.kind for e in events if e.kind in ("server_stop", "engine_death", "start_failed")]


def test_at_error_level_finished_server_process_after_engine_dead_error_is_a_death_at_once():
    pipe, events = _fed([READY, *DEAD_HANDLER, *UVICORN_DOWN, FINISHED])
    assert _kinds(events) == ["engine_death"]  # decided on the line, not at the end of the input
    (death,) = [e for e in events if e.kind == "engine_death"]
    assert death.fields["signature"] == "AsyncLLM output_handler failed"
    assert _kinds(pipe.flush()) == []


def test_at_error_level_uvicorn_s_shutdown_without_finished_is_a_stop_and_its_errors_belong_to_it():
    pipe, events = _fed([READY, *DEAD_HANDLER, *UVICORN_DOWN])
    assert _kinds(events) == []  # held: the log has not said yet
    events += pipe.flush()
    assert _kinds(events) == ["server_stop"]
    assert [e.fields["state"] for e in events if e.kind == "server_state"] == ["serving", "stopped"]
    assert {e.fields.get("during") for e in events if e.kind == "engine_dead"} == {"stop"}


def test_a_held_engine_dead_error_is_decided_by_the_wall_clock_when_the_log_goes_quiet(monkeypatch):
    import exporter.stream.lifecycle as lc

    now = [1000.0]
    monkeypatch.setattr(lc.time, "monotonic", lambda: now[0])
    for tail, want in ((UVICORN_DOWN, "server_stop"), ([], "engine_death")):
        pipe, events = _fed([READY, *DEAD_HANDLER, *tail])
        events += pipe.flush(idle_seconds=5.0)  # the daemon's idle flush: the traceback ends, still held
        assert _kinds(events) == []
        now[0] += lc.HOLD_SECONDS + 1
        events += pipe.flush(idle_seconds=5.0)
        assert _kinds(events) == [want], tail  # a server that never shut down after it: a death


def test_a_held_engine_dead_error_is_decided_by_log_time_a_bad_exit_or_another_death():
    later = "(APIServer pid=10) ERROR 12-04 10:04:30 [serving.py:1] Error in chat completion stream generator."
    exit_1 = "Dec 04 10:04:01 gpu1 systemd[1]: vllm.service: Main process exited, code=exited, status=1/FAILURE"
    # a WARNING-level death line vLLM would have printed first, arriving later (another process's stream)
    for tail in ([*UVICORN_DOWN, FINISHED], [later], [exit_1], [DEATH]):
        _, events = _fed([READY, *DEAD_HANDLER, *tail])
        assert _kinds(events) == ["engine_death"], tail


def test_a_stop_line_after_a_held_engine_dead_error_makes_it_a_stop():
    stop = "(APIServer pid=10) INFO 12-04 10:04:00 [launcher.py:110] [shutdown] API server: shutdown triggered"
    _, events = _fed([READY, *DEAD_HANDLER, stop, *UVICORN_DOWN])
    assert _kinds(events) == ["server_stop"]
    assert {e.fields.get("during") for e in events if e.kind == "engine_dead"} == {"stop"}


def test_a_hold_never_holds_more_than_its_bound_and_loses_nothing():
    """One stream's error per request in flight follows a death; the hold takes HOLD_MAX_EVENTS at most."""
    import exporter.stream.lifecycle as lc
    from exporter.parsers.events import Event

    life = lc.Lifecycle()
    out = life.feed([Event("ready", {}), Event("engine_dead", {"signature": "AsyncLLM output_handler failed"}, 1.0)])
    streams = [Event("traceback", {"exception": "EngineDeadError", "kinds": ["engine_dead"]}, 1.0)
               for _ in range(lc.HOLD_MAX_EVENTS + 10)]
    for ev in streams:
        out += life.feed([ev])
    assert [e.kind for e in out if e.kind == "engine_death"] == ["engine_death"]  # nothing shut down: a death
    assert life._hold is None
    out += life.tick(None)
    assert [e for e in out if e.kind == "traceback"] == streams  # every one, in order


def test_at_error_level_a_failed_start_whose_worker_speaks_first_is_one_failed_start():
    """No banner at ERROR: the worker's exception comes before ``EngineCore failed to start.``
    (0.30's spec_decode_refused capture, filtered to ERROR)."""
    lines = ["(Worker pid=12) ERROR 12-04 10:01:00 [multiproc_executor.py:1055] WorkerProc hit an exception.",
             "(EngineCore pid=11) ERROR 12-04 10:01:00 [core.py:1366] EngineCore failed to start."]
    kinds, states = derived(lines)
    assert kinds == ["start_failed"] and states[-1] == "failed"
    # the same worker exception from a server seen serving is a death when the engine core dies of it (its
    # step raised: v1/engine/core.py's "EngineCore encountered a fatal error."), at that line; alone, the
    # engine lived through it (tests/test_engine_calls.py)
    fatal = "(EngineCore pid=11) ERROR 12-04 10:01:00 [core.py:1017] EngineCore encountered a fatal error."
    _, events = _fed([READY, lines[0], fatal])
    assert _kinds(events) == ["engine_death"]
    _, events = _fed([READY, lines[0]])
    assert _kinds(events) == []
