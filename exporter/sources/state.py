"""The optional state file: where each source stopped, so a restart resumes there.

JSON ``{"version": 2, "sources": {"<name>": {"source": "<identity>", "checkpoint": {...}}}}``,
written atomically (temporary file, fsync, rename). The identity (``file:PATH``,
``journald:DIRECTORY:MATCH``, ``container:NAME``) ties a checkpoint to what it was taken from: a
source renamed or pointed elsewhere starts as configured. What a checkpoint holds is each source's
own business (a file's device, inode and offset; the journal's cursor; a container's id and last
stamp). Version 1 files (file sources only) are still read.

A state file that cannot be read is reported and ignored: the sources then start as configured,
and the file is rewritten. One bad entry is dropped with a warning; the others are kept.
"""

from __future__ import annotations

import json
import os
import tempfile

import structlog

log = structlog.get_logger("vllm_log_exporter.state")


def load(path: str) -> dict[str, tuple[str, dict]]:
    """``{source name: (identity, checkpoint)}``."""
    try:
        with open(path, encoding="utf-8") as f:
            data = json.load(f)
    except FileNotFoundError:
        return {}
    except (OSError, ValueError, RecursionError) as e:  # (RecursionError: nested ~1,000 deep, a 2 KB file)
        log.warning("state file unreadable, ignored", path=path, error=f"{type(e).__name__}: {e}"[:300])
        return {}
    sources = data.get("sources") if isinstance(data, dict) else None
    if not isinstance(sources, dict):
        log.warning("state file malformed, ignored", path=path, error="no 'sources' mapping")
        return {}
    out = {}
    for name, s in sources.items():
        if not isinstance(s, dict):
            log.warning("state file entry malformed, dropped", path=path, source=name)
            continue
        if "source" in s and isinstance(s.get("checkpoint"), dict) and isinstance(s["source"], str):
            out[name] = (s["source"], s["checkpoint"])
        elif isinstance(s.get("path"), str):  # version 1
            out[name] = ("file:" + s["path"], {k: s.get(k) for k in ("dev", "ino", "offset")})
        else:
            log.warning("state file entry malformed, dropped", path=path, source=name)
    return out


def save(path: str, checkpoints: dict[str, tuple[str, dict]]) -> None:
    data = {"version": 2, "sources": {
        name: {"source": identity, "checkpoint": cp} for name, (identity, cp) in checkpoints.items()
    }}
    folder = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(prefix=".vllm-log-exporter-state-", dir=folder)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            json.dump(data, f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
