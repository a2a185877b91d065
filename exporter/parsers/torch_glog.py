"""PyTorch's c10 log lines (glog format), which bypass Python logging: ``[rank1]:[W1203 10:02:11.402918
ProcessGroupNCCL.cpp:1476] Warning: WARNING: destroy_process_group() was not called ...``, with or
without the ``[rankN]:`` prefix and a thread id before the file. Warnings, errors and fatal lines
become ``log`` events by level (counted in ``vllm_log_messages_total{level}``) unless an error family
claimed them first (an NCCL watchdog timeout is an ``nccl_error``); info lines are left to the others.
"""

from __future__ import annotations

from exporter.parsers.events import Event
from exporter.framing.frame import Frame
from exporter.parsers.base import NO_LEVEL, Parser, lazy_compile, where

_GLOG = lazy_compile(r"(?:\[rank\d+\]:)?\[([WEF])\d{4} [\d:.]+ (?:\d+ )?([\w.-]+:\d+)\] (.*)$")
_LEVELS = {"W": "warning", "E": "error", "F": "critical"}


def _parse(frame: Frame) -> list[Event] | None:
    m = _GLOG.search(frame.message)
    if not m:
        return None
    return [Event("log", {"level": _LEVELS[m.group(1)], "logger": m.group(2), "message": m.group(3)[:1000]})]


# (the trust boundary: PyTorch's own stderr line, not a record of vLLM's logger; its glog header first)
PARSER = Parser("torch_glog", ("[W", "[E", "[F"), _parse, where((NO_LEVEL,), start=r"(?:\[rank\d+\]:)?\[[WEF]\d{4} "))
