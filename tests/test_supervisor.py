"""What systemd and docker compose say of the vLLM process: parsed, decided by the lifecycle,
counted, and carried by the pushed alert (issue 28)."""

import pytest

from exporter.alerts.from_events import Alerts
from exporter.parsers.events import Event
from exporter.metrics import Metrics
from tests.conftest import run_lines
from tests.helpers import samples, value

J = "Dec 04 10:{:02d}:{:02d} gpu1 systemd[1]: "
V = "Dec 04 10:{:02d}:{:02d} gpu1 vllm[100]: (APIServer pid=100) INFO 12-04 10:{:02d}:{:02d} [x.py:1] "


def sd(m, s, msg):
    return J.format(m, s) + msg


def vl(m, s, msg):
    return V.format(m, s, m, s) + msg


BANNER = [vl(0, 0, "vLLM API server version 0.32.0"), vl(0, 50, "Application startup complete.")]


def kinds(events):
    return [e.kind for e in events]


@pytest.mark.parametrize("msg, fields", [
    ("vllm.service: Main process exited, code=exited, status=1/FAILURE",
     {"supervisor": "systemd", "unit": "vllm.service", "how": "exited", "status": "1", "status_text": "1/FAILURE",
      "clean": False}),
    ("vllm.service: Main process exited, code=killed, status=9/KILL",
     {"how": "killed", "status": "SIGKILL", "status_text": "9/KILL"}),
    ("vllm.service: Main process exited, code=dumped, status=11/SEGV",
     {"how": "dumped", "status": "SIGSEGV", "status_text": "11/SEGV"}),
    # a number systemd has no name for is "n/a"
    ("vllm.service: Main process exited, code=exited, status=137/n/a", {"status": "137", "status_text": "137/n/a"}),
    ("vllm-gpu0.service: Main process exited, code=exited, status=0/SUCCESS (success)",
     {"unit": "vllm-gpu0.service", "clean": True}),
])
def test_systemd_main_process_exits(msg, fields):
    _, (ev,) = run_lines([sd(5, 0, msg)])
    assert ev.kind == "process_exit"
    assert {k: ev.fields[k] for k in fields} == fields


@pytest.mark.parametrize("msg, kind, fields", [
    ("vllm.service: Failed with result 'exit-code'.", "unit_result", {"unit": "vllm.service", "result": "exit-code"}),
    ("vllm.service: Failed with result 'oom-kill'.", "unit_result", {"result": "oom-kill"}),
    ("vllm.service: Failed with result 'start-limit-hit'.", "unit_result", {"result": "start-limit-hit"}),
    ("vllm.service: Scheduled restart job, restart counter is at 3.", "restart",
     {"supervisor": "systemd", "unit": "vllm.service", "counter": 3}),
    ("vllm.service: Start request repeated too quickly.", "start_limit", {"unit": "vllm.service"}),
    ("vllm.service: A process of this unit has been killed by the OOM killer.", "host_oom_kill", {"unit": "vllm.service"}),
])
def test_systemd_results_restarts_and_limits(msg, kind, fields):
    _, (ev,) = run_lines([sd(5, 0, msg)])
    assert ev.kind == kind and {k: ev.fields[k] for k in fields} == fields


def test_compose_exit_lines_with_and_without_a_restart():
    _, events = run_lines(["vllm-1 exited with code 137 (restarting)", "vllm_server_1 exited with code 0",
                           "myproj-vllm-1  exited with code 1"])
    assert kinds(events) == ["process_exit", "restart", "process_exit", "process_exit"]
    assert events[0].fields == {"supervisor": "compose", "unit": "vllm-1", "how": "exited", "status": "137",
                                "status_text": "137", "clean": False}
    assert events[2].fields["clean"] is True and events[3].fields["unit"] == "myproj-vllm-1"


@pytest.mark.parametrize("line", [
    "Main process exited with a smile",
    "the worker exited with code red",
    "vllm.service: Failed with result",
    # a vLLM message that merely mentions the words
    "(APIServer pid=1) INFO 12-04 10:00:00 [x.py:1] Process exited with code 0 after the benchmark",
])
def test_near_misses_are_no_supervisor_events(line):
    _, events = run_lines([line])
    assert not [e for e in events if e.kind in ("process_exit", "unit_result", "restart", "start_limit")]


