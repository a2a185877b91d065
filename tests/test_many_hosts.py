"""Many GPU hosts into one store, with real processes: two exporters that look alike (same loopback
address on their host, same server name), each scraped by its own Prometheus agent configured from
deploy/prometheus/agent.yml, remote-writing into one central Prometheus. With the required `host`
external label they stay two hosts; the rules' aggregations keep them apart."""

import json
import subprocess
import time

import pytest
import yaml

from tests.conftest import SAMPLE, SAMPLE_LMCACHE
from tests.helpers import (ROOT, Exporter, Prometheus, dashboard_queries, demo_leaves_empty, free_port, grafana_substitute, have, http_get,
                           terminate, wait_until)

pytestmark = pytest.mark.skipif(not (have("prometheus") and have("promtool")), reason="prometheus not installed")

AGENT = ROOT / "deploy" / "prometheus" / "agent.yml"


def test_the_shipped_agent_config_is_valid_and_asks_for_the_host():
    r = subprocess.run(["promtool", "check", "config", "--agent", str(AGENT)], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stdout + r.stderr
    cfg = yaml.safe_load(AGENT.read_text())
    assert cfg["global"]["external_labels"]["host"] == "CHANGE-ME"
    assert "REQUIRED" in AGENT.read_text()


def _agent(tmp, name: str, exporter_port: int, stores: list[str]):
    cfg = yaml.safe_load(AGENT.read_text())
    cfg["global"]["external_labels"]["host"] = name
    cfg["global"]["scrape_interval"] = "1s"
    cfg["scrape_configs"][0]["static_configs"][0]["targets"] = [f"127.0.0.1:{exporter_port}"]
    # on real hosts both agents scrape 127.0.0.1:10825: give both that instance, as there
    cfg["scrape_configs"][0]["relabel_configs"] = [{"target_label": "instance", "replacement": "127.0.0.1:10825"}]
    cfg["remote_write"] = [{"url": url, "queue_config": {"batch_send_deadline": "1s"}} for url in stores]
    d = tmp / name
    d.mkdir()
    (d / "agent.yml").write_text(yaml.safe_dump(cfg))
    port = free_port()
    log = open(d / "agent.log", "w")
    proc = subprocess.Popen(["prometheus", "--enable-feature=agent", f"--config.file={d / 'agent.yml'}",
                             f"--storage.agent.path={d / 'wal'}", f"--web.listen-address=127.0.0.1:{port}"],
                            stdout=log, stderr=subprocess.STDOUT)
    return proc, log


class _Store:
    """A query API: the central Prometheus or VictoriaMetrics (which answers the same API)."""

    def __init__(self, name: str, url: str):
        self.name, self.url = name, url

    def query(self, expr: str) -> list[dict]:
        import urllib.parse

        status, body = http_get(self.url + "/api/v1/query?" + urllib.parse.urlencode({"query": expr}))
        data = json.loads(body)
        assert status == 200 and data["status"] == "success", (self.name, expr, body)
        return data["data"]["result"]


def _start(cmd: list[str], log_path, ready_url: str, what: str):
    log = open(log_path, "w")
    proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT)
    wait_until(lambda: proc.poll() is None and http_get(ready_url)[0] == 200, 30, 0.2, what=what)
    return proc, log


