"""What counts as one error, when one failure is logged many times.

An engine that dies is logged by every process that notices (EngineCore's fatal error, AsyncLLM's
output handler, the API server's EngineDeadError traceback, the worker's exception...): six lines
for the sample log's two deaths. ``Deaths`` makes them one: an ``engine_dead`` signal is a new
death when none was seen since the server last started (its version banner), or when the last
signal is more than ``DEATH_WINDOW_SECONDS`` away in log time (a log that holds no banner).

A traceback counts as ``traceback`` only when it is none of the named kinds: the OOM, CUDA, NCCL or
dead-engine error it raised is counted as that kind instead (``unclassified``).
"""

from __future__ import annotations

DEATH_WINDOW_SECONDS = 300.0


class Deaths:
    def __init__(self) -> None:
        self._dead = False
        self._last: float | None = None

    def started(self) -> None:
        """A server start: the next signal is a new death."""
        self._dead = False
        self._last = None

    def is_new(self, ts: float | None) -> bool:
        far = ts is not None and self._last is not None and abs(ts - self._last) > DEATH_WINDOW_SECONDS
        new = not self._dead or far
        self._dead = True
        if ts is not None:
            self._last = ts if new or self._last is None else max(self._last, ts)
        return new


def unclassified(traceback_fields: dict) -> bool:
    """A traceback that raised none of the named error kinds."""
    return not traceback_fields.get("kinds")
