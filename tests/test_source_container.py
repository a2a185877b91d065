"""The container source against a stand-in aiohttp server speaking the Docker logs API on a unix socket
(quick checks of the protocol handling; tests/test_source_container_real.py runs the real podman API)."""

import asyncio
import struct

from aiohttp import web

from exporter.sources.container import ContainerSource, Demuxer
from tests.test_source_file import Follow


def frame(stream: int, payload: bytes) -> bytes:
    return bytes([stream, 0, 0, 0]) + struct.pack(">I", len(payload)) + payload


def test_demuxer_handles_split_frames_and_both_streams():
    d = Demuxer()
    data = frame(1, b"out line\n") + frame(2, b"err line\n")
    out = b"".join(d.feed(data[i:i + 3]) for i in range(0, len(data), 3))
    assert out == b"out line\nerr line\n"


class FakeEngine:
    """Serves one container whose log grows; a 'restart' ends the follow stream."""

    def __init__(self, tty=False):
        self.tty = tty
        self.log: list[str] = []
        self.requests: list[dict] = []
        self.restart = asyncio.Event()
        self.new_line = asyncio.Event()
        self.closed = False

    def close(self):
        self.closed = True
        self.restart.set()

    def add(self, second: int, text: str):
        self.log.append(f"2026-08-04T02:44:{second:02d}.{len(self.log):09d}Z {text}")
        self.new_line.set()

    def app(self) -> web.Application:
        app = web.Application()
        app.router.add_get("/containers/{name}/json", self.inspect)
        app.router.add_get("/containers/{name}/logs", self.logs)
        return app

    async def inspect(self, request):
        if request.match_info["name"] != "grandpa":
            return web.json_response({"message": "no such container"}, status=404)
        return web.json_response({"Id": "abc", "Config": {"Tty": self.tty}, "State": {"Running": True}})

    async def logs(self, request):
        q = dict(request.query)
        self.requests.append(q)
        resp = web.StreamResponse()
        await resp.prepare(request)
        since = int(q.get("since", 0))
        sent = 0
        if not self.closed:
            self.restart.clear()
        while not self.restart.is_set():
            while sent < len(self.log):
                line = self.log[sent]
                sent += 1
                second = int(line[17:19])
                if 1785811440 + second < since:  # 2026-08-04T02:44:00Z is 1785811440
                    continue
                data = (line + "\n").encode()
                if self.tty:
                    await resp.write(data)
                else:
                    chunk = frame(1, data)
                    await resp.write(chunk[:5])  # split a frame header across writes
                    await resp.write(chunk[5:])
            self.new_line.clear()
            waiter = asyncio.create_task(self.new_line.wait())
            stopper = asyncio.create_task(self.restart.wait())
            await asyncio.wait([waiter, stopper], return_when=asyncio.FIRST_COMPLETED, timeout=5)
            waiter.cancel()
            stopper.cancel()
        return resp


async def serve(engine, sock):
    runner = web.AppRunner(engine.app(), shutdown_timeout=1)
    await runner.setup()
    site = web.UnixSite(runner, str(sock))
    await site.start()
    return runner


async def test_follows_reconnects_and_never_repeats_a_line(tmp_path):
    sock = tmp_path / "podman.sock"
    engine = FakeEngine()
    engine.add(0, "before start")  # not wanted: the source starts at the end
    runner = await serve(engine, sock)
    try:
        async with Follow(ContainerSource("gp", "grandpa", socket=str(sock), started_at=1785811441.0)) as fw:
            await asyncio.sleep(0.2)
            engine.add(1, "one")
            engine.add(1, "two")
            await fw.wait_for(2)
            engine.restart.set()  # container restarts: stream ends
            await asyncio.sleep(0.1)
            engine.add(1, "three (same second)")
            engine.add(2, "four")
            lines = await fw.wait_for(4, timeout=10)
            assert [l.split(" ", 1)[1] for l in lines] == ["one", "two", "three (same second)", "four"]
            assert fw.status.restarts == 1 and fw.status.ups[-1] is True
            assert engine.requests[0]["since"] == "1785811441" and engine.requests[1]["since"] == str(1785811441)
    finally:
        engine.close()
        await runner.cleanup()


async def test_tty_container_and_missing_socket(tmp_path):
    sock = tmp_path / "docker.sock"
    engine = FakeEngine(tty=True)
    async with Follow(ContainerSource("gp", "grandpa", socket=str(sock), from_start=True)) as fw:
        await asyncio.sleep(0.3)
        assert fw.status.ups == [False] or fw.status.ups == []  # socket not there yet: down, retrying
        engine.add(5, "raw tty line")
        runner = await serve(engine, sock)
        try:
            lines = await fw.wait_for(1, timeout=10)
            assert lines[0].endswith("raw tty line")
        finally:
            engine.close()
            await runner.cleanup()


def test_stamp_key_compares_as_numbers():
    from exporter.sources.container import stamp_key

    assert stamp_key("2026-08-04T02:44:01Z") == (1785811441, 0)
    assert stamp_key("2026-08-04T02:44:01.5Z") == (1785811441, 500000000)
    assert stamp_key("2026-08-04T02:44:01.123456789Z") == (1785811441, 123456789)
    assert stamp_key("2026-08-04T04:44:01.1+02:00") == (1785811441, 100000000)
    assert stamp_key("2026-08-04T02:44:01.5Z") > stamp_key("2026-08-04T02:44:01.123456789Z")
    assert stamp_key("not a stamp") is None and stamp_key("2026-13-04T02:44:01Z") is None


