"""Records that echo text a client chose or a model generated: recognised before any other family,
never split, never read as anything else.

vLLM prints a client's text in these records (read from the released sources, 0.5-0.34; the research
is in docs/research/issue32-echoes.md):

- the request logger (``--enable-log-requests``, ``--enable-log-outputs``), ``request_logger.py``
  (``entrypoints/serve/utils/`` in 0.29-0.34), ``entrypoints/logger.py`` before (0.5-0.10), V0's
  ``async_llm_engine.py`` before that:
  - INFO ``Received request %s: params: %s, lora_request: %s.`` (0.32; 0.5-0.10 also ``prompt: %r``
    after the id): the id is the client's ``X-Request-Id`` header or the body's ``request_id``,
    printed as it came (a body's id may hold a newline); ``params`` is SamplingParams' repr, whose
    stop strings and bad words are quoted (escaped); the LoRARequest's repr is quoted too.
  - DEBUG ``Request %s details: prompt: %r, prompt_token_ids: %s, prompt_embeds shape: %s.``,
    ``Request %s JSON body: %s`` (the request as JSON, cut at ``--max-log-len``).
  - INFO ``Generated response %s%s: output: %r, finish_reason: %s``, DEBUG ``Generated response
    %s%s details: output_token_ids: %s``.
- the engine client logging requests (``v1/engine/async_llm.py``; V0 ``engine/async_llm_engine.py``):
  INFO ``Added request %s.``, ``Request %s aborted.``, ``Request %s failed (engine dead).``,
  ``Request %s failed (bad request): %s.`` (the error may quote the request), ``Aborted request(s)
  %s.``; V0 ``Aborted request %s.``, ``Finished request %s.``. Any vLLM record that begins with a
  request's id (``Request %s ...``) is taken for one of these: the id is the client's.
- LoRA adapters loaded at run time (``entrypoints/openai/models/serving.py``, names and paths from a
  client's ``/v1/load_lora_adapter`` body, printed raw): ``Loaded new LoRA adapter: name '%s', path
  '%s'``, ``Removed LoRA adapter: name '%s'``, ``Reloaded LoRA adapter '%s' ...``, ``Resolved and
  loaded LoRA adapter '%s' using %s``, ``Failed to load LoRA '%s' resolved by %s: %s. ...``.
- ``VLLM_DEBUG_LOG_API_SERVER_RESPONSE``'s middleware (``serve/middleware/log_response.py``):
  ``response_body={%s}`` (a response's JSON), ``response_body={streaming_complete: content=%r, ...}``.

LMCache's own records (its header, which framing reads) are none of these: ``Request %s failed to load %d
tokens across %d blocks`` begins with an id too, but its families read the numbers from the record's end.

Recognised by where the record starts (the words before the client's text), or by its logger alone
for the request logger's files, whose every record is an echo. A record's continuation lines (vLLM
repeats the record's header on each line of a multi-line message) are its own: the pipeline keeps
the header of the last echo per process and takes every line with that exact header for one.

What a recognised record yields: only the bounded facts ``events`` reads (a response's finish
reason, a request's LoRA adapter, an abort, a LoRA adapter loaded or removed), never the prompt, the
output, the id, a name a client gave at run time or a path. ``Pipeline._echo`` in exporter.stream.pipeline
makes them; exporter.stream.fastpath leaves the records that begin with ``COUNTED`` to the pipeline.

- ``request_log`` ``{"record": "received", "lora": name|None}``: a request the request logger logged
  (``--enable-log-requests``), with its adapter's name (the name of a LoRARequest's repr, read from the
  record's end; None without an adapter). Its label is bounded where it is counted.
- ``request_log`` ``{"record": "generated", "finish_reason": ...}`` (``--enable-log-outputs``): a finished
  response (a streaming delta says ``None``, or in its last chunk the reason: neither is counted; a stream
  is counted once, by its ``(streaming complete)`` record, whose ``finish_reason`` is ``streaming_complete``).
- ``request_log`` ``{"record": "aborted"}``: ``Aborted request(s) %s.`` (0.10.2+; ``Aborted request %s.``
  before): one abort call, which may name several requests (their ids, the client's, joined by commas, so
  not countable). ``Request %s aborted.`` says the same of a client's disconnect and is not counted again.
- ``lora_adapter`` ``{"event": "loaded|removed|reloaded|load_failed"}``: a LoRA adapter loaded at run time
  (``/v1/load_lora_adapter``, a resolver), unloaded, or failing to load; its name is not kept.
- ``validation_failure`` ``{}``: INFO ``Request %s failed validation: %s`` from the engine core
  (``v1/engine/core.py``, 0.33+): a request the engine refused as invalid, finished with reason ``error``
  (what vLLM's ``vllm:request_success_total{finished_reason="error"}`` counts). Read only from ``core.py``'s
  INFO records: the same words in another record are a client's.
- ``kv_offload_store_refused`` ``{}``: WARNING ``Request %s: cannot store chunks`` (0.26+; ``cannot store
  blocks`` 0.20-0.25, ``cannot store %s blocks`` 0.11-0.19) from the offloading connector's scheduler
  (``offloading/scheduler.py``, ``offloading_connector.py`` before 0.19): the offload tier had no room for a
  request's KV (what vLLM's ``vllm:kv_offload_allocation_failure`` counts). Read from the record's end, only
  from those files' WARNING records.
"""