def test_a_silent_kill_is_a_death_known_only_from_systemd():
    _, events = run_lines(BANNER + [
        sd(5, 0, "vllm.service: A process of this unit has been killed by the OOM killer."),
        sd(5, 0, "vllm.service: Main process exited, code=killed, status=9/KILL"),
        sd(5, 0, "vllm.service: Failed with result 'oom-kill'."),
        sd(5, 10, "vllm.service: Scheduled restart job, restart counter is at 1."),
    ], derived=True)
    (death,) = [e for e in events if e.kind == "engine_death"]
    assert "killed, status 9/KILL" in death.fields["message"] and "OOM killer" in death.fields["message"]
    assert [e.fields["state"] for e in events if e.kind == "server_state"] == ["starting", "serving", "dead"]


def test_the_exit_after_a_logged_death_or_a_stop_is_not_a_second_one():
    death = [vl(3, 0, "").replace("INFO", "ERROR") + "AsyncLLM output_handler failed.",
             sd(3, 2, "vllm.service: Main process exited, code=exited, status=1/FAILURE"),
             sd(3, 2, "vllm.service: Failed with result 'exit-code'.")]
    _, events = run_lines(BANNER + death, derived=True)
    assert kinds(events).count("engine_death") == 1
    assert [e.fields.get("during") for e in events if e.kind == "process_exit"] == ["death"]
    stop = [vl(3, 0, "[shutdown] API server: shutdown triggered"),
            sd(3, 30, "vllm.service: State 'stop-sigterm' timed out. Killing."),
            sd(3, 30, "vllm.service: Main process exited, code=killed, status=9/KILL"),
            sd(3, 30, "vllm.service: Failed with result 'timeout'.")]
    _, events = run_lines(BANNER + stop, derived=True)
    assert "engine_death" not in kinds(events) and kinds(events).count("server_stop") == 1
    assert [e.fields.get("during") for e in events if e.kind == "process_exit"] == ["stop"]


def test_an_exit_while_starting_is_a_failed_start_and_a_clean_one_a_stop():
    _, events = run_lines([BANNER[0], sd(0, 20, "vllm.service: Main process exited, code=exited, status=1/FAILURE")],
                          derived=True)
    assert "start_failed" in kinds(events) and "engine_death" not in kinds(events)
    _, events = run_lines(BANNER + ["vllm-1 exited with code 0"], derived=True)
    assert "server_stop" in kinds(events) and "engine_death" not in kinds(events)


def test_counted_with_bounded_labels():
    m = Metrics(process_metrics=False)
    m.add_server("s")
    _, events = run_lines(BANNER + [
        sd(5, 0, "vllm.service: Main process exited, code=killed, status=9/KILL"),
        sd(5, 0, "vllm.service: Failed with result 'signal'."),
        sd(5, 10, "vllm.service: Scheduled restart job, restart counter is at 1."),
        sd(6, 0, "vllm.service: Main process exited, code=exited, status=1/FAILURE"),
        sd(6, 0, "vllm.service: Failed with result 'bogus-result'."),
        sd(6, 10, "vllm.service: Scheduled restart job, restart counter is at 2."),
        sd(7, 0, "vllm.service: Start request repeated too quickly."),
        "vllm-1 exited with code 137 (restarting)",
    ], derived=True)
    for ev in events:
        m.observe("s", ev)
    text = samples(m.render().decode())
    assert value(text, "vllm_log_process_exits_total", server="s", supervisor="systemd", how="killed", status="SIGKILL") == 1
    assert value(text, "vllm_log_process_exits_total", server="s", supervisor="systemd", how="exited", status="1") == 1
    assert value(text, "vllm_log_process_exits_total", server="s", supervisor="compose", how="exited", status="137") == 1
    assert value(text, "vllm_log_unit_failures_total", server="s", result="signal") == 1
    assert value(text, "vllm_log_unit_failures_total", server="s", result="other") == 1
    assert value(text, "vllm_log_restarts_total", server="s") == 3
    assert value(text, "vllm_log_start_limit_hits_total", server="s") == 1
    assert value(text, "vllm_log_last_exit_timestamp_seconds", server="s") is not None


