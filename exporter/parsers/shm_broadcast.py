"""vLLM's own hang warning: a process waited N seconds on the shared-memory message queue that
carries work between the engine core and its workers.

It repeats every ``VLLM_RINGBUFFER_WARNING_INTERVAL`` seconds (default 60) for as long as the wait
lasts, so a run of them is a hang (or a long compile or weight load at start-up, which vLLM says can
cause it too). Wordings, from ``distributed/device_communicators/shm_broadcast.py``:

- 0.32 (``LONG_WAIT_TIME_LOG_MSG``, line 108, logged at INFO by writers and readers): "No available
  shared memory broadcast block found in %d seconds. This typically happens when some processes are
  hanging or doing some time-consuming work (e.g. compilation, weight/kv cache quantization)."
- 0.6-0.10: the same up to "(e.g. compilation)" at INFO; some releases log only the first sentence
  ("... found in %s second.") at DEBUG; 0.8.5 lost the space ("... block foundin %s second.").
- 0.5-0.6: "No available block found in %s second. " at WARNING.

``seconds`` is the interval (N), not the time waited so far: vLLM prints the same N every time.
"""

from __future__ import annotations

from exporter.parsers.events import Event
from exporter.framing.frame import Frame
from exporter.parsers.base import ALL_LEVELS, Parser, lazy_compile, where

_WAIT = lazy_compile(r"No available (?:shared memory broadcast )?block found ?in (\d+(?:\.\d+)?) seconds?\b")


def _parse(frame: Frame) -> list[Event] | None:
    m = _WAIT.search(frame.message)
    if not m:
        return None
    return [Event("shm_broadcast_wait", {"seconds": float(m.group(1))})]


# (the trust boundary: shm_broadcast.py's INFO, DEBUG or WARNING record, its words first)
PARSER = Parser("shm_broadcast_wait", ("No available shared memory broadcast block", "No available block found"), _parse,
                where(ALL_LEVELS, ("shm_broadcast",), start=r"No available (?:shared memory broadcast )?block found ?in "))
