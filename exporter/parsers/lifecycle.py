"""A server that is ready to serve, and a stop that somebody asked for.

Both matter to what the error lines after them mean (exporter.stream.lifecycle): a routine stop of vLLM
0.32 logs an ``EngineDeadError`` traceback at ERROR, which is not a death; an engine that dies while
the server is still starting is a failed start. Wordings, from vLLM's source:

- ready: uvicorn's ``Application startup complete.`` (every version), vLLM's ``Starting vLLM API
  server 0 on http://...`` (0.6+; ``Starting vLLM API server on ...`` before).
- stop asked for:
  - 0.32 (``entrypoints/launchers/launcher.py``, its SIGINT/SIGTERM handler):
    ``[shutdown] API server: shutdown triggered``; the engine core's own handler
    (``v1/engine/core.py``): ``[shutdown] EngineCore: trigger received signal=SIGTERM``, also when
    a supervisor signals every process of the group at once.
  - 0.6.3 to 0.22 (``entrypoints/launcher.py``): ``Shutting down FastAPI HTTP server.``, logged only
    when its signal handler cancelled the server (a dead engine ends the server without it); 0.6.0:
    ``Gracefully stopping http server``.
  - uvicorn's own ``Shutting down`` is *not* one: a dead engine's server logs it too.
"""

from __future__ import annotations

import re

from exporter.parsers.events import Event
from exporter.framing.frame import Frame
from exporter.parsers.base import INFO_LEVELS, Parser, where

_SIGNAL = re.compile(r"trigger received signal=(\w+)")
# needle -> the signature an event carries
_STOPS = {
    "API server: shutdown triggered": "API server: shutdown triggered",
    "EngineCore: trigger received signal=": "EngineCore: trigger received signal",
    "hutting down FastAPI HTTP server": "Shutting down FastAPI HTTP server",  # "shutting down ..." in 0.32
    "Gracefully stopping http server": "Gracefully stopping http server",
}
_READY = ("Application startup complete", "Starting vLLM API server")


def _parse(frame: Frame) -> list[Event] | None:
    msg = frame.message
    for needle, sig in _STOPS.items():
        if needle in msg:
            fields: dict = {"signature": sig, "message": msg[:300]}
            m = _SIGNAL.search(msg)
            if m:
                fields["signal"] = m.group(1)[:20]
            return [Event("shutdown", fields)]
    for sig in _READY:
        if sig in msg:
            return [Event("ready", {"signature": sig})]
    return None


# Where vLLM prints them (the trust boundary): a stop makes the next errors part of it, so a stop or a
# start only from an INFO record (or uvicorn's line), their words first.
PARSER = Parser("lifecycle", tuple(_STOPS) + _READY, _parse, where(
    INFO_LEVELS | {"WARNING"}, start=r"(?:\[shutdown\] (?:API server: shutdown triggered|EngineCore: trigger received signal=)|[Ss]hutting down "
          r"FastAPI HTTP server|Gracefully stopping http server|Application startup complete|Starting vLLM API server)"))
