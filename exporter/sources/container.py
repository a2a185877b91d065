"""Follow a container's log through the Docker-compatible HTTP API on a unix socket.

Works with podman (``podman system service``, socket ``/run/podman/podman.sock``) and docker
(``/var/run/docker.sock``). ``GET /containers/{name}/logs?follow=1&stdout=1&stderr=1&timestamps=1``;
a container without a TTY sends the 8-byte multiplexed framing (stream byte, three zero bytes,
big-endian payload length), one with a TTY sends the raw stream. When the stream ends (container
stopped or restarted, socket gone) the source reconnects with capped backoff, asking only for lines
since the last timestamp seen and skipping the ones it already passed on.

What was seen against the real podman 4.3 API, and what it takes:

- ``since`` is whole seconds, and podman's stamps are too, so a reconnect replays the whole second
  of the last line passed on. Within one second the API does not keep stdout and stderr in the order
  they were written, so the lines of that second already passed on are known by their checksums
  (a multiset), not by their count.
- A stopped container's stream ends at once. Reconnecting then is pointless (nothing can be
  logged) and flaps ``source_up``: the source is down while inspect says the container is not
  running, and backs off (to 10 s); the backoff is reset only once lines arrive again.
- The first connection asks for the lines since the exporter started, not ``tail=0``: a container
  that appears later (or a slow first connection) would lose what it printed before.
- A container removed and created again under the same name has a new ``Id``: its log is new from
  its first line, and nothing of the old one's replay state applies to it.
- The checkpoint (id, last stamp, checksums of that second) goes into the state file, so an
  exporter restart resumes where it stopped.
- A followed log gets no response headers until a line passes ``since``: a running container that
  logs nothing (an idle vLLM, from the exporter's start on) is up, waiting, not a failure.
"""

from __future__ import annotations

import asyncio
import json
import os
import struct
import time
import zlib
from collections import Counter
from datetime import datetime, timezone
from typing import AsyncIterator
from urllib.parse import quote

import aiohttp
import structlog

from exporter.framing.lines import MAX_LINE_BYTES, LineSplitter
from exporter.sources.base import FROM_START_HINT, Backoff, Status

log = structlog.get_logger("vllm_log_exporter.source.container")

DEFAULT_SOCKETS = ("/run/podman/podman.sock", "/var/run/docker.sock")
# A container's inspect answer: tens of KB; one larger is refused (a retry), never held whole
MAX_INSPECT_BYTES = 4 << 20


def stamp_key(stamp: str) -> tuple[int, int] | None:
    """(unix seconds, nanoseconds) of an RFC 3339 stamp as the Docker API prints it, else None.

    Compared as numbers, not text: RFC3339Nano drops trailing zeros, so stamps vary in length.
    """
    if len(stamp) < 20 or stamp[4] != "-" or stamp[10] != "T":
        return None
    try:
        base = datetime.fromisoformat(stamp[:19])
    except ValueError:
        return None
    rest = stamp[19:]
    nanos = 0
    if rest.startswith("."):
        digits = ""
        for ch in rest[1:]:
            if not ch.isdigit():
                break
            digits += ch
        rest = rest[1 + len(digits):]
        nanos = int((digits + "000000000")[:9]) if digits else 0
    offset = 0
    if rest not in ("Z", ""):
        try:
            sign = 1 if rest[0] == "+" else -1
            hh, mm = rest[1:].split(":")
            offset = sign * (int(hh) * 3600 + int(mm) * 60)
        except (ValueError, IndexError):
            return None
    return int(base.replace(tzinfo=timezone.utc).timestamp()) - offset, nanos


def default_socket() -> str:
    for path in DEFAULT_SOCKETS:
        if os.path.exists(path):
            return path
    return DEFAULT_SOCKETS[0]


class Demuxer:
    """The multiplexed stream of a non-TTY container, bytes in, payload bytes out.

    A frame's payload is passed on as it arrives, never held until the frame is complete: a frame
    header may announce up to 4 GiB (one huge line), and the line splitter bounds lines itself."""

    def __init__(self):
        self.buf = b""  # at most a frame header in progress
        self.left = 0  # payload bytes of the current frame still to come
        self.raw = False  # not framed after all: everything passes through

    def feed(self, data: bytes) -> bytes:
        if self.raw:
            return data
        out = []
        buf = self.buf + data if self.buf else data
        i = 0
        while i < len(buf):
            if self.left:
                take = buf[i:i + self.left]
                out.append(take)
                self.left -= len(take)
                i += len(take)
                continue
            if len(buf) - i < 8:
                break
            stream, size = buf[i], struct.unpack(">I", buf[i + 4:i + 8])[0]
            if stream not in (0, 1, 2) or buf[i + 1:i + 4] != b"\0\0\0":
                # Not framed after all: hand the bytes through unchanged.
                self.raw = True
                out.append(buf[i:])
                i = len(buf)
                break
            self.left = size
            i += 8
        self.buf = buf[i:]
        return b"".join(out)


