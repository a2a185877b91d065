"""exporter.web.guard with short limits, in process, on loopback: each deadline and the cap.

Every client here is a real socket to a real aiohttp server; each loop is bounded in count and time.
"""

import asyncio
import socket

import pytest
from aiohttp import web

from exporter.web.guard import Guard, GuardedSite, Limits


async def _serve(limits: Limits, handler=None):
    closed: list[str] = []
    guard = Guard(limits, on_close=closed.append)

    async def ok(request):
        return web.Response(text="ok\n")

    app = web.Application(middlewares=[guard.middleware()])
    app.router.add_get("/", handler or ok)
    app.router.add_get("/ok", ok)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = GuardedSite(runner, "127.0.0.1", 0, guard)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]
    return runner, guard, port, closed


async def _get(port: int, path: str = "/ok", timeout: float = 2.0) -> bytes:
    r, w = await asyncio.wait_for(asyncio.open_connection("127.0.0.1", port), timeout)
    try:
        w.write(f"GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n".encode())
        return await asyncio.wait_for(r.read(), timeout)
    finally:
        w.close()


async def _closed_by_server(reader: asyncio.StreamReader, within: float) -> bool:
    try:
        data = await asyncio.wait_for(reader.read(1024), within)
    except (asyncio.TimeoutError, ConnectionError):
        return False
    return data == b"" or data.startswith(b"HTTP/1.1 503")


@pytest.mark.asyncio
async def test_a_client_that_sends_headers_one_byte_at_a_time_is_cut_at_the_header_timeout():
    runner, guard, port, closed = await _serve(Limits(header_timeout=0.6, idle_timeout=30))
    try:
        r, w = await asyncio.open_connection("127.0.0.1", port)
        request = b"GET /ok HTTP/1.1\r\nHost: x\r\nX-Slow: " + b"a" * 100
        cut = False
        for i in range(40):  # 40 x 0.05 s: well past the 0.6 s deadline
            try:
                w.write(request[i:i + 1])
                await w.drain()
            except ConnectionError:
                cut = True
                break
            if r.at_eof():
                cut = True
                break
            await asyncio.sleep(0.05)
        cut = cut or await _closed_by_server(r, 1.0)
        w.close()
        assert cut, "the slow client was still connected after 2 s"
        assert closed == ["header_timeout"]
        assert b"200 OK" in await _get(port)  # the server still answers others
    finally:
        await runner.cleanup()


@pytest.mark.asyncio
async def test_a_connection_that_never_sends_is_cut_at_the_header_timeout_and_an_idle_keep_alive_at_the_idle_timeout():
    runner, guard, port, closed = await _serve(Limits(header_timeout=0.4, idle_timeout=0.8))
    try:
        silent_r, silent_w = await asyncio.open_connection("127.0.0.1", port)
        ka_r, ka_w = await asyncio.open_connection("127.0.0.1", port)
        ka_w.write(b"GET /ok HTTP/1.1\r\nHost: x\r\n\r\n")
        head = await asyncio.wait_for(ka_r.readuntil(b"ok\n"), 2)
        assert b"200 OK" in head
        # the silent one goes first (0.4 s), the kept-alive one after its idle time (0.8 s)
        assert await _closed_by_server(silent_r, 1.5)
        assert len(guard) == 1
        assert await _closed_by_server(ka_r, 2.0)
        assert closed == ["header_timeout", "idle_timeout"]
        assert len(guard) == 0
        silent_w.close()
        ka_w.close()
    finally:
        await runner.cleanup()


