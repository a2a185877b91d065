"""deploy/systemd/: the unit for a pipx install and its environment file, checked by the real
`systemd-analyze verify` and run as the unit runs it.

No systemd runs as PID 1 on the test machines, so the service is not started by systemd: its
ExecStart is run with the environment systemd would give it (the unit's Environment= lines, %S
expanded, then the environment file, which overrides them), the source set as the file's comment
says a user sets it. What systemd itself adds (the dynamic user, the sandbox) is checked by
`systemd-analyze verify` alone.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from exporter.cli import build_parser
from tests.helpers import free_port, http_get, terminate, value, wait_until

ROOT = Path(__file__).resolve().parent.parent
UNIT = ROOT / "deploy" / "systemd" / "vllm-log-exporter.service"
ENV_FILE = ROOT / "deploy" / "systemd" / "vllm-log-exporter.env"
STATS = ("(APIServer pid=53) INFO 08-04 02:46:09 [loggers.py:314] Engine 000: Avg prompt throughput: 0.0 tokens/s, "
         "Avg generation throughput: 30.0 tokens/s, Running: 1 reqs, Waiting: 0 reqs, GPU KV cache usage: 1.9%, "
         "Prefix cache hit rate: 88.1%")


def unit_keys(path: Path = UNIT) -> dict[str, list[str]]:
    """``Section.Key`` -> its values in order (a key may repeat, as Environment= does)."""
    out: dict[str, list[str]] = {}
    section = ""
    for line in path.read_text(encoding="utf-8").splitlines():
        line = line.strip()
        if not line or line.startswith(("#", ";")):
            continue
        if line.startswith("["):
            section = line.strip("[]")
            continue
        key, _, val = line.partition("=")
        out.setdefault(f"{section}.{key}", []).append(val)
    return out


def env_file(text: str) -> dict[str, str]:
    return dict(line.split("=", 1) for line in text.splitlines() if line and not line.startswith("#"))


def test_the_unit_runs_the_exporter_and_names_only_variables_it_reads():
    keys = unit_keys()
    (exec_start,) = keys["Service.ExecStart"]
    prog, *args = shlex.split(exec_start)
    assert prog == "/usr/local/bin/vllm-log-exporter"  # where `pipx install` as the comment says puts it
    assert build_parser().parse_args(args).command == "serve"
    assert keys["Service.EnvironmentFile"] == ["/etc/default/vllm-log-exporter"]
    # every variable the unit and the file set, commented examples included, is one the exporter reads
    said = set(re.findall(r"VLLM_LOG_EXPORTER_([A-Z_]+)=", UNIT.read_text() + ENV_FILE.read_text()))
    assert {"SOURCE", "STATE_FILE", "WEB_LISTEN_ADDRESS", "ALERTMANAGER_URL"} <= said
    code = "".join((ROOT / "exporter" / "config" / f).read_text() for f in ("flags.py", "settings.py"))
    for v in said:
        assert f'"{v}"' in code, f"VLLM_LOG_EXPORTER_{v}: the exporter reads no such variable"
    # the file's sources are sources the exporter takes
    from exporter.config.flags import build

    lines = ENV_FILE.read_text().splitlines()
    for line in [ln.lstrip("#") for ln in lines if ln.lstrip("#").startswith("VLLM_LOG_EXPORTER_SOURCE=")]:
        cfg = build(build_parser().parse_args(["serve"]), environ=env_file(line))
        assert [s.name for s in cfg.sources] == ["vllm"], line


def test_systemd_analyze_verifies_the_unit(tmp_path):
    if not shutil.which("systemd-analyze"):
        pytest.skip("systemd-analyze not installed")
    # verify checks that the program and the environment file exist: the copy names this checkout's
    text = UNIT.read_text().replace("/usr/local/bin/vllm-log-exporter", str(ROOT / ".venv" / "bin" / "vllm-log-exporter"))
    text = text.replace("EnvironmentFile=/etc/default/vllm-log-exporter", f"EnvironmentFile={ENV_FILE}")
    if not (ROOT / ".venv" / "bin" / "vllm-log-exporter").exists():
        text = text.replace(str(ROOT / ".venv" / "bin" / "vllm-log-exporter"), sys.executable + " -m exporter")
    copy = tmp_path / "vllm-log-exporter.service"
    copy.write_text(text)
    r = subprocess.run(["systemd-analyze", "verify", "--man=no", str(copy)], capture_output=True, text=True,
                       timeout=120)
    assert r.returncode == 0 and "vllm-log-exporter" not in r.stderr, r.stdout + r.stderr


def test_the_service_follows_its_source_reloads_and_keeps_its_state(tmp_path):
    keys = unit_keys()
    state_dir = tmp_path / "lib"  # %S, with StateDirectory= made by systemd
    (state_dir / keys["Service.StateDirectory"][0]).mkdir(parents=True)
    env = {k: v.replace("%S", str(state_dir)) for k, v in (e.split("=", 1) for e in keys["Service.Environment"])}
    log = tmp_path / "vllm.log"
    log.write_text("")
    port = free_port()
    # the environment file as a user edits it: the file source uncommented, the address set
    edited = ENV_FILE.read_text().replace("VLLM_LOG_EXPORTER_SOURCE=vllm=journald:vllm\n", "")
    edited = edited.replace("#VLLM_LOG_EXPORTER_SOURCE=vllm=/var/log/vllm/vllm.log", f"VLLM_LOG_EXPORTER_SOURCE=vllm={log}")
    edited = edited.replace("#VLLM_LOG_EXPORTER_WEB_LISTEN_ADDRESS=127.0.0.1:10825",
                            f"VLLM_LOG_EXPORTER_WEB_LISTEN_ADDRESS=127.0.0.1:{port}")
    env.update(env_file(edited))
    (exec_start,) = keys["Service.ExecStart"]
    args = shlex.split(exec_start)[1:]
    base = {k: v for k, v in os.environ.items() if not k.startswith("VLLM_LOG_EXPORTER_")}
    proc = subprocess.Popen([sys.executable, "-m", "exporter", *args], env={**base, **env}, cwd=tmp_path,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    url = f"http://127.0.0.1:{port}"
    try:
        wait_until(lambda: http_get(url + "/healthz")[0] == 200, 10, what=f"{url}/healthz")
        with log.open("a") as f:
            f.write(STATS + "\n")
        wait_until(lambda: value(http_get(url + "/metrics")[1], "vllm_log_exporter_lines_total", server="vllm") == 1,
                   10, what="the line counted under server=vllm")
        proc.send_signal(signal.SIGHUP)  # ExecReload
        assert keys["Service.ExecReload"] == ["/bin/kill -HUP $MAINPID"]
        wait_until(lambda: http_get(url + "/healthz")[0] == 200, 10, what="/healthz after the reload")
        proc.send_signal(signal.SIGTERM)  # what systemctl stop sends
        assert proc.wait(30) == 0
    finally:
        terminate(proc)
        out = proc.stdout.read() if proc.stdout else ""
    assert (state_dir / "vllm-log-exporter" / "state.json").is_file(), out[-2000:]
    assert str(log) in (state_dir / "vllm-log-exporter" / "state.json").read_text(), out[-2000:]
