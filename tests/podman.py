"""Podman for tests: the settings this machine needs, and small images made without a registry."""

from __future__ import annotations

import fcntl
import os
import shutil
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from tests.helpers import ROOT

CACHE = Path(os.environ.get("VLLM_LOG_EXPORTER_IMAGE_CACHE", "/var/tmp/vllm-log-exporter-test-images"))
VENV_BIN = Path(sys.executable).parent
# Images are the machine's: a name of this test run's own, so that two runs at once (two checkouts,
# or CI beside a developer) never remove or replace each other's
RUN = uuid.uuid4().hex[:8]
SMOKE = f"localhost/vle-smoke-busybox:{RUN}"


def podman_environment(tmp: Path) -> dict:
    """The environment podman needs here. This machine: crun cannot run under cgroup v1 hybrid, and
    the hard ulimits are lower than podman's defaults (see shared/machine-notes.md)."""
    conf = tmp / "containers.conf"
    conf.write_text('[containers]\ndefault_ulimits = ["nofile=20000:20000", "nproc=32768:32768"]\n'
                    '[engine]\nruntime = "runc"\n')
    return {**os.environ, "CONTAINERS_CONF": str(conf)}


def _busybox_rootfs(tmp: Path, binaries: dict[str, str] | None = None) -> Path:
    root = tmp / f"rootfs-{len(list(tmp.glob('rootfs-*')))}"
    for d in ("bin", "etc", "tmp", "lib/x86_64-linux-gnu", "lib64"):
        (root / d).mkdir(parents=True, exist_ok=True)
    shutil.copy("/bin/busybox", root / "bin" / "busybox")
    for applet in ("sh", "wget", "true", "ls", "cat", "sleep", "rm"):
        (root / "bin" / applet).symlink_to("busybox")
    for src, dst in (binaries or {}).items():
        target = root / dst.lstrip("/")
        target.parent.mkdir(parents=True, exist_ok=True)
        if Path(src).is_dir():
            shutil.copytree(src, target)
        else:
            shutil.copy(src, target)
    if binaries:
        for lib in ("/lib/x86_64-linux-gnu/libc.so.6", "/lib64/ld-linux-x86-64.so.2"):
            shutil.copy(lib, root / lib.lstrip("/"))
    (root / "etc" / "passwd").write_text("root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/nonexistent:/bin/false\n")
    (root / "etc" / "group").write_text("root:x:0:\nnogroup:x:65534:\n")
    return root


def _import(root: Path, tag: str, change: str, env) -> None:
    tar = subprocess.Popen(["tar", "-C", str(root), "-c", "."], stdout=subprocess.PIPE)
    r = subprocess.run(["podman", "import", "--change", change, "-", tag], stdin=tar.stdout, env=env,
                       capture_output=True, text=True, timeout=300)
    tar.wait()
    assert r.returncode == 0, r.stderr


def _run(cmd, env, timeout=600, check=True, **kw):
    r = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=timeout, **kw)
    if check and r.returncode != 0:
        raise AssertionError(f"{' '.join(map(str, cmd))} exited {r.returncode}:\n{r.stdout[-3000:]}\n{r.stderr[-3000:]}")
    return r


# Session-wide, registered once by tests/conftest.py: tests/test_compose.py and tests/test_quadlet.py
# run the same images (a fixture imported into two test modules would be built once for each).
@pytest.fixture(scope="session")
def podman_env(tmp_path_factory):
    if not shutil.which("podman"):
        pytest.skip("podman not installed")
    tmp = tmp_path_factory.mktemp("podman")
    env = {**podman_environment(tmp), "PATH": f"{VENV_BIN}:{os.environ['PATH']}"}
    busybox = _busybox_rootfs(tmp)
    _import(busybox, SMOKE, 'CMD ["/bin/sh"]', env)
    try:
        r = _run(["podman", "run", "--rm", "--network=host", SMOKE, "/bin/true"], env,
                 check=False)
        if r.returncode != 0:
            pytest.skip(f"containers cannot run here: {r.stderr.strip().splitlines()[-1] if r.stderr.strip() else r.returncode}")
        yield env, tmp
    finally:
        _run(["podman", "rmi", "-f", SMOKE], env, check=False)


