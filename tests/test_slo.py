"""Service levels (mixin/slo.py): thresholds on vLLM's bucket bounds, the bounds read from vLLM's own
sources, and Alertmanager holding back what a page or the log's own alert already says.

The rules themselves are tested by promtool (deploy/prometheus/rules/vllm-log-exporter-slo.rules_test.yml,
run by tests/test_mixin.py); a real vLLM scraped by a real Prometheus with them loaded is
tests/test_slo_live.py.
"""

from __future__ import annotations

import json
import subprocess
import sys
import urllib.request

import pytest

from mixin import build, slo
from mixin import config as C
from mixin.slo_buckets import BUCKETS, LATENCY_SLIS, RELEASES, bounds_in_every_release, threshold_problems
from tests.helpers import ROOT, have, wait_until
from tests.test_stack_e2e import Alertmanager, Receiver

TOOL = ROOT / "tools" / "vllm_histogram_buckets.py"
sys.path.insert(0, str(ROOT))
from tools import vllm_cpu  # noqa: E402


def test_every_default_threshold_is_a_bucket_bound_of_every_supported_release():
    assert threshold_problems(C.SLOS) == []
    for name, (histogram, _, _) in LATENCY_SLIS.items():
        assert C.SLOS[name]["threshold_seconds"] in bounds_in_every_release(histogram), name


def test_the_build_refuses_a_threshold_between_two_bounds(monkeypatch, capsys):
    monkeypatch.setitem(C.SLOS, "time_to_first_token", {"objective": 0.99, "threshold_seconds": 2.0})
    assert build.main(["--check"]) == 1
    err = capsys.readouterr().err
    assert "threshold_seconds 2 is not a bucket bound of vllm:time_to_first_token_seconds in vLLM 0.29-0.34" in err
    assert "Nearest bounds: 1 or 2.5" in err


def test_a_release_whose_bounds_differ_narrows_what_every_release_has(monkeypatch):
    """The check is over every release: a bound one of them lacks is refused."""
    patched = {r: dict(b) for r, b in BUCKETS.items()}
    patched["0.34"]["vllm:time_to_first_token_seconds"] = (0.5, 1.0, 5.0)
    monkeypatch.setattr("mixin.slo_buckets.BUCKETS", patched)
    assert 2.5 not in bounds_in_every_release("vllm:time_to_first_token_seconds")
    (problem,) = threshold_problems({"time_to_first_token": {"objective": 0.99, "threshold_seconds": 2.5}})
    assert "Nearest bounds: 1 or 5" in problem


def test_le_matches_the_bound_as_vllm_writes_it_and_as_prometheus_3_normalises_it():
    assert slo.le_matcher(2.5) == 'le="2.5"'
    assert slo.le_matcher(1.0) == 'le=~"1(\\\\.0)?"'  # 1.0 from vLLM's client, 1 from Prometheus 3
    assert slo.le_matcher(60) == 'le=~"60(\\\\.0)?"'


def test_burn_rates_are_the_sre_workbooks_for_a_30_day_window():
    assert C.SLO_WINDOW == "30d"
    assert [round(slo.burn_rate(long, share), 6) for long, _, share in C.SLO_FAST_BURN + C.SLO_SLOW_BURN] == [
        14.4, 6, 3, 1]
    assert slo.windows() == ["5m", "30m", "1h", "2h", "6h", "1d", "3d", "30d"]


# -- the bucket bounds, read from vLLM's sources -----------------------------------------------------

