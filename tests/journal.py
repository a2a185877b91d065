"""Real journal files for tests: entries in Journal Export Format fed to systemd's own
``systemd-journal-remote``, which writes the same files journald does; read by the real journalctl."""

from __future__ import annotations

import os
import shutil
import struct
import subprocess
import time
from pathlib import Path

JOURNAL_REMOTE = "/lib/systemd/systemd-journal-remote"


def have_journal_tools() -> bool:
    return os.path.exists(JOURNAL_REMOTE) and shutil.which("journalctl") is not None


def boot_id() -> str:
    # `journalctl -f` shows only the current boot's entries unless --merge: write them as this boot's,
    # as journald on this host would.
    return Path("/proc/sys/kernel/random/boot_id").read_text().strip().replace("-", "")


def export_entry(message: str | bytes, **fields: str) -> bytes:
    out = []
    for key, val in fields.items():
        out.append(f"{key}={val}\n".encode())
    raw = message.encode() if isinstance(message, str) else message
    if b"\n" in raw or any(b < 32 and b not in (9,) for b in raw) or not _utf8(raw):
        # the binary form: KEY, newline, little-endian 64-bit length, the bytes, newline
        out.append(b"MESSAGE\n" + struct.pack("<Q", len(raw)) + raw + b"\n")
    else:
        out.append(b"MESSAGE=" + raw + b"\n")
    return b"".join(out) + b"\n"


def _utf8(raw: bytes) -> bool:
    try:
        raw.decode("utf-8")
        return True
    except UnicodeDecodeError:
        return False


class Journal:
    """A journal directory; every ``write`` appends entries to the same file."""

    def __init__(self, directory: Path):
        self.dir = directory
        self.dir.mkdir(parents=True, exist_ok=True)
        self.file = self.dir / "remote.journal"
        self.boot = boot_id()

    def write(self, messages, unit: str = "grandpa.service", field: str = "_SYSTEMD_UNIT", **extra: str) -> None:
        data = []
        for m in messages:
            us = time.time_ns() // 1000
            data.append(export_entry(m, __REALTIME_TIMESTAMP=str(us), __MONOTONIC_TIMESTAMP=str(us),
                                     _BOOT_ID=self.boot, **{field: unit}, **extra))
        r = subprocess.run([JOURNAL_REMOTE, f"--output={self.file}", "--split-mode=none", "-"],
                           input=b"".join(data), capture_output=True, timeout=30)
        assert r.returncode == 0, r.stderr.decode()

    def count(self, *matches: str) -> int:
        r = subprocess.run(["journalctl", "--no-pager", "--merge", f"--directory={self.dir}", "-o", "cat", *matches],
                           capture_output=True, timeout=30)
        return len(r.stdout.splitlines())


def access(i: int) -> str:
    """A numbered vLLM access-log line: the number travels in the client port."""
    return f'(APIServer pid=53) INFO:     127.0.0.1:{i} - "GET /v1/models HTTP/1.1" 200 OK'


def numbers(lines) -> list[int]:
    out = []
    for ln in lines:
        if '"GET /v1/models' in ln:
            out.append(int(ln.split("127.0.0.1:", 1)[1].split(" ", 1)[0]))
    return out
