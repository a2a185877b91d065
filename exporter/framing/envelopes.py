"""JSON envelopes: a tool's JSON object that carries one raw line of the log, not a record of its own.

- docker's json-file log driver (and fluent-bit's default): ``{"log": "<line>\\n", "stream": "stderr",
  "time": "<RFC 3339>"}`` (moby daemon/logger/jsonfilelog);
- ``journalctl -o json``: ``{"MESSAGE": "<line>", "__REALTIME_TIMESTAMP": "<µs>", "_HOSTNAME": ...,
  "SYSLOG_IDENTIFIER": ...}`` (a MESSAGE holding control bytes is an array of byte values);
- stern's ``--output json``: ``{"message": "<line>", "nodeName": ..., "namespace": ..., "podName": ...,
  "containerName": ...}``;
- Loki's ``logcli query -o jsonl``: ``{"labels": {...}, "line": "<line>", "timestamp": "<RFC 3339>"}``.

``unwrap`` gives the line they carry, with the envelope's time, host and unit; framing then reads the line
as any other. A vLLM JSON record (``message`` with ``levelname``...) is no envelope: it is read whole by
exporter.framing.json_records.

Pure: text in, text out.
"""

from __future__ import annotations

import json
import re

from exporter.framing.clock import Clock, epoch_seconds

MAX_ENVELOPE_CHARS = 1 << 20
_RFC3339 = re.compile(r"(\d{4})-(\d\d)-(\d\d)[T ](\d\d):(\d\d):(\d\d)(\.\d+)?(Z|[+-]\d\d:?\d\d)$")


def _bytes_text(value) -> str | None:
    if isinstance(value, str):
        return value
    if isinstance(value, list) and len(value) <= MAX_ENVELOPE_CHARS and all(type(b) is int and 0 <= b < 256 for b in value):
        return bytes(value).decode("utf-8", "replace")
    return None


def _zoned(text) -> float | None:
    if not isinstance(text, str):
        return None
    m = _RFC3339.match(text[:64])
    return Clock.rfc3339(m) if m is not None and m.group(8) is not None else None


def _name(value) -> str | None:
    return value[:128] if isinstance(value, str) and value else None


def unwrap(text: str) -> tuple[str, float | None, str | None, str | None] | None:
    """(line, time, host, unit) of the envelope ``text`` is, else None."""
    if len(text) > MAX_ENVELOPE_CHARS or text.rstrip()[-1:] != "}":
        return None
    if '"log":' in text:
        key = "log"
    elif '"MESSAGE":' in text:
        key = "MESSAGE"
    elif '"podName":' in text:
        key = "message"
    elif '"line":' in text and '"labels":' in text:
        key = "line"
    else:
        return None
    try:
        rec = json.loads(text)
    except (ValueError, RecursionError):
        return None
    if not isinstance(rec, dict):
        return None
    line = _bytes_text(rec.get(key))
    if line is None:
        return None
    # one physical line: a value holding more (a journal entry of several lines) keeps its first
    line = line.split("\n", 1)[0].rstrip("\r")
    if key == "log":
        return line, _zoned(rec.get("time")), None, None
    if key == "MESSAGE":
        us = rec.get("__REALTIME_TIMESTAMP")
        ts = epoch_seconds(float(us)) if isinstance(us, str) and us.isdigit() and len(us) < 20 else None
        return line, ts, _name(rec.get("_HOSTNAME")), _name(rec.get("SYSLOG_IDENTIFIER"))
    if key == "message":
        return line, None, _name(rec.get("nodeName")), _name(rec.get("containerName"))
    return line, _zoned(rec.get("timestamp")), None, None