from __future__ import annotations

import re

from exporter.framing.frame import Frame
from exporter.parsers.base import logger_stem
from exporter.parsers.events import Event

# message start -> the record it begins
STARTS = (
    ("Received request ", "received"),
    ("Generated response ", "generated"),
    ("Request ", "request"),
    ("Added request ", "added"),
    ("Aborted request", "aborted"),
    ("Finished request ", "finished"),
    ("Loaded new LoRA adapter: ", "lora"),
    ("Removed LoRA adapter: ", "lora"),
    ("Reloaded LoRA adapter ", "lora"),
    ("Resolved and loaded LoRA adapter ", "lora"),
    ("Failed to load LoRA ", "lora"),
    ("response_body={", "response_body"),
)
_FIRST_LETTERS = frozenset(s[0] for s, _ in STARTS)
# first letter -> the starts with it, in STARTS' order (a message is tried against two or four, not twelve)
_BY_FIRST = {c: tuple((s, r) for s, r in STARTS if s[0] == c) for c in _FIRST_LETTERS}
# the records whose facts are counted: a line starting so is not "ignorable" for exporter.stream.fastpath
COUNTED = ("Received request ", "Generated response ", "Aborted request", "Loaded new LoRA adapter: ",
           "Removed LoRA adapter: ", "Reloaded LoRA adapter ", "Resolved and loaded LoRA adapter ", "Failed to load LoRA ")
_LORA_EVENTS = (("Loaded new LoRA adapter: ", "loaded"), ("Resolved and loaded LoRA adapter ", "loaded"),
                ("Removed LoRA adapter: ", "removed"), ("Reloaded LoRA adapter ", "reloaded"),
                ("Failed to load LoRA ", "load_failed"))
# records of vLLM's that begin "Request " with its own words, not an id: the admission control's refusal
# (v1/engine/async_llm.py 0.29-0.34), whose id follows its words and whose end its family matches whole
_VLLM_REQUEST_WORDS = ("Request queue full - rejecting request ",)
# loggers whose every record echoes a request: vLLM's RequestLogger (request_logger.py; logger.py
# in 0.5-0.10, where vllm/logger.py's own few lines carry no fact either)
LOGGERS = frozenset({"request_logger", "logger"})


def recognise(frame: Frame) -> str | None:
    """The echo record ``frame`` begins (``received``, ``generated``, ``request``, ``lora``...), or
    "continued" for any record of an echo-only logger, else None."""
    msg = frame.message
    if msg[:1] in _FIRST_LETTERS:
        record = begun(msg, frame.header)
        if record != "":
            return record  # (None: LMCache's or vLLM's own words)
    if frame.logger is not None and logger_stem(frame.logger) in LOGGERS:
        return "continued"
    return None


