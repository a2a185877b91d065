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
