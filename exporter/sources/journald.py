"""Follow the systemd journal through a ``journalctl -f -o json --all`` child.

``journald:NAME`` matches entries whose unit, container name or syslog identifier is NAME (a unit
without a dot gets ``.service``), which covers a plain systemd service, a Quadlet container and
``podman run --log-driver=journald``. The child is restarted with capped backoff when it exits and
resumes after the last cursor seen, so nothing is read twice or skipped.

``--all`` matters: without it journald hands over messages holding ESC bytes (vLLM's coloured
prefixes) as arrays of byte values and drops long fields. ``MESSAGE`` may still be such an array.
The entry's own timestamp (``__REALTIME_TIMESTAMP``) is put in front of the line in RFC 3339, so
framing takes it over the year-less one vLLM prints.
"""

from __future__ import annotations

import asyncio
import json
from datetime import datetime, timezone
from typing import AsyncIterator

import structlog

from exporter.sources.base import Backoff, Status

log = structlog.get_logger("vllm_log_exporter.source.journald")


def journal_matches(name: str) -> list[str]:
    unit = name if "." in name else f"{name}.service"
    return [f"_SYSTEMD_UNIT={unit}", "+", f"CONTAINER_NAME={name}", "+", f"SYSLOG_IDENTIFIER={name}"]


def entry_to_lines(entry: dict) -> list[str]:
    msg = entry.get("MESSAGE")
    if isinstance(msg, list):
        try:
            msg = bytes(int(b) & 0xFF for b in msg).decode("utf-8", "replace")
        except (TypeError, ValueError):
            return []
    if not isinstance(msg, str):
        return []
    prefix = ""
    ts = entry.get("__REALTIME_TIMESTAMP")
    try:
        us = int(ts)
        dt = datetime.fromtimestamp(us // 1_000_000, tz=timezone.utc)
        prefix = f"{dt:%Y-%m-%dT%H:%M:%S}.{us % 1_000_000:06d}Z "
    except (TypeError, ValueError, OverflowError, OSError):
        pass
    return [prefix + part for part in msg.split("\n")]


class JournaldSource:
    def __init__(self, name: str, match: str, journalctl: str = "journalctl", from_start: bool = False):
        self.name = name
        self.match = match
        self.journalctl = journalctl
        self.from_start = from_start
        self.cursor: str | None = None

    def command(self) -> list[str]:
        cmd = [self.journalctl, "-f", "-o", "json", "--all", "--no-pager"]
        if self.cursor:
            cmd.append(f"--after-cursor={self.cursor}")
        elif not self.from_start:
            cmd += ["-n", "0"]
        return cmd + journal_matches(self.match)

    async def batches(self, status: Status) -> AsyncIterator[list[str]]:
        backoff = Backoff()
        started = False
        while True:
            try:
                proc = await asyncio.create_subprocess_exec(
                    *self.command(), stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
                    limit=1 << 22,
                )
            except OSError as e:
                log.error("cannot start journalctl", source=self.name, error=str(e))
                status.up(False)
                await backoff.sleep()
                continue
            if started:
                status.restarted()
            started = True
            status.up(True)
            taken = 0
            try:
                assert proc.stdout is not None
                while True:
                    try:
                        raw = await proc.stdout.readline()
                    except ValueError:  # an entry beyond the stream limit: skip it
                        log.warning("journal entry too long, skipped", source=self.name)
                        continue
                    if not raw:
                        break
                    backoff.reset()
                    try:
                        entry = json.loads(raw)
                    except ValueError:
                        log.warning("journalctl printed a line that is not JSON", source=self.name)
                        continue
                    if not isinstance(entry, dict):
                        continue
                    if isinstance(entry.get("__CURSOR"), str):
                        self.cursor = entry["__CURSOR"]
                    lines = entry_to_lines(entry)
                    if lines:
                        yield lines
                    taken += 1
                    if taken % 256 == 0:
                        await asyncio.sleep(0)  # a journal backlog must not starve /metrics
            finally:
                if proc.returncode is None:
                    proc.kill()
                err = b""
                if proc.stderr is not None:
                    try:
                        err = await asyncio.wait_for(proc.stderr.read(2000), 1)
                    except (asyncio.TimeoutError, OSError):
                        pass
                await proc.wait()
            status.up(False)
            log.warning("journalctl exited", source=self.name, returncode=proc.returncode,
                        stderr=err.decode("utf-8", "replace").strip()[:500])
            await backoff.sleep()
