"""The Quadlet units through the real Quadlet generator, and the services it makes through
`systemd-analyze verify`.

Debian 12's podman (4.3) has no Quadlet; Debian trixie's podman package holds the generator, which
runs here (it needs only libc). The test fetches that .deb with apt-get and a temporary sources
list (the system's apt state is not touched), unpacks it, and caches the binary next to the test
images. Skipped, saying why, where the Debian mirror is unreachable.
"""

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.helpers import ROOT

CACHE = Path(os.environ.get("VLLM_LOG_EXPORTER_IMAGE_CACHE", "/var/tmp/vllm-log-exporter-test-images"))
UNITS = ROOT / "deploy" / "quadlet"


@pytest.fixture(scope="module")
def quadlet(tmp_path_factory):
    binary = CACHE / "quadlet" / "usr" / "libexec" / "podman" / "quadlet"
    if binary.exists():
        return binary
    if not shutil.which("apt-get") or not shutil.which("dpkg-deb"):
        pytest.skip("apt-get/dpkg-deb not here: cannot fetch the Quadlet generator")
    work = tmp_path_factory.mktemp("apt")
    (work / "lists" / "partial").mkdir(parents=True)
    (work / "sources.list").write_text("deb http://deb.debian.org/debian trixie main\n")
    opts = ["-o", f"Dir::Etc::sourcelist={work / 'sources.list'}", "-o", "Dir::Etc::sourceparts=-",
            "-o", f"Dir::State::Lists={work / 'lists'}", "-o", "APT::Get::List-Cleanup=0", "-qq"]
    r = subprocess.run(["apt-get", *opts, "update"], capture_output=True, text=True, timeout=300)
    if r.returncode != 0:
        pytest.skip(f"Debian mirror unreachable: {r.stderr.strip()[-200:]}")
    r = subprocess.run(["apt-get", *opts, "download", "podman"], cwd=work, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    (deb,) = work.glob("podman_*.deb")
    target = CACHE / "quadlet.part"
    shutil.rmtree(target, ignore_errors=True)
    subprocess.run(["dpkg-deb", "-x", str(deb), str(target)], check=True, timeout=120)
    os.replace(target, CACHE / "quadlet")
    return binary


def generate(quadlet: Path, out: Path, *flags: str) -> subprocess.CompletedProcess:
    return subprocess.run([str(quadlet), *flags, str(out)], env={**os.environ, "QUADLET_UNIT_DIRS": str(UNITS)},
                          capture_output=True, text=True, timeout=60)


@pytest.mark.parametrize("mode", ["system", "user"])
def test_the_generator_makes_both_services_as_the_units_say(quadlet, tmp_path, mode):
    out = tmp_path / "generated"
    out.mkdir()
    r = generate(quadlet, out, *(["-user"] if mode == "user" else []))
    assert r.returncode == 0, r.stderr
    services = sorted(p.name for p in out.glob("*.service"))
    assert services == ["vllm-log-exporter-journald.service", "vllm-log-exporter.service"], r.stderr
    for name in services:
        text = (out / name).read_text()
        start = next(ln for ln in text.splitlines() if ln.startswith("ExecStart="))
        for flag in ("--cap-drop all", "--read-only", "--security-opt=no-new-privileges", "--security-opt label=disable",
                     "--user 0", "--network host", "--init",
                     '--health-cmd "vllm-log-exporter healthcheck --web.listen-address=127.0.0.1:10825"'):
            assert flag in start, (name, flag, start)
        assert "localhost/vllm-log-exporter:latest --web.listen-address=127.0.0.1:10825" in start
    journald = (out / "vllm-log-exporter-journald.service").read_text()
    assert "-v /var/log/journal:/var/log/journal:ro" in journald and "RequiresMountsFor=/var/log/journal" in journald


def test_systemd_analyze_verifies_the_generated_services(quadlet, tmp_path):
    if not shutil.which("systemd-analyze"):
        pytest.skip("systemd-analyze not installed")
    out = tmp_path / "generated"
    out.mkdir()
    assert generate(quadlet, out).returncode == 0
    r = subprocess.run(["systemd-analyze", "verify", "--man=no", *map(str, sorted(out.glob("*.service")))],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "vllm-log-exporter" not in r.stderr, r.stderr  # nothing said about our units


def test_a_unit_with_a_key_the_generator_does_not_know_is_refused(quadlet, tmp_path):
    """So the tests above would catch a misspelt key."""
    units = tmp_path / "units"
    units.mkdir()
    text = (UNITS / "vllm-log-exporter.container").read_text().replace("ReadOnly=true", "ReadOnyl=true")
    (units / "broken.container").write_text(text)
    out = tmp_path / "generated"
    out.mkdir()
    r = subprocess.run([str(quadlet), str(out)], env={**os.environ, "QUADLET_UNIT_DIRS": str(units)},
                       capture_output=True, text=True, timeout=60)
    assert r.returncode != 0 and not (out / "broken.service").exists()
    dry = subprocess.run([str(quadlet), "-dryrun"], env={**os.environ, "QUADLET_UNIT_DIRS": str(units)},
                         capture_output=True, text=True, timeout=60)
    assert "unsupported key 'ReadOnyl'" in dry.stderr, dry.stderr
