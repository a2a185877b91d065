"""Sending exporter.alerts.from_events's alerts to Alertmanager (API v2, ``POST /api/v2/alerts``).

The log pipeline never waits on this: it only updates the alerts' state; this task looks at it
every ``tick`` seconds and posts what changed (and, every minute, what is still active, as
Prometheus does). A failed post is retried with backoff (0.5 s doubling to 30 s) and counted
through ``on_result("ok" | "error")``; with several Alertmanagers each gets every alert.

Whatever an Alertmanager (or what answers in its place) sends back is a failed post at worst: any
status but 2xx, a body that is not text (read as UTF-8 with replacements), a body of any size (at most
ERROR_BODY_BYTES of it is read, for the warning), a redirect (not followed: the configured URL is the
one that gets the alerts and their credentials), a TLS error, a timeout. The daemon supervises this
task besides (exporter.daemon.supervise): a failure nobody foresaw restarts it, counted.
"""

from __future__ import annotations

import asyncio
import ssl

import aiohttp
import structlog

from exporter.alerts.from_events import Alerts
from exporter.framing.text import visible

log = structlog.get_logger("vllm_log_exporter.alerts")

ERROR_BODY_BYTES = 4096  # of a failed post's answer, read for the warning; the rest is never read
POST_SECONDS = 5.0  # one post, connection to answer


class AlertPusher:
    def __init__(self, alerts: Alerts, urls: list[str], on_result=None, tick: float = 0.2,
                 username: str | None = None, password: str | None = None, ca_file: str | None = None):
        self.alerts = alerts
        self.urls = [u.rstrip("/") + "/api/v2/alerts" for u in urls]
        self.on_result = on_result or (lambda result: None)
        self.tick = tick
        self.auth = aiohttp.BasicAuth(username, password or "") if username is not None else None
        # our own context for an https URL, never aiohttp's default one (exporter.web.aiohttp_import: it is made
        # without the system's CA store)
        https = any(u.lower().startswith("https:") for u in self.urls)
        self.ssl = ssl.create_default_context(cafile=ca_file) if ca_file else (
            ssl.create_default_context() if https else None)
        self._failing: dict[str, str] = {}

    async def run(self) -> None:
        delay = 0.5
        timeout = aiohttp.ClientTimeout(total=POST_SECONDS)
        async with aiohttp.ClientSession(timeout=timeout) as session:
            while True:
                batch = self.alerts.pending()
                if batch:
                    body = [a.to_api() for a in batch]
                    ok = await self._post_all(session, body)
                    if ok:
                        self.alerts.sent(batch)
                        delay = 0.5
                    else:
                        await asyncio.sleep(delay)  # the batch stays pending: retried
                        delay = min(30.0, delay * 2)
                        continue
                await asyncio.sleep(self.tick)

    async def _post_all(self, session, body) -> bool:
        results = await asyncio.gather(*(self._post(session, url, body) for url in self.urls))
        return any(results)  # delivered to at least one: the others catch up at the next repeat

    async def _post(self, session, url: str, body) -> bool:
        try:
            async with session.post(url, json=body, auth=self.auth, ssl=self.ssl, allow_redirects=False) as r:
                if r.status // 100 == 2:
                    self.on_result("ok")
                    if self._failing.pop(url, None) is not None:
                        log.info("alertmanager reachable again", url=url)
                    return True
                answer = (await r.content.read(ERROR_BODY_BYTES)).decode("utf-8", "replace")
                cause = f"HTTP {r.status}"
                problem = f"{cause}: {visible(answer[:200])}"
                if 300 <= r.status < 400:
                    problem += f" (a redirect to {visible(r.headers.get('Location', '?')[:200])}: not followed)"
        except asyncio.CancelledError:
            raise
        except Exception as e:  # noqa: BLE001 - whatever the other end did, a failed post to retry
            cause = type(e).__name__
            problem = f"{cause}: {e}"[:300] if str(e) else cause
        self.on_result("error")
        if self._failing.get(url) != cause:  # once per cause, not once per retry (nor per garbled body)
            log.warning("alerts not delivered to alertmanager; retrying", url=url, error=problem)
        self._failing[url] = cause
        return False
