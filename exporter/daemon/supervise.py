"""Every long-lived task of the daemon runs supervised: the alert pusher, each source, each glob's look
for files, the flush and state loops, each scrape's rendering, and the event loop's callbacks (the
HTTP server's connections). A task that raises is counted
(vllm_log_exporter_task_failures_total{task}), said in one warning line (the error and where it was
raised, no traceback), and started again after a backoff (1 s doubling to 30 s; back to 1 s once it
has run a while): a bug, or an input nobody foresaw, costs that task a moment, never the process its
alerts or its other sources.
"""

from __future__ import annotations

import asyncio
import time
import traceback

import structlog

from exporter.metrics import TASKS  # noqa: F401 - the tasks' names, as the counter knows them
from exporter.sources.base import Backoff

log = structlog.get_logger("vllm_log_exporter")
# A task that ran this long before it failed starts again after the first backoff step.
HEALTHY_SECONDS = 60.0


def where(error: BaseException) -> str:
    """``file.py:123 in function`` of the innermost frame ``error`` was raised in."""
    tb = traceback.extract_tb(error.__traceback__) if error.__traceback__ else []
    if not tb:
        return "?"
    frame = tb[-1]
    return f"{frame.filename.rsplit('/', 1)[-1]}:{frame.lineno} in {frame.name}"


class Supervisor:
    def __init__(self, on_failure=None):
        """``on_failure(task)``: counts a failure (the daemon's metrics)."""
        self.on_failure = on_failure or (lambda task: None)

    def failed(self, task: str, error: BaseException, name: str | None = None, then: str = "restarting") -> None:
        """One failure of ``task``: counted, and said in one line."""
        self.on_failure(task)
        said = {"task": task, "error": f"{type(error).__name__}: {str(error)[:300]}", "at": where(error)}
        if name is not None:
            said["name"] = name
        log.warning(f"task failed; {then}", **said)

    async def keep(self, task: str, run, name: str | None = None, backoff: Backoff | None = None) -> None:
        """Run ``run()`` (a coroutine function) until it returns; each time it raises, again after a backoff."""
        backoff = backoff or Backoff(1.0, 30.0)
        while True:
            started = time.monotonic()
            try:
                await run()
                return
            except asyncio.CancelledError:
                raise
            except Exception as e:  # noqa: BLE001 - any failure: counted, said, started again
                self.failed(task, e, name)
            if time.monotonic() - started >= HEALTHY_SECONDS:
                backoff.reset()
            await backoff.sleep()