def test_lines_sharing_a_stamp_are_all_kept_and_replays_dropped_exactly():
    src = ContainerSource("gp", "grandpa", socket="/nonexistent")
    src._found("abc")
    same = "2026-08-04T02:44:01.5Z"
    first = [f"{same} a", f"{same} b", "2026-08-04T02:44:01.6Z c"]
    assert [src._keep(l) for l in first] == [True, True, True]
    more = ["2026-08-04T02:44:01.6Z d", "2026-08-04T02:44:01.6Z e"]
    assert [src._keep(l) for l in more] == [True, True]  # one write: three lines at .6
    src._found("abc")
    # the engine replays from 02:44:01 (a whole second): everything we had comes again first
    replay = first + more + ["2026-08-04T02:44:01.6Z f", "2026-08-04T02:44:02Z g"]
    kept = [l for l in replay if src._keep(l)]
    assert kept == ["2026-08-04T02:44:01.6Z f", "2026-08-04T02:44:02Z g"]


def test_replay_of_a_second_is_skipped_by_content_not_by_count():
    """podman 4.3's API does not keep stdout and stderr in write order within a second, and its
    stamps are whole seconds. Skipping the replay by count then drops a line never passed on and
    passes one on twice (a doubled start-up banner counted a server start too many)."""
    src = ContainerSource("gp", "grandpa", socket="/nonexistent")
    src._found("abc")
    s = "2026-08-04T02:44:01Z"
    assert src._keep(f"{s} vLLM API server version 0.11.0")  # live, then the stream broke
    src._found("abc")  # reconnect: the second is replayed, stderr's line first this time
    replay = [f"{s} (EngineCore pid=2) late stderr line", f"{s} vLLM API server version 0.11.0"]
    assert [ln for ln in replay if src._keep(ln)] == [f"{s} (EngineCore pid=2) late stderr line"]


def test_a_new_container_id_is_read_from_its_first_line():
    src = ContainerSource("gp", "grandpa", socket="/nonexistent", resume={"id": "old", "since": [1785811441, 0],
                                                                          "seen": [1, 2]})
    assert "since=1785811441" in src._logs_url()
    src._found("new")  # removed and created again while we were away
    assert "since=" not in src._logs_url() and "tail=" not in src._logs_url()
    assert src._keep("2026-08-04T02:44:01Z first line of the new container")
    assert src.checkpoint()["id"] == "new"
    assert ContainerSource("gp", "g", socket="/x", resume={"id": "a", "since": [-1, 0], "seen": []}).checkpoint() is None


async def test_an_api_that_accepts_and_never_answers_is_reported_and_retried(tmp_path):
    """A bare unix socket that accepts connections and says nothing (no stand-in protocol: silence is the case)."""
    from structlog.testing import capture_logs

    from exporter.sources.base import Backoff

    sock = tmp_path / "silent.sock"
    accepted = []

    async def hold(reader, writer):
        accepted.append(writer)
        await reader.read()  # never answers; returns when the client gives up

    server = await asyncio.start_unix_server(hold, path=str(sock))
    try:
        with capture_logs() as logs:
            src = ContainerSource("gp", "grandpa", socket=str(sock), request_timeout=0.3,
                                  backoff=Backoff(0.05, 0.05))
            async with Follow(src) as fw:
                for _ in range(60):  # bounded: 3 s
                    if len(accepted) >= 3:
                        break
                    await asyncio.sleep(0.05)
                assert len(accepted) >= 3  # retried, not stuck on the first connection
                assert fw.status.ups and not any(fw.status.ups)
        warned = [e for e in logs if e["event"] == "container log unavailable"]
        assert len(warned) == 1 and warned[0]["error"] == "no answer within 0.3s", logs
    finally:
        for w in accepted:
            w.close()
        server.close()
        await server.wait_closed()


async def test_says_where_reading_starts(tmp_path):
    """Once, at the first connection: the exporter's start (and how to read more), the first line, or
    the saved stamp."""
    from structlog.testing import capture_logs

    sock = tmp_path / "podman.sock"
    engine = FakeEngine()
    engine.add(0, "before start")
    runner = await serve(engine, sock)

    async def said(**kw):
        with capture_logs() as logs:
            async with Follow(ContainerSource("gp", "grandpa", socket=str(sock), started_at=1785811441.0, **kw)) as fw:
                await fw.wait_for(1)
                engine.restart.set()  # a reconnect says nothing more
                await asyncio.sleep(0.3)
        return [e for e in logs if e["event"].startswith("reading")]

    try:
        engine.add(1, "after start")
        [at_start] = await said()
        assert at_start["event"].startswith("reading starts at the exporter's start")
        assert at_start["since"] == "2026-08-04T02:44:01Z" and "--from-start" in at_start["hint"]
        [first] = await said(from_start=True)
        assert first["event"] == "reading starts at the container's first line (from_start)"
        [resumed] = await said(resume={"id": "abc", "since": [1785811441, 0], "seen": []})
        assert resumed["event"] == "reading resumes at the saved stamp (state file)"
    finally:
        engine.close()
        await runner.cleanup()
