"""Connection limits in front of aiohttp: header, idle and request deadlines, and a connection cap.

Everything here happens before basic auth, so it is what stands between a host's open port and the
exporter's file descriptors. aiohttp alone keeps a connection that sends one header byte a second
for as long as its keep-alive allows (an hour in 3.13) and accepts connections until ``accept()``
fails with EMFILE, after which it cannot answer Prometheus either.

Each connection has one deadline at a time:

- from the connection's first byte of a request (or from the open, if nothing came yet) to the
  request's last header: ``header_timeout``;
- while a request is answered, writing included: ``request_timeout`` (a client that never reads
  its response would otherwise pin the connection);
- idle between keep-alive requests: ``idle_timeout`` (longer than any scrape interval a user is
  likely to set, so Prometheus' connection is kept).

At ``max_connections``, a new connection makes room by closing the connection idle longest (one
that is not in the middle of answering); when every connection is answering, the new one gets a
503 and is closed. In-flight requests are never cut for a newcomer. The default cap is half the process's
file descriptors after a reserve of 64; the listen backlog (which asyncio accepts in one burst,
before any connection reaches the guard) is at most half the cap, so a burst never meets EMFILE.

With TLS, the guard starts TLS itself on each connection, after a look at its first byte: plain
HTTP gets the 400 Go's servers give, and handshakes in progress are connections like any other
(under the cap and the header deadline).

The reasons connections are closed are counted through ``on_close(reason)``: ``header_timeout``,
``idle_timeout``, ``request_timeout``, ``evicted``, ``refused``.
"""

from __future__ import annotations

import asyncio
import os
import resource
import socket
import ssl
from dataclasses import dataclass
from typing import Callable

from aiohttp import web

_REFUSED = (b"HTTP/1.1 503 Service Unavailable\r\nContent-Type: text/plain\r\nContent-Length: 20\r\n"
            b"Connection: close\r\n\r\ntoo many connections")


def _nofile() -> int:
    try:
        soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    except (OSError, ValueError):
        soft = 1024
    return 65536 if soft == resource.RLIM_INFINITY or soft <= 0 else soft


