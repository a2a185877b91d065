"""Follow the systemd journal through a ``journalctl -f --no-tail -o json --all --merge`` child.

``journald:NAME`` matches entries whose system unit, user unit, container name or syslog identifier
is NAME (a unit without a dot gets ``.service``), which covers a plain systemd service, a rootful or
rootless Quadlet container and ``podman run --log-driver=journald``; and what systemd itself logged
about that unit (its exits, results and restarts: exporter.parsers.supervisor). ``directory`` (``-D``) names
the journal's location, e.g. the host journal mounted into the exporter's container.

Where reading begins, and why each flag is there (every point was seen with the real journalctl 252):

- ``-f`` alone implies ``-n 10``: after any restart only the last 10 entries written meanwhile
  would arrive. ``--no-tail`` always.
- Starting "at the end" is not ``-n 0`` (entries written between our start and journalctl's are
  lost): the newest *matching* entry's cursor is taken first (``-n 1``) and followed from with
  ``--after-cursor``. The cursor must come from a matching entry: given a cursor of an entry the
  matches exclude, journalctl skips the first matching entry after it. With no matching entry yet,
  everything that comes later is new, so the follow starts at the beginning.
- ``-f`` also limits the output to the current boot; ``--merge`` lifts that, so a cursor saved
  before a reboot still resumes with the entries written after it.
- Every later start (journalctl exited, the exporter restarted with a state file) resumes after the
  last cursor passed on, so nothing is read twice or skipped.

``MESSAGE`` holding an ESC byte (vLLM's coloured prefixes) or invalid UTF-8 arrives as an array of
byte values, with or without ``--all``; ``--all`` is still needed, for without it a field over 64 KiB
arrives as ``null``. The entry's own timestamp (``__REALTIME_TIMESTAMP``) is put in front of the
line in RFC 3339, so framing takes it over the year-less one vLLM prints.
"""

from __future__ import annotations

import asyncio
import json
import time
from datetime import datetime, timezone
from typing import AsyncIterator

import structlog

from exporter.framing.lines import MAX_LINE_BYTES, Cut, cut_text, record_lines, tail_size
from exporter.framing.text import text_lines
from exporter.sources.base import FROM_START_HINT, Backoff, Status

log = structlog.get_logger("vllm_log_exporter.source.journald")

# A child that ran this long was a working follow, not one failing at start: its exit does not
# count towards the backoff.
HEALTHY_RUN_SECONDS = 10.0
NO_FILES = "No journal files were found"


def journal_matches(name: str) -> list[str]:
    """The unit's own lines, and what its service manager said of it: PID 1 logs a system unit's exits
    and restarts ("vllm.service: Main process exited, ...") with ``UNIT=`` (as ``journalctl -u`` adds
    ``UNIT=... _PID=1``), a user manager a user unit's (rootless Quadlet) with ``USER_UNIT=``."""
    unit = name if "." in name else f"{name}.service"
    return [f"_SYSTEMD_UNIT={unit}", "+", f"_SYSTEMD_USER_UNIT={unit}", "+", f"CONTAINER_NAME={name}", "+",
            f"SYSLOG_IDENTIFIER={name}", "+", f"UNIT={unit}", "_PID=1", "+", f"USER_UNIT={unit}"]


