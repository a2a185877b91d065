"""KV connector transfer lines: ``KV Transfer metrics: name=value, name=value, ...``.

Every key is kept as logged (``fields["metrics"]``); the ones we know are also normalised to base
units at the top level: ``store_bytes``, ``store_seconds``, ``load_bytes``, ``load_seconds``
(CPU offload, both the 0.16–0.23 ``GPU_to_CPU_total_*`` names and the 0.24+ ``vllm:kv_offload_*``
names), ``cpu_cache_usage``, and NIXL/Mooncake's ``transfers``, ``failed_transfers``,
``xfer_seconds_avg``, ``throughput_bytes_per_second`` (their "MB" is MiB).

Values may be tuples-labelled keys (``vllm:kv_offload_tiering_read_bytes:('1:cpu',)=``), dict
reprs (MultiConnector) or carry a space before ``=`` (tpu-inference): split at depth 0 only.
"""

from __future__ import annotations

import re
from math import isfinite
from operator import itemgetter

from exporter.parsers.events import Event
from exporter.framing.frame import Frame
from exporter.parsers._values import literal_eval, number
from exporter.parsers.base import INFO_LEVELS, Parser, where

MARKER = "KV Transfer metrics: "
_OPEN = {"(": ")", "[": "]", "{": "}"}

_STORE_BYTES = ("vllm:kv_offload_store_bytes", "GPU_to_CPU_total_bytes")
_STORE_TIME = ("vllm:kv_offload_store_time", "GPU_to_CPU_total_time")
_LOAD_BYTES = ("vllm:kv_offload_load_bytes", "CPU_to_GPU_total_bytes")
_LOAD_TIME = ("vllm:kv_offload_load_time", "CPU_to_GPU_total_time")
_MIB = 2**20
_NAMED = (("store_bytes", _STORE_BYTES), ("store_seconds", _STORE_TIME), ("load_bytes", _LOAD_BYTES),
          ("load_seconds", _LOAD_TIME))
_NUMBER = (int, float)


# The offload connector's usual line: plain ``key=number`` pairs, nothing nested, no spaces in keys.
# Such a body is read in bulk with string methods (each a loop in C); anything else goes through
# split_pairs and _value, which give the same result on it (tests compare the two).
_HEAD = itemgetter(slice(0, 1))
_EQ_JOIN = "=".join


# One connector logs the same keys in the same order every interval: once a body was read the
# splitting way, a pattern of exactly its keys reads the next ones in one match. A body the pattern
# takes is one the splitting way takes too, with the same result (keys known plain, values digits
# only); anything else is split as before (tests compare the two).
_TEMPLATES: list[tuple[tuple[str, ...], re.Pattern]] = []
_VALUE = "([0-9][0-9.eE+-]*)"


# A pattern every body plain_metrics takes matches whole (wider than what it takes): keys without white space
# or "=", values a digit and then what float() reads (digits, ".", "e", "E", "+", "-", white space). What
# exporter.parsers.reach reads to know which of a user's needles a plain KV line can hold (tests check both).
PLAIN_BODY = r"(?:[^\s=]+=\d[\d\s.eE+\-]*, )*[^\s=]+=\d[\d\s.eE+\-]*"


def plain_metrics(body: str) -> dict | None:
    """``a=1, b=2.5`` -> {"a": 1.0, "b": 2.5} when the body is only such pairs, else None."""
    for keys, pattern in _TEMPLATES:
        m = pattern.fullmatch(body)
        if m is not None:
            try:
                values = list(map(float, m.groups()))
            except ValueError:  # "1.2.3": the splitting way says what it is
                break
            return dict(zip(keys, values)) if _plain_bounded(values) else None
    out = split_plain_metrics(body)
    if out is not None:
        keys = tuple(out)
        # (a template of a hostile line's 100,000 keys would be a huge pattern, compiled for nothing)
        if len(keys) <= 64 and len(keys) == len(set(keys)) and not any(k == keys for k, _ in _TEMPLATES):
            _TEMPLATES.insert(0, (keys, re.compile(", ".join(re.escape(k) + "=" + _VALUE for k in keys))))
            del _TEMPLATES[4:]
    return out


