"""The HTTP side: ``/metrics`` (the text format, gzip at level 1 when asked), ``/healthz``, a landing page."""

from __future__ import annotations

import html
import zlib
from typing import Callable

from aiohttp import web
from aiohttp.web_urldispatcher import PlainResource

from exporter import __version__

_LANDING = """<!DOCTYPE html>
<html><head><meta charset="utf-8"><title>vLLM log exporter</title></head>
<body>
<h1>vLLM log exporter</h1>
<p>Version {version}. Prometheus metrics from vLLM server logs.</p>
<p><a href="{path}">Metrics</a> &middot; <a href="/healthz">Health</a></p>
<h2>Sources</h2>
<ul>{sources}</ul>
</body></html>
"""


# What Metrics.render writes: the classic text format, which every Prometheus reads.
TEXT_FORMAT = "text/plain; version=0.0.4; charset=utf-8"
OPENMETRICS_FORMAT = "application/openmetrics-text; version=1.0.0; charset=utf-8"


def wants_only_openmetrics(accept: str) -> bool:
    """OpenMetrics when the scraper takes nothing else. Prometheus asks for OpenMetrics first but
    takes the text format too, and gets that: the same samples, written about ten times faster
    (`python bench/pipeline.py --render-only`, docs/benchmarks.md)."""
    types = [part.split(";")[0].strip().lower() for part in accept.split(",")]
    return "application/openmetrics-text" in types and not any(
        t in ("text/plain", "*/*", "text/*") for t in types)


# Level 1: a third of level 6's time on a big exposition for 15 % more bytes (bench/scrape.py). A
# scrape is a few hundred KB of repetitive text; it is the CPU of the GPU host that pays for it.
GZIP_LEVEL = 1


def accepts_gzip(accept_encoding: str) -> bool:
    for part in accept_encoding.split(","):
        coding, _, params = part.partition(";")
        if coding.strip().lower() in ("gzip", "x-gzip"):
            q = params.strip()
            if q.startswith("q="):
                try:
                    return float(q[2:]) > 0
                except ValueError:
                    return True
            return True
    return False


def gzipped(body: bytes) -> bytes:
    c = zlib.compressobj(GZIP_LEVEL, zlib.DEFLATED, 16 + zlib.MAX_WBITS)
    return c.compress(body) + c.flush()


def make_app(render: Callable[[], bytes], telemetry_path: str, sources: Callable[[], dict[str, bool]],
             middlewares: list | None = None, problems: Callable[[], dict[str, str]] | None = None,
             render_openmetrics: Callable[[], bytes] | None = None,
             notes: Callable[[], dict[str, str]] | None = None,
             waiting: Callable[[], dict[str, str]] | None = None) -> web.Application:
    """``render`` writes the metrics (exporter.metrics.Metrics.render): rendered in the event loop,
    the thread that also updates them. ``problems`` names what is wrong with the exporter itself
    (e.g. ``{"state_file": "cannot write ...: No space left on device"}``); ``notes`` what a server's
    own log says is missing (``{"b": "vLLM logs no stats lines (api_server_count): ..."}``); ``waiting``
    the sources that wait for what may never come (``{"a": "no such directory: /var/log/vlm"}``)."""

    async def metrics_handler(request: web.Request) -> web.Response:
        try:
            if render_openmetrics is not None and wants_only_openmetrics(request.headers.get("Accept", "")):
                body, ctype = render_openmetrics(), OPENMETRICS_FORMAT
            else:
                body, ctype = render(), TEXT_FORMAT
        except Exception:  # noqa: BLE001 - counted and said by the render given (the daemon's); this scrape fails
            return web.Response(status=500, text="the metrics could not be written: the exporter's own log says why\n")
        headers = {"Content-Type": ctype, "Vary": "Accept-Encoding"}
        if accepts_gzip(request.headers.get("Accept-Encoding", "")):
            headers["Content-Encoding"] = "gzip"
            return web.Response(body=gzipped(body), headers=headers)
        # (not aiohttp's enable_compression: it gzips for "gzip;q=0" too)
        return web.Response(body=body, headers=headers)

    async def landing(request: web.Request) -> web.Response:
        items = "".join(
            f"<li>{html.escape(name)}: {'up' if up else 'down'}</li>" for name, up in sorted(sources().items())
        )
        body = _LANDING.format(version=html.escape(__version__), path=html.escape(telemetry_path), sources=items)
        return web.Response(text=body, content_type="text/html", charset="utf-8")

    async def healthz(request: web.Request) -> web.Response:
        # The process answers, so it is healthy (200); a source being down is a metric, not a health
        # failure. What the exporter cannot do for itself (save its state) makes it "degraded".
        found = problems() if problems else {}
        waits = waiting() if waiting else {}
        body = {"status": "degraded" if found else "waiting" if waits else "ok", "version": __version__,
                "sources": sources(), "problems": found}
        if waits:
            body["waiting"] = waits  # a source pointed at a file that is not there: a mistyped --source?
        if notes is not None and (said := notes()):
            body["servers"] = said  # what a server's log says is missing, and why (not the exporter's fault)
        return web.json_response(body)

    app = web.Application(middlewares=middlewares or [])
    app.router.add_get("/", landing)
    app.router.add_get("/healthz", healthz)
    # literally the path given: add_get would read `{x}` in it as a variable part
    metrics_resource = PlainResource(telemetry_path)
    app.router.register_resource(metrics_resource)
    metrics_resource.add_route("GET", metrics_handler)
    metrics_resource.add_route("HEAD", metrics_handler)  # (as add_get gives / and /healthz)
    return app