@pytest.mark.asyncio
async def test_a_request_that_outlives_the_request_timeout_is_cut():
    async def slow(request):
        await asyncio.sleep(5)
        return web.Response(text="late\n")

    runner, guard, port, closed = await _serve(Limits(header_timeout=2, request_timeout=0.5), slow)
    try:
        r, w = await asyncio.open_connection("127.0.0.1", port)
        w.write(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
        assert await _closed_by_server(r, 3.0)
        assert closed == ["request_timeout"]
        w.close()
    finally:
        await runner.cleanup()


@pytest.mark.asyncio
async def test_at_the_cap_the_connection_idle_longest_makes_room_and_a_request_still_answers():
    runner, guard, port, closed = await _serve(Limits(header_timeout=30, idle_timeout=30, max_connections=8))
    try:
        idle = []
        for _ in range(8):
            idle.append(await asyncio.open_connection("127.0.0.1", port))
            await asyncio.sleep(0.01)
        for _ in range(100):  # bounded: the server has seen all 8
            if len(guard) == 8:
                break
            await asyncio.sleep(0.01)
        assert len(guard) == 8
        body = await _get(port)
        assert b"200 OK" in body
        assert closed == ["evicted"]
        # the oldest was the one let go
        assert await _closed_by_server(idle[0][0], 1.0)
        assert not await _closed_by_server(idle[1][0], 0.2)
        for _, w in idle:
            w.close()
    finally:
        await runner.cleanup()


@pytest.mark.asyncio
async def test_when_every_connection_is_answering_a_new_one_gets_503_and_the_ones_in_flight_finish():
    release = asyncio.Event()

    async def held(request):
        await asyncio.wait_for(release.wait(), 10)
        return web.Response(text="done\n")

    runner, guard, port, closed = await _serve(Limits(header_timeout=30, request_timeout=30, max_connections=3), held)
    try:
        inflight = [asyncio.create_task(_get(port, "/", timeout=10)) for _ in range(3)]
        for _ in range(200):
            if len(guard) == 3 and all(c.busy for c in guard._conns.values()):
                break
            await asyncio.sleep(0.01)
        refused = await _get(port, "/ok")
        assert refused.startswith(b"HTTP/1.1 503") and b"too many connections" in refused
        assert closed == ["refused"]
        release.set()
        answers = await asyncio.gather(*inflight)
        assert all(b"200 OK" in a and a.endswith(b"done\n") for a in answers)
    finally:
        await runner.cleanup()


def test_the_default_cap_leaves_file_descriptors_for_the_rest():
    import resource

    from exporter.web.guard import default_max_connections

    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    assert default_max_connections() == max(8, min(1024, (soft - 64) // 2))


def test_the_real_exporter_at_a_256_fd_limit_still_answers_scrapes_under_idle_and_slow_clients():
    """The issue's reproducer: 377 idle connections at a 256 fd limit made /metrics time out and
    filled the log with `Too many open files`. Here 400 idle and 20 slow-header clients. How fast it
    answers (issue 19: under a second) is bench/crowded_scrape.py's to measure."""
    import resource
    import subprocess
    import sys
    import time
    import urllib.request

    from tests.helpers import ROOT, ceiling, free_port, samples, terminate, wait_until

    port = free_port()

    def limit():
        resource.setrlimit(resource.RLIMIT_NOFILE, (256, 256))

    proc = subprocess.Popen([sys.executable, "-m", "exporter", "--demo", "--web.listen-address", f"127.0.0.1:{port}",
                             "--log.format", "json"], cwd=ROOT, preexec_fn=limit,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    clients = []
    try:
        url = f"http://127.0.0.1:{port}"
        wait_until(lambda: urllib.request.urlopen(url + "/healthz", timeout=ceiling(2)).status == 200, 20, what="exporter up")
        for _ in range(400):
            s = socket.create_connection(("127.0.0.1", port), timeout=ceiling(2))
            clients.append(s)
        slow = []
        for _ in range(20):
            s = socket.create_connection(("127.0.0.1", port), timeout=ceiling(2))
            s.sendall(b"GET /metrics HTTP/1.1\r\n")
            slow.append(s)
        clients += slow
        answered = []
        for _ in range(5):  # five scrapes, each answered (how fast is bench/'s: a loaded machine is slower)
            with urllib.request.urlopen(url + "/metrics", timeout=ceiling(1.0)) as r:
                answered.append((r.status, r.read()))
            for s in slow:  # the slow clients keep trickling one byte per round
                try:
                    s.sendall(b"X")
                except OSError:
                    pass
            time.sleep(0.2)
        assert [a[0] for a in answered] == [200] * 5
        m = samples(answered[-1][1].decode())
        assert m[("vllm_log_exporter_http_connections_closed_total", frozenset({("reason", "evicted")}))] > 400 + 20 - 96 - 1
        assert m[("vllm_log_exporter_http_connections", frozenset())] <= 96
    finally:
        for s in clients:
            s.close()
        terminate(proc)
    err = proc.stderr.read()
    assert "Too many open files" not in err and "Traceback" not in err, err[-2000:]


def test_accept_encoding_is_read_as_rfc_9110_says():
    from exporter.web.server import accepts_gzip

    assert accepts_gzip("gzip") and accepts_gzip("deflate, gzip;q=0.5") and accepts_gzip("GZIP") and accepts_gzip("x-gzip")
    assert not accepts_gzip("") and not accepts_gzip("gzip;q=0") and not accepts_gzip("deflate, br")
