"""What counts as one error, when one failure is logged many times.

An engine that dies is logged by every process that notices (EngineCore's fatal error, AsyncLLM's
output handler, the API server's EngineDeadError traceback, the worker's exception...): six lines
for the sample log's two deaths. ``Deaths`` makes them one: an ``engine_dead`` signal is a new
death when none was seen since the server last started (its version banner), or when the last
signal is more than ``DEATH_WINDOW_SECONDS`` away in log time (a log that holds no banner).

A failed start-up is logged several times too: the EngineCore or worker's "failed to start" line,
the traceback of its exception (whose last line says why: a KV cache too small, weights that did
not fit...), the API server's "Engine core initialization failed". ``StartFailures`` makes them one
failed start, and gives each reason the log states once; a failed start whose log names no reason
counts as ``other`` when it is over (the next start, or a signal beyond the window).

A traceback counts as ``traceback`` only when it is none of the named kinds: the OOM, CUDA, NCCL or
dead-engine error it raised is counted as that kind instead (``unclassified``).
"""

from __future__ import annotations

DEATH_WINDOW_SECONDS = 300.0


class Deaths:
    def __init__(self) -> None:
        self._dead = False
        self._last: float | None = None

    @property
    def open(self) -> bool:
        """A signal was seen since the last start."""
        return self._dead

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


class StartFailures:
    def __init__(self) -> None:
        self._span = Deaths()  # the same window: one failed start, however many lines, until a start
        self._reasons: set[str] = set()

    def signal(self, ts: float | None, reason: str) -> tuple[bool, list[str]]:
        """(a new failed start?, the reasons to count now)."""
        was_open = self._span.open
        new = self._span.is_new(ts)
        counted: list[str] = []
        if new:
            counted += self._close(was_open)
        if reason != "other" and reason not in self._reasons:
            self._reasons.add(reason)
            counted.append(reason)
        return new, counted

    def started(self) -> list[str]:
        """A server start: an open failed start is over."""
        counted = self._close(self._span.open)
        self._span.started()
        return counted

    def _close(self, was_open: bool) -> list[str]:
        counted = ["other"] if was_open and not self._reasons else []
        self._reasons = set()
        return counted


def busy_window(fields: dict) -> bool:
    """A stats window in which the engine worked: requests running, or tokens in or out. vLLM logs
    one every interval while busy, so silence after such a window means something."""
    return bool(fields.get("running") or fields.get("generation_tokens_per_second")
                or fields.get("prompt_tokens_per_second"))
