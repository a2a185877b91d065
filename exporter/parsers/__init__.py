"""The parser registry: every line family, in the order they are tried.

Adding a log line means one new module here with a ``Parser`` and its tests, and one entry below.
"""

from __future__ import annotations

from exporter.events import Event
from exporter.framing import Frame
from exporter.parsers import (
    access_log,
    engine_stats,
    errors,
    kv_capacity,
    kv_transfer,
    memory,
    spec_decode,
    startup,
)
from exporter.parsers.base import Parser

# Most frequent first: access-log lines dominate real logs, then the periodic stats families.
PARSERS: tuple[Parser, ...] = (
    access_log.PARSER,
    engine_stats.PARSER,
    spec_decode.PARSER,
    kv_transfer.PARSER,
    *errors.ERROR_PARSERS,
    engine_stats.PREFIX_V0,
    kv_capacity.KV_SIZE,
    kv_capacity.KV_MEMORY,
    kv_capacity.GPU_BLOCKS,
    kv_capacity.OFFLOAD_POOL,
    memory.MEMORY_PROFILE,
    memory.MODEL_LOAD,
    memory.CUDA_GRAPH,
    startup.INIT_ENGINE,
    startup.VERSION,
    startup.ENGINE_CONFIG,
)


def parse_frame(frame: Frame, parsers: tuple[Parser, ...] = PARSERS) -> list[Event] | None:
    """Events of one framed line, or None when no family recognises it."""
    msg = frame.message
    for p in parsers:
        for needle in p.needles:
            if needle in msg:
                events = p.parse(frame)
                if events:
                    return events
                break
    return None


def parse_errors(frame: Frame) -> list[Event]:
    """Only the error families: used on a traceback's exception lines."""
    return parse_frame(frame, errors.ERROR_PARSERS) or []


__all__ = ["PARSERS", "Parser", "parse_frame", "parse_errors"]
