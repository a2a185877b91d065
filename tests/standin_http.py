"""A stand-in HTTP server on 127.0.0.1 for what a real Alertmanager cannot be made to do: answer 500
with a body that is not text, with a body of 150 MB, or a redirect. It records the alerts posted to
it when it answers as an Alertmanager would (mode "ok"), and, for the huge body, how many bytes it
managed to send before the client stopped reading."""

from __future__ import annotations

import asyncio
import json

from aiohttp import web

from tests.helpers import free_port

HUGE_BYTES = 150 << 20


class StandIn:
    def __init__(self, mode: str = "ok", forward: str | None = None, ssl_context=None):
        self.mode = mode
        # a real Alertmanager's URL: mode "ok" passes each post on to it and answers what it answered
        # (so a test ends with the alert in a real Alertmanager); mode "redirect" points there
        self.forward = forward
        self.ssl_context = ssl_context
        self.port = free_port()
        self.alerts: list[dict] = []
        self.requests = 0
        self.sent_bytes: list[int] = []  # per huge answer: what was written before the client left
        self._runner: web.AppRunner | None = None

    @property
    def url(self) -> str:
        return f"{'https' if self.ssl_context else 'http'}://127.0.0.1:{self.port}"

    async def _alerts(self, request: web.Request) -> web.StreamResponse:
        self.requests += 1
        mode = self.mode
        if mode == "garbage":
            return web.Response(status=500, body=b"\xff\xfe\x00internal \xc3(\x9b]0;pwned\x07 error\x80" * 50)
        if mode == "huge":
            resp = web.StreamResponse(status=500)
            resp.content_length = HUGE_BYTES
            await resp.prepare(request)
            chunk, sent = b"\xff" * (1 << 20), 0
            try:
                while sent < HUGE_BYTES:
                    await resp.write(chunk)
                    sent += len(chunk)
            except (ConnectionError, asyncio.CancelledError):
                pass
            finally:
                self.sent_bytes.append(sent)
            return resp
        if mode == "redirect":
            raise web.HTTPTemporaryRedirect(location=(self.forward or self.url) + "/api/v2/alerts")
        if mode == "slow":
            await asyncio.sleep(30)
        body = await request.read()
        self.alerts += json.loads(body)
        if self.forward:
            import aiohttp

            async with aiohttp.ClientSession() as session:
                async with session.post(self.forward + "/api/v2/alerts", data=body,
                                        headers={"Content-Type": "application/json"}) as r:
                    return web.Response(status=r.status, body=await r.read())
        return web.Response(status=200)

    async def __aenter__(self) -> "StandIn":
        app = web.Application()
        app.router.add_post("/api/v2/alerts", self._alerts)
        self._runner = web.AppRunner(app, access_log=None, shutdown_timeout=0.1)
        await self._runner.setup()
        await web.TCPSite(self._runner, "127.0.0.1", self.port, ssl_context=self.ssl_context).start()
        return self

    async def __aexit__(self, *exc) -> None:
        await self._runner.cleanup()
