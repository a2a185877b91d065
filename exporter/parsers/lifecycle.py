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
  - at ``VLLM_LOGGING_LEVEL=WARNING`` (or ERROR) none of the above is logged. What is left:
    ``[shutdown] Process manager: force killing remaining processes count=N`` (``v1/utils.py``
    0.29-0.32, a WARNING, when an engine core does not exit at once; ``Subprocess manager`` for API
    server processes), and uvicorn's own ``Shutting down`` /
    ``Application shutdown complete.`` (uvicorn's loggers, INFO whatever vLLM's level; 0.29-0.32
    checked on real runs). These are *weak* signs: a dead engine's server logs them too, and a
    failed start's cleanup force-kills too, so exporter.lifecycle takes them only from a server that
    was serving (or whose start it never saw) and that no death signal came before.
  - uvicorn's ``Finished server process [N]`` (its serve returned): another weak stop sign, but
    after a bare ``EngineDeadError`` it is what says *death*: vLLM 0.29-0.32's launcher cancels the
    serve on a stop, so the line follows all 9 deaths captured and none of the 17 stops
    (exporter.stream.lifecycle holds the EngineDeadError until it, or its absence, decides).
"""

from __future__ import annotations

from exporter.parsers.events import Event
from exporter.framing.frame import Frame
from exporter.parsers.base import INFO_LEVELS, Parser, lazy_compile, where

_SIGNAL = lazy_compile(r"trigger received signal=(\w+)")
# needle -> the signature an event carries
_STOPS = {
    "API server: shutdown triggered": "API server: shutdown triggered",
    "EngineCore: trigger received signal=": "EngineCore: trigger received signal",
    "hutting down FastAPI HTTP server": "Shutting down FastAPI HTTP server",  # "shutting down ..." in 0.32
    "Gracefully stopping http server": "Gracefully stopping http server",
}
_READY = ("Application startup complete", "Starting vLLM API server")
# "[shutdown] Process manager: ..." (the engine cores) and "[shutdown] Subprocess manager: ..." (other
# API servers), v1/utils.py in 0.29-0.32
_WEAK_STOPS = {"manager: force killing remaining processes": "force killing remaining processes"}
# uvicorn's, matched as the whole message (a request's log may say anything)
_UVICORN_STOPS = {"Shutting down": "uvicorn: Shutting down", "Application shutdown complete.": "uvicorn: Shutting down"}
_FINISHED = lazy_compile(r"Finished server process \[\d{1,10}\]\s*$")


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
    for needle, sig in _WEAK_STOPS.items():
        if needle in msg:
            return [Event("shutdown", {"signature": sig, "weak": True, "message": msg[:300]})]
    if not (frame.uvicorn or frame.header is None):
        return None
    sig = _UVICORN_STOPS.get(msg.strip())
    if sig is not None:
        return [Event("shutdown", {"signature": sig, "weak": True, "message": msg.strip()})]
    m = _FINISHED.match(msg)
    if m:
        return [Event("shutdown", {"signature": "uvicorn: Finished server process", "weak": True, "finished": True,
                                   "message": msg.strip()})]
    return None


# Where vLLM prints them (the trust boundary): a stop makes the next errors part of it, so a stop or a
# start only from an INFO record (or uvicorn's line), a weak stop from the WARNING v1/utils.py logs or
# uvicorn's whole message, their words first.
PARSER = Parser("lifecycle", tuple(_STOPS) + _READY + tuple(_WEAK_STOPS) + tuple(_UVICORN_STOPS)
                + ("Finished server process",), _parse, where(
    INFO_LEVELS | {"WARNING"}, start=r"(?:\[shutdown\] (?:API server: (?:shutdown triggered|shutting down FastAPI HTTP server)|EngineCore: trigger received signal=|"
          r"(?:Sub)?[Pp]rocess manager: force killing remaining processes)|[Ss]hutting down "
          r"FastAPI HTTP server|Gracefully stopping http server|Application startup complete|Starting vLLM API server|"
          r"(?:Shutting down|Application shutdown complete\.)\s*$|Finished server process \[\d+\]\s*$)"))
