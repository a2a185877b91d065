"""The trust boundary's part that needs memory of the stream (issue 32): which lines continue a
record that echoes a client's text, where a record glued onto another may be split off, and what a
carriage return inside a record is.

A client's text reaches the log inside vLLM's own records (exporter.parsers.echo lists them). Inside a
line it is harmless once every family anchors its words where vLLM prints them (exporter.parsers.base's
``Where``); these are the ways it could still pass for a line of its own:

- A newline in text vLLM prints raw (a request id from the body's ``request_id``, a LoRA name): vLLM's
  formatter repeats the record's header on the next line, so the continuation carries the echoing
  record's exact header. ``Echoes`` remembers that header per process and takes every line with it
  for part of the echo (and families gate on level and logger, so a continuation of an INFO record
  is never an error, whoever wrote it). The record's bounded facts (a request's adapter, a response's
  finish reason) are at its end, after the id: a record whose first line did not hold them is
  ``pending`` until a continuation line does (the first that does is read, once).
- A vLLM header in the text (``...xERROR 12-04 10:00:00 [core.py:1] EngineCore encountered...``),
  which the glued-record split would cut off as a record: a record is split off only after text that
  is vLLM's own through and through (``glue_host``).
- A carriage return in text printed raw: framing keeps what follows the last one (progress bars redraw
  so), which would drop the record's header; inside a vLLM record it is the record's text instead
  (``inner_returns``).
- A traceback in text printed raw (a request id holding one, in a record logged with its exception):
  in the text format its lines are the record's continuation lines like the real traceback's, and
  nothing tells them apart; a JSON record keeps them apart, the message's lines are text and only
  ``exc_info`` is a traceback (``message_lines``).
"""

from __future__ import annotations

import json
import re

from exporter.framing.clock import Clock
from exporter.framing.frame import Frame, frame_line
from exporter.parsers import echo, parse_frame

# The families whose lines are vLLM's words and numbers from end to end (a client's text is in none
# of them): a record glued after one of these lines is a record (vllm-project/vllm#18115). An access
# line is one when it is whole (its path is the client's, but a record glued on starts after the status).
GLUE_HOSTS = frozenset({"engine_stats", "mfu", "prefix_cache", "spec_decode", "spec_calibration", "diffusion_decoding",
                        "kv_transfer", "access_log"})
# Progress bars (tqdm) that records get glued onto when a newline is lost.
_PROGRESS = re.compile(r"(?:Loading (?:safetensors|pt) checkpoint shards|Capturing CUDA graph|Processed prompts|"
                       r"Adding requests|Compiling|\d+%\|)")


def glue_host(frame: Frame) -> bool:
    """Whether a record glued on after ``frame``'s message may be split off as a record: the message
    is a progress bar or a line of GLUE_HOSTS, so what follows it is no client's text."""
    if _PROGRESS.match(frame.message):
        return True
    events = parse_frame(frame)
    return bool(events) and all(ev.kind in GLUE_HOSTS for ev in events)


# Where a record glued onto the text before it starts: a level and vLLM's date and "[" right after a non-space.
GLUED = re.compile(r"(?<=\S)(?=(?:DEBUG|INFO|WARNING|ERROR|CRITICAL) \d\d-\d\d \d\d:\d\d:\d\d \[)")


def split_glued(f: Frame, clock: Clock) -> list[Frame]:
    """``f``, and the records glued onto its line after it (a lost newline), each split off where the text before
    it is vLLM's own (``glue_host``): a header inside a client's text stays text. A glued record is framed on its
    own (it is another record), with the line's wrapper facts where it has none."""
    frames, g = [f], f
    while True:
        msg = g.message
        m = GLUED.search(msg)
        if m is None:
            break
        g.message = msg[:m.start()]
        if not glue_host(g):
            g.message = msg
            break
        g = frame_line(msg[m.start():], clock)
        g.process, g.pid = g.process or f.process, g.pid or f.pid
        g.host, g.unit = f.host, f.unit
        if f.ts_source == "rfc3339" or g.ts is None:
            g.ts, g.ts_source = f.ts, f.ts_source
        frames.append(g)
    return frames


