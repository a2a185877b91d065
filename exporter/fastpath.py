"""One match for the whole of the commonest periodic lines: wrapper, header and message at once.

A busy server logs an engine-stats and a spec-decode line per engine every few seconds, always in
the same shape (journald, process tag, vLLM header, then the current release's exact wording).
Framing them and then parsing them is two passes and a Frame in between; here the framing fast
shape and the parser's exact-wording pattern are compiled into one regex. The wrapper part is an
atomic group, so it matches exactly as framing alone would, and the message part is the parser's
own pattern, so a match means framing + parsing would give these very fields (tests compare the
two on real and mutated lines). Anything else, or a line this cannot place, goes the usual way.
"""

from __future__ import annotations

import re

from exporter.framing import BARE_RESET, JOURNALD_RECORD_P, NO_MONTH, Clock, header_time, record_time
from exporter.parsers import engine_stats, spec_decode

_WRAPPER_GROUPS = re.compile(JOURNALD_RECORD_P).groups  # group numbers framing's helpers expect

# (needle that must be in the line, kind, regex, fields from the message groups)
_SHAPES = tuple(
    (needle, kind, re.compile(f"(?>{JOURNALD_RECORD_P}){body}"), fields)
    for needle, kind, body, fields in (
        ("Avg prompt throughput: ", "engine_stats", engine_stats.CURRENT_PATTERN, engine_stats.current_fields),
        (spec_decode.MARKER, "spec_decode", re.escape(spec_decode.MARKER) + spec_decode.CURRENT_PATTERN,
         spec_decode.current_fields),
    )
)


def match(line: str, clock: Clock) -> tuple[str, dict, float | None, str | None, int | None] | None:
    """(kind, fields, ts, process, pid) when ``line`` is one of the shapes, else None.

    The caller has checked the line for ESC, caret and ``#033`` colour and carriage returns, as
    framing's fast shape requires."""
    if not line[:1].isalpha():  # framing's fast shape starts so
        return None
    for needle, kind, regex, fields in _SHAPES:
        if needle in line:
            break
    else:
        return None
    text = line.rstrip()
    m = regex.fullmatch(text)
    if m is None or BARE_RESET.search(text) is not None:
        return None
    ts = record_time(m, text, clock)
    if ts is NO_MONTH:
        return None
    if ts is None:
        ts = header_time(m, clock)
    proc, pid = m.group(10, 11)
    return kind, fields(*m.groups()[_WRAPPER_GROUPS:]), ts, proc, int(pid) if pid is not None else None