def test_a_fresh_server_has_its_restart_counters_at_zero():
    m = Metrics(process_metrics=False)
    m.add_server("s")
    text = samples(m.render().decode())
    for name in ("vllm_log_restarts_total", "vllm_log_start_limit_hits_total", "vllm_log_host_oom_kills_total"):
        assert value(text, name, server="s") == 0, name


def test_the_pushed_dead_engine_alert_goes_at_once_and_is_posted_again_with_the_exit_and_result():
    """Not held: the rule's copy would reach Alertmanager first, and its notification would lack the
    log's words (the live tier showed it). The exit's words follow in a second post of the same alert."""
    a = Alerts()
    death = Event("engine_death", {"message": "AsyncLLM output_handler failed."}, 100.0, "APIServer", 1)
    a.observe("s", [death], now=1000.0)
    (first,) = a.pending(now=1000.0)
    assert "exit_status" not in first.annotations
    a.sent([first], now=1000.0)
    a.observe("s", [Event("process_exit", {"supervisor": "systemd", "how": "exited", "status": "1",
                                           "status_text": "1/FAILURE", "clean": False}, 102.0)], now=1002.0)
    a.observe("s", [Event("unit_result", {"result": "exit-code"}, 102.0)], now=1002.0)
    (again,) = a.pending(now=1002.0)
    assert again.annotations["exit_status"] == "1/FAILURE" and again.annotations["unit_result"] == "exit-code"
    assert again.annotations["description"].splitlines()[1:] == [
        "systemd: main process exited, status 1/FAILURE", "systemd: failed with result 'exit-code'"]
    # a clean exit (after a stop) adds nothing
    b = Alerts()
    b.observe("s", [death], now=1000.0)
    b.sent(b.pending(now=1000.0), now=1000.0)
    b.observe("s", [Event("process_exit", {"supervisor": "compose", "status": "0", "clean": True})], now=1001.0)
    assert b.pending(now=1001.0) == []


# --- every real wording in tests/fixtures/real_lines/supervisor.yaml (its sources are in the file) ----------

import yaml  # noqa: E402

from tests.conftest import ROOT  # noqa: E402

REAL = yaml.safe_load((ROOT / "tests" / "fixtures" / "real_lines" / "supervisor.yaml").read_text())
SUPERVISOR_KINDS = {"process_exit", "unit_result", "restart", "start_limit", "host_oom_kill"}
# entry index -> the supervisor events the line is; every other entry must give none (announcements,
# summaries, job lines, old companions of counted lines, a restart asked for by a client)
EXPECTED = {
    0: ["process_exit"], 1: ["unit_result"], 3: ["restart"], 8: ["host_oom_kill"], 9: ["process_exit"],
    10: ["unit_result"], 12: ["host_oom_kill"], 13: ["process_exit"], 14: ["unit_result"], 15: ["process_exit"],
    16: ["unit_result"], 17: ["process_exit"], 21: ["restart"], 22: ["start_limit"], 23: ["unit_result"],
    31: ["process_exit"], 35: ["restart"], 36: ["start_limit"], 37: ["process_exit"], 42: ["start_limit"],
    44: ["process_exit"], 45: ["process_exit"], 46: ["process_exit"], 47: ["process_exit", "restart"],
    48: ["process_exit"], 49: ["process_exit"], 50: ["process_exit"], 51: ["process_exit"], 52: ["process_exit"],
    54: ["process_exit"], 55: ["process_exit"],
}


@pytest.mark.parametrize("i", range(len(REAL)), ids=lambda i: f"{i}-{REAL[i]['supervisor']}")
def test_every_real_supervisor_wording(i):
    entry = REAL[i]
    results, events = run_lines([entry["line"]])
    got = [e.kind for e in events if e.kind in SUPERVISOR_KINDS]
    assert got == EXPECTED.get(i, []), (entry["line"], entry["meaning"], got)
    assert results != ["unparsed"] or entry["supervisor"] != "systemd", "a systemd line is at least ignored"


