"""Every long-lived task of the daemon is supervised (exporter.daemon.supervise): each is killed from
inside here (a fault injected where the task runs, once), and each time the failure is counted in
vllm_log_exporter_task_failures_total{task}, said in one warning line without a traceback, and the task
works again: the alert is delivered, the lines are read (none twice), the glob finds its files, the
state file is written, the next scrape answers."""

import asyncio
import json
import time

import aiohttp
import pytest
import structlog

from exporter.config.settings import Config, SourceConfig
from exporter.daemon.daemon import Daemon
from tests.helpers import ceiling, free_port, samples, value
from tests.standin_http import StandIn

LINE = '(APIServer pid=1) INFO 08-04 02:50:{s:02d} [launcher.py:46] Route: /v{n}, Methods: GET'
OOM = "(EngineCore_DP0 pid=7) ERROR 08-04 02:50:00 [core.py:1] torch.OutOfMemoryError: CUDA out of memory."


def write(path, start, count):
    with open(path, "a") as f:
        f.write("".join(LINE.format(s=n % 60, n=n) + "\n" for n in range(start, start + count)))


async def until(fn, timeout: float, what: str):
    deadline = time.monotonic() + ceiling(timeout)
    last = None
    while time.monotonic() < deadline:
        last = await fn() if asyncio.iscoroutinefunction(fn) else fn()
        if last:
            return last
        await asyncio.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what} (last: {last!r})")


def Once(fn, after: int = 0):
    """``fn`` that raises the first time it is called (after ``after`` calls), then works (a plain
    function, so that it binds as a method where it replaces one)."""
    state = {"after": after, "raised": False}

    def wrapped(*a, **kw):
        if not state["raised"]:
            if state["after"] <= 0:
                state["raised"] = True
                raise RuntimeError("injected fault")
            state["after"] -= 1
        return fn(*a, **kw)

    return wrapped


class Running:
    def __init__(self, cfg: Config):
        self.daemon = Daemon(cfg)
        self.url = f"http://127.0.0.1:{cfg.listen_port}"

    async def __aenter__(self):
        self.task = asyncio.create_task(self.daemon.run())
        self.session = aiohttp.ClientSession()
        await until(self._up, 10, "the daemon's /healthz")
        return self

    async def _up(self):
        try:
            async with self.session.get(self.url + "/healthz") as r:
                return r.status == 200
        except aiohttp.ClientError:
            return False

    async def get(self, path: str):
        async with self.session.get(self.url + path) as r:
            return r.status, await r.text()

    async def metric(self, name: str, **labels):
        status, body = await self.get("/metrics")
        return value(samples(body), name, **labels) if status == 200 else None

    async def __aexit__(self, *exc):
        self.daemon.stop()
        await asyncio.wait_for(self.task, ceiling(5))
        await self.session.close()


def config(tmp_path, **kw) -> Config:
    return Config(listen_port=free_port(), **kw)


def failures_said(logged, task: str) -> list[dict]:
    return [e for e in logged if e["event"].startswith("task failed") and e.get("task") == task]


async def test_the_alert_pusher_killed_from_inside_is_restarted_and_delivers(tmp_path, monkeypatch):
    from exporter.alerts.from_events import Alerts

    log = tmp_path / "v.log"
    log.write_text("")
    monkeypatch.setattr(Alerts, "pending", Once(Alerts.pending))
    async with StandIn() as am:
        cfg = config(tmp_path, sources=[SourceConfig("v", "file", path=str(log))], alertmanager_urls=[am.url])
        with structlog.testing.capture_logs() as logged:
            async with Running(cfg) as d:
                with open(log, "a") as f:
                    f.write(OOM + "\n")
                await until(lambda: am.alerts, 20, "the OOM delivered after the restart")
                assert await d.metric("vllm_log_exporter_task_failures_total", task="alerts") == 1
    (said,) = failures_said(logged, "alerts")
    assert said["error"] == "RuntimeError: injected fault" and "in wrapped" in said["at"]
    assert "exception" not in said and "\n" not in json.dumps(said)


async def test_a_source_killed_from_inside_reads_on_from_where_it_was(tmp_path, monkeypatch):
    from exporter.sources import file as file_source

    log = tmp_path / "v.log"
    log.write_text("")
    cfg = config(tmp_path, sources=[SourceConfig("v", "file", path=str(log))])
    with structlog.testing.capture_logs() as logged:
        async with Running(cfg) as d:
            write(log, 0, 100)
            await until(lambda: d.daemon.metrics.lines.values.get(("v", "ignored")) == 100, 10, "100 lines")
            monkeypatch.setattr(file_source, "same_head", Once(file_source.same_head))
            write(log, 100, 50)  # the source raises in its loop (once), and starts again where it was
            await until(lambda: failures_said(logged, "source"), 10, "the failure")
            write(log, 150, 50)
            await until(lambda: d.daemon.metrics.lines.values.get(("v", "ignored")) == 200, 20, "200 lines")
            await asyncio.sleep(0.5)
            assert d.daemon.metrics.lines.values.get(("v", "ignored")) == 200  # none read twice
            assert await d.metric("vllm_log_exporter_task_failures_total", task="source") == 1
    assert len(failures_said(logged, "source")) == 1


