"""LMCache, the KV-offload connector most used with vLLM, in its own words (``lmcache/v1/cache_engine.py``
and the vLLM adapter), inside the vLLM process tag: ``(Worker_TP0 pid=1) [2026-01-29 04:52:51,168]
LMCache INFO: ... (cache_engine.py:446:lmcache.v1.cache_engine)``. Framing reads LMCache's header (its
level, and the file from the record's end), so these parsers see the message alone.

Wordings, from LMCache's wheels (catalogue/vllm-log-calls.jsonl, 0.3.1-0.5.6):

- store: ``[req_id=R] Stored N out of total M tokens. size: X GB, cost Y ms, throughput: Z GB/s[;
  offload_time: A ms, put_time: B ms]`` (0.3.15+; 0.3.7 without the id, "gb")
- retrieve: ``[req_id=R] Retrieved N out of M required tokens (from T total tokens). size: X gb, cost
  Y ms, throughput: Z GB/s;``; a retrieve logged without its size and cost: ``[req_id=R] Retrieved N out
  of M out of total T tokens`` (0.3.15+; 0.3.7 ``Retrieved N out of M out of total T tokens``):
  tokens only.
- lookup, per request: ``Reqid: R, Total tokens T, LMCache hit tokens: H, need to load: L`` (0.3.1-0.3.7,
  and vLLM's own copy of the adapter, ``kv_connector/v1/lmcache_integration/vllm_v1_adapter.py``
  0.11.2-0.34.0, under vLLM's header); 0.3.15+ adds ``Inference Engine computed tokens: C, `` before the
  hits (C: tokens vLLM's own prefix cache held, so L = H - C), and logs ``..., but need to load: L <
  min_retrieve K, skip retrieve but record for save skip`` when L is too small to be worth loading
  (``skipped``: the hits were not loaded). L is negative when vLLM held more than LMCache's chunks cover
  (LMCache#2703: "it means there's more KV cache in HBM than on DRAM due to smaller chunk granularity").
- the adapter's announcement of a store: ``Storing KV cache for 2048 out of 43008 tokens
  (skip_leading_tokens=40960) for request R`` (LMCache#2262; vLLM's copy too). It holds no bytes: it is
  not a move (the "Stored ..." line that follows is); skipped tokens were stored before.
- the V0 adapter (``integration/vllm/vllm_adapter.py``, 0.3.1-0.3.7, DEBUG): ``Store skips S tokens and then
  stores N tokens`` (``store_begin``, as the v1 adapter's announcement) and ``Injected token number: N`` (``inject``:
  the tokens a retrieve handed to vLLM; the engine's own retrieve line counts them, so no series does again).
- the storage manager's prefetch (``v1/distributed/storage_manager.py``, 0.4.1+, INFO): ``Prefetch request
  completed (L1+L2): H/K retained keys (A L1, B L2) in X ms`` (0.4.1: ``prefix hits``): ``prefetch`` with
  ``hit_keys``, ``keys``, ``l1_keys``, ``l2_keys``, ``seconds`` (an event; no series yet).
- the pre-v1 engine (``lmcache/cache_engine.py``, 0.3.1-0.3.7, still what ``LMCacheEngine`` users of
  vLLM's V0 connector run): ``Retrieved {n} chunks ({t} tokens in total) --hit rate {r:.2%} -- elapsed
  time {s}`` (seconds, as Python prints a float) and ``Stored/updated {n} chunks, total time {s:.2f}s,
  make chunks time {m:.2f}s`` (no tokens, no bytes: ``chunks`` and ``seconds`` only).

LMCache's "gb" is bytes / 1024**3 (GiB), and "GB" in some releases' docs the same. The logged
throughput is not kept: a rate is computed from bytes and seconds, as for vLLM's own offload.

Where LMCache prints them (the trust boundary): at INFO or DEBUG, from LMCache's engine and adapter (or
vLLM's copy of the adapter), the words first. A request's id (a client's text) stands inside some: the
numbers are read from the words around it, from its end when the id comes first.
"""