# Stand-ins for the two ways vLLM's sources give the bounds (ours, written for this test): a list in
# the histogram's call or assigned in the same function (0.29), and histogram_buckets("family")
# resolved through buckets.py (0.30 and later).
_LOGGERS_029 = '''
class PrometheusStatLogger:
    def __init__(self):
        request_latency_buckets = [0.3, 0.5, 60.0]
        h = self._histogram_cls(name="vllm:time_to_first_token_seconds", documentation="x",
                                buckets=[0.001, 2.5, 5.0], labelnames=labelnames)
        e = self._histogram_cls(name="vllm:e2e_request_latency_seconds", documentation="x",
                                buckets=request_latency_buckets, labelnames=labelnames)
        t = self._histogram_cls(name="vllm:request_prompt_tokens", buckets=build_1_2_5_buckets(2048))
'''
_LOGGERS_030 = '''
class PrometheusStatLogger:
    def __init__(self):
        ttft = histogram_buckets("time_to_first_token", overrides=custom_buckets)
        h = self._histogram_cls(name="vllm:time_to_first_token_seconds", buckets=ttft, labelnames=labelnames)
        q = self._histogram_cls(name="vllm:request_queue_time_seconds",
                                buckets=histogram_buckets("request_latency"), labelnames=labelnames)
'''
_BUCKETS_030 = '''
REQUEST_LATENCY_BUCKETS: tuple[float, ...] = (0.3, 1.0, 60.0)
TIME_TO_FIRST_TOKEN_BUCKETS: tuple[float, ...] = (0.01, 2.5)
_STATIC_FAMILY_DEFAULTS: dict[str, tuple[float, ...]] = {
    "request_latency": REQUEST_LATENCY_BUCKETS,
    "time_to_first_token": TIME_TO_FIRST_TOKEN_BUCKETS,
}
'''