def split_plain_metrics(body: str) -> dict | None:
    """plain_metrics the splitting way (string methods, each a loop in C)."""
    if "(" in body or "[" in body or "{" in body or "'" in body or '"' in body:
        return None  # split_pairs' nesting-aware way
    flat = body.replace(", ", "=").split("=")
    keys, raw = flat[0::2], flat[1::2]
    # Neither a key nor a value holds "=" or ", ", so putting the pairs back together gives the body
    # exactly when every ", "-separated part held exactly one "=" (else split_pairs decides).
    if len(keys) != len(raw) or ", ".join(map(_EQ_JOIN, zip(keys, raw))) != body:
        return None
    joined = "".join(keys)
    if "" in keys or joined.split() != [joined]:
        return None  # an empty key, or white space in one (split_pairs strips keys)
    # _value reads a value that starts with a digit and has no "_" with float() itself
    if "_" in "".join(raw) or not all(map(str.isdigit, map(_HEAD, raw))):
        return None
    try:
        values = list(map(float, raw))
    except ValueError:  # "1.2.3" starts with a digit but is no float: the general way reads it
        return None
    if not _plain_bounded(values):
        return None
    return dict(zip(keys, values))


# Values the plain way takes: within +-1e12, so that nothing fields_of derives (MiB to bytes) passes
# exporter.parsers._values.LIMIT; a line with a larger value (or inf, nan) goes the general way,
# whose event parse_frame bounds.
_PLAIN_LIMIT = 1e12


def _plain_bounded(values: list[float]) -> bool:
    # (no NaN gets here: every plain value starts with a digit, and float() reads none of those as NaN)
    return -_PLAIN_LIMIT <= min(values) and max(values) <= _PLAIN_LIMIT


def split_pairs(body: str) -> list[tuple[str, str]]:
    """``a=1, b:('x', 'y')=2, c={'k': 1, 'j': 2}`` -> [(a, 1), (b:('x', 'y'), 2), (c, {...})]."""
    if not any(ch in body for ch in "([{'\""):
        # The common case (offload metrics): no nesting, so a plain split is exact.
        out = []
        for part in body.split(", "):
            k, eq, v = part.partition("=")
            if eq and k.strip():
                out.append((k.strip(), v.strip()))
        return out
    pairs: list[tuple[str, str]] = []
    depth: list[str] = []
    quote = ""
    start = 0
    eq = -1
    i, n = 0, len(body)
    while i < n:
        ch = body[i]
        if quote:
            if ch == quote:
                quote = ""
        elif ch in "'\"":
            quote = ch
        elif ch in _OPEN:
            depth.append(_OPEN[ch])
        elif depth and ch == depth[-1]:
            depth.pop()
        elif not depth:
            if ch == "=" and eq < 0:
                eq = i
            elif ch == "," and body.startswith(", ", i):
                if eq > start:
                    pairs.append((body[start:eq].strip(), body[eq + 1:i].strip()))
                start, eq = i + 2, -1
                i += 1
        i += 1
    if eq > start:
        pairs.append((body[start:eq].strip(), body[eq + 1:].strip()))
    return pairs


def _value(text: str):
    c = text[:1]
    if c.isdigit() and "_" not in text:
        try:  # the usual case: a plain int or float repr
            v = float(text)
        except ValueError:
            pass
        else:
            if isfinite(v):
                return v
    if c == "{" and len(text) < 20000:
        try:
            v = literal_eval(text)
        except (ValueError, SyntaxError, MemoryError, RecursionError):
            return text
        return v if isinstance(v, dict) else text
    v = number(text) if text and (text[0].isdigit() or text[0] in "-+.n") else None
    return v if v is not None else text


def general_metrics(body: str) -> dict:
    """Every pair of any body: nested keys, dict values (MultiConnector), text values."""
    metrics: dict = {}
    for key, raw in split_pairs(body):
        v = _value(raw)
        if isinstance(v, dict):
            # MultiConnector: one dict per connector; flatten as "Connector.key".
            for k2, v2 in v.items():
                metrics[f"{key}.{k2}"] = v2 if isinstance(v2, (int, float)) else str(v2)
        else:
            metrics[key] = v
    return metrics


def _parse(frame: Frame) -> list[Event] | None:
    msg = frame.message
    i = msg.find(MARKER)
    if i < 0:
        return None
    body = msg[i + len(MARKER):]
    metrics = plain_metrics(body)
    if metrics is None:
        metrics = general_metrics(body)
    return [Event("kv_transfer", fields_of(metrics, msg))]