from __future__ import annotations

import re

from exporter.parsers.events import Event
from exporter.framing.frame import Frame
from exporter.parsers.base import Parser, where

_GIB = 2**30
_SIZE_COST = r"size: ([\d.]+) ?(?:gb|GB|GiB), cost ([\d.]+) ?ms"
# the files that log them: LMCache's engines (v1 and pre-v1 are both cache_engine.py) and its vLLM adapter,
# also vLLM's copy of it
LOGGERS = ("cache_engine", "vllm_v1_adapter", "vllm_adapter", "storage_manager",
           # LMCache's multiprocess server (0.3.15+: v1/multiprocess/server.py, then its transfer modules)
           "server", "gpu_transfer", "non_gpu_transfer", "engine_driven_transfer", "lmcache_driven_transfer")
# "[req_id=R] " before it: the last "] Stored"/"] Retrieved" is LMCache's (R may hold one)
_REQ = r"(?:\[req_id=.*\] )?"
_STORED = re.compile(rf"{_REQ}Stored (\d+) out of total (\d+) tokens\. {_SIZE_COST}")
_RETRIEVED = re.compile(rf"{_REQ}Retrieved (\d+) out of (\d+) required tokens(?: \(from (\d+) total tokens\))?"
                        rf"\. {_SIZE_COST}")
_RETRIEVED_TOKENS = re.compile(rf"{_REQ}Retrieved (\d+) out of (\d+) out of total (\d+) tokens$")
_RETRIEVED_CHUNKS = re.compile(r"Retrieved (\d+) chunks \((\d+) tokens in total\) --hit rate [\d.]+% -- elapsed time "
                               r"(\d+(?:\.\d+)?(?:e-?\d+)?)$")
# the multiprocess server's moves: "Stored 2048 tokens in 0.012 seconds" (tokens and time, no size)
_MP_MOVE = re.compile(r"(Stored|Retrieved) (\d+) tokens in (\d+(?:\.\d+)?) seconds$")
_STORED_CHUNKS = re.compile(r"Stored/updated (\d+) chunks, total time ([\d.]+)s, make chunks time [\d.]+s")
# the id first: the numbers are the last ones that read so
_LOOKUP = re.compile(r"Reqid: .*, Total tokens (\d+), (?:Inference Engine computed tokens: (\d+), )?LMCache hit tokens: "
                     r"(\d+), (but )?need to load: (-?\d+)(?: < min_retrieve (\d+))?")
_STORING = re.compile(r"Storing KV cache for (\d+) out of (\d+) tokens \(skip_leading_tokens=(\d+)\)")
# the V0 adapter's (0.3.1-0.3.7 integration/vllm/vllm_adapter.py, DEBUG): a store's announcement and a retrieve's
# tokens handed to vLLM
_STORE_SKIPS = re.compile(r"Store skips (\d+) tokens and then stores (\d+) tokens")
_INJECTED = re.compile(r"Injected token number: (\d+)")
# the storage manager's prefetch (0.4.1 "prefix hits", 0.4.7+ "retained keys"): what the L1 and L2 tiers held of
# a request's keys
_PREFETCH = re.compile(r"Prefetch request completed \(L1\+L2\): (\d+)/(\d+) (?:retained keys|prefix hits) \((\d+) L1, "
                       r"(\d+) L2\) in ([\d.]+) ms")


