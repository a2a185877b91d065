"""Periodic engine stats: the ``Avg prompt throughput ...`` line, V0 and V1 (all releases).

V1: ``Engine 000: Avg prompt throughput: 0.0 tokens/s, Avg generation throughput: 359.0 tokens/s,
Running: 1 reqs, Waiting: 0 reqs, GPU KV cache usage: 1.9%, Prefix cache hit rate: 88.1%`` with
optional Deferred / KV fetch / Preemptions / Corrupted / External / MM segments in any order.
V0: ``... Running: 1 reqs, Swapped: 0 reqs, Pending: 0 reqs, GPU KV cache usage: 0.4%, CPU KV cache
usage: 0.0%.`` and the separate ``Prefix cache hit rate: GPU: 12.00%, CPU: 0.00%`` line.
"""

from __future__ import annotations

import re

from exporter.parsers.events import Event
from exporter.framing.frame import Frame
from exporter.parsers._values import integer, number, percent, ratio, segments, snake
from exporter.parsers.base import INFO_LEVELS, Parser, where

_ENGINE = re.compile(r"Engine (\d+): ")
_AGGREGATED = re.compile(r"(\d+) Engines Aggregated: ")
_KV_FETCH = re.compile(r"(\d+) waiting to start, (\d+) in progress, (\d+) completed waiting")
_V0_PREFIX = re.compile(r"Prefix cache hit rate: GPU: ([\d.]+|nan)%, CPU: ([\d.]+|nan)%")

_KNOWN = {
    "avg prompt throughput": ("prompt_tokens_per_second", number),
    "avg generation throughput": ("generation_tokens_per_second", number),
    "running": ("running", integer),
    "waiting": ("waiting", integer),
    "pending": ("waiting", integer),  # V0 called the waiting queue "Pending"
    "swapped": ("swapped", integer),
    "deferred": ("deferred", integer),
    "preemptions": ("preemptions", integer),
    "corrupted": ("corrupted", integer),
    "prefix cache hit rate": ("prefix_cache_hit_rate", ratio),
    "external prefix cache hit rate": ("external_prefix_cache_hit_rate", ratio),
    "mm cache hit rate": ("mm_cache_hit_rate", ratio),
    "cpu kv cache usage": ("swap_kv_cache_usage", ratio),
}


# The most common V1 line exactly: one anchored match instead of the generic splitter; any other
# wording goes the generic way (tests check both give the same fields). exporter.stream.fastpath matches it
# together with the line's wrapper.
# Numbers of at most 18 digits (exporter.parsers._values.MAX_DIGITS): a longer one goes the generic
# way, which leaves it out of the event.
CURRENT_PATTERN = (
    r"Engine (\d{1,18}): Avg prompt throughput: (-?\d{1,18}\.\d) tokens/s, "
    r"Avg generation throughput: (-?\d{1,18}\.\d) tokens/s, "
    r"Running: (\d{1,18}) reqs, Waiting: (\d{1,18}) reqs, (?:Preemptions: (\d{1,18}), )?"
    r"GPU KV cache usage: (\d{1,18}\.\d)%, Prefix cache hit rate: (\d{1,18}\.\d)%"
    r"(?:, External prefix cache hit rate: (\d{1,18}\.\d)%)?"
)
_CURRENT = re.compile(CURRENT_PATTERN)


def current_fields(engine, prompt, gen, running, waiting, preemptions, kv, prefix, external) -> dict:
    """The fields of a CURRENT_PATTERN match, from its groups."""
    fields = {"engine": int(engine), "prompt_tokens_per_second": float(prompt),
              "generation_tokens_per_second": float(gen), "running": int(running), "waiting": int(waiting)}
    if preemptions is not None:  # logged (0.11.1+) only in an interval that had some
        fields["preemptions"] = int(preemptions)
    fields["device"] = "GPU"
    fields["kv_cache_usage"] = percent(kv)
    fields["prefix_cache_hit_rate"] = percent(prefix)
    if external is not None:
        fields["external_prefix_cache_hit_rate"] = percent(external)
    return fields


def _parse_current(msg: str) -> dict | None:
    m = _CURRENT.fullmatch(msg)
    return None if m is None else current_fields(*m.groups())


def _parse(frame: Frame) -> list[Event] | None:
    msg = frame.message
    fields = _parse_current(msg)
    if fields is None:
        fields = parse_generic(msg)
    return [Event("engine_stats", fields)] if fields is not None else None


