"""Real vLLM 0.32.0 runs (CPU build, tiny random-weight Llama), captured here by
tools/capture_vllm_run.py, read back in a second: the fast regression sample for what the live tier
(tests/test_live_vllm.py) checks against a running server. Each log comes with its ground truth
(``*.truth.json``): what the client was answered, and vLLM's own /metrics counters after its last
stats window (``vllm_final``)."""

from __future__ import annotations

import gzip
import json
from collections import Counter

import pytest

from exporter.alerts.from_events import Alerts
from exporter.framing.clock import Clock
from exporter.metrics import Metrics
from exporter.stream.pipeline import Pipeline
from exporter.offline.report.stats import RunStats
from tests.conftest import FIXTURES
from tests.helpers import samples

CAPTURES = FIXTURES / "vllm-0.32-cpu"


def read(scenario: str):
    """The capture through the daemon's path (batches, then the end-of-input flush): metrics,
    report statistics, the alerts the exporter would push, and the events."""
    lines = gzip.decompress((CAPTURES / f"{scenario}.log.gz").read_bytes()).decode("utf-8", "replace").splitlines()
    truth = json.loads((CAPTURES / f"{scenario}.truth.json").read_text())
    pipe = Pipeline(Clock(year=2026))
    m = Metrics(process_metrics=False, stats_interval=truth["stats_interval"])
    m.add_server("s")
    stats, alerts, events = RunStats(), Alerts(), []
    for i in range(0, len(lines), 256):
        counts, evs, access, span = pipe.feed_batch(lines[i:i + 256])
        m.count_lines("s", counts)
        m.observe_access("s", access)
        stats.add_access(access, span)
        events += evs
    events += pipe.flush()
    m.observe_many("s", events)
    for ev in events:
        stats.add(ev)
    alerts.observe("s", events, now=0.0)
    s = samples(m.render().decode())

    def val(name, **labels):
        return sum(v for (n, lbls), v in s.items()
                   if n == name and all(dict(lbls).get(k) == w for k, w in labels.items()))

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
