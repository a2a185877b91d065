"""Sending exporter.alerts.from_events's alerts to Alertmanager (API v2, ``POST /api/v2/alerts``).

The log pipeline never waits on this: it only updates the alerts' state; this task looks at it
every ``tick`` seconds and posts what changed (and, every minute, what is still active, as
Prometheus does). A failed post is retried with backoff (0.5 s doubling to 30 s) and counted
through ``on_result("ok" | "error")``; with several Alertmanagers each gets every alert.
"""

from __future__ import annotations

import asyncio
import ssl

import aiohttp
import structlog

from exporter.alerts.from_events import Alerts

log = structlog.get_logger("vllm_log_exporter.alerts")


class AlertPusher:
    def __init__(self, alerts: Alerts, urls: list[str], on_result=None, tick: float = 0.2,
                 username: str | None = None, password: str | None = None, ca_file: str | None = None):
        self.alerts = alerts
        self.urls = [u.rstrip("/") + "/api/v2/alerts" for u in urls]
        self.on_result = on_result or (lambda result: None)
        self.tick = tick
        self.auth = aiohttp.BasicAuth(username, password or "") if username is not None else None
        self.ssl = ssl.create_default_context(cafile=ca_file) if ca_file else None
        self._failing: dict[str, str] = {}

    async def run(self) -> None:
        delay = 0.5
        timeout = aiohttp.ClientTimeout(total=5)
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
            async with session.post(url, json=body, auth=self.auth, ssl=self.ssl) as r:
                if r.status // 100 == 2:
                    self.on_result("ok")
                    if self._failing.pop(url, None) is not None:
                        log.info("alertmanager reachable again", url=url)
                    return True
                problem = f"HTTP {r.status}: {(await r.text())[:200]}"
        except (aiohttp.ClientError, asyncio.TimeoutError, OSError) as e:
            problem = str(e) or type(e).__name__
        self.on_result("error")
        if self._failing.get(url) != problem:  # once per cause, not once per retry
            log.warning("alerts not delivered to alertmanager; retrying", url=url, error=problem)
        self._failing[url] = problem
        return False
