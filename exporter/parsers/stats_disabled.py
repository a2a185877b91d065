"""vLLM saying it will log no stats lines for this run.

With ``--api-server-count`` above 1 every API server logs, once at start-up, "AsyncLLM created with
api_server_count more than 1; disabling stats logging to avoid incomplete stats." at WARNING
(``v1/metrics/loggers.py:1386-1389`` in 0.32, the same text since the option came in) and then no
``Engine NNN: Avg prompt throughput ...`` line ever: quiet stats gauges mean "not logged", not an
idle or stalled engine.
"""

from __future__ import annotations

from exporter.parsers.events import Event
from exporter.framing.frame import Frame
from exporter.parsers.base import Parser, where

_API_SERVERS = "AsyncLLM created with api_server_count more than 1; disabling stats logging"


def _parse(frame: Frame) -> list[Event] | None:
    if _API_SERVERS not in frame.message:
        return None
    return [Event("stats_disabled", {"reason": "api_server_count"})]


# (the trust boundary: the stats logger's WARNING, its words first)
PARSER = Parser("stats_disabled", ("disabling stats logging",), _parse, where(
    ("WARNING", "INFO", ""), ("loggers",), start=_API_SERVERS))
