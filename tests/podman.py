"""Podman for tests: the settings this machine needs, and small images made without a registry."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path


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