def _parse(frame: Frame) -> list[Event] | None:
    msg = frame.message
    c0 = msg[:1]
    if c0 == "[" or c0 == "S":
        m = _STORED.match(msg)
        if m:
            return [Event("lmcache", {"op": "store", "tokens": int(m.group(1)), "of_tokens": int(m.group(2)),
                                      "bytes": round(float(m.group(3)) * _GIB), "seconds": float(m.group(4)) / 1000})]
    if c0 == "[" or c0 == "R":
        m = _RETRIEVED.match(msg)
        if m:
            fields = {"op": "retrieve", "tokens": int(m.group(1)), "of_tokens": int(m.group(2)),
                      "bytes": round(float(m.group(4)) * _GIB), "seconds": float(m.group(5)) / 1000}
            if m.group(3):
                fields["total_tokens"] = int(m.group(3))
            return [Event("lmcache", fields)]
        m = _RETRIEVED_TOKENS.match(msg)
        if m:
            return [Event("lmcache", {"op": "retrieve", "tokens": int(m.group(1)), "of_tokens": int(m.group(2)),
                                      "total_tokens": int(m.group(3))})]
    if c0 == "S" or c0 == "R":
        m = _MP_MOVE.match(msg)
        if m:  # (the rate needs bytes: these count their tokens only)
            return [Event("lmcache", {"op": "store" if m.group(1) == "Stored" else "retrieve", "tokens": int(m.group(2)),
                                      "mp_seconds": float(m.group(3))})]
    if c0 == "S":
        m = _STORING.match(msg)
        if m:
            return [Event("lmcache", {"op": "store_begin", "tokens": int(m.group(1)), "of_tokens": int(m.group(2)),
                                      "skipped_tokens": int(m.group(3))})]
        m = _STORED_CHUNKS.match(msg)
        if m:
            return [Event("lmcache", {"op": "store", "chunks": int(m.group(1)), "seconds": float(m.group(2))})]
        m = _STORE_SKIPS.match(msg)
        if m:
            return [Event("lmcache", {"op": "store_begin", "tokens": int(m.group(2)), "skipped_tokens": int(m.group(1))})]
    if c0 == "I":
        m = _INJECTED.match(msg)
        if m:  # (the pre-v1 engine's "Retrieved ... chunks" counts the same tokens: these are not counted again)
            return [Event("lmcache", {"op": "inject", "tokens": int(m.group(1))})]
    if c0 == "P":
        m = _PREFETCH.match(msg)
        if m:
            return [Event("lmcache", {"op": "prefetch", "hit_keys": int(m.group(1)), "keys": int(m.group(2)),
                                      "l1_keys": int(m.group(3)), "l2_keys": int(m.group(4)),
                                      "seconds": float(m.group(5)) / 1000})]
    if c0 == "R":
        m = _LOOKUP.match(msg)
        if m:
            fields = {"op": "lookup", "total_tokens": int(m.group(1)), "hit_tokens": int(m.group(3)),
                      "need_to_load": int(m.group(5))}
            if m.group(2) is not None:
                fields["computed_tokens"] = int(m.group(2))
            if m.group(6) is not None:
                fields["skipped"] = True  # too few to load: the hits were not retrieved
            return [Event("lmcache", fields)]
        m = _RETRIEVED_CHUNKS.match(msg)
        if m:
            return [Event("lmcache", {"op": "retrieve", "chunks": int(m.group(1)), "tokens": int(m.group(2)),
                                      "seconds": float(m.group(3))})]
    return None


PARSER = Parser("lmcache", ("Stored ", "Retrieved ", "LMCache hit tokens", "Storing KV cache for ", "Stored/updated "),
                _parse, where(("DEBUG", "INFO"), LOGGERS,
                              start=rf"{_REQ}(?:Stored |Retrieved |Storing KV cache for |Stored/updated )|Reqid: "))


def _own(frame: Frame) -> list[Event] | None:
    # (LMCache's own header only: framing read it, its file is at the record's end)
    return _parse(frame) if frame.header is not None and "LMCache" in frame.header else None


# The lines only LMCache's own logger prints, under its own header (the V0 adapter's, the storage manager's):
# never a line of vLLM's header, so the fast path's filter for vLLM's quiet INFO lines leaves their needles out
# (exporter.parsers.NO_NEEDLE_FILTERS) and costs those lines nothing.
OWN_HEADER = Parser("lmcache", ("Store skips ", "Injected token number: ", "Prefetch request completed "), _own,
                    where(("DEBUG", "INFO"), ("vllm_adapter", "storage_manager"),
                          start=r"Store skips \d|Injected token number: \d|Prefetch request completed \(L1\+L2\): \d"))