class ContainerSource:
    def __init__(self, name: str, container: str, socket: str | None = None, from_start: bool = False,
                 resume: dict | None = None, backoff: Backoff | None = None, started_at: float | None = None,
                 request_timeout: float = 10.0, max_line: int = MAX_LINE_BYTES):
        self.name = name
        self.max_line = max_line
        # an API that accepts the connection and never answers must not leave the source down in silence
        self.request_timeout = request_timeout
        self.container = container
        self.socket = socket or default_socket()
        self.from_start = from_start
        self.backoff = backoff or Backoff(0.5, 10.0)
        self.started_at = time.time() if started_at is None else started_at
        self.id: str | None = None
        # Where we are in the container's log: the stamp of the newest line passed on, and the
        # checksums of the lines passed on with exactly that stamp.
        self.last_ts: str | None = None
        self._last_key: tuple[int, int] | None = None
        self._seen: Counter = Counter()
        # While replaying after a reconnect: what of the last stamp's second to skip.
        self._skip_key: tuple[int, int] | None = None
        self._skip: Counter = Counter()
        self._read_all = False
        self._resumed_id: str | None = None
        self._quiet_said = False
        if isinstance(resume, dict):
            self._resume(resume)

    def _resume(self, cp: dict) -> None:
        since, seen, cid = cp.get("since"), cp.get("seen"), cp.get("id")
        ok = (isinstance(cid, str) and isinstance(since, list) and len(since) == 2
              and all(isinstance(v, int) and not isinstance(v, bool) and v >= 0 for v in since)
              and isinstance(seen, list) and all(isinstance(v, int) for v in seen))
        if not ok:
            log.warning("state file: container checkpoint malformed, ignored", source=self.name, checkpoint=cp)
            return
        self._resumed_id = cid
        self._last_key = (since[0], since[1])
        self._seen = Counter(seen)

    def checkpoint(self) -> dict | None:
        cid = self.id or self._resumed_id
        if cid is None or self._last_key is None:
            return None
        return {"id": cid, "since": list(self._last_key), "seen": sorted(self._seen.elements())}

    def _logs_url(self) -> str:
        q = "follow=1&stdout=1&stderr=1&timestamps=1"
        if self._read_all:
            pass
        elif self._last_key is not None:
            q += f"&since={self._last_key[0]}"
        elif not self.from_start:
            q += f"&since={int(self.started_at)}"
        return f"http://localhost/containers/{quote(self.container, safe='')}/logs?{q}"

    def _say_start(self) -> None:
        """Where the first connection's reading begins, said once (as _logs_url asked for it)."""
        if getattr(self, "_start_said", False):
            return
        self._start_said = True
        said = {"source": self.name, "container": self.container}
        if self._read_all:
            log.info("reading starts at the container's first line (a new container)", **said)
        elif self._last_key is not None:
            log.info("reading resumes at the saved stamp (state file)", **said, since=self.last_ts or self._last_key[0])
        elif self.from_start:
            log.info("reading starts at the container's first line (from_start)", **said)
        else:
            when = datetime.fromtimestamp(int(self.started_at), tz=timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
            log.info("reading starts at the exporter's start: the container's earlier lines are not read", **said,
                     since=when, hint=FROM_START_HINT)

    def _found(self, cid: str) -> None:
        """Inspect answered with this container id: a new container starts a new log."""
        known = self.id or self._resumed_id
        if known is not None and cid != known:
            log.info("container replaced, reading the new one from its first line", source=self.name,
                     container=self.container, old_id=known[:12], new_id=cid[:12])
            self._last_key, self._seen, self.last_ts = None, Counter(), None
            self._read_all = True
        self.id, self._resumed_id = cid, None
        self._skip_key, self._skip = self._last_key, Counter(self._seen)

    def _keep(self, line: str) -> bool:
        stamp = line.split(" ", 1)[0]
        key = stamp_key(stamp)
        if key is None:
            return True
        sum_ = zlib.crc32(line.encode("utf-8", "surrogateescape"))
        if self._skip_key is not None:
            if key < self._skip_key:
                return False
            if key == self._skip_key:
                if self._skip[sum_] > 0:
                    self._skip[sum_] -= 1
                    return False
            else:
                self._skip_key = None  # past what we had: everything from here is new
                self._skip = Counter()
        if self._last_key is None or key > self._last_key:
            self._last_key, self._seen = key, Counter()
            self.last_ts = stamp
        if key == self._last_key:
            self._seen[sum_] += 1
        return True

    @staticmethod
    def _tidy(lines: list[str], tty: bool) -> list[str]:
        # a terminal turns each newline into CR LF
        return [ln[:-1] if ln.endswith("\r") else ln for ln in lines] if tty else lines

    async def _inspect(self, session) -> dict:
        url = f"http://localhost/containers/{quote(self.container, safe='')}/json"
        async with session.get(url, timeout=aiohttp.ClientTimeout(total=self.request_timeout)) as r:
            if r.status == 404:
                raise LookupError(f"no container named {self.container!r}")
            if r.status != 200:
                raise ConnectionError(f"inspect {self.container}: HTTP {r.status}")
            raw = b""
            while len(raw) <= MAX_INSPECT_BYTES:  # (every body read from the network is bounded)
                chunk = await r.content.read(1 << 16)
                if not chunk:
                    break
                raw += chunk
            if len(raw) > MAX_INSPECT_BYTES:
                raise ConnectionError(f"inspect {self.container}: the answer is over {MAX_INSPECT_BYTES} bytes")
            try:
                info = json.loads(raw)
            except (ValueError, RecursionError):
                info = None
        if not isinstance(info, dict) or not isinstance(info.get("Id"), str):
            raise ConnectionError(f"inspect {self.container}: the answer is not a container ({type(info).__name__})")
        return info

    async def _logs(self, session, running: bool, status: Status):
        """The followed log's response. podman (4.3) sends its headers only once a line passes
        ``since``: for a running container that logs nothing (an idle vLLM) no answer comes. The API
        has just answered the inspect and the container runs, so the source is up, waiting for a
        line; only a container that is not running, or an API that answers nothing, is a failure."""
        get = asyncio.ensure_future(session.get(self._logs_url()))
        try:
            done, _ = await asyncio.wait({get}, timeout=self.request_timeout * 1.5)
            if not done:
                if not running:
                    raise asyncio.TimeoutError
                status.up(True)
                if not self._quiet_said:
                    self._quiet_said = True
                    log.info("container running, its log quiet; waiting for lines", source=self.name,
                             container=self.container)
            return await get
        finally:
            if not get.done():
                get.cancel()

    async def batches(self, status: Status) -> AsyncIterator[list[str]]:
        backoff = self.backoff
        connected_before = False
        last_problem = None
        while True:
            got_lines = False
            try:
                conn = aiohttp.UnixConnector(path=self.socket)
                timeout = aiohttp.ClientTimeout(total=None, sock_connect=self.request_timeout)
                async with aiohttp.ClientSession(connector=conn, timeout=timeout) as session:
                    info = await self._inspect(session)
                    tty = bool((info.get("Config") or {}).get("Tty"))
                    running = bool((info.get("State") or {}).get("Running"))
                    self._found(info["Id"])
                    resp = await self._logs(session, running, status)
                    async with resp as r:
                        if r.status != 200:
                            raise ConnectionError(f"logs {self.container}: HTTP {r.status}")
                        self._say_start()
                        self._read_all = False
                        if running:
                            if connected_before:
                                status.restarted()
                            connected_before = True
                            status.up(True)
                            if last_problem:
                                log.info("container log followed", source=self.name, container=self.container)
                            last_problem = None
                        else:
                            status.up(False)
                            problem = "container is not running"
                            if problem != last_problem:
                                log.info("container is not running; waiting for it", source=self.name,
                                         container=self.container, state=(info.get("State") or {}).get("Status"))
                            last_problem = problem
                        demux = None if tty else Demuxer()
                        split = LineSplitter(self.name, self.max_line, on_cut=getattr(status, "line_cut", None))
                        async for chunk in r.content.iter_any():
                            data = demux.feed(chunk) if demux else chunk
                            lines = [ln for ln in self._tidy(split.feed(data), tty) if self._keep(ln)]
                            if lines:
                                got_lines = True
                                yield lines
                        lines = [ln for ln in self._tidy(split.flush(), tty) if self._keep(ln)]
                        if lines:
                            got_lines = True
                            yield lines
                if running:
                    log.info("container log stream ended", source=self.name, container=self.container)
            except LookupError as e:
                status.up(False)
                if str(e) != last_problem:
                    log.info("container not found; waiting for it", source=self.name, container=self.container)
                last_problem = str(e)
            except (aiohttp.ClientError, ConnectionError, OSError, asyncio.TimeoutError, ValueError) as e:
                status.up(False)
                problem = str(e) or ("no answer within %gs" % self.request_timeout
                                     if isinstance(e, asyncio.TimeoutError) else type(e).__name__)
                if problem != last_problem:
                    log.warning("container log unavailable", source=self.name, container=self.container,
                                socket=self.socket, error=problem)
                last_problem = problem
            if got_lines:
                backoff.reset()
            await backoff.sleep()
