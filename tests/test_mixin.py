"""The rendered rules, Alertmanager config and dashboards: current, sound, and tested with the real tools."""

import copy
import json
import re
import subprocess
import sys

import jsonschema
import pytest
import yaml

from mixin import alerts, build
from tests.helpers import ROOT, have

RULES = ROOT / "deploy" / "prometheus" / "rules" / "vllm-log-exporter.rules.yml"
RULES_TEST = ROOT / "deploy" / "prometheus" / "rules" / "vllm-log-exporter.rules_test.yml"
# the service levels' promtool tests (mixin/slo.py), on the same rules file
SLO_RULES_TEST = RULES_TEST.with_name("vllm-log-exporter-slo.rules_test.yml")
# the capacity and heartbeat groups' (mixin/capacity.py)
CAPACITY_RULES_TEST = RULES_TEST.with_name("vllm-log-exporter-capacity.rules_test.yml")
# the cost group's (mixin/cost.py: recording rules only)
COST_RULES_TEST = RULES_TEST.with_name("vllm-log-exporter-cost.rules_test.yml")
AM = ROOT / "deploy" / "alertmanager" / "alertmanager.yml"
PROM = ROOT / "deploy" / "prometheus" / "prometheus.yml"
SCHEMA = json.loads((ROOT / "tests" / "schemas" / "grafana-dashboard.schema.json").read_text())
# Grafana's schema types an annotation's query only for its own built-in datasource ("TODO: this
# should be a regular DataQuery"); a Prometheus annotation keeps its query in the fields Grafana's
# Prometheus datasource reads (expr, step, titleFormat, textFormat, tagKeys, useValueForTime), as
# the Prometheus mixins' dashboards do. Those fields, and only those, are added here.
_ANNOTATION = SCHEMA["definitions"]["AnnotationQuery"]["properties"]
for _field, _type in (("expr", "string"), ("step", "string"), ("titleFormat", "string"), ("textFormat", "string"),
                      ("tagKeys", "string"), ("useValueForTime", "boolean")):
    _ANNOTATION[_field] = {"type": _type}
DASHBOARDS = sorted((ROOT / "dashboards").glob("*.json"))
promtool = pytest.mark.skipif(not have("promtool"), reason="promtool (Debian package prometheus) not installed")
amtool = pytest.mark.skipif(not have("amtool"), reason="amtool (Debian package prometheus-alertmanager) not installed")


def run(*cmd):
    return subprocess.run(list(cmd), capture_output=True, text=True, timeout=120)


