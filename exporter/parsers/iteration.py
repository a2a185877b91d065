"""Per-step iteration details (``--enable-logging-iteration-details``): one line per engine step, the only
per-step latency the log gives.

- 0.14.1-0.25 (``v1/engine/core.py``): ``Iteration(N): A context requests, B context tokens, C generation
  requests, D generation tokens, iteration elapsed time: X ms`` (0.23+: `` (dummy)`` after it on a data-parallel
  rank's padding step).
- 0.26-0.34 (``v1/metrics/loggers.py``): ``Engine 000: Iteration(N): ...`` the same, then ``, GPU KV cache usage:
  U%`` (0.30+: the KV cache's device in place of ``GPU``) and, with encoder inputs, ``, encoder inputs: E,
  encoder output embeddings: O``.

Fields: ``engine`` (0 when the line names none), ``ctx_requests``, ``ctx_tokens``, ``gen_requests``,
``gen_tokens``, ``seconds`` (the step's elapsed time), ``dummy`` (True on a padding step), ``kv_cache_usage``
(0-1, where logged).
"""

from __future__ import annotations

import re

from exporter.framing.frame import Frame
from exporter.parsers.base import INFO_LEVELS, Parser, where
from exporter.parsers.events import Event

_ITERATION = re.compile(
    r"(?:Engine (\d+): )?Iteration\(\d+\): (\d+) context requests, (\d+) context tokens, (\d+) generation requests, "
    r"(\d+) generation tokens, iteration elapsed time: (\d+(?:\.\d+)?) ms( \(dummy\))?"
    r"(?:, [A-Za-z+ ]{1,16} KV cache usage: (\d+(?:\.\d+)?)%)?")


def _parse(frame: Frame) -> list[Event] | None:
    m = _ITERATION.match(frame.message)
    if not m:
        return None
    engine, ctx_r, ctx_t, gen_r, gen_t, ms, dummy, usage = m.groups()
    fields = {"engine": int(engine) if engine is not None else 0, "ctx_requests": int(ctx_r),
              "ctx_tokens": int(ctx_t), "gen_requests": int(gen_r), "gen_tokens": int(gen_t),
              "seconds": float(ms) / 1000.0, "dummy": dummy is not None}
    if usage is not None:
        fields["kv_cache_usage"] = float(usage) / 100.0
    return [Event("iteration", fields)]


# Where vLLM prints them: the engine core (0.14-0.25) or its stats logger (0.26+), at INFO, the words first.
PARSER = Parser("iteration", ("Iteration(",), _parse, where(
    INFO_LEVELS, ("core", "loggers"), start=r"(?:Engine \d+: )?Iteration\(\d+\): "))