def _python_base(env) -> None:
    """docker.io/library/python:3.11-slim stand-in: Debian bookworm's Python, pip allowed system-wide."""
    tarball = CACHE / "python-3.11-slim-standin.tar"
    if not tarball.exists():
        if not shutil.which("debootstrap"):
            pytest.skip("debootstrap not installed: no Python base image can be made")
        CACHE.mkdir(parents=True, exist_ok=True)
        # the cache is the machine's: two test runs at once (two checkouts) must not debootstrap into
        # one folder together (one's chroot found the other's half-made system and failed)
        with open(CACHE / ".build.lock", "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            if not tarball.exists():
                _make_python_base(env, tarball)
    with open(tarball, "rb") as f:
        r = subprocess.run(["podman", "import", "--change", 'CMD ["python3"]', "-", UPSTREAM["docker.io/library/python:3.11-slim"]],
                           stdin=f, env=env, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr


def _make_python_base(env, tarball: Path) -> None:
    """Debootstrap the stand-in's system and tar it (a few minutes; once per machine)."""
    root = CACHE / "python-rootfs"
    shutil.rmtree(root, ignore_errors=True)
    _run(["debootstrap", "--variant=minbase", "--include=python3,python3-pip", "bookworm", str(root),
          "http://deb.debian.org/debian"], env, timeout=900)
    (root / "usr/lib/python3.11/EXTERNALLY-MANAGED").unlink(missing_ok=True)
    for name, target in (("python", "python3"), ("pip", "pip3")):
        link = root / "usr/bin" / name
        if not link.exists():
            link.symlink_to(target)
    _run(["tar", "-C", str(root), "-cf", str(tarball) + ".part", "."], env, timeout=300)
    os.replace(str(tarball) + ".part", tarball)
    shutil.rmtree(root, ignore_errors=True)


# Stand-ins live under names of their own, never an upstream one: a user who ran the tests and then
# the stack must get the real images (compose pulls only what is missing). compose.yaml and the
# Containerfile are rewritten to these names in temporary copies; every image is removed afterwards.
UPSTREAM = {
    "docker.io/prom/prometheus:v2.55.1": f"localhost/vle-test-prometheus:standin-{RUN}",
    "docker.io/prom/alertmanager:v0.27.0": f"localhost/vle-test-alertmanager:standin-{RUN}",
    "docker.io/library/python:3.11-slim": f"localhost/vle-test-python:standin-{RUN}",
    "localhost/vllm-log-exporter:latest": f"localhost/vle-test-exporter:{RUN}",
}
EXPORTER = UPSTREAM["localhost/vllm-log-exporter:latest"]


def standin_names(text: str) -> str:
    for upstream, ours in UPSTREAM.items():
        text = text.replace(upstream, ours)
    return text


@pytest.fixture(scope="session")
def images(podman_env):
    env, tmp = podman_env
    made = []
    try:
        prom = _busybox_rootfs(tmp, {"/usr/bin/prometheus": "/bin/prometheus", "/usr/bin/promtool": "/bin/promtool",
                                     "/usr/share/prometheus/web": "/usr/share/prometheus/web"})
        _import(prom, UPSTREAM["docker.io/prom/prometheus:v2.55.1"], 'ENTRYPOINT ["/bin/prometheus"]', env)
        made.append(UPSTREAM["docker.io/prom/prometheus:v2.55.1"])
        # Debian's build reads its notification templates from /usr/share/prometheus/alertmanager.
        am = _busybox_rootfs(tmp, {"/usr/bin/prometheus-alertmanager": "/bin/alertmanager", "/usr/bin/amtool": "/bin/amtool",
                                   "/usr/share/prometheus/alertmanager": "/usr/share/prometheus/alertmanager"})
        _import(am, UPSTREAM["docker.io/prom/alertmanager:v0.27.0"], 'ENTRYPOINT ["/bin/alertmanager"]', env)
        made.append(UPSTREAM["docker.io/prom/alertmanager:v0.27.0"])
        _python_base(env)
        made.append(UPSTREAM["docker.io/library/python:3.11-slim"])
        # The repo's own Containerfile on the stand-in base; PyPI is reached through this machine's
        # TLS proxy, hence the CA bundle.
        containerfile = tmp / "Containerfile"
        containerfile.write_text(standin_names((ROOT / "Containerfile").read_text()))
        # --layers=false: no intermediate images left behind to clean up
        _run(["podman", "build", "--network=host", "--pull=never", "--layers=false",
              "-v", "/etc/ssl/certs/ca-certificates.crt:/etc/ssl/certs/ca-certificates.crt:ro",
              "-t", EXPORTER, "-f", str(containerfile), str(ROOT)], env, timeout=900)
        made.append(EXPORTER)
        yield env, tmp
    finally:
        _run(["podman", "rmi", "-f", *made], env, check=False)