def test_committed_files_are_current_and_name_only_exported_metrics():
    r = subprocess.run([sys.executable, "-m", "mixin.build", "--check"], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr


def test_check_catches_a_metric_that_does_not_exist(monkeypatch):
    real = alerts.groups

    def with_bad_rule():
        g = real()
        g[0]["rules"].append({"alert": "Never", "expr": "rate(vllm_log_preemptions[5m]) > 0"})
        return g

    monkeypatch.setattr(alerts, "groups", with_bad_rule)
    problems = build.unknown_metrics()
    assert problems == ["rules: Never: metric vllm_log_preemptions is not exported by vllm-log-exporter"]


def test_check_catches_a_stale_file(tmp_path, monkeypatch, capsys):
    stale = tmp_path / "rules.yml"
    stale.write_text("groups: []\n")
    monkeypatch.setattr(build, "RULES_FILE", stale)
    assert build.main(["--check"]) == 1
    assert f"{stale}: stale; run python -m mixin.build" in capsys.readouterr().err


@promtool
def test_promtool_check_and_unit_test_the_rules():
    r = run("promtool", "check", "rules", str(RULES))
    rules = sum(len(g["rules"]) for g in alerts.groups())
    assert r.returncode == 0 and f"SUCCESS: {rules} rules found" in r.stdout, r.stdout + r.stderr
    for tests in (RULES_TEST, SLO_RULES_TEST, CAPACITY_RULES_TEST, COST_RULES_TEST):
        r = run("promtool", "test", "rules", str(tests))
        assert r.returncode == 0 and "SUCCESS" in r.stdout, r.stdout + r.stderr


def test_every_alert_has_a_firing_and_a_quiet_promtool_test():
    names = {r["alert"] for g in yaml.safe_load(RULES.read_text())["groups"] for r in g["rules"] if "alert" in r}
    fires, quiet = set(), set()
    for tests in (RULES_TEST, SLO_RULES_TEST, CAPACITY_RULES_TEST):
        for t in yaml.safe_load(tests.read_text())["tests"]:
            for a in t.get("alert_rule_test", []):
                (fires if a["exp_alerts"] else quiet).add(a["alertname"])
    assert names - fires == set(), "alerts without a test that fires them"
    assert names - quiet == set(), "alerts without a test that they stay quiet"


def test_every_alert_has_severity_summary_and_description():
    for g in alerts.groups():
        for r in g["rules"]:
            if "record" in r:
                continue
            assert r["labels"]["severity"] in ("critical", "warning"), r["alert"]
            assert r["annotations"]["summary"] and len(r["annotations"]["description"]) > 40, r["alert"]


@amtool
def test_alertmanager_config_and_routes():
    r = run("amtool", "check-config", str(AM))
    assert r.returncode == 0, r.stdout + r.stderr
    for labels, receiver in (("severity=critical", "critical"), ("severity=warning", "warning"), ("severity=info", "default")):
        r = run("amtool", "config", "routes", "test", f"--config.file={AM}", labels, "alertname=VllmCudaOutOfMemory", "server=gp")
        assert r.returncode == 0 and r.stdout.strip() == receiver, (labels, r.stdout, r.stderr)


@promtool
def test_stack_prometheus_config_is_valid():
    r = run("promtool", "check", "config", str(PROM))
    assert r.returncode == 0, r.stdout + r.stderr


@pytest.mark.parametrize("path", DASHBOARDS, ids=lambda p: p.name)
def test_dashboard_matches_grafana_schema(path):
    d = json.loads(path.read_text())
    errors = [f"{list(e.absolute_path)}: {e.message}" for e in jsonschema.Draft7Validator(SCHEMA).iter_errors(d)]
    assert errors == []


def test_schema_rejects_a_broken_dashboard():
    d = json.loads(DASHBOARDS[0].read_text())
    bad = copy.deepcopy(d)
    bad["panles"] = bad.pop("panels")
    bad["graphTooltip"] = 7
    bad["templating"]["list"][1]["type"] = "querry"
    assert len(list(jsonschema.Draft7Validator(SCHEMA).iter_errors(bad))) >= 3


@pytest.mark.parametrize("path", DASHBOARDS, ids=lambda p: p.name)
def test_dashboard_layout_and_conventions(path):
    d = json.loads(path.read_text())
    ids = [p["id"] for p in d["panels"]]
    assert len(ids) == len(set(ids)), "panel ids must be unique"
    assert d["uid"].startswith("vllm-log-") and len(d["uid"]) <= 40
    names = [v["name"] for v in d["templating"]["list"]]
    assert names == ["datasource", "cluster", "job", "host", "instance", "namespace", "server", "engine", "vllm_job"]
    for v in d["templating"]["list"][1:]:
        assert v["multi"] and v["includeAll"]
    cells = set()
    for p in d["panels"]:
        g = p["gridPos"]
        assert g["x"] >= 0 and g["w"] > 0 and g["x"] + g["w"] <= 24, p["title"]
        for x in range(g["x"], g["x"] + g["w"]):
            for y in range(g["y"], g["y"] + g["h"]):
                assert (x, y) not in cells, f"panel {p['title']!r} overlaps another"
                cells.add((x, y))
        if p["type"] == "row":
            continue
        assert p["datasource"] == {"type": "prometheus", "uid": "${datasource}"}
        assert p["fieldConfig"]["defaults"].get("unit"), f"panel {p['title']!r} has no unit"
        for t in p["targets"]:
            assert t["datasource"]["uid"] == "${datasource}" and t["expr"]
    uids = [json.loads(p.read_text())["uid"] for p in DASHBOARDS]
    assert len(set(uids)) == len(uids)


# grafana/dashboard-linter's rules (it is not installable here), over every rendered dashboard.
_COUNTER = re.compile(r"\b(vllm_log\w*_(?:total|bucket|count|sum))\b")
_SELECTOR = re.compile(r"\b((?:vllm_log\w*|up))\{([^}]*)\}")
_VLLM_SELECTOR = re.compile(r"\b(vllm:\w+)\{([^}]*)\}")


def _enclosing_function(expr: str, pos: int) -> str | None:
    """The name of the innermost call whose parentheses hold position ``pos``."""
    depth = 0
    for i in range(pos - 1, -1, -1):
        c = expr[i]
        if c == ")":
            depth += 1
        elif c == "(":
            if depth == 0:
                m = re.search(r"(\w+)\s*$", expr[:i])
                return m.group(1) if m else None
            depth -= 1
    return None


def lint(d: dict) -> list[str]:
    problems = []
    variables = {v["name"]: v for v in d["templating"]["list"]}
    if variables.get("datasource", {}).get("type") != "datasource":
        problems.append("no templated datasource")
    for name in ("cluster", "job", "host", "instance", "vllm_job"):
        if variables.get(name, {}).get("type") != "query":
            problems.append(f"no {name} variable")
    queries = []
    for p in d["panels"]:
        if p["type"] == "row":
            continue
        title = p.get("title")
        if not title:
            problems.append(f"panel {p['id']}: no title")
        if not p.get("description"):
            problems.append(f"{title}: no description")
        if not p["fieldConfig"]["defaults"].get("unit"):
            problems.append(f"{title}: no unit")
        if not p.get("targets"):
            problems.append(f"{title}: no target")
        steps = p["fieldConfig"]["defaults"].get("thresholds", {}).get("steps", [])
        if [x.get("color") for x in steps] == ["green", "red"] and steps[1].get("value") == 80:
            problems.append(f"{title}: Grafana's default thresholds")
        queries += [(title, t["expr"]) for t in p.get("targets", [])]
    queries += [(f"annotation {a['name']}", a["expr"]) for a in d["annotations"]["list"] if "expr" in a]
    for where, expr in queries:
        for m in _COUNTER.finditer(expr):
            fn = _enclosing_function(expr, m.start())
            if fn not in ("rate", "irate", "increase"):
                problems.append(f"{where}: counter {m.group(1)} outside rate/irate/increase ({fn})")
        for m in re.finditer(r"\b(rate|irate)\(", expr):
            inner = expr[m.end():]
            rng = re.search(r"\[([^\]]+)\]", inner)
            if not rng or rng.group(1) != "$__rate_interval":
                problems.append(f"{where}: {m.group(1)}() over {rng.group(1) if rng else '?'}, not $__rate_interval")
        for m in _SELECTOR.finditer(expr):
            matchers = m.group(2)
            for var in ("cluster", "job", "host", "instance"):
                if f'{var}=~"${var}"' not in matchers:
                    problems.append(f"{where}: {m.group(1)} without {var}=~\"${var}\"")
        # vLLM's own series: its scrape job is a variable, never a name written into the board
        for m in _VLLM_SELECTOR.finditer(expr):
            for matcher in ('cluster=~"$cluster"', 'job=~"$vllm_job"'):
                if matcher not in m.group(2):
                    problems.append(f"{where}: {m.group(1)} without {matcher}")
    return problems


@pytest.mark.parametrize("path", DASHBOARDS, ids=lambda p: p.name)
def test_dashboards_pass_the_dashboard_linter_rules(path):
    assert lint(json.loads(path.read_text())) == []


def test_the_linter_rules_catch_what_they_are_for():
    d = json.loads(next(p for p in DASHBOARDS if p.name == "overview.json").read_text())  # it has vLLM's own panels
    bad = copy.deepcopy(d)
    panel = next(p for p in bad["panels"] if p["type"] != "row")
    panel["description"] = ""
    panel["targets"][0]["expr"] = 'vllm_log_errors_total{instance=~"$instance"} + rate(vllm_log_errors_total{job=~"$job", instance=~"$instance"}[5m])'
    panel["fieldConfig"]["defaults"]["thresholds"]["steps"] = [{"color": "green", "value": None}, {"color": "red", "value": 80}]
    bad["templating"]["list"] = [v for v in bad["templating"]["list"] if v["name"] != "job"]
    found = "\n".join(lint(bad))
    vllm_panel = next(p for p in bad["panels"] if p["type"] != "row" and "vllm:" in p["targets"][0]["expr"])
    vllm_panel["targets"][0]["expr"] = vllm_panel["targets"][0]["expr"].replace('job=~"$vllm_job"', 'job="vllm"')
    found = "\n".join(lint(bad))
    for expected in ("no job variable", "no description", "outside rate/irate/increase", "not $__rate_interval",
                     'without job=~"$job"', "Grafana's default thresholds", 'without job=~"$vllm_job"'):
        assert expected in found, expected


@pytest.mark.parametrize("path", DASHBOARDS, ids=lambda p: p.name)
def test_annotations_mark_server_starts_and_every_error_kind(path):
    names = {a["name"] for a in json.loads(path.read_text())["annotations"]["list"]}
    assert {"Server starts", "CUDA out of memory", "Engine dead", "CUDA error", "NCCL error"} <= names


@promtool
def test_the_commented_examples_in_prometheus_yml_are_valid_once_uncommented(tmp_path):
    """Code lines are commented with one "# ", explanations with "## ": uncomment every code line
    where it stands, as a user would, and the file must still be a valid config."""
    lines = []
    for line in PROM.read_text().splitlines():
        stripped = line.lstrip()
        if stripped.startswith("# ") and not stripped.startswith("## "):
            indent = line[: len(line) - len(stripped)]
            line = indent + stripped[2:]
        lines.append(line)
    uncommented = tmp_path / "prometheus.yml"
    uncommented.write_text("\n".join(lines) + "\n")
    assert "remote_write:" in uncommented.read_text() and "file_sd_configs:" in uncommented.read_text()
    (tmp_path / "rules").mkdir()
    r = run("promtool", "check", "config", "--syntax-only", str(uncommented))
    assert r.returncode == 0, r.stdout + r.stderr


@promtool
@pytest.mark.parametrize("path", sorted((ROOT / "deploy" / "prometheus" / "examples").glob("*.yml")), ids=lambda p: p.name)
def test_every_example_config_is_a_file_promtool_accepts(path):
    r = run("promtool", "check", "config", "--syntax-only", str(path))
    assert r.returncode == 0, r.stdout + r.stderr


def test_every_alert_pushed_or_rule_based_has_a_runbook_section():
    from exporter.alerts.from_events import _RULES, RUNBOOK_URL
    from mixin import config as C

    runbook = (ROOT / "docs" / "runbook.md").read_text()
    sections = {line[3:].strip().lower() for line in runbook.splitlines() if line.startswith("## ")}
    rules = [r for g in yaml.safe_load(RULES.read_text())["groups"] for r in g["rules"] if "alert" in r]
    for r in rules:
        url = r["annotations"]["runbook_url"]
        assert url == f"{C.RUNBOOK_BASE_URL}#{r['alert'].lower()}" and r["alert"].lower() in sections, r["alert"]
    for alertname, _ in _RULES.values():
        assert alertname.lower() in sections and alertname in {r["alert"] for r in rules}
    assert C.RUNBOOK_BASE_URL == RUNBOOK_URL
    assert sections == {r["alert"].lower() for r in rules}  # no section for an alert that does not exist


def test_every_rule_links_its_board_and_overrides_change_for_and_severity(monkeypatch):
    from mixin import config as C

    boards = {json.loads(p.read_text())["uid"] for p in DASHBOARDS}
    for g in alerts.groups():
        for r in g["rules"]:
            if "record" in r:
                continue
            url = r["annotations"]["dashboard_url"]
            assert url.startswith(C.GRAFANA_URL + "/d/") and url.split("/d/")[1].split("?")[0] in boards, r["alert"]
            assert ("var-instance=" if g["name"] == "vllm-log-exporter" else "var-server=") in url
    monkeypatch.setattr(C, "ALERT_OVERRIDES", {"VllmEngineStalled": {"for": "3m", "severity": "warning"}})
    (stalled,) = [r for g in alerts.groups() for r in g["rules"] if r.get("alert") == "VllmEngineStalled"]
    assert stalled["for"] == "3m" and stalled["labels"]["severity"] == "warning"


def test_rules_keep_cluster_and_namespace_so_two_clusters_stay_two_alerts():
    for g in alerts.groups():
        for r in g["rules"]:
            for by in re.findall(r"\b(?:by|on) \(([^)]*)\)", r["expr"]):
                names = [x.strip() for x in by.split(",")]
                if "server" in names and "host" in names and "instance" in names:
                    assert "cluster" in names and "namespace" in names, (r.get("alert") or r["record"], by)