def _tool(source) -> dict:
    r = subprocess.run([sys.executable, str(TOOL), str(source)], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def test_the_tool_reads_bounds_written_in_loggers_and_through_buckets_py(tmp_path):
    old = tmp_path / "029" / "vllm" / "v1" / "metrics"
    old.mkdir(parents=True)
    (old / "loggers.py").write_text(_LOGGERS_029)
    assert _tool(tmp_path / "029") == {"vllm:e2e_request_latency_seconds": [0.3, 0.5, 60.0],
                                       "vllm:time_to_first_token_seconds": [0.001, 2.5, 5.0]}
    new = tmp_path / "030" / "vllm" / "v1" / "metrics"
    new.mkdir(parents=True)
    (new / "loggers.py").write_text(_LOGGERS_030)
    (new / "buckets.py").write_text(_BUCKETS_030)
    assert _tool(tmp_path / "030") == {"vllm:request_queue_time_seconds": [0.3, 1.0, 60.0],
                                       "vllm:time_to_first_token_seconds": [0.01, 2.5]}
    # and from a wheel, without unpacking it
    import zipfile

    wheel = tmp_path / "vllm-0.30.0-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as z:
        z.writestr("vllm/v1/metrics/loggers.py", _LOGGERS_030)
        z.writestr("vllm/v1/metrics/buckets.py", _BUCKETS_030)
    assert _tool(wheel) == _tool(tmp_path / "030")


def _installed_vllm():
    venv = vllm_cpu.default_venv()
    if not (venv / vllm_cpu.MARKER).exists():
        return None
    return next(iter(sorted((venv / "lib").glob("python3*/site-packages"))), None)


# Marked vllm: it reads the venv that make test installs beside the tests without vLLM, so in that tier, on a
# fresh machine, it would always be skipped; the tier with vLLM runs once the venv is there.
@pytest.mark.vllm
@pytest.mark.skipif(_installed_vllm() is None, reason="no vLLM CPU venv: `python tools/vllm_cpu.py ensure-venv` "
                                                      "(make test runs it)")
def test_the_table_is_what_the_installed_vllm_ships():
    site = _installed_vllm()
    version = vllm_cpu.vllm_version(vllm_cpu.default_venv())
    release = ".".join(version.split(".")[:2])
    assert release in RELEASES, version
    read = _tool(site)
    for histogram, bounds in BUCKETS[release].items():
        assert read[histogram] == list(bounds), histogram


# -- Alertmanager: a page holds back its ticket, the log's own alert holds back the burn -------------


def _post(url: str, alerts: list[dict]) -> None:
    req = urllib.request.Request(url + "/api/v2/alerts", data=json.dumps(alerts).encode(), method="POST",
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=5) as r:
        assert r.status == 200


def _states(url: str) -> dict[tuple[str, str, str], str]:
    with urllib.request.urlopen(url + "/api/v2/alerts", timeout=5) as r:
        return {(a["labels"]["alertname"], a["labels"]["server"], a["labels"].get("severity", "")): a["status"]["state"]
                for a in json.loads(r.read())}


@pytest.mark.skipif(not have("prometheus-alertmanager"), reason="prometheus-alertmanager (Debian package) not installed")
def test_alertmanager_inhibits_the_ticket_under_its_page_and_a_burn_under_the_logs_cause(tmp_path):
    config = (ROOT / "deploy" / "alertmanager" / "alertmanager.yml").read_text()
    with Alertmanager(tmp_path, config) as am:
        burn = {"alertname": "VllmTimeToFirstTokenBudgetBurn", "slo": "time_to_first_token", "host": "h"}
        errors = {"alertname": "VllmErrorBudgetBurn", "slo": "errors", "host": "h"}
        _post(am.url, [
            {"labels": {**burn, "server": "a", "severity": "critical"}},
            {"labels": {**burn, "server": "a", "severity": "warning"}},
            {"labels": {**burn, "server": "b", "severity": "warning"}},  # a slow burn alone: a ticket
            # the log says the engine of c died: its error burn is that death, already paged
            {"labels": {"alertname": "VllmEngineDead", "server": "c", "host": "h", "instance": "h:10825",
                        "severity": "critical"}},
            {"labels": {**errors, "server": "c", "severity": "critical"}},
            {"labels": {**errors, "server": "d", "severity": "critical"}},  # another server: pages
        ])
        want = {
            ("VllmTimeToFirstTokenBudgetBurn", "a", "critical"): "active",
            ("VllmTimeToFirstTokenBudgetBurn", "a", "warning"): "suppressed",
            ("VllmTimeToFirstTokenBudgetBurn", "b", "warning"): "active",
            ("VllmEngineDead", "c", "critical"): "active",
            ("VllmErrorBudgetBurn", "c", "critical"): "suppressed",
            ("VllmErrorBudgetBurn", "d", "critical"): "active",
        }
        # the API computes each alert's state when asked; the posts are processed asynchronously
        wait_until(lambda: _states(am.url) == want, 20, 0.2, what=f"alert states {want}")


@pytest.mark.skipif(not have("prometheus-alertmanager"), reason="prometheus-alertmanager (Debian package) not installed")
def test_the_notification_of_a_burn_links_the_service_levels_board(tmp_path):
    """deploy/alertmanager/templates/vllm.tmpl rendered by the real Alertmanager for a Slack receiver
    whose API URL is a local server of ours."""
    import yaml

    with Receiver() as slack:
        cfg = {
            "templates": [str(ROOT / "deploy" / "alertmanager" / "templates" / "*.tmpl")],
            "route": {"receiver": "slack", "group_by": ["alertname", "server"], "group_wait": "0s",
                      "group_interval": "1s", "repeat_interval": "1h"},
            "receivers": [{"name": "slack", "slack_configs": [{
                "api_url": f"http://127.0.0.1:{slack.port}/slack", "channel": "#gpu",
                "title": '{{ template "vllm.title" . }}', "text": '{{ template "vllm.text" . }}'}]}],
        }
        with Alertmanager(tmp_path, yaml.safe_dump(cfg)) as am:
            _post(am.url, [{"labels": {"alertname": "VllmQueueTimeBudgetBurn", "slo": "queue_time", "server": "s1",
                                       "severity": "critical"},
                            "annotations": {"summary": "Queue time on s1: error budget burning fast (40% bad)",
                                            "description": "Objective: 99% of requests good over 30d."}},
                           {"labels": {"alertname": "VllmKvCacheFull", "server": "s1", "severity": "warning"},
                            "annotations": {"summary": "KV cache of s1 is 97% full", "description": "..."}}])
            wait_until(lambda: len(slack.posts) >= 2, 20, 0.1, what="two Slack messages")
    texts = {att["title"]: att["text"] for _, body in slack.posts for att in body["attachments"]}
    assert "/d/vllm-log-slo?var-server=s1&from=" in texts["[FIRING:1] VllmQueueTimeBudgetBurn on s1"]
    assert "/d/vllm-log-overview?var-server=s1&from=" in texts["[FIRING:1] VllmKvCacheFull on s1"]