@pytest.mark.skipif(not (have("victoria-metrics") and have("vmalert")), reason="victoria-metrics (Debian) not installed")
def test_two_hosts_through_agents_stay_apart_on_a_central_prometheus_and_victoriametrics(tmp_path):
    rules = ROOT / "deploy" / "prometheus" / "rules" / "vllm-log-exporter.rules.yml"
    central = Prometheus(tmp_path, {"global": {"scrape_interval": "15s", "evaluation_interval": "1s"},
                                    "rule_files": [str(rules)], "scrape_configs": []},
                         extra_args=["--web.enable-remote-write-receiver"]).start()
    vm_port, vmalert_port = free_port(), free_port()
    started = []
    exporters, agents = [], []
    try:
        # the newest 30 s are hidden by default (-search.latencyOffset): 1 s, so the test need not wait
        started.append(_start(["victoria-metrics", f"-httpListenAddr=127.0.0.1:{vm_port}",
                               f"-storageDataPath={tmp_path / 'vm'}", "-search.latencyOffset=1s",
                               "-retentionPeriod=100y"], tmp_path / "vm.log",
                              f"http://127.0.0.1:{vm_port}/health", "VictoriaMetrics up"))
        started.append(_start(["vmalert", f"-rule={rules}", f"-datasource.url=http://127.0.0.1:{vm_port}",
                               # Debian's vmalert (1.79) has no -notifier.blackhole: a port nobody
                               # listens on (sending fails, evaluating does not)
                               f"-notifier.url=http://127.0.0.1:{free_port()}", "-evaluationInterval=1s", f"-httpListenAddr=127.0.0.1:{vmalert_port}",
                               # the recording rules (the SLIs) are written back to the store; vmalert
                               # refuses to start with recording rules and no -remoteWrite.url
                               f"-remoteWrite.url=http://127.0.0.1:{vm_port}", "-remoteWrite.flushInterval=1s"],
                              tmp_path / "vmalert.log", f"http://127.0.0.1:{vmalert_port}/health", "vmalert up"))
        stores = [_Store("prometheus", central.url), _Store("victoria-metrics", f"http://127.0.0.1:{vm_port}")]
        for host in ("gpu-01", "gpu-02"):
            d = tmp_path / f"{host}-logs"
            d.mkdir()
            (d / "vllm.log").write_text(SAMPLE.read_text(encoding="utf-8"))
            # and a vLLM pod in kubelet's layout, for the boards' namespace variable
            pod = d / "pods" / "llm_vllm-pod-0_uid-1" / "vllm" / "0.log"
            pod.parent.mkdir(parents=True)
            pod.write_text("".join(f"2026-08-04T02:45:03.123456789Z stdout F {ln}\n"
                                   for ln in SAMPLE.read_text(encoding="utf-8").splitlines()[:200]))
            # the default server name on both: the file stem, "vllm"
            ex = Exporter("--source", str(d / "vllm.log"), "--source", str(d / "pods" / "*_*" / "*" / "*.log"),
                          "--from-start", "--year", "2026").start()
            exporters.append(ex)
            agents.append(_agent(tmp_path, host, ex.port, [f"{central.url}/api/v1/write",
                                                          f"http://127.0.0.1:{vm_port}/api/v1/write"]))
        for store in stores:
            wait_until(lambda: {r["metric"].get("host") for r in store.query(
                'vllm_log_exporter_build_info{job="vllm-log-exporter"}')} == {"gpu-01", "gpu-02"}, 60, 0.5,
                what=f"both hosts on {store.name}")
        # live traffic for a few seconds, so rates are not 0/0 (VictoriaMetrics drops NaN: a ratio of
        # idle counters is "No data" there, unlike Prometheus)
        sample = SAMPLE.read_text(encoding="utf-8").splitlines()
        lmcache = SAMPLE_LMCACHE.read_text(encoding="utf-8").splitlines()
        live = [next(ln for ln in sample if marker in ln) for marker in
                ("KV Transfer metrics", "SpecDecoding metrics", "Draft length histogram", "DSpark STS calibration bins",
                 '" 200 OK', '" 500 ', '" 429 ')]
        live += [next(ln for ln in lmcache if marker in ln)
                 for marker in ("Stored ", "Retrieved ", "LMCache hit tokens: 2", "MM cache hit rate",
                                "aborting in-flight requests")]  # (a stop's aborted requests: only demo-lmcache stops)
        for _ in range(15):
            for host in ("gpu-01", "gpu-02"):
                with open(tmp_path / f"{host}-logs" / "vllm.log", "a") as f:
                    f.write("\n".join(live) + "\n")
            time.sleep(0.3)
        for store in stores:
            # apart, with counters that never go down (two hosts in one series would zigzag)
            resets = store.query('resets(vllm_log_exporter_lines_total{server="vllm"}[1m])')
            assert sorted({r["metric"]["host"] for r in resets}) == ["gpu-01", "gpu-02"], store.name
            assert all(float(r["value"][1]) == 0 for r in resets), (store.name, resets)
            # every dashboard query has data for each host
            # (vLLM's own `vllm:` panels need vLLM's job, which these agents do not scrape: the e2e stack
            # checks them against a stand-in target; so do the service levels' SLIs, `slo:` rules over
            # vLLM's histograms, which tests/test_otel_recipe.py also checks through an agent per host; and the
            # heartbeat's engine steps, a rule over vLLM's own counter, and the cost rules, which need a price
            # these exporters are not given: tests/test_stack_e2e.py checks both)
            missing = [f"{where} ({host})" for host in ("gpu-01", "gpu-02") for where, expr in dashboard_queries()
                       if "vllm:" not in expr and "slo:" not in expr and not demo_leaves_empty(expr)
                       and "vllm_log:engine_steps" not in expr and "vllm_log:cost" not in expr
                       # (empty while nothing runs, by design: VictoriaMetrics reads 30 s back, after the lines'
                       # last busy window)
                       and "capacity_headroom_typical" not in expr
                       and not store.query(grafana_substitute(expr, host=host))]
            assert missing == [], (store.name, missing)
        # the rules run centrally on both, with no evaluation errors
        groups = central.api("/api/v1/rules")["groups"]
        assert groups and all(r["health"] == "ok" for g in groups for r in g["rules"]), groups
        status, body = http_get(f"http://127.0.0.1:{vmalert_port}/api/v1/rules")
        vm_groups = json.loads(body)["data"]["groups"]
        vm_rules = [r for g in vm_groups for r in g["rules"]]
        assert status == 200 and len(vm_rules) == len([r for g in groups for r in g["rules"]])
        assert all(not r.get("lastError") for r in vm_rules), [r for r in vm_rules if r.get("lastError")]
    finally:
        for proc, log in agents + started:
            terminate(proc)
            log.close()
        for ex in exporters:
            ex.stop()
        central.stop()