def parse_generic(msg: str) -> dict | None:
    """Any stats wording, segment by segment (V0, V1, optional and unknown segments)."""
    fields: dict = {"engine": 0}
    start = msg.find("Avg prompt throughput: ")
    if start < 0:
        return None
    head = msg[:start]
    if head:
        m = _ENGINE.search(head)
        if m:
            fields["engine"] = int(m.group(1))
        else:
            m = _AGGREGATED.search(head)
            if not m:
                return None
            fields["aggregated_engines"] = int(m.group(1))
    for key, value in segments(msg[start:]):
        k = key.lower()
        known = _KNOWN.get(k)
        if known:
            name, conv = known
            v = conv(value)
            if v is not None:
                fields[name] = v
        elif k.endswith(" kv cache usage"):
            fields["device"] = key[: -len(" KV cache usage")]
            v = ratio(value)
            if v is not None:
                fields["kv_cache_usage"] = v
        elif k == "mfu":
            mfu = mfu_fields("MFU: " + value)
            if mfu is not None:
                fields["mfu"] = mfu
        elif k == "kv fetch":
            m = _KV_FETCH.search(value)
            if m:
                fields["kv_fetch_waiting"] = int(m.group(1))
                fields["kv_fetch_in_progress"] = int(m.group(2))
                fields["kv_fetch_completed_waiting"] = int(m.group(3))
        else:
            # A custom build's extra segment: keep it, as a number when it is one.
            v = ratio(value) if value.endswith("%") else number(value)
            fields[snake(key)] = v if v is not None else value
    if "prompt_tokens_per_second" not in fields or "generation_tokens_per_second" not in fields:
        return None
    if "kv_cache_usage" not in fields and "swap_kv_cache_usage" in fields:
        # vLLM's CPU backend (V1) calls its main KV cache "CPU KV cache usage"; V0's CPU KV cache is
        # the swap space, logged beside the GPU's
        fields["device"] = "CPU"
        fields["kv_cache_usage"] = fields.pop("swap_kv_cache_usage")
    return fields


def _parse_v0_prefix(frame: Frame) -> list[Event] | None:
    m = _V0_PREFIX.search(frame.message)
    if not m:
        return None
    fields = {}
    g, c = ratio(m.group(1) + "%"), ratio(m.group(2) + "%")
    if g is not None:
        fields["gpu_prefix_cache_hit_rate"] = g
    if c is not None:
        fields["cpu_prefix_cache_hit_rate"] = c
    return [Event("prefix_cache", fields)]


# vLLM 0.34's analytic MFU estimate (--enable-mfu-metrics; v1/metrics/perf.py PerfMetricsLogging.log),
# logged after each stats line with the same prefix: "Engine 000: MFU: 160.6 TF/s/device 106.9 GB/s/device"
# (FLOPs the model's shapes imply per device, and bytes read plus written). vllm-project/vllm#30738 first
# put it inside the stats line as a segment, "MFU: 0.4 TF/s/GPU 0.5 GB/s/GPU".
_MFU = re.compile(r"MFU: (\d+(?:\.\d+)?) TF/s/(?:device|GPU) (\d+(?:\.\d+)?) GB/s/(?:device|GPU)")


def mfu_fields(text: str) -> dict | None:
    m = _MFU.search(text)
    if not m:
        return None
    return {"flops_per_second": float(m.group(1)) * 1e12, "bytes_per_second": float(m.group(2)) * 1e9}


def _parse_mfu(frame: Frame) -> list[Event] | None:
    msg = frame.message
    if not msg.lstrip().startswith(("Engine ", "MFU: ")) and "Engines Aggregated: MFU" not in msg:
        return None
    fields = mfu_fields(msg)
    if fields is None:
        return None
    m = _ENGINE.search(msg)
    if m:
        fields["engine"] = int(m.group(1))
    else:
        m = _AGGREGATED.search(msg)
        if m:
            fields["aggregated_engines"] = int(m.group(1))
        else:
            fields["engine"] = 0
    return [Event("mfu", fields)]


# Where vLLM prints them (the trust boundary): its stats logger, v1/metrics/loggers.py (V1), engine/metrics.py
# (V0; llm_engine.py in 0.3), at INFO (DEBUG while idle), the line's words first; the MFU line from
# v1/metrics/perf.py (0.34) or inside the stats line.
_ENGINE_P = r"(?:Engine \d+: |\d+ Engines Aggregated: )?"
PARSER = Parser("engine_stats", ("Avg prompt throughput: ",), _parse, where(
    INFO_LEVELS, ("loggers", "metrics", "llm_engine"), start=_ENGINE_P + "Avg prompt throughput: "))
PREFIX_V0 = Parser("prefix_cache", ("Prefix cache hit rate: GPU: ",), _parse_v0_prefix, where(
    INFO_LEVELS, ("metrics",), start="Prefix cache hit rate: GPU: "))
MFU = Parser("mfu", ("MFU: ",), _parse_mfu, where(INFO_LEVELS, ("perf", "loggers"), start=_ENGINE_P + "MFU: "))
