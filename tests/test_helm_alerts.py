"""On Kubernetes, the exporter's pushed alert and the PrometheusRule's copy of the same OOM are one
alert in Alertmanager: the chart gives the pushed one the labels the rule's copy gets from the
ServiceMonitor's scrape (instance, host, namespace, service, pod, container, endpoint) and from
Prometheus' external labels.

No cluster runs here (tests/test_helm.py says why), so what a cluster would do is done by hand, each
step named:
- kubelet: the DaemonSet's container runs with the downward API's values (the pod's IP, node,
  namespace and name) in its environment, and `$(VAR)` in its arguments expanded from them;
- prometheus-operator: the rendered ServiceMonitor becomes the scrape config the operator generates
  for it (its fixed relabelings, copied from the operator's own expected output for a ServiceMonitor
  endpoint, pkg/prometheus/testdata/*ServiceMonitor*.golden, then the endpoint's `relabelings`),
  the target's Kubernetes metadata given as `__meta_kubernetes_*` labels of a static target; the
  external labels it sets (`prometheus`, `prometheus_replica`) and the alert relabeling that drops
  `prometheus_replica`;
- the rest is real: the exporter (as the chart's pod runs it), Prometheus with the PrometheusRule's
  groups, Alertmanager.
"""

from __future__ import annotations

import json
import re
import time

import pytest
import yaml

from tests.helpers import Exporter, Prometheus, free_port, have, http_get, value, wait_until
from tests.test_helm import helm, one, render  # noqa: F401 - helm is a fixture
from tests.test_stack_e2e import Alertmanager, Receiver, stack_alertmanager_config

pytestmark = pytest.mark.skipif(not (have("prometheus") and have("prometheus-alertmanager")),
                                reason="needs prometheus and prometheus-alertmanager")

POD = {"POD_IP": "127.0.0.1", "NODE_NAME": "gpu-node-7", "POD_NAMESPACE": "gpu-monitoring",
       "POD_NAME": "vle-vllm-log-exporter-x7k2p"}
STAMP = "2026-12-02T10:00:00.000000000Z"
OOM = ["(EngineCore pid=9) ERROR 12-02 10:00:00 [core.py:842] EngineCore encountered a fatal error.",
       "(EngineCore pid=9) ERROR 12-02 10:00:00 [core.py:842] Traceback (most recent call last):",
       "(EngineCore pid=9) ERROR 12-02 10:00:00 [core.py:842] torch.OutOfMemoryError: CUDA out of memory. "
       "Tried to allocate 2.00 GiB. GPU 0 has a total capacity of 94.97 GiB of which 1.07 GiB is free."]


def operator_scrape_config(monitor: dict, port: int) -> dict:
    """The scrape config prometheus-operator makes of the chart's ServiceMonitor (one endpoint)."""
    (ep,) = monitor["spec"]["endpoints"]
    ns, name = monitor["metadata"]["namespace"], monitor["metadata"]["name"]
    fixed = [  # the operator's own, for every ServiceMonitor endpoint backed by pods
        {"source_labels": ["__meta_kubernetes_namespace"], "target_label": "namespace"},
        {"source_labels": ["__meta_kubernetes_service_name"], "target_label": "service"},
        {"source_labels": ["__meta_kubernetes_pod_name"], "target_label": "pod"},
        {"source_labels": ["__meta_kubernetes_pod_container_name"], "target_label": "container"},
        {"source_labels": ["__meta_kubernetes_service_name"], "target_label": "job", "replacement": "${1}"},
        {"target_label": "endpoint", "replacement": ep["port"]},
    ]
    keys = {"sourceLabels": "source_labels", "targetLabel": "target_label"}
    own = [{keys.get(k, k): v for k, v in r.items()} for r in ep.get("relabelings", [])]
    return {"job_name": f"serviceMonitor/{ns}/{name}/0", "honor_labels": ep["honorLabels"], "scrape_interval": "1s",
            "static_configs": [{"targets": [f"127.0.0.1:{port}"], "labels": {
                "__meta_kubernetes_namespace": POD["POD_NAMESPACE"], "__meta_kubernetes_service_name": name,
                "__meta_kubernetes_pod_name": POD["POD_NAME"], "__meta_kubernetes_pod_container_name": "exporter",
                "__meta_kubernetes_pod_node_name": POD["NODE_NAME"]}}],
            "relabel_configs": fixed + own}