def default_max_connections() -> int:
    # Half of what is left after a reserve for sources, pipes and the state file: asyncio accepts a
    # whole backlog of sockets before the guard sees any of them, so that burst must fit too.
    return max(8, min(1024, (_nofile() - 64) // 2))


def backlog_for(cap: int) -> int:
    return max(4, min(128, cap // 2))


@dataclass
class Limits:
    header_timeout: float = 10.0
    request_timeout: float = 30.0
    idle_timeout: float = 120.0
    max_connections: int = 0  # 0: default_max_connections()

    def cap(self) -> int:
        return self.max_connections or default_max_connections()


class _Conn:
    __slots__ = ("transport", "alias", "deadline", "reason", "busy", "waiting_for_headers", "last_active")

    def __init__(self, transport, now: float, limits: Limits):
        self.transport = transport
        self.alias = None
        self.busy = False
        self.waiting_for_headers = True
        self.deadline = now + limits.header_timeout
        self.reason = "header_timeout"
        self.last_active = now


_PLAIN_TO_TLS = (b"HTTP/1.1 400 Bad Request\r\nContent-Type: text/plain; charset=utf-8\r\nConnection: close\r\n"
                 b"Content-Length: 48\r\n\r\nClient sent an HTTP request to an HTTPS server.\n")
_TLS_HANDSHAKE = 0x16  # the first byte of every TLS record that opens a connection


class _Guarded(asyncio.Protocol):
    """Wraps aiohttp's protocol for one connection; every call is passed on once admitted.

    With ``tls``, the connection arrives in the clear: its first byte is looked at (without reading
    it) and a TLS ClientHello gets the handshake, anything else Go's answer to plain HTTP on an HTTPS
    port, a 400. Handshakes in progress so count against the cap and the header deadline."""

    def __init__(self, guard: "Guard", inner: asyncio.Protocol, tls=None):
        self._guard = guard
        self._inner = inner
        self._tls = tls
        self._conn: _Conn | None = None
        self._inner_made = False
        self._sniff_fd: int | None = None
        self._peek: socket.socket | None = None
        self._early: list[bytes] | None = None

    def connection_made(self, transport) -> None:
        try:
            self._admitted(transport)
        except BaseException:
            transport.abort()  # a connection that could not be taken is closed, not left hanging
            raise  # (the daemon's event-loop handler counts it and says it in one line)

    def _admitted(self, transport) -> None:
        self._conn = self._guard._admit(transport)
        if self._conn is None:
            return
        if self._tls is None:
            self._inner_made = True
            self._inner.connection_made(transport)
            return
        transport.pause_reading()
        # a duplicate of the socket, watched while the transport is paused: asyncio lets no one else
        # watch the transport's own descriptor
        self._peek = socket.socket(fileno=os.dup(transport.get_extra_info("socket").fileno()))
        self._sniff_fd = self._peek.fileno()
        self._guard._loop.add_reader(self._sniff_fd, self._sniff, transport)

    def _unwatch(self) -> None:
        if self._sniff_fd is not None:
            self._guard._loop.remove_reader(self._sniff_fd)
            self._sniff_fd = None
            self._peek.close()

    def _sniff(self, transport) -> None:
        try:
            first = self._peek.recv(1, socket.MSG_PEEK | socket.MSG_DONTWAIT)
        except BlockingIOError:
            return  # woken with nothing to read: keep watching
        except OSError:
            first = b""
        self._unwatch()
        if not first:
            transport.close()
        elif first[0] != _TLS_HANDSHAKE:
            transport.write(_PLAIN_TO_TLS)
            transport.close()
        else:
            self._early = []
            asyncio.ensure_future(self._handshake(transport))

    async def _handshake(self, transport) -> None:
        loop = self._guard._loop
        try:
            app = await loop.start_tls(transport, self, self._tls, server_side=True,
                                       ssl_handshake_timeout=self._guard.limits.header_timeout)
        except (OSError, ssl.SSLError, asyncio.TimeoutError, ConnectionError):
            return  # the raw transport is closed; connection_lost forgets the connection
        if self._conn is None or app is None:
            return
        self._guard._alias(app, self._conn)
        self._inner_made = True
        self._inner.connection_made(app)
        early, self._early = self._early or [], None
        for data in early:
            self.data_received(data)

    def data_received(self, data: bytes) -> None:
        c = self._conn
        if c is None:
            return
        if not self._inner_made:
            # decrypted bytes that came before start_tls handed us the transport: kept for aiohttp
            if self._early is not None and sum(map(len, self._early)) < 65536:
                self._early.append(data)
            return
        if not c.busy and not c.waiting_for_headers:
            # the first byte of the next keep-alive request: its headers get header_timeout from now
            now = self._guard._loop.time()
            c.waiting_for_headers = True
            c.deadline = min(c.deadline, now + self._guard.limits.header_timeout)
            c.reason = "header_timeout"
        self._inner.data_received(data)

    def eof_received(self):
        if self._conn is None or not self._inner_made:
            return False
        return self._inner.eof_received()

    def connection_lost(self, exc) -> None:
        self._unwatch()
        if self._conn is None:
            return
        self._guard._forget(self._conn)
        self._conn = None
        if self._inner_made:
            self._inner.connection_lost(exc)

    def pause_writing(self) -> None:
        if self._conn is not None and self._inner_made:
            self._inner.pause_writing()

    def resume_writing(self) -> None:
        if self._conn is not None and self._inner_made:
            self._inner.resume_writing()


class Guard:
    def __init__(self, limits: Limits | None = None, on_close: Callable[[str], None] | None = None,
                 on_count: Callable[[int], None] | None = None):
        self.limits = limits or Limits()
        self.max_connections = self.limits.cap()
        self._on_close = on_close or (lambda reason: None)
        self._on_count = on_count or (lambda n: None)
        self._conns: dict[object, _Conn] = {}
        self._aliases: dict[object, _Conn] = {}
        self._loop: asyncio.AbstractEventLoop | None = None
        self._reaper: asyncio.TimerHandle | None = None

    def __len__(self) -> int:
        return len(self._conns)

    def protocol_factory(self, inner_factory: Callable[[], asyncio.Protocol], tls=None) -> Callable[[], asyncio.Protocol]:
        def factory() -> asyncio.Protocol:
            return _Guarded(self, inner_factory(), tls)

        return factory

    def _alias(self, app_transport, c: _Conn) -> None:
        """The TLS transport aiohttp sees, for the connection admitted by its raw one."""
        self._aliases[app_transport] = c
        c.alias = app_transport

    def middleware(self):
        """Marks a connection as answering while its handler runs (so it is neither idle nor evictable)."""

        @web.middleware
        async def middleware(request: web.Request, handler):
            c = self._conns.get(request.transport) or self._aliases.get(request.transport)
            if c is None:
                return await handler(request)
            now = self._loop.time()
            c.busy, c.waiting_for_headers = True, False
            c.deadline, c.reason = now + self.limits.request_timeout, "request_timeout"
            try:
                return await handler(request)
            finally:
                # the response is written after the handler returns: the idle deadline covers that write
                now = self._loop.time()
                c.busy, c.last_active = False, now
                c.deadline, c.reason = now + self.limits.idle_timeout, "idle_timeout"

        return middleware

    # -- connection bookkeeping -----------------------------------------------------------------

    def _admit(self, transport) -> _Conn | None:
        if self._loop is None:
            self._loop = asyncio.get_running_loop()
        now = self._loop.time()
        if len(self._conns) >= self.max_connections:
            victim = min((c for c in self._conns.values() if not c.busy), key=lambda c: c.last_active, default=None)
            if victim is None:
                self._on_close("refused")
                try:
                    transport.write(_REFUSED)
                finally:
                    transport.close()
                return None
            self._close(victim, "evicted")
        c = _Conn(transport, now, self.limits)
        self._conns[transport] = c
        self._on_count(len(self._conns))
        if self._reaper is None:
            self._reaper = self._loop.call_later(self._tick(), self._reap)
        return c

    def _tick(self) -> float:
        return max(0.05, min(1.0, self.limits.header_timeout / 4))

    def _forget(self, c: _Conn) -> None:
        if c.alias is not None:
            self._aliases.pop(c.alias, None)
            c.alias = None
        if self._conns.pop(c.transport, None) is not None:
            self._on_count(len(self._conns))

    def _close(self, c: _Conn, reason: str) -> None:
        self._forget(c)
        self._on_close(reason)
        # abort, not close: close waits to flush a write buffer that a stuck client never drains
        c.transport.abort()

    def _reap(self) -> None:
        self._reaper = None
        now = self._loop.time()
        for c in [c for c in self._conns.values() if c.deadline <= now]:
            self._close(c, c.reason)
        if self._conns:
            self._reaper = self._loop.call_later(self._tick(), self._reap)

    def close_all(self) -> None:
        for c in list(self._conns.values()):
            self._forget(c)
            c.transport.abort()
        if self._reaper is not None:
            self._reaper.cancel()
            self._reaper = None


class GuardedSite(web.TCPSite):
    """aiohttp's TCP site with every connection passed through ``guard``, TLS handshakes included
    (bounded by ``header_timeout`` and counted against the cap)."""

    def __init__(self, runner: web.BaseRunner, host: str, port: int, guard: Guard, ssl_context=None):
        super().__init__(runner, host, port, ssl_context=ssl_context, backlog=backlog_for(guard.max_connections))
        self._guard = guard

    async def start(self) -> None:
        await web.BaseSite.start(self)  # registers the site with its runner, so cleanup stops it
        loop = asyncio.get_running_loop()
        # TLS is started by the guard on each connection (after a look at its first byte), not by
        # the server: so plain HTTP gets a 400 and handshakes count against the cap
        self._server = await loop.create_server(
            self._guard.protocol_factory(self._runner.server, self._ssl_context), self._host, self._port,
            backlog=self._backlog, reuse_address=self._reuse_address, reuse_port=self._reuse_port)

    async def stop(self) -> None:
        self._guard.close_all()
        await super().stop()
