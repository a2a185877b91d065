"""vLLM's JSON log records, turned into the frames its text format would have given.

vLLM 0.34 logs one JSON object per line with ``--logging-config.formatter json``
(``vllm/logging_utils/formatter.py``: python-json-logger's JsonFormatter with ``JSON_FORMAT =
"%(asctime)s %(levelname)s %(name)s %(processName)s %(process)d %(message)s"``, plus the record's
``vllm_process_name``); uvicorn's access and error lines go through the same formatter
(``create_uvicorn_log_config(formatter="json")``). A user's own JsonFormatter config (vLLM's
logging_configuration example) may give only ``message`` and the extras. An exception is one
``exc_info`` string holding the whole traceback with its newlines (a list of lines is taken too).
The OpenTelemetry-style shape proposed in vllm-project/vllm#54769 (``body``, ``severity_text``,
``timestamp``) is read the same way. The time is any of the common JSON formatters' keys
(``TIME_KEYS``), so a record from a user's own logging config has one too.

A record becomes the frame of its message (level, logger, process, pid, time from its keys) and,
when it carries ``exc_info``, one frame per traceback line after it with the same header: exactly
what ``logger.exception`` writes in the text format, so the traceback joiner and every parser work
unchanged. The header is made unique per record, so a traceback never runs on into the next record.

Pure: no I/O; the frames' wrapper fields (host, unit, an outer RFC 3339 stamp) are the outer frame's.
"""

from __future__ import annotations

import json
from datetime import datetime

from exporter.framing.clock import Clock, epoch_seconds, plausible

from exporter.framing.frame import Frame
from exporter.framing.lines import MAX_MAX_LINE_BYTES, MAX_RECORD_LINES, record_lines
from exporter.framing.text import scrub_json, unescaped_may_need_scrub

_LEVELS = {"DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL"}
_LEVEL_ALIASES = {"WARN": "WARNING", "FATAL": "CRITICAL", "ERR": "ERROR", "TRACE": "DEBUG"}
MAX_RECORD_CHARS = MAX_MAX_LINE_BYTES  # (every line is bounded before: this only guards other callers)


def looks_like_record(message: str) -> bool:
    return message[:2] == '{"' and message.rstrip()[-1:] == "}"