def test_the_real_wordings_read_right():
    def first(i):
        _, events = run_lines([REAL[i]["line"]])
        return next(e.fields for e in events if e.kind in SUPERVISOR_KINDS)
    assert first(37)["status"] == "255" and first(52)["status"] == "-1"  # old "main process", compose v1's -1
    assert first(42)["unit"] == "vllm.service" and first(8)["unit"] == "testsuite-55-testbloat.service"
    assert first(48)["unit"] == "vllm-1" and first(55)["supervisor"] == "podman-compose"


def test_a_forgotten_server_s_pushed_alerts_end_instead_of_being_posted_for_ever():
    a = Alerts()
    a.observe("gone-pod", [Event("engine_death", {"message": "x"}, 100.0)], now=1000.0)
    a.observe("live-pod", [Event("engine_death", {"message": "y"}, 100.0)], now=1000.0)
    a.forget("gone-pod", now=1050.0)
    ended = {al.labels["server"]: al.ends_at for al in a.pending(now=1050.0)}
    assert ended == {"gone-pod": 1050.0, "live-pod": None}


# --- a routine stop whose vLLM wrote no stop line (log level above INFO) must not page ---------------

@pytest.mark.parametrize("exit_line", [
    "vllm.service: Main process exited, code=killed, status=9/KILL",    # SIGTERM was not enough
    "vllm.service: Main process exited, code=exited, status=143/n/a",   # podman stop's 128 + SIGTERM
])
def test_a_systemd_stop_without_vllm_s_own_stop_line_is_a_stop_not_a_death(exit_line):
    quiet = [vl(0, 0, "vLLM API server version 0.32.0").replace(" INFO ", " WARNING ")]  # only WARNING and up
    lines = quiet + [
        # supervisor.yaml entries 5 and 18: systemd's own words, combined status format
        sd(3, 0, "Stopping vllm.service - vLLM OpenAI server..."),
        sd(3, 30, "vllm.service: State 'stop-sigterm' timed out. Killing."),
        sd(3, 30, exit_line),
        sd(3, 30, "vllm.service: Failed with result 'timeout'."),
    ]
    _, events = run_lines(lines, derived=True)
    kinds = [e.kind for e in events]
    assert "engine_death" not in kinds and "start_failed" not in kinds and kinds.count("server_stop") == 1
    assert [e.fields.get("during") for e in events if e.kind == "process_exit"] == ["stop"]


@pytest.mark.parametrize("line", [
    "(APIServer pid=1) INFO 12-04 10:00:00 [x.py:1] Stopping profiler...",  # vLLM's own record
    "Dec 04 10:00:00 gpu1 sshd[77]: Stopping sessions...",                 # another program's tag
    "Stopping now, really",                                                # no job line
    # Mooncake's metadata server (mooncake/http_metadata_server.py 0.3.4-0.3.13, print) in the unit's own
    # output: untagged, names no unit (catalogue/findings.md row 9)
    "Stopping server loop...",
    "2026-08-04T02:44:21.123456Z Stopping server loop...",
])
def test_only_systemd_s_own_stop_lines_are_stops(line):
    _, events = run_lines([line])
    assert not [e for e in events if e.kind == "shutdown"]


@pytest.mark.parametrize("line", [
    "Stopping vllm.service...",                                         # a unit with no Description
    "Stopping vllm.service - vLLM OpenAI server...",                    # the combined status format
    "2026-08-04T02:44:21.123456Z systemd[1]: Stopping vLLM server...",  # the journald source's, tagged
    "Aug 04 02:44:21 gpu1 systemd[1]: Stopping vLLM server...",          # journalctl -o short
])
def test_systemd_s_stop_job_lines_are_stops(line):
    _, events = run_lines([line])
    assert [e.fields["signature"] for e in events if e.kind == "shutdown"] == ["systemd stop"]
