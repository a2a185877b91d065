"""Capacity headroom and the engine's heartbeat (mixin/capacity.py): the rules are tested by promtool
(deploy/prometheus/rules/vllm-log-exporter-capacity.rules_test.yml, run by tests/test_mixin.py); here the
real Alertmanager running the shipped config holds the heartbeat's page back while the log's own stall
alert for the same server fires (one page, not two), and the rules read a real vLLM's series
(tests/fixtures/vllm-0.32-cpu, through the exporter's metrics)."""

from __future__ import annotations

import pytest

from mixin import capacity
from tests.helpers import ROOT, have, wait_until
from tests.test_slo import _post, _states
from tests.test_stack_e2e import Alertmanager


@pytest.mark.skipif(not have("prometheus-alertmanager"), reason="prometheus-alertmanager (Debian package) not installed")
def test_the_heartbeat_page_is_held_back_while_the_logs_stall_alert_says_the_same(tmp_path):
    config = (ROOT / "deploy" / "alertmanager" / "alertmanager.yml").read_text()
    with Alertmanager(tmp_path, config) as am:
        steps = {"alertname": capacity.HEARTBEAT_ALERT, "severity": "critical", "host": "h"}
        _post(am.url, [
            # both signals on a: the log's stall (per engine, with the exporter's instance) and the heartbeat
            {"labels": {"alertname": "VllmEngineStalled", "server": "a", "engine": "0", "host": "h",
                        "instance": "h:10825", "severity": "critical"}},
            {"labels": {**steps, "server": "a"}},
            # the heartbeat alone on b (a log without stats lines): it stands in and pages
            {"labels": {**steps, "server": "b"}},
        ])
        want = {
            ("VllmEngineStalled", "a", "critical"): "active",
            (capacity.HEARTBEAT_ALERT, "a", "critical"): "suppressed",
            (capacity.HEARTBEAT_ALERT, "b", "critical"): "active",
        }
        wait_until(lambda: _states(am.url) == want, 20, 0.2, what=f"alert states {want}")