async def test_a_glob_s_look_killed_from_inside_looks_again(tmp_path, monkeypatch):
    from exporter.daemon.globs import GlobRunner
    from exporter.sources import file_glob

    monkeypatch.setattr(GlobRunner, "SCAN_SECONDS", 0.1)
    (tmp_path / "a.log").write_text("")
    monkeypatch.setattr(file_glob, "look", Once(file_glob.look))
    cfg = config(tmp_path, sources=[SourceConfig("g", "file", path=str(tmp_path / "*.log"), server_label="file")])
    with structlog.testing.capture_logs() as logged:
        async with Running(cfg) as d:
            await until(lambda: d.daemon.sources().get("a"), 10, "the file found at the next look, open")
            write(tmp_path / "a.log", 0, 3)
            await until(lambda: d.daemon.metrics.lines.values.get(("a", "ignored")) == 3, 10, "3 lines")
            assert await d.metric("vllm_log_exporter_task_failures_total", task="scan") == 1
    assert len(failures_said(logged, "scan")) == 1


async def test_the_flush_loop_killed_from_inside_goes_on(tmp_path, monkeypatch):
    from exporter.daemon.runners import SourceRunner

    log = tmp_path / "v.log"
    log.write_text("")
    monkeypatch.setattr(SourceRunner, "flush", Once(SourceRunner.flush))
    cfg = config(tmp_path, sources=[SourceConfig("v", "file", path=str(log))])
    with structlog.testing.capture_logs() as logged:
        async with Running(cfg) as d:
            await until(lambda: failures_said(logged, "flush"), 10, "the flush failure")
            # a traceback's end is decided by the flush: it still comes
            with open(log, "a") as f:
                f.write("Traceback (most recent call last):\n  File \"x.py\", line 1, in <module>\n"
                        "torch.OutOfMemoryError: CUDA out of memory.\n")
            await until(lambda: d.daemon.metrics.errors.values.get(("v", "oom")), 20, "the OOM, flushed")
            assert await d.metric("vllm_log_exporter_task_failures_total", task="flush") == 1


async def test_the_state_loop_killed_from_inside_writes_again(tmp_path, monkeypatch):
    from exporter.sources import state

    log, saved = tmp_path / "v.log", tmp_path / "state.json"
    log.write_text("")
    monkeypatch.setattr(state, "save", Once(state.save))
    cfg = config(tmp_path, sources=[SourceConfig("v", "file", path=str(log))], state_file=str(saved))
    with structlog.testing.capture_logs() as logged:
        async with Running(cfg) as d:
            write(log, 0, 5)
            await until(lambda: saved.exists() and '"v"' in saved.read_text(), 20, "the state file written")
            assert await d.metric("vllm_log_exporter_task_failures_total", task="state") == 1
    assert len(failures_said(logged, "state")) == 1


async def test_a_scrape_that_fails_answers_500_shows_in_healthz_and_the_next_one_answers(tmp_path, monkeypatch):
    from exporter.metrics import Metrics

    monkeypatch.setattr(Metrics, "render", Once(Metrics.render))
    cfg = config(tmp_path, sources=[])
    with structlog.testing.capture_logs() as logged:
        async with Running(cfg) as d:
            status, body = await d.get("/metrics")
            assert status == 500 and "Traceback" not in body
            status, health = await d.get("/healthz")
            assert status == 200 and json.loads(health)["status"] == "degraded"
            assert "injected fault" in json.loads(health)["problems"]["metrics"]
            assert await d.metric("vllm_log_exporter_task_failures_total", task="http") == 1
            assert json.loads((await d.get("/healthz"))[1])["status"] == "ok"
    assert len(failures_said(logged, "http")) == 1


async def test_head_answers_for_metrics_as_for_healthz(tmp_path):
    cfg = config(tmp_path, sources=[])
    async with Running(cfg) as d:
        for path in ("/metrics", "/healthz", "/"):
            async with d.session.head(d.url + path) as r:
                assert r.status == 200, path
                assert await r.read() == b""


async def test_a_connection_the_server_could_not_take_is_counted_and_the_next_is_served(tmp_path, monkeypatch):
    """The server loop killed from inside: a connection's admission raises (what an accept with no file
    descriptor left, or a bug in the connection guard, does): one line, counted, the next one served."""
    from exporter.web.guard import Guard

    monkeypatch.setattr(Guard, "_admit", Once(Guard._admit))
    cfg = config(tmp_path, sources=[])
    with structlog.testing.capture_logs() as logged:
        d = Daemon(cfg)
        task = asyncio.create_task(d.run())
        url = f"http://127.0.0.1:{cfg.listen_port}"
        async with aiohttp.ClientSession() as session:
            async def up():
                try:
                    async with session.get(url + "/healthz") as r:
                        return r.status == 200
                except aiohttp.ClientError:
                    return False

            await until(up, 10, "the server answering after the connection it could not take")
            async with session.get(url + "/metrics") as r:
                body = await r.text()
        d.stop()
        await asyncio.wait_for(task, ceiling(5))
    assert value(samples(body), "vllm_log_exporter_task_failures_total", task="loop") == 1
    assert len(failures_said(logged, "loop")) == 1
