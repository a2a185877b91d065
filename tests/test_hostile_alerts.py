"""The alert pusher against what answers in Alertmanager's place (a stand-in: a real Alertmanager
cannot be made to answer so): a 500 whose body is not UTF-8 (it raised outside the pusher's guard and
the task died for the life of the process, in silence), a 500 of 150 MB (read whole on every retry),
a redirect. Each is a failed post, counted and said once, retried, and the alert is delivered once
the other end answers as Alertmanager does."""

import asyncio
import time

import pytest
import structlog

from exporter.alerts.from_events import Alerts
from exporter.alerts.push import AlertPusher
from exporter.parsers.events import Event
from tests.helpers import ceiling
from tests.standin_http import HUGE_BYTES, StandIn

OOM = Event("oom", {"message": "torch.OutOfMemoryError: CUDA out of memory.", "gpu": 0}, None, "EngineCore", 9)


async def until(fn, timeout: float, what: str):
    deadline = time.monotonic() + ceiling(timeout)
    while time.monotonic() < deadline:
        if fn():
            return
        await asyncio.sleep(0.02)
    raise AssertionError(f"timed out waiting for {what}")


@pytest.mark.parametrize("mode", ["garbage", "huge", "redirect"])
async def test_a_bad_answer_is_a_failed_post_and_the_alert_is_delivered_once_it_answers(mode):
    alerts = Alerts(instance="h:1")
    alerts.observe("s", [OOM])
    results: list[str] = []
    async with StandIn(mode) as am:
        pusher = AlertPusher(alerts, [am.url], on_result=results.append, tick=0.02)
        with structlog.testing.capture_logs() as logged:
            task = asyncio.create_task(pusher.run())
            try:
                await until(lambda: results.count("error") >= 2, 10, "two failed posts")
                assert not task.done(), task.exception() if task.done() else None
                am.mode = "ok"
                await until(lambda: am.alerts, 20, "the alert delivered")
            finally:
                task.cancel()
                await asyncio.gather(task, return_exceptions=True)
    assert am.alerts[0]["labels"]["alertname"] == "VllmCudaOutOfMemory"
    warned = [e for e in logged if e["event"] == "alerts not delivered to alertmanager; retrying"]
    assert len(warned) == 1, logged  # once per cause, however the bodies differ
    assert "\x1b" not in warned[0]["error"] and "\x07" not in warned[0]["error"]
    if mode == "huge":
        # what the pusher read of each 150 MB answer is bounded: the sender could not get far
        assert am.sent_bytes and max(am.sent_bytes) < 32 << 20 < HUGE_BYTES, am.sent_bytes
    if mode == "redirect":
        assert "not followed" in warned[0]["error"]
