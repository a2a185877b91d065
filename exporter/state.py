"""The optional state file: where each file source stopped, so a restart resumes there.

JSON ``{"version": 1, "sources": {"<name>": {"path": ..., "dev": ..., "ino": ..., "offset": ...}}}``,
written atomically (temporary file, fsync, rename). A state file that cannot be read is reported and
ignored: the sources then start as configured, and the file is rewritten.
"""

from __future__ import annotations

import json
import os
import tempfile

import structlog

from exporter.sources.file import Position

log = structlog.get_logger("vllm_log_exporter.state")


def load(path: str) -> dict[str, tuple[str, Position]]:
    try:
        with open(path, encoding="utf-8") as f:
            data = json.load(f)
    except FileNotFoundError:
        return {}
    except (OSError, ValueError) as e:
        log.warning("state file unreadable, ignored", path=path, error=str(e))
        return {}
    out = {}
    try:
        for name, s in (data.get("sources") or {}).items():
            out[name] = (str(s["path"]), Position(int(s["dev"]), int(s["ino"]), int(s["offset"])))
    except (AttributeError, KeyError, TypeError, ValueError) as e:
        log.warning("state file malformed, ignored", path=path, error=str(e))
        return {}
    return out


def save(path: str, positions: dict[str, tuple[str, Position]]) -> None:
    data = {"version": 1, "sources": {
        name: {"path": p, "dev": pos.dev, "ino": pos.ino, "offset": pos.offset} for name, (p, pos) in positions.items()
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
