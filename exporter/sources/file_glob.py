"""A glob of log files, as Kubernetes nodes keep them: ``/var/log/pods/*_vllm-*/*/*.log``.

kubelet's layout is ``/var/log/pods/<namespace>_<pod>_<uid>/<container>/<restart>.log``. Pods come
and go, a restarted container writes a new ``<restart+1>.log``, and kubelet rotates by renaming
``0.log`` to ``0.log.<stamp>`` (later gzipped) and opening a new ``0.log``. So the glob is looked
at again every few seconds: each file that matches is followed by a file source of its own (which
already reads a renamed file to its end before the new one), a file that appears later is read
from its first line, and one that is gone for two looks is let go once it has been read to its end.
The ``server`` label of each file is its pod's name (the file's stem outside that layout).
"""

from __future__ import annotations

import glob
import os
from pathlib import Path

from exporter.config.settings import _NAME


def is_glob(path: str | None) -> bool:
    return bool(path) and glob.has_magic(path)


def server_for(path: str) -> str:
    parts = Path(path).parts
    if len(parts) >= 3:
        pod_dir = parts[-3].split("_")
        if len(pod_dir) == 3 and all(pod_dir):  # namespace_pod_uid: none of the three holds "_"
            name = pod_dir[1]
            return name[:64] if _NAME.match(name[:64]) else "pod"
    stem = Path(path).name.split(".")[0]
    return stem if _NAME.match(stem) else "vllm"


def pod_of(path: str) -> tuple[str, str, str] | None:
    """(namespace, pod, container) of a file in kubelet's layout, else None. Kubernetes names hold no
    "_" (DNS labels), so the directory's three parts are unambiguous."""
    parts = Path(path).parts
    if len(parts) >= 3:
        pod_dir = parts[-3].split("_")
        if len(pod_dir) == 3 and all(pod_dir):
            ns, pod, container = pod_dir[0][:64], pod_dir[1][:64], parts[-2][:64]
            if all(_NAME.match(x) for x in (ns, pod, container)):
                return ns, pod, container
    return None


def matches(pattern: str) -> list[str]:
    return sorted(p for p in glob.glob(pattern) if os.path.isfile(p))