def as_kubelet_runs_it(docs: list[dict], tmp) -> tuple[list[str], dict]:
    """The DaemonSet container's arguments and environment as kubelet gives them to the process."""
    (c,) = one(docs, "DaemonSet")["spec"]["template"]["spec"]["containers"]
    env = {}
    for e in c["env"]:
        if "valueFrom" in e:
            env[e["name"]] = POD[e["name"]]  # the downward API (fieldRef)
        else:
            env[e["name"]] = e["value"]
    args = [re.sub(r"\$\((\w+)\)", lambda m: env[m.group(1)], a) for a in c["args"]]
    config = one(docs, "ConfigMap", "vle-vllm-log-exporter")["data"]["config.yaml"]
    (tmp / "state").mkdir()
    (tmp / "config.yaml").write_text(config.replace("/var/lib/vllm-log-exporter", str(tmp / "state")))
    args = [f"--config={tmp / 'config.yaml'}" if a.startswith("--config=") else a for a in args]
    env.pop("VLLM_LOG_EXPORTER_WEB_LISTEN_ADDRESS")  # ":port" in the pod; loopback here (the Exporter helper's)
    return args, env


def test_the_pushed_alert_and_the_rules_copy_are_one_alert_in_alertmanager(helm, tmp_path):  # noqa: F811
    port = free_port()
    pods = tmp_path / "pods"
    log = pods / "llm_vllm-0_0a1b-2c3d" / "vllm" / "0.log"
    log.parent.mkdir(parents=True)
    log.write_text("")
    with Receiver() as receiver, Alertmanager(tmp_path, stack_alertmanager_config(receiver.port)) as am:
        docs = render(helm, tmp_path, {
            "pods": {"logDirectory": str(pods), "namespaces": ["llm"]},
            "service": {"port": port},
            "serviceMonitor": {"enabled": True}, "prometheusRule": {"enabled": True},
            "alertmanager": {"urls": [am.url], "labels": {"prometheus": "monitoring/k8s"}},
        }, namespace=POD["POD_NAMESPACE"])
        rules = tmp_path / "rules.yml"
        rules.write_text(yaml.safe_dump(one(docs, "PrometheusRule")["spec"]))
        prom_dir = tmp_path / "prometheus"
        prom_dir.mkdir()
        config = {
            "global": {"scrape_interval": "1s", "evaluation_interval": "1s",
                       "external_labels": {"prometheus": "monitoring/k8s", "prometheus_replica": "prometheus-k8s-0"}},
            "rule_files": [str(rules)],
            "alerting": {"alert_relabel_configs": [{"action": "labeldrop", "regex": "prometheus_replica"}],
                         "alertmanagers": [{"static_configs": [{"targets": [f"127.0.0.1:{am.port}"]}]}]},
            "scrape_configs": [operator_scrape_config(one(docs, "ServiceMonitor"), port)],
        }
        args, env = as_kubelet_runs_it(docs, tmp_path)
        with Exporter(*args, port=port, env=env) as ex, Prometheus(prom_dir, config) as prom:
            wait_until(lambda: prom.query('vllm_log_errors_total{kind="oom",server="llm/vllm-0"} == 0'), 30, 0.5,
                       what="the OOM counter scraped at 0")
            with open(log, "a") as f:
                f.write("".join(f"{STAMP} stderr F {line}\n" for line in OOM))

            def am_alerts(name):
                status, body = http_get(f"{am.url}/api/v2/alerts?filter=alertname%3D%22{name}%22")
                return json.loads(body) if status == 200 else []

            def rule_alert(name):
                return [a for a in prom.api("/api/v1/alerts")["alerts"] if a["labels"]["alertname"] == name
                        and a["state"] == "firing"]

            for name in ("VllmCudaOutOfMemory", "VllmEngineDead"):
                (fired,) = wait_until(lambda: rule_alert(name), 60, 0.5, what=f"the rule's {name}")
                # both have posted: the exporter at once, Prometheus on its next evaluation
                wait_until(lambda: (ex.value("vllm_log_exporter_alerts_sent_total", result="ok") or 0) >= 1, 20, 0.2,
                           what="the exporter's push")
                wait_until(lambda: (value(http_get(prom.url + "/metrics")[1], "prometheus_notifications_sent_total")
                                    or 0) >= 2, 30, 0.5, what="Prometheus' notifications")
                time.sleep(2)  # a few more evaluations and resends of the rule's copy
                held = am_alerts(name)
                assert len(held) == 1, [a["labels"] for a in held]
                assert held[0]["labels"] == {**fired["labels"], "prometheus": "monitoring/k8s"}
            # and what the labels are: the exporter pod's, as the ServiceMonitor's scrape gives them
            assert {k: v for k, v in held[0]["labels"].items() if k not in ("alertname", "severity", "kind")} == {
                "server": "llm/vllm-0", "job": "vllm-log-exporter", "instance": f"127.0.0.1:{port}",
                "host": POD["NODE_NAME"], "namespace": POD["POD_NAMESPACE"], "pod": POD["POD_NAME"],
                "container": "exporter", "endpoint": "metrics", "service": "vle-vllm-log-exporter",
                "prometheus": "monitoring/k8s"}
