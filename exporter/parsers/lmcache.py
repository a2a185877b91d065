"""LMCache, the KV-offload connector most used with vLLM, in its own words (``lmcache/v1/cache_engine.py``
and the vLLM adapter), inside the vLLM process tag: ``(Worker_TP0 pid=1) [2026-01-29 04:52:51,168]
LMCache INFO: ...``.

- store: "Stored N out of total M tokens. size: X gb, cost Y ms, throughput: Z GB/s[; offload_time:
  A ms, put_time: B ms]"
- retrieve: "[[req_id=R] ]Retrieved N out of M required tokens[ (from T total tokens)]. size: X gb,
  cost Y ms, throughput: Z GB/s;"
- lookup, per request: "Reqid: R, Total tokens T, LMCache hit tokens: H, need to load: L"

LMCache's "gb" is bytes / 1024**3 (GiB), and "GB" in some releases' docs the same. The logged
throughput is not kept: a rate is computed from bytes and seconds, as for vLLM's own offload.

Where LMCache prints them (the trust boundary): outside vLLM's logger (no vLLM level), right after its own header, ``[<time>] LMCache
<LEVEL>: `` (0.2's experimental tree: ``<LEVEL> LMCache: ``), which a progress bar may precede when
a newline was lost. A request's id (a client's text) stands inside some: the numbers are read from
the words around it, from its end when the id comes first.
"""

from __future__ import annotations

import re

from exporter.parsers.events import Event
from exporter.framing.frame import Frame
from exporter.parsers.base import NO_LEVEL, Parser, where

_GIB = 2**30
_SIZE_COST = r"size: ([\d.]+) ?(?:gb|GB|GiB), cost ([\d.]+) ?ms"
# LMCache's header ("[2026-01-29 04:52:51,168] LMCache INFO: "), after a progress bar that lost its
# newline ("Adding requests:   0%|...| 0/2 [00:00<?, ?it/s]") and the process tag that came with it
# (pastes lose the stamp, its "[", or the space after the colon)
LMCACHE_P = (r"(?:(?:Adding requests|Processed prompts)[^\]]*\](?:\([^()]* pid=\d+[^()]*\) ?)?)?"
             r"(?:(?:\[?[^\]\s]*(?: [^\]\s]*)?\] ?)?LMCache (?:DEBUG|INFO|WARNING|ERROR|CRITICAL): ?"
             r"|(?:DEBUG|INFO|WARNING|ERROR) LMCache: )")
_HEADER = re.compile(LMCACHE_P)
_STORED = re.compile(rf"Stored (\d+) out of total (\d+) tokens\. {_SIZE_COST}")
# "[req_id=R] " before it: the last "] Retrieved" is LMCache's (R may hold one)
_RETRIEVED = re.compile(rf"(?:\[req_id=.*\] )?Retrieved (\d+) out of (\d+) required tokens(?: \(from (\d+) total tokens\))?"
                        rf"\. {_SIZE_COST}")
# the id first: the numbers are the last ones that read so
_LOOKUP = re.compile(r"Reqid: .*, Total tokens (\d+), LMCache hit tokens: (\d+), need to load: (\d+)")
# the vLLM adapter's announcement of a store (integration/vllm/vllm_v1_adapter.py, LMCache 0.3+): "Storing
# KV cache for 2048 out of 43008 tokens (skip_leading_tokens=40960) for request R" (LMCache#2262). It
# holds no bytes: it is not a move (the "Stored ..." line that follows is); skipped tokens were stored
# before (the prefix LMCache already has).
_STORING = re.compile(r"Storing KV cache for (\d+) out of (\d+) tokens \(skip_leading_tokens=(\d+)\)")


def _parse(frame: Frame) -> list[Event] | None:
    h = _HEADER.match(frame.message)
    if h is None:
        return None
    msg = frame.message[h.end():]
    m = _STORED.match(msg)
    if m:
        return [Event("lmcache", {"op": "store", "tokens": int(m.group(1)), "of_tokens": int(m.group(2)),
                                  "bytes": round(float(m.group(3)) * _GIB), "seconds": float(m.group(4)) / 1000})]
    m = _RETRIEVED.match(msg)
    if m:
        fields = {"op": "retrieve", "tokens": int(m.group(1)), "of_tokens": int(m.group(2)),
                  "bytes": round(float(m.group(4)) * _GIB), "seconds": float(m.group(5)) / 1000}
        if m.group(3):
            fields["total_tokens"] = int(m.group(3))
        return [Event("lmcache", fields)]
    m = _STORING.match(msg)
    if m:
        return [Event("lmcache", {"op": "store_begin", "tokens": int(m.group(1)), "of_tokens": int(m.group(2)),
                                  "skipped_tokens": int(m.group(3))})]
    m = _LOOKUP.match(msg)
    if m:
        return [Event("lmcache", {"op": "lookup", "total_tokens": int(m.group(1)), "hit_tokens": int(m.group(2)),
                                  "need_to_load": int(m.group(3))})]
    return None


PARSER = Parser("lmcache", ("Stored ", "Retrieved ", "LMCache hit tokens", "Storing KV cache for "), _parse,
                where((NO_LEVEL,), start=LMCACHE_P))