def inner_returns(line: str, clock: Clock) -> str:
    """``line`` as framing should read it: a carriage return after the start of a vLLM record (a
    header before it) is part of the record's text, printed raw, and becomes a space; anywhere else
    (a progress bar redrawing itself) it stays, and framing keeps the last drawing."""
    body = line.rstrip("\r\n")
    i = body.find("\r")
    if i < 0 or frame_line(body[:i], clock).header is None:
        return line
    return body.replace("\r", " ")


def message_lines(record: str, frames: int) -> int:
    """How many of a JSON record's ``frames`` hold its message (the rest are its ``exc_info``): framing
    makes one frame per line of the message, then one per line of the exception. Counted only for a
    record of several frames (a message of one line and no exception is one frame)."""
    if frames < 2:
        return frames
    try:
        rec = json.loads(record)
        message = rec.get("message", rec.get("body"))
    except (ValueError, RecursionError, AttributeError):
        return frames  # (framing read it, so this does not happen; all of it is text then)
    if not isinstance(message, str):
        return 1  # framing dumps it as JSON: one line
    return min(frames, message.count("\n") + 1)


class Echoes:
    """The echo records of one stream: what each process's last one was, and its header, so that its
    continuation lines (the same header, vLLM's formatter repeats it) are taken for it."""

    MAX_PROCESSES = 1024

    def __init__(self) -> None:
        # process -> (header, record, pending) of its last echo; pending: the record, while its facts are to come
        self._headers: dict[tuple, tuple[str, str, str | None]] = {}

    def record(self, f: Frame, key: tuple) -> str | None:
        """The echo record ``f`` begins or continues (exporter.parsers.echo's name for it; "continued"
        for a continuation line), else None."""
        rec = echo.recognise(f)
        header = f.header
        if rec is None:
            return "continued" if header is not None and self.continues(key, header.rstrip()) else None
        return rec if header is None else self.begins(key, header.rstrip(), rec)

    def begins(self, key: tuple, header: str, rec: str) -> str:
        """``rec`` (echo.recognise's name for the record a line of ``key`` with this header, white space stripped
        from its end, begins by its words), or "continued" when it is a line of the last echo record's text."""
        headers = self._headers
        last = headers.get(key)
        if last is not None and last[0] == header and last[1] != rec and last[1] != "continued":
            # the same header (second, file and line) as the last echo, another record's words: a line
            # of the client's text inside it (a LoRA name with a line break holding "Aborted request(s)").
            # (After lines of a record whose start this read did not see, a record's words start one.)
            return "continued"
        if len(headers) >= self.MAX_PROCESSES:
            headers.clear()
        headers[key] = (header, rec, rec if rec in echo.FACT_RECORDS else None)
        return rec

    def header(self, key: tuple) -> str | None:
        """The header of ``key``'s last echo record (white space stripped from its end), None if it has none."""
        last = self._headers.get(key)
        return last[0] if last is not None else None

    def continues(self, key: tuple, header: str) -> bool:
        """Whether a line of ``key`` with this header (white space stripped from its end) is a line of its last echo
        record: the same header (second, file and line)."""
        headers = self._headers
        return bool(headers) and headers.get(key, ("",))[0] == header

    def pending(self, key: tuple) -> str | None:
        """The record whose continuation line ``key``'s last one was, while its facts are still to come."""
        last = self._headers.get(key)
        return last[2] if last is not None else None

    def found(self, key: tuple) -> None:
        """The facts of ``key``'s last echo record were read: its later lines are text."""
        last = self._headers.get(key)
        if last is not None and last[2] is not None:
            self._headers[key] = (last[0], last[1], None)