def plain_fields(body: str) -> dict | None:
    """The fields of a message that is MARKER + ``body``, when the body is plain ``key=number`` pairs
    (exporter.stream.fastpath's shape); None otherwise."""
    metrics = plain_metrics(body)
    return None if metrics is None else fields_of(metrics, body)


def fields_of(metrics: dict, text: str) -> dict:
    """The event's fields from the pairs; ``text`` (the message) tells a connector's line from offload's."""
    fields: dict = {"metrics": metrics}
    get = metrics.get
    for name, (current, old) in _NAMED:  # (_first, unrolled: this runs for every offload line)
        v = get(current)
        if not isinstance(v, _NUMBER):
            v = get(old)
            if not isinstance(v, _NUMBER):
                continue
        fields[name] = v
    usage = metrics.get("vllm:kv_offload_cpu_cache_usage_perc")
    if isinstance(usage, _NUMBER):
        # vLLM's *_perc gauges are 0-1; a build printing 0-100 is brought back to a ratio.
        fields["cpu_cache_usage"] = usage / 100.0 if usage > 1 else usage
    failures = metrics.get("vllm:kv_offload_allocation_failure")
    if isinstance(failures, _NUMBER):
        fields["allocation_failures"] = failures
    # NIXL / Mooncake (possibly flattened under a MultiConnector name); offload lines have none of these.
    for key, v in (metrics.items() if "vllm:kv_offload" not in text or "Num " in text or "(ms)" in text else ()):
        if not isinstance(v, _NUMBER):
            continue
        short = key.rsplit(".", 1)[-1]
        if short in ("Num successful transfers", "num_successful_transfers"):
            fields["transfers"] = fields.get("transfers", 0) + v
        elif short == "Num failed transfers":
            fields["failed_transfers"] = fields.get("failed_transfers", 0) + v
        elif short == "Avg xfer time (ms)":
            fields["xfer_seconds_avg"] = v / 1000.0
        elif short == "Throughput (MB/s)":
            fields["throughput_bytes_per_second"] = v * _MIB
        elif short == "Avg MB per transfer":
            fields["bytes_per_transfer_avg"] = v * _MIB
    return fields


# Where vLLM prints it (the trust boundary): after the stats line, at its level, the marker first (the file
# varies: kv_connector/v1/metrics.py, the stats logger, a plugin's connector such as tpu-inference's).
PARSER = Parser("kv_transfer", (MARKER,), _parse, where(
    INFO_LEVELS, start=r"(?:Engine \d+: )?" + MARKER))


# Mooncake's store connector (0.22+, with VLLM_MOONCAKE_STORE_TIER_LOG=1): one line per batch it loads, ``Mooncake
# load tier summary: req_id=%s batch_keys=%d memory_keys=%d disk_keys=%d unknown_keys=%d success_keys=%d
# failed_keys=%d bytes_by_tier={'memory': N, 'disk': N, 'unknown': N}``: where the store found the KV (its
# memory or its disk tier) and how much of it. The request's id comes first and may be a client's (a request-id
# header): the numbers are read after the last " batch_keys=", which no id can move.
LOAD_TIERS_MARKER = "Mooncake load tier summary: "
_TIER_TAIL = re.compile(r"(\d{1,12}) memory_keys=(\d{1,12}) disk_keys=(\d{1,12}) unknown_keys=(\d{1,12}) "
                        r"success_keys=(\d{1,12}) failed_keys=(\d{1,12}) bytes_by_tier=\{([^{}]{0,200})\}")
_TIER_BYTES = re.compile(r"'(memory|disk|unknown)': (\d{1,15})")


def _load_tiers(frame: Frame) -> list[Event] | None:
    msg = frame.message
    at = msg.rfind(" batch_keys=")
    if at < 0:
        return None
    m = _TIER_TAIL.fullmatch(msg, at + len(" batch_keys="))
    if m is None:
        return None
    keys, memory, disk, unknown, ok, failed, tiers = m.groups()
    fields = {"keys": int(keys), "memory_keys": int(memory), "disk_keys": int(disk), "unknown_keys": int(unknown),
              "success_keys": int(ok), "failed_keys": int(failed)}
    for tier, n in _TIER_BYTES.findall(tiers):
        fields[tier + "_bytes"] = int(n)
    return [Event("mooncake_load_tiers", fields)]


MOONCAKE_LOAD_TIERS = Parser("mooncake_load_tiers", (LOAD_TIERS_MARKER,), _load_tiers,
                             where(INFO_LEVELS, start=LOAD_TIERS_MARKER))
