"""The exporter pushes the log's own alerts to a real Alertmanager, which delivers them to a real
webhook receiver: the OOM with its exception line and numbers, the dead engine resolved by the next
server start, and delivery after Alertmanager comes back."""

import json
import time

import pytest

from exporter.alerts.from_events import Alerts
from exporter.parsers.events import Event
from tests.helpers import Exporter, free_port, have, wait_until
from tests.test_stack_e2e import OOM_TRACEBACK, Alertmanager, Receiver, stack_alertmanager_config

pytestmark = pytest.mark.skipif(not have("prometheus-alertmanager"), reason="prometheus-alertmanager not installed")

BANNER = "(APIServer pid=1) INFO 12-02 10:05:00 [api_server.py:1] vLLM API server version 0.11.2, serving model m"


def _alerts(receiver, alertname, server="live", status="firing"):
    return [a for _, body in receiver.posts for a in body["alerts"]
            if a["labels"].get("alertname") == alertname and a["labels"].get("server") == server
            and a["status"] == status]


def test_an_oom_reaches_the_webhook_from_the_exporter_itself_and_a_start_resolves_the_dead_engine(tmp_path):
    live = tmp_path / "live.log"
    live.write_text("")
    with Receiver() as receiver, Alertmanager(tmp_path, stack_alertmanager_config(receiver.port)) as am:
        with Exporter("--source", f"live={live}", "--year", "2026", "--alertmanager.url", am.url) as ex:
            t0 = time.monotonic()
            with open(live, "a") as f:
                f.write("\n".join(OOM_TRACEBACK) + "\n")
            (oom, *_) = wait_until(lambda: _alerts(receiver, "VllmCudaOutOfMemory"), 20, 0.05, what="the pushed OOM")
            elapsed = time.monotonic() - t0
            print(f"append -> webhook: {elapsed:.2f} s")  # measured, not asserted (issue 15 asks < 2 s)
            assert "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB" in oom["annotations"]["description"]
            assert "GPU 0, asked for 2.00 GiB, 1.07 GiB free, of 94.97 GiB." in oom["annotations"]["description"]
            assert oom["annotations"]["gpu"] == "0" and oom["annotations"]["requested_bytes"] == str(2 * 2**30)
            assert oom["labels"] == {"alertname": "VllmCudaOutOfMemory", "severity": "critical", "server": "live",
                                     "kind": "oom", "job": "vllm-log-exporter", "instance": f"127.0.0.1:{ex.port}"}
            # the engine died with it; the next server start resolves that
            wait_until(lambda: _alerts(receiver, "VllmEngineDead"), 20, 0.1, what="the pushed dead engine")
            with open(live, "a") as f:
                f.write(BANNER + "\n")
            wait_until(lambda: _alerts(receiver, "VllmEngineDead", status="resolved"), 20, 0.1,
                       what="the dead engine resolved by the start")
            assert ex.value("vllm_log_exporter_alerts_sent_total", result="ok") >= 2
            assert ex.value("vllm_log_exporter_alerts_sent_total", result="error") == 0


def test_with_alertmanager_down_the_exporter_keeps_serving_retries_and_delivers_when_it_is_back(tmp_path):
    live = tmp_path / "live.log"
    live.write_text("")
    am_port = free_port()
    with Receiver() as receiver:
        with Exporter("--source", f"live={live}", "--year", "2026", "--alertmanager.url",
                      f"http://127.0.0.1:{am_port}") as ex:
            with open(live, "a") as f:
                f.write("\n".join(OOM_TRACEBACK) + "\n")
            wait_until(lambda: (ex.value("vllm_log_exporter_alerts_sent_total", result="error") or 0) >= 2, 20, 0.2,
                       what="failed posts, retried")
            assert ex.value("vllm_log_errors_total", server="live", kind="oom") == 1  # parsing went on
            am = Alertmanager(tmp_path, stack_alertmanager_config(receiver.port))
            am.port = am_port
            with am:
                wait_until(lambda: _alerts(receiver, "VllmCudaOutOfMemory"), 60, 0.2, what="delivery once it is back")
            err = ex.stop()
    # (by the event: the source's own start line names the log's path, and tmp_path holds this test's name)
    warnings = [w for w in (json.loads(x) for x in err.splitlines() if x.startswith("{")) if "alertmanager" in w["event"]]
    assert [w["event"] for w in warnings][:1] == ["alerts not delivered to alertmanager; retrying"]
    assert sum(1 for w in warnings if w["event"] == "alerts not delivered to alertmanager; retrying") == 1  # once per cause


