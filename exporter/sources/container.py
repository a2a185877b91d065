"""Follow a container's log through the Docker-compatible HTTP API on a unix socket.

Works with podman (``podman system service``, socket ``/run/podman/podman.sock``) and docker
(``/var/run/docker.sock``). ``GET /containers/{name}/logs?follow=1&stdout=1&stderr=1&timestamps=1``;
a container without a TTY sends the 8-byte multiplexed framing (stream byte, three zero bytes,
big-endian payload length), one with a TTY sends the raw stream. When the stream ends (container
stopped or restarted, socket gone) the source reconnects with capped backoff, asking only for lines
since the last timestamp seen and skipping the ones it already passed on.
"""

from __future__ import annotations

import asyncio
import os
import struct
from datetime import datetime, timezone
from typing import AsyncIterator
from urllib.parse import quote

import aiohttp
import structlog

from exporter.lines import LineSplitter
from exporter.sources.base import Backoff, Status

log = structlog.get_logger("vllm_log_exporter.source.container")

DEFAULT_SOCKETS = ("/run/podman/podman.sock", "/var/run/docker.sock")


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
    """The multiplexed stream of a non-TTY container, bytes in, payload bytes out."""

    def __init__(self):
        self.buf = b""

    def feed(self, data: bytes) -> bytes:
        self.buf += data
        out = []
        while len(self.buf) >= 8:
            stream, size = self.buf[0], struct.unpack(">I", self.buf[4:8])[0]
            if stream not in (0, 1, 2) or self.buf[1:4] != b"\0\0\0":
                # Not framed after all: hand the bytes through unchanged.
                out.append(self.buf)
                self.buf = b""
                break
            if len(self.buf) < 8 + size:
                break
            out.append(self.buf[8:8 + size])
            self.buf = self.buf[8 + size:]
        return b"".join(out)


class ContainerSource:
    def __init__(self, name: str, container: str, socket: str | None = None, from_start: bool = False):
        self.name = name
        self.container = container
        self.socket = socket or default_socket()
        self.from_start = from_start
        # Where we are in the container's log: the stamp of the last line passed on, and how many
        # lines carried exactly that stamp (one write of several lines shares one stamp).
        self.last_ts: str | None = None
        self._last_key: tuple[int, int] | None = None
        self._same = 0
        # After a reconnect the engine replays from a whole second: skip what we already passed on.
        self._skip_key: tuple[int, int] | None = None
        self._skip_same = 0

    def _logs_url(self) -> str:
        q = "follow=1&stdout=1&stderr=1&timestamps=1"
        if self._last_key is not None:
            q += f"&since={self._last_key[0]}"
        elif not self.from_start:
            q += "&tail=0"
        return f"http://localhost/containers/{quote(self.container, safe='')}/logs?{q}"

    def _reconnecting(self) -> None:
        self._skip_key, self._skip_same = self._last_key, self._same

    def _keep(self, line: str) -> bool:
        stamp = line.split(" ", 1)[0]
        key = stamp_key(stamp)
        if key is None:
            return True
        if self._skip_key is not None:
            if key < self._skip_key:
                return False
            if key == self._skip_key and self._skip_same > 0:
                self._skip_same -= 1
                return False
            self._skip_key = None  # past what we had: everything from here is new
        if key == self._last_key:
            self._same += 1
        else:
            self._last_key, self._same = key, 1
        self.last_ts = stamp
        return True

    async def batches(self, status: Status) -> AsyncIterator[list[str]]:
        backoff = Backoff()
        connected_before = False
        while True:
            try:
                conn = aiohttp.UnixConnector(path=self.socket)
                timeout = aiohttp.ClientTimeout(total=None, sock_connect=10)
                async with aiohttp.ClientSession(connector=conn, timeout=timeout) as session:
                    tty = False
                    async with session.get(f"http://localhost/containers/{quote(self.container, safe='')}/json") as r:
                        if r.status != 200:
                            raise ConnectionError(f"inspect {self.container}: HTTP {r.status}")
                        info = await r.json(content_type=None)
                        tty = bool((info.get("Config") or {}).get("Tty"))
                    self._reconnecting()
                    async with session.get(self._logs_url()) as r:
                        if r.status != 200:
                            raise ConnectionError(f"logs {self.container}: HTTP {r.status}")
                        if connected_before:
                            status.restarted()
                        connected_before = True
                        status.up(True)
                        backoff.reset()
                        demux = None if tty else Demuxer()
                        split = LineSplitter(self.name)
                        async for chunk in r.content.iter_any():
                            data = demux.feed(chunk) if demux else chunk
                            lines = [ln for ln in split.feed(data) if self._keep(ln)]
                            if lines:
                                yield lines
                        lines = [ln for ln in split.flush() if self._keep(ln)]
                        if lines:
                            yield lines
                log.info("container log stream ended", source=self.name, container=self.container)
            except (aiohttp.ClientError, ConnectionError, OSError, asyncio.TimeoutError, ValueError) as e:
                log.warning("container log unavailable", source=self.name, container=self.container,
                            socket=self.socket, error=str(e))
            status.up(False)
            await backoff.sleep()