def record_frames(outer: Frame, clock: Clock, seq: int, max_lines: int = MAX_RECORD_LINES,
                  on_cut=None) -> list[Frame] | None:
    """The frames of the JSON record in ``outer.message``, or None when it is not one of vLLM's.
    ``seq`` makes the record's header unique. At most ``max_lines`` frames: a record whose message
    and traceback hold more lines (a message of a million newlines, an ``exc_info`` list of a
    million items) keeps the first and last half of them, and ``on_cut(record_chars)`` is called."""
    text = outer.message
    if len(text) > MAX_RECORD_CHARS:
        return None
    try:
        rec = json.loads(text)
    except (ValueError, RecursionError):  # (nesting ~1,000 deep: a 2 KB line)
        return None
    if not isinstance(rec, dict):
        return None
    if unescaped_may_need_scrub(text):  # a lone surrogate or NUL escaped in it (exporter.framing.text)
        rec = scrub_json(rec)
    message = rec.get("message", rec.get("body"))
    if message is None:
        return None
    if not isinstance(message, str):
        try:
            message = json.dumps(message, ensure_ascii=False)
        except (ValueError, RecursionError):
            return None
    level = _text(rec.get("levelname", rec.get("severity_text", rec.get("level"))), 10)
    level = level.upper() if level is not None else None
    level = _LEVEL_ALIASES.get(level, level)
    if level not in _LEVELS:
        level = None
    logger = _text(rec.get("name") or rec.get("log.target") or rec.get("target"), 200)
    if logger is not None and "filename" in rec and "lineno" in rec:
        logger = f"{_text(rec['filename'], 200)}:{_text(rec['lineno'], 12)}"
    else:
        # NVIDIA Dynamo's JSONL (lib/runtime/src/logging.rs): a Python record's file and line as "log.file" and
        # "log.line" (older) or "file" and "line"; its logger "module.funcName" as "log.target" or "target"
        path, line = rec.get("log.file", rec.get("file")), rec.get("log.line", rec.get("line"))
        if isinstance(path, str) and type(line) is int:
            logger = f"{path[-200:].rpartition('/')[2]}:{_text(line, 12)}"
    process = _text(rec.get("vllm_process_name") or rec.get("processName"), 64)
    process = process if process and process != "MainProcess" else None
    pid = rec.get("process")
    pid = pid if type(pid) is int and 0 <= pid < 1 << 32 else None
    ts, ts_source = outer.ts, outer.ts_source
    if ts_source != "rfc3339":  # an outer RFC 3339 stamp (journald, CRI) is the better time
        t = _record_time(rec, clock)
        if t is not None:
            ts, ts_source = t, "json"
    header = f"{level or '-'} json#{seq} [{logger or '-'}] "
    base = dict(raw=outer.raw, ts=ts, ts_source=ts_source, host=outer.host, unit=outer.unit, process=process,
                pid=pid, level=level, logger=logger, header=header, clean=outer.clean, inner_at=outer.inner_at,
                uvicorn=bool(logger and logger.startswith("uvicorn")))
    # a multi-line message is several lines in the text format too
    lines, cut = record_lines(message, max_lines)
    exc = rec.get("exc_info")
    if isinstance(exc, list):
        if len(exc) > max_lines:
            exc, cut = exc[:max_lines // 2] + exc[-(max_lines - max_lines // 2):], True
        exc = "\n".join((x if isinstance(x, str) else _text(x, 1000) or "").rstrip("\n") for x in exc)
    if isinstance(exc, str) and exc:
        more, cut_exc = record_lines(exc.rstrip("\n"), max_lines)
        lines += more
        cut = cut or cut_exc
    if len(lines) > max_lines:
        lines, cut = lines[:max_lines // 2] + lines[-(max_lines - max_lines // 2):], True
    if cut and on_cut is not None:
        on_cut(len(text))
    return [Frame(message=line.rstrip(), **base) for line in lines]


def _text(value, limit: int) -> str | None:
    """A key's value as text, at most ``limit`` characters: a string or a number; None for anything
    else (a nested object's repr could recurse, a huge integer's could refuse)."""
    if isinstance(value, str):
        return value[:limit]
    if isinstance(value, (int, float)) and not isinstance(value, bool) and -1e18 < value < 1e18:
        return str(value)[:limit]
    return None


# Where JSON formatters put the time, first found wins: python-json-logger's asctime (vLLM's own
# JSON_FORMAT) and its timestamp=True / timestamp="KEY" ISO 8601 key; OTel's and structlog's
# "timestamp"; Bunyan, pino, GCP's structured logging, Go's slog: "time"; Logstash and ECS:
# "@timestamp"; zap: "ts" (epoch seconds); a formatter that dumps the LogRecord: "created".
TIME_KEYS = ("asctime", "time", "timestamp", "@timestamp", "ts", "created")


def _record_time(rec: dict, clock: Clock) -> float | None:
    """The record's time from the first of TIME_KEYS it has: a text time (asctime, ISO 8601 / RFC
    3339) or a number since the epoch (seconds, milliseconds, microseconds or nanoseconds, told apart
    by size). None for a time no log was written at (exporter.framing.clock.plausible)."""
    for key in TIME_KEYS:
        t = rec.get(key)
        if t is None:
            continue
        if isinstance(t, str):
            return _text_time(t[:64], clock)
        if isinstance(t, (int, float)) and not isinstance(t, bool):
            return epoch_seconds(float(t)) if -1e30 < t < 1e30 else None  # (float() of a huge int overflows)
        return None
    return None


def _text_time(t: str, clock: Clock) -> float | None:
    """asctime ("2026-12-04 18:07:07,802", local time) or ISO 8601 / RFC 3339 ("2026-12-04T18:07:07.802341+00:00",
    "...Z"; without an offset: local time), or an epoch number written as a string."""
    t = t.strip()
    if len(t) >= 19 and t[10] == " " and (len(t) == 19 or t[19] in ",."):
        try:
            dt = datetime.strptime(t[:19], "%Y-%m-%d %H:%M:%S").replace(tzinfo=clock.tz)
            ts = plausible(dt.timestamp())
        except (ValueError, OverflowError, OSError):  # (year 1 west of UTC is year 0)
            return None
        frac = t[20:26] if len(t) > 20 else ""
        return None if ts is None else ts + (int(frac) / 10 ** len(frac) if frac.isdigit() else 0.0)
    if t[-1:] in "Zz":
        t = t[:-1] + "+00:00"
    try:
        dt = datetime.fromisoformat(t)
    except ValueError:
        if t.replace(".", "", 1).isdigit() and len(t) < 40:  # an epoch number written as a string
            return epoch_seconds(float(t))
        return None
    try:
        if dt.tzinfo is None:
            dt = dt.replace(tzinfo=clock.tz)
        return plausible(dt.timestamp())
    except (ValueError, OverflowError, OSError):
        return None
