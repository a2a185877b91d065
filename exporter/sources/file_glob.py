"""A glob of log files, as Kubernetes nodes keep them: ``/var/log/pods/*_vllm-*/*/*.log``.

kubelet's layout is ``/var/log/pods/<namespace>_<pod>_<uid>/<container>/<restart>.log``. Pods come
and go, a restarted container writes a new ``<restart+1>.log``, and kubelet rotates by renaming
``0.log`` to ``0.log.<stamp>`` (later gzipped) and opening a new ``0.log``. So the glob is looked
at again every few seconds: each file that matches is followed by a file source of its own (which
already reads a renamed file to its end before the new one), a file that appears later is read
from its first line, and one that is gone for two looks is let go once it has been read to its end.

The ``server`` label of each file is ``<namespace>/<pod>`` (pod names repeat across namespaces: a
StatefulSet's ``vllm-0`` in two of them), the file's stem outside that layout.

What a look finds is checked, since the directories belong to every tenant on the node and the
exporter reads them as uid 0:

- A match is followed only if its real path (every symbolic link resolved) stays inside the glob's
  own directory, the part of the pattern before its first wildcard: a link out of the pods tree
  (to ``/etc/shadow``, say) is refused. kubelet's own links, ``/var/log/containers/<pod>_<namespace>_
  <container>-<id>.log -> /var/log/pods/...``, are kept: for a glob under a directory named
  ``containers`` its sibling ``pods`` counts as inside too. The file then followed is the real path,
  and its pod is read from there.
- A directory the glob must look into but cannot list (permission denied) is reported, not passed
  over in silence: glob.glob would skip it and its pods would be invisible.
"""

from __future__ import annotations

import errno
import fnmatch
import glob
import os
import re
import stat
from dataclasses import dataclass, field
from pathlib import Path

from exporter.config.settings import _NAME

# Kubernetes names: a namespace and a container are DNS labels, a pod name a DNS subdomain (up to
# 253 characters, so no cut: two long Deployment pods differ only in their last characters).
_DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$")
_DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?$")


def is_glob(path: str | None) -> bool:
    return bool(path) and glob.has_magic(path)


def _pod_dir(parts: tuple[str, ...]) -> tuple[str, str] | None:
    """(namespace, pod) of a ``<namespace>_<pod>_<uid>`` directory name. Kubernetes names hold no
    "_", so its three parts are unambiguous."""
    fields = parts[-1].split("_") if parts else []
    if len(fields) == 3 and all(fields) and _DNS_LABEL.match(fields[0]) and _DNS_SUBDOMAIN.match(fields[1]):
        return fields[0], fields[1]
    return None


def server_for(path: str) -> str:
    pod = pod_of(path)
    if pod is not None:
        return f"{pod[0]}/{pod[1]}"
    stem = Path(path).name.split(".")[0]
    return stem if _NAME.match(stem) else "vllm"


def pod_of(path: str) -> tuple[str, str, str] | None:
    """(namespace, pod, container) of a file in kubelet's layout, else None."""
    parts = Path(path).parts
    if len(parts) >= 3:
        ns_pod = _pod_dir(parts[:-2])
        if ns_pod is not None and _DNS_LABEL.match(parts[-2]):
            return ns_pod[0], ns_pod[1], parts[-2]
    return None


def server_of_directory(path: str) -> str | None:
    """The server whose files an unreadable directory hides: a pod's directory, or one of its
    containers' (None for any other directory)."""
    parts = Path(path).parts
    for tail in (parts, parts[:-1]):
        ns_pod = _pod_dir(tail)
        if ns_pod is not None:
            return f"{ns_pod[0]}/{ns_pod[1]}"
    return None


def base_directory(pattern: str) -> str:
    """The part of the pattern before its first wildcard: the directory a glob reads."""
    parts = os.path.abspath(pattern).split(os.sep)
    fixed = []
    for part in parts[:-1]:
        if glob.has_magic(part):
            break
        fixed.append(part)
    return os.sep.join(fixed) or os.sep


def roots(pattern: str) -> tuple[str, ...]:
    """Where a match's real path may lie: the glob's own directory and, under kubelet's
    ``/var/log/containers`` (links into ``/var/log/pods``), its sibling ``pods``."""
    base = base_directory(pattern)
    out = [os.path.realpath(base)]
    if os.path.basename(base) == "containers":
        out.append(os.path.realpath(os.path.join(os.path.dirname(base), "pods")))
    return tuple(out)


def inside(real: str, allowed: tuple[str, ...]) -> bool:
    return any(real == r or real.startswith(r.rstrip(os.sep) + os.sep) for r in allowed)


@dataclass
class Look:
    """One look at a glob: the files to follow (match -> real path), links refused (match -> where
    they point), and the directories that could not be listed (directory -> why)."""

    files: dict[str, str] = field(default_factory=dict)
    refused: dict[str, str] = field(default_factory=dict)
    unreadable: dict[str, str] = field(default_factory=dict)


_GONE = (errno.ENOENT, errno.ENOTDIR)  # removed while we looked (a pod deleted): not a problem


def look(pattern: str) -> Look:
    """glob.glob's matches (hidden names only for a pattern part that starts with "."), with the
    checks above."""
    out = Look()
    parts = os.path.abspath(pattern).split(os.sep)
    base = base_directory(pattern)
    rest = parts[len(base.split(os.sep)) if base != os.sep else 1:]
    allowed = roots(pattern)
    level = [base]
    for i, part in enumerate(rest):
        last = i == len(rest) - 1
        found = []
        for d in level:
            if not glob.has_magic(part):
                p = os.path.join(d, part)
                if os.path.lexists(p):
                    found.append(p)
                continue
            try:
                with os.scandir(d) as it:
                    names = [e.name for e in it]
            except OSError as e:
                if e.errno not in _GONE:
                    out.unreadable[d] = e.strerror or str(e)
                continue
            hidden_ok = part.startswith(".")
            found += [os.path.join(d, n) for n in sorted(names)
                      if fnmatch.fnmatchcase(n, part) and (hidden_ok or not n.startswith("."))]
        if not last:  # a directory linked out of the tree is not looked into either
            kept = []
            for p in found:
                real = os.path.realpath(p)
                if inside(real, allowed):
                    kept.append(p)
                else:
                    out.refused[p] = real
            found = kept
        level = found
    seen: set[str] = set()
    for path in level:
        try:
            real = os.path.realpath(path, strict=True)
            st = os.stat(real)
        except OSError as e:
            if e.errno in (errno.EACCES, errno.EPERM):
                out.unreadable[os.path.dirname(path)] = e.strerror or str(e)
            continue
        if not inside(real, allowed):
            out.refused[path] = real
        elif stat.S_ISREG(st.st_mode) and real not in seen:
            seen.add(real)
            out.files[path] = real
    return out


def matches(pattern: str) -> list[str]:
    """The files a glob follows (their real paths), sorted."""
    return sorted(look(pattern).files.values())