def test_pending_alerts_repeat_while_active_and_end_when_over():
    a = Alerts(instance="h:1")
    oom = Event("oom", {"message": "torch.OutOfMemoryError: CUDA out of memory.", "gpu": 0}, 1000.0, "EngineCore", 9)
    a.observe("s", [oom], now=1000.0)
    (alert,) = a.pending(now=1001.0)
    assert alert.to_api()["endsAt"] == "1970-01-01T00:26:40.000Z"  # 10 minutes after the line, like the rule
    a.sent([alert], now=1001.0)
    assert a.pending(now=1030.0) == []              # nothing new
    assert a.pending(now=1062.0) == [alert]         # re-posted while active
    a.sent([alert], now=1062.0)
    assert a.pending(now=1700.0) == [] and a.active == {}  # over: its end was in the first post


def test_the_notification_templates_give_a_slack_receiver_the_exception_line_runbook_and_dashboard(tmp_path):
    """deploy/alertmanager/templates/vllm.tmpl rendered by the real Alertmanager for a Slack receiver
    whose API URL is a local server (what Slack would be sent)."""
    import yaml

    from tests.helpers import ROOT

    live = tmp_path / "live.log"
    live.write_text("")
    with Receiver() as slack:
        cfg = {
            "templates": [str(ROOT / "deploy" / "alertmanager" / "templates" / "*.tmpl")],
            "route": {"receiver": "slack", "group_by": ["alertname", "host", "instance", "server"],
                      "group_wait": "0s", "group_interval": "1s", "repeat_interval": "1h"},
            "receivers": [{"name": "slack", "slack_configs": [{
                "api_url": f"http://127.0.0.1:{slack.port}/slack", "channel": "#gpu", "send_resolved": True,
                "title": '{{ template "vllm.title" . }}', "text": '{{ template "vllm.text" . }}'}]}],
        }
        with Alertmanager(tmp_path, yaml.safe_dump(cfg)) as am:
            with Exporter("--source", f"live={live}", "--year", "2026", "--alertmanager.url", am.url):
                with open(live, "a") as f:
                    f.write("\n".join(OOM_TRACEBACK) + "\n")

                def oom_message():
                    for path, body in slack.posts:
                        for att in body.get("attachments", []):
                            if "VllmCudaOutOfMemory" in att.get("title", ""):
                                return att
                    return None

                att = wait_until(oom_message, 20, 0.1, what="the Slack message for the OOM")
    assert att["title"] == "[FIRING:1] VllmCudaOutOfMemory on live"
    text = att["text"]
    assert "CUDA out of memory on vLLM server live" in text
    assert "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB" in text
    assert "GPU 0" in text and "Runbook: https://" in text and "docs/runbook.md#vllmcudaoutofmemory" in text
    assert "/d/vllm-log-overview?var-server=live&from=" in text and "&to=now" in text


def test_a_failed_start_is_held_back_until_its_reason_or_root_cause_is_known():
    """Alertmanager notifies once per alert: the first post must already say why the start failed."""
    a = Alerts()
    first = Event("start_failed", {"reason": "other", "message": "EngineCore failed to start."}, 100.0, "EngineCore", 7)
    a.observe("s", [first], now=1000.0)
    assert a.pending(now=1000.5) == []  # its traceback (the reason) follows within the idle flush
    why = Event("start_failure_reason", {"reason": "kv_cache_too_small", "message": "To serve at least one request "
                "with the model's max seq len (131072), (0.12 GiB KV cache is needed"}, 100.0, "EngineCore", 7)
    a.observe("s", [why], now=1001.0)
    (sent,) = a.pending(now=1001.0)
    assert sent.annotations["reason"] == "kv_cache_too_small" and "KV cache is needed" in sent.annotations["description"]
    # with no reason at all it goes anyway, once the wait is over
    b = Alerts()
    b.observe("s", [first], now=1000.0)
    assert b.pending(now=1005.0) == [] and len(b.pending(now=1000.0 + 13)) == 1


def test_pushed_alerts_carry_the_labels_given_and_keep_their_own():
    """``labels`` (host, the pod's target labels, external labels) join the alert's; they cannot
    change what the alert says of itself."""
    a = Alerts(instance="10.0.0.5:10825", labels={"host": "gpu-1", "namespace": "monitoring", "job": "vle"})
    oom = Event("oom", {"message": "torch.OutOfMemoryError: CUDA out of memory."}, 1000.0, "EngineCore", 9)
    a.observe("llm/vllm-0", [oom], now=1000.0)
    (alert,) = a.pending(now=1000.0)
    assert alert.labels == {"alertname": "VllmCudaOutOfMemory", "severity": "critical", "server": "llm/vllm-0",
                            "kind": "oom", "job": "vle", "instance": "10.0.0.5:10825", "host": "gpu-1",
                            "namespace": "monitoring"}