def begun(message: str, header: str | None) -> str | None:
    """The echo record a message begins by its words (the first of STARTS it starts with); None for words that
    begin none under this header (LMCache's own records, vLLM's own ``Request ...`` words); "" for a message that
    starts with none of STARTS."""
    if header is not None and "LMCache" in header:
        return None  # LMCache's own records: its families read them from the words around the id
    if message.startswith(_VLLM_REQUEST_WORDS):
        return None  # vLLM's words, the id after them (exporter.parsers.serving_capacity reads them whole)
    for start, record in _BY_FIRST.get(message[:1], ()):
        if message.startswith(start):
            return record
    return ""


# What a record's end says, read from the end (the client's text comes before it, and a match from
# the left could start inside that text).
_FINISH = ", finish_reason: "
# the records that hold such facts, and the words their facts follow: a record whose id held a line break
# has them on a later line (exporter.stream.boundary.Echoes.pending), which the fast path must not skip
FACT_RECORDS = frozenset({"received", "generated"})
FACT_WORDS = (_FINISH, ", lora_request: ")
# a streaming response's chunk (0.32 ``Generated response %s%s``: " (streaming delta)", or " (streaming
# complete)" for the whole stream once it ended): a delta is never a response
_DELTA = " (streaming delta): output: "
_FINISH_REASON = re.compile(r"[a-z_]{1,32}|None")
_LORA = ", lora_request: "
_LORA_NAME = re.compile(r"LoRARequest\(lora_name='([^'\\]{1,128})'")


def fields(record: str, message: str) -> dict:
    """The bounded facts of an echo record: ``finish_reason`` of a generated response (``stop``,
    ``length``, ``abort``..., absent for a streaming delta that did not finish), ``lora`` of a
    received request (the adapter's name, None without one). Never the prompt, the output or the id.

    The hook for counting requests by adapter and responses by finish reason."""
    out: dict = {"record": record}
    if record == "generated":
        head, found, reason = message.rpartition(_FINISH)
        if found and _FINISH_REASON.fullmatch(reason) and reason != "None" and _DELTA not in head:
            out["finish_reason"] = reason
    elif record == "received":
        head, found, tail = message.rpartition(_LORA)
        if found:
            m = _LORA_NAME.match(tail)
            out["lora"] = m.group(1) if m else None
    return out


# vLLM's own records that begin with a request's id and end in its words, by (level, logger stem); the id is
# the client's (it may hold anything but a line break), so the words are read where vLLM puts them: after
# the id for the refusal (what follows is the validation error, which may quote the request), at the end
# for the store
_VALIDATION = " failed validation: "
_STORE_REFUSED = re.compile(r": cannot store (?:chunks|blocks|\d{1,9} blocks)\Z")
_STORE_LOGGERS = frozenset({"scheduler", "offloading_connector"})
# what the fast path must not skip unread among the quiet (INFO) lines: a record starting so and holding
# VALIDATION (exporter.stream.fastpath looks only in the records that start so)
REQUEST, VALIDATION = "Request ", _VALIDATION


def _request_events(message: str, level: str | None, logger: str | None) -> list[Event]:
    """A ``Request %s ...`` record's counted fact: an engine core's refusal or an offload store turned away."""
    stem = logger_stem(logger) if logger is not None else None
    if level == "INFO" and stem == "core" and _VALIDATION in message:
        return [Event("validation_failure", {})]
    if level == "WARNING" and stem in _STORE_LOGGERS and _STORE_REFUSED.search(message):
        return [Event("kv_offload_store_refused", {})]
    return []


def events(record: str, message: str, level: str | None = None, logger: str | None = None) -> list[Event]:
    """The counted facts of an echo record (see the module's docstring), none for the others. ``level`` and
    ``logger`` are the record's header's: vLLM's own ``Request %s`` records are told apart by them."""
    if record == "request":
        return _request_events(message, level, logger)
    if record == "received":
        f = fields(record, message)
        return [Event("request_log", f)] if "lora" in f else []
    if record == "generated":
        f = fields(record, message)
        return [Event("request_log", f)] if "finish_reason" in f else []
    if record == "aborted":
        return [Event("request_log", {"record": "aborted"})]
    if record == "lora":
        for start, event in _LORA_EVENTS:
            if message.startswith(start):
                return [Event("lora_adapter", {"event": event})]
    return []
