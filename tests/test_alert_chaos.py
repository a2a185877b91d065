"""A flaky Alertmanager, against the real exporter: down, slow (a real Alertmanager stopped with SIGSTOP),
and, through a stand-in in front of a real Alertmanager for what a real one cannot be made to do, a 500
whose body is not text, a 500 of 150 MB, a redirect, a certificate the exporter does not trust. Each case
ends with the alert in the real Alertmanager once the other end recovers, and the exporter healthy: it
answered all along, counted the failed posts, and no task of it failed."""

import asyncio
import json
import shutil
import signal
import ssl
import subprocess
import time

import aiohttp
import pytest
import yaml

from tests.helpers import Exporter, ceiling, free_port, have, http_get
from tests.standin_http import StandIn
from tests.test_stack_e2e import OOM_TRACEBACK, Alertmanager

pytestmark = pytest.mark.skipif(not have("prometheus-alertmanager") or not shutil.which("openssl"),
                                reason="prometheus-alertmanager or openssl not installed")

AM_CONFIG = "route:\n  receiver: none\nreceivers:\n  - name: none\n"


@pytest.fixture(scope="module")
def alertmanager(tmp_path_factory):
    with Alertmanager(tmp_path_factory.mktemp("am"), AM_CONFIG) as am:
        yield am


@pytest.fixture(scope="module")
def certs(tmp_path_factory):
    """Two certificates for 127.0.0.1: one the exporter is told to trust, one it is not."""
    d = tmp_path_factory.mktemp("certs")
    for name in ("trusted", "untrusted"):
        subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", str(d / f"{name}.key"),
                        "-out", str(d / f"{name}.pem"), "-days", "2", "-subj", "/CN=127.0.0.1",
                        "-addext", "subjectAltName=IP:127.0.0.1"], check=True, capture_output=True, timeout=60)
    return d


async def until(fn, timeout: float, what: str):
    deadline = time.monotonic() + ceiling(timeout)
    last = None
    while time.monotonic() < deadline:
        last = await fn()
        if last:
            return last
        await asyncio.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what} (last: {last!r})")


async def delivered(am_url: str, server: str):
    async with aiohttp.ClientSession() as s:
        async with s.get(am_url + "/api/v2/alerts", params={"filter": f'server="{server}"'}) as r:
            return [a for a in await r.json() if a["labels"].get("alertname") == "VllmCudaOutOfMemory"]


async def metric(ex: Exporter, name: str, **labels):
    return await asyncio.to_thread(ex.value, name, **labels)


def exporter(tmp_path, server: str, url: str, ca: str | None = None) -> tuple[Exporter, object]:
    log = tmp_path / f"{server}.log"
    log.write_text("")
    am = {"urls": [url]}
    if ca:
        am["tls_config"] = {"ca_file": ca}
    cfg = tmp_path / "config.yaml"
    cfg.write_text(yaml.safe_dump({"sources": [{"name": server, "type": "file", "path": str(log)}],
                                   "timestamps": {"year": 2026}, "alertmanager": am}))
    return Exporter("--config", str(cfg)), log


async def _chaos(ex: Exporter, log, server: str, am_url: str, recover) -> dict:
    """The OOM written, failed posts seen, then ``recover()``; the alert delivered and the exporter healthy."""
    await asyncio.to_thread(ex.start)
    try:
        with open(log, "a") as f:
            f.write("\n".join(OOM_TRACEBACK) + "\n")

        async def failed():
            return (await metric(ex, "vllm_log_exporter_alerts_sent_total", result="error") or 0) >= 1

        await until(failed, 30, "a failed post")
        assert (await metric(ex, "vllm_log_errors_total", server=server, kind="oom")) == 1  # reading went on
        await recover()
        await until(lambda: delivered(am_url, server), 60, "the alert in the real Alertmanager")
        # (a post that timed out may still have reached it: the exporter's own 200 comes with a retry)
        async def answered():
            return (await metric(ex, "vllm_log_exporter_alerts_sent_total", result="ok") or 0) >= 1

        await until(answered, 60, "a post answered 200")
        status, health = await asyncio.to_thread(http_get, ex.url + "/healthz")
        assert status == 200 and json.loads(health)["status"] == "ok"
        assert (await metric(ex, "vllm_log_exporter_task_failures_total")) == 0  # the pusher never died
    finally:
        err = await asyncio.to_thread(ex.stop)
    warned = [json.loads(x) for x in err.splitlines() if x.startswith("{") and "not delivered" in x]
    assert len(warned) == 1, warned  # said once per cause
    return warned[0]


async def test_alertmanager_down_then_up(tmp_path):
    port = free_port()
    server = "chaos-down"
    ex, log = exporter(tmp_path, server, f"http://127.0.0.1:{port}")
    am = Alertmanager(tmp_path, AM_CONFIG)
    am.port = port

    async def recover():
        await asyncio.to_thread(am.__enter__)

    try:
        said = await _chaos(ex, log, server, f"http://127.0.0.1:{port}", recover)
        assert "ClientConnectorError" in said["error"]
    finally:
        if getattr(am, "proc", None) is not None:
            am.__exit__(None, None, None)


async def test_alertmanager_slow_then_answering(tmp_path, alertmanager):
    """The real Alertmanager stopped (SIGSTOP): the connection opens, no answer comes (5 s, then a
    failed post); continued (SIGCONT), it gets the alert."""
    server = "chaos-slow"
    ex, log = exporter(tmp_path, server, alertmanager.url)
    alertmanager.proc.send_signal(signal.SIGSTOP)
    stopped = True

    async def recover():
        nonlocal stopped
        alertmanager.proc.send_signal(signal.SIGCONT)
        stopped = False

    try:
        said = await _chaos(ex, log, server, alertmanager.url, recover)
        assert "Timeout" in said["error"]
    finally:
        if stopped:
            alertmanager.proc.send_signal(signal.SIGCONT)


@pytest.mark.parametrize("mode", ["garbage", "huge", "redirect"])
async def test_a_stand_in_that_answers_badly_then_passes_on(tmp_path, alertmanager, mode):
    server = f"chaos-{mode}"
    async with StandIn(mode, forward=alertmanager.url) as front:
        ex, log = exporter(tmp_path, server, front.url)

        async def recover():
            front.mode = "ok"

        said = await _chaos(ex, log, server, alertmanager.url, recover)
    assert said["error"].startswith("HTTP 500" if mode != "redirect" else "HTTP 307")
    assert "\x1b" not in said["error"] and "\x07" not in said["error"]
    if mode == "huge":
        assert max(front.sent_bytes) < 32 << 20  # of 150 MB: the answer was not read whole


async def test_a_certificate_not_trusted_then_one_that_is(tmp_path, alertmanager, certs):
    server = "chaos-tls"
    ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ctx.load_cert_chain(certs / "untrusted.pem", certs / "untrusted.key")
    async with StandIn("ok", forward=alertmanager.url, ssl_context=ctx) as front:
        ex, log = exporter(tmp_path, server, front.url, ca=str(certs / "trusted.pem"))

        async def recover():  # the next handshakes get the certificate the exporter trusts
            ctx.load_cert_chain(certs / "trusted.pem", certs / "trusted.key")

        said = await _chaos(ex, log, server, alertmanager.url, recover)
    assert "certificate verify failed" in said["error"] or "Certificate" in said["error"], said