def entry_to_lines(entry: dict, max_line: int = MAX_LINE_BYTES, on_cut=None) -> list[str]:
    """An entry's MESSAGE as lines, each after the entry's time. A message longer than ``max_line``
    is cut (its first and last parts), one of more than MAX_RECORD_LINES lines keeps the first and
    last half of them; ``on_cut(message_size)`` then."""
    msg = entry.get("MESSAGE")
    size = len(msg) if isinstance(msg, (list, str)) else 0
    if isinstance(msg, list):
        try:
            if len(msg) > max_line:
                t = tail_size(max_line)
                msg = msg[:max_line - t] + msg[-t - 1:]
            msg = bytes(int(b) & 0xFF for b in msg).decode("utf-8", "replace")
        except (TypeError, ValueError):
            return []
    if not isinstance(msg, str):
        return []
    msg = text_lines(msg)
    cut = size > max_line
    if cut:
        msg = cut_text(msg, max_line)
    parts, more = record_lines(msg)
    if (cut or more) and on_cut is not None:
        on_cut(size)
    prefix = ""
    ts = entry.get("__REALTIME_TIMESTAMP")
    try:
        us = int(ts)
        dt = datetime.fromtimestamp(us // 1_000_000, tz=timezone.utc)
        prefix = f"{dt:%Y-%m-%dT%H:%M:%S}.{us % 1_000_000:06d}Z "
    except (TypeError, ValueError, OverflowError, OSError):
        pass
    if entry.get("SYSLOG_IDENTIFIER") == "systemd" and ("UNIT" in entry or "USER_UNIT" in entry):
        # the service manager's word on the unit (its exits, restarts, stop job): tagged as `journalctl -o
        # short` shows it, so that a program's own "Stopping ..." is not taken for systemd's
        pid = entry.get("_PID")
        prefix += f"systemd[{pid if isinstance(pid, str) and pid.isdigit() else 1}]: "
    if cut or more:  # (counted here: a JSON record in them is not counted again)
        return [Cut(prefix + part) for part in parts]
    return [prefix + part for part in parts]


class JournaldSource:
    def __init__(self, name: str, match: str, journalctl: str = "journalctl", from_start: bool = False,
                 directory: str | None = None, resume: dict | None = None, backoff: Backoff | None = None,
                 max_line: int = MAX_LINE_BYTES):
        self.name = name
        self.match = match
        self.journalctl = journalctl
        self.directory = directory
        self.backoff = backoff or Backoff()
        self.max_line = max_line
        # one JSON entry from journalctl: its message (escaped, up to 6 bytes a byte) and its fields
        self._limit = max(1 << 22, 4 * max_line)
        self.cursor: str | None = None
        if isinstance(resume, dict) and isinstance(resume.get("cursor"), str) and resume["cursor"]:
            self.cursor = resume["cursor"]
        # With no cursor: read from the beginning (True) or first take the tail's cursor (False).
        self._from_beginning = from_start
        self._from_start = from_start
        self._start_said = False  # where reading begins is said once, at the first start

    def _say_start(self, at: str) -> None:
        """``at``: "tail" (after the newest matching entry), "cursor" (saved), "start" or "empty"."""
        if self._start_said:
            return
        self._start_said = True
        said = {"source": self.name, "unit": self.match}
        if at == "tail":
            log.info("reading starts after the unit's newest journal entry: the entries already there are "
                     "not read", **said, hint=FROM_START_HINT)
        elif at == "cursor":
            log.info("reading resumes after the saved journal cursor (state file)", **said)
        elif at == "start":
            log.info("reading starts at the unit's first journal entry (from_start)", **said)
        else:
            log.info("reading starts at the unit's first journal entry: the journal holds none yet", **said)

    def checkpoint(self) -> dict | None:
        return {"cursor": self.cursor} if self.cursor else None

    def _base(self) -> list[str]:
        cmd = [self.journalctl, "--no-pager", "--merge"]
        if self.directory:
            cmd.append(f"--directory={self.directory}")
        return cmd

    def command(self) -> list[str]:
        cmd = self._base() + ["-f", "--no-tail", "-o", "json", "--all"]
        if self.cursor:
            cmd.append(f"--after-cursor={self.cursor}")
        return cmd + journal_matches(self.match)

    def tail_command(self) -> list[str]:
        return self._base() + ["-n", "1", "-o", "json"] + journal_matches(self.match)

    def header_command(self) -> list[str]:
        return self._base() + ["--header"]

    async def _run(self, cmd: list[str], want_stdout: bool) -> tuple[int, bytes, str]:
        proc = await asyncio.create_subprocess_exec(
            *cmd, stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE if want_stdout else asyncio.subprocess.DEVNULL,
            stderr=asyncio.subprocess.PIPE, limit=1 << 22)
        try:
            out, err = await asyncio.wait_for(proc.communicate(), 60)
        except asyncio.TimeoutError:
            proc.kill()
            await proc.wait()
            return -1, b"", "timed out after 60 s"
        return proc.returncode, out or b"", err.decode("utf-8", "replace").strip()[:500]

    async def _where_to_start(self) -> str | None:
        """Settle where the follow begins when there is no cursor; None when ready, else why not."""
        rc, out, err = await self._run(self.header_command(), want_stdout=False)
        if NO_FILES in err:
            # Nothing is there yet, so whatever appears later is new.
            self._from_beginning = True
            where = self.directory or "/var/log/journal and /run/log/journal"
            return f"no journal files in {where} (is the journal mounted into the exporter?)"
        if self.cursor or self._from_beginning:
            self._say_start("cursor" if self.cursor else "start" if self._from_start else "empty")
            return None
        rc, out, err = await self._run(self.tail_command(), want_stdout=True)
        if rc != 0:
            return f"journalctl exited {rc}: {err}"
        for raw in reversed(out.splitlines()):
            try:
                entry = json.loads(raw)
            except ValueError:
                continue
            if isinstance(entry, dict) and isinstance(entry.get("__CURSOR"), str):
                self.cursor = entry["__CURSOR"]
                self._say_start("tail")
                return None
        self._from_beginning = True  # no matching entry yet: all that comes is new
        self._say_start("empty")
        return None

    async def batches(self, status: Status) -> AsyncIterator[list[str]]:
        backoff = self.backoff
        started = False
        last_problem = None
        while True:
            try:
                problem = await self._where_to_start()
            except OSError as e:
                problem = f"cannot start journalctl: {e}"
            if problem:
                status.up(False)
                if problem != last_problem:
                    log.warning("journal not readable", source=self.name, problem=problem)
                last_problem = problem
                await backoff.sleep()
                continue
            try:
                proc = await asyncio.create_subprocess_exec(
                    *self.command(), stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.PIPE,
                    stderr=asyncio.subprocess.PIPE, limit=self._limit,
                )
            except OSError as e:
                log.error("cannot start journalctl", source=self.name, error=str(e))
                status.up(False)
                await backoff.sleep()
                continue
            if started:
                status.restarted()
            started = True
            last_problem = None
            status.up(True)
            began = time.monotonic()
            taken = 0
            try:
                assert proc.stdout is not None
                while True:
                    try:
                        raw = await proc.stdout.readline()
                    except ValueError:  # an entry beyond the stream limit: skip it
                        log.warning("journal entry too long, skipped", source=self.name, limit_bytes=self._limit)
                        continue
                    if not raw:
                        break
                    try:
                        entry = json.loads(raw)
                    except ValueError:
                        log.warning("journalctl printed a line that is not JSON", source=self.name)
                        continue
                    if not isinstance(entry, dict):
                        continue
                    lines = entry_to_lines(entry, self.max_line, getattr(status, "line_cut", None))
                    # The cursor moves with the lines it stands for: a checkpoint taken while the
                    # consumer works on them (at the next await) already counts them as passed on.
                    if isinstance(entry.get("__CURSOR"), str):
                        self.cursor = entry["__CURSOR"]
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
            text = err.decode("utf-8", "replace").strip()[:500]
            if "Failed to seek to cursor" in text:
                log.warning("saved journal cursor not found, starting at the journal's end",
                            source=self.name, cursor=self.cursor)
                self.cursor = None
            log.warning("journalctl exited", source=self.name, returncode=proc.returncode, stderr=text)
            if time.monotonic() - began >= HEALTHY_RUN_SECONDS:
                backoff.reset()
            await backoff.sleep()
