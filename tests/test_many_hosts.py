"""Many GPU hosts into one store, with real processes: two exporters that look alike (same loopback
address on their host, same server name), each scraped by its own Prometheus agent configured from
deploy/prometheus/agent.yml, remote-writing into one central Prometheus. With the required `host`
external label they stay two hosts; the rules' aggregations keep them apart."""

import json
import subprocess
import time

import pytest
import yaml

from tests.helpers import ROOT, Exporter, Prometheus, free_port, have, http_get, terminate, wait_until

pytestmark = pytest.mark.skipif(not (have("prometheus") and have("promtool")), reason="prometheus not installed")

AGENT = ROOT / "deploy" / "prometheus" / "agent.yml"


def test_the_shipped_agent_config_is_valid_and_asks_for_the_host():
    r = subprocess.run(["promtool", "check", "config", "--agent", str(AGENT)], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stdout + r.stderr
    cfg = yaml.safe_load(AGENT.read_text())
    assert cfg["global"]["external_labels"]["host"] == "CHANGE-ME"
    assert "REQUIRED" in AGENT.read_text()


def _agent(tmp, name: str, exporter_port: int, central_url: str):
    cfg = yaml.safe_load(AGENT.read_text())
    cfg["global"]["external_labels"]["host"] = name
    cfg["global"]["scrape_interval"] = "1s"
    cfg["scrape_configs"][0]["static_configs"][0]["targets"] = [f"127.0.0.1:{exporter_port}"]
    # on real hosts both agents scrape 127.0.0.1:10825: give both that instance, as there
    cfg["scrape_configs"][0]["relabel_configs"] = [{"target_label": "instance", "replacement": "127.0.0.1:10825"}]
    cfg["remote_write"] = [{"url": f"{central_url}/api/v1/write", "queue_config": {"batch_send_deadline": "1s"}}]
    d = tmp / name
    d.mkdir()
    (d / "agent.yml").write_text(yaml.safe_dump(cfg))
    port = free_port()
    log = open(d / "agent.log", "w")
    proc = subprocess.Popen(["prometheus", "--enable-feature=agent", f"--config.file={d / 'agent.yml'}",
                             f"--storage.agent.path={d / 'wal'}", f"--web.listen-address=127.0.0.1:{port}"],
                            stdout=log, stderr=subprocess.STDOUT)
    return proc, log


def test_two_hosts_through_agents_stay_two_hosts_in_the_central_store(tmp_path):
    central = Prometheus(tmp_path, {"global": {"scrape_interval": "15s"}, "scrape_configs": []},
                         extra_args=["--web.enable-remote-write-receiver"]).start()
    exporters, agents = [], []
    try:
        for host in ("gpu-01", "gpu-02"):
            ex = Exporter("--demo").start()  # both: server "demo", job and (relabelled) instance alike
            exporters.append(ex)
            agents.append(_agent(tmp_path, host, ex.port, central.url))

        def hosts():
            return {r["metric"].get("host") for r in central.query('vllm_log_exporter_build_info{job="vllm-log-exporter"}')}

        wait_until(lambda: hosts() == {"gpu-01", "gpu-02"}, 60, 0.5, what="both hosts in the central store")
        # every line counter climbs per host: no zigzag of two hosts' counts in one series
        wait_until(lambda: len(central.query('vllm_log_exporter_lines_total{result="parsed",server="demo"}')) == 2, 30,
                   0.5, what="one parsed-lines series per host")
        time.sleep(4)
        resets = central.query('resets(vllm_log_exporter_lines_total{result="parsed",server="demo"}[1m])')
        assert sorted(r["metric"]["host"] for r in resets) == ["gpu-01", "gpu-02"]
        assert all(float(r["value"][1]) == 0 for r in resets), resets
        # the rules aggregate by host too: one HTTP series per host for the same server name
        ratio = central.query('sum by (host, instance, server) (rate(vllm_log_http_requests_total{server="demo"}[1m]))')
        assert sorted(r["metric"]["host"] for r in ratio) == ["gpu-01", "gpu-02"]
        status, body = http_get(central.url + "/api/v1/label/host/values")
        assert status == 200 and json.loads(body)["data"] == ["gpu-01", "gpu-02"]
    finally:
        for proc, log in agents:
            terminate(proc)
            log.close()
        for ex in exporters:
            ex.stop()
        central.stop()
