"""One match for the whole of the commonest periodic lines: wrapper, header and message at once.

A busy server logs an engine-stats, a spec-decode and a KV-transfer line per engine every few
seconds, always in the same shape (journald, process tag, vLLM header, then the current release's
exact wording, or for KV transfers plain ``key=number`` pairs).
Framing them and then parsing them is two passes and a Frame in between; here the framing fast
shape and the parser's exact-wording pattern are compiled into one regex. The wrapper part is an
atomic group, so it matches exactly as framing alone would, and the message part is the parser's
own pattern, so a match means framing + parsing would give these very fields (tests compare the
two on real and mutated lines). Anything else, or a line this cannot place, goes the usual way.
"""

from __future__ import annotations

import re

from exporter.framing import BARE_RESET, JOURNALD_RECORD_P, NO_MONTH, Clock, header_time, record_time
from exporter.parsers import engine_stats, kv_transfer, spec_decode

_WRAPPER_GROUPS = re.compile(JOURNALD_RECORD_P).groups  # group numbers framing's helpers expect


def _shape(needle: str, kind: str, body: str, fields):
    regex = re.compile(f"(?>{JOURNALD_RECORD_P}){body}")
    return needle, kind, regex, tuple(range(_WRAPPER_GROUPS + 1, regex.groups + 1)), fields


# (needle that must be in the line, kind, regex, the message's group numbers, fields from those groups)
_SHAPES = tuple(
    _shape(needle, kind, body, fields)
    for needle, kind, body, fields in (
        ("Avg prompt throughput: ", "engine_stats", engine_stats.CURRENT_PATTERN, engine_stats.current_fields),
        (spec_decode.MARKER, "spec_decode", re.escape(spec_decode.MARKER) + spec_decode.CURRENT_PATTERN,
         spec_decode.current_fields),
        (kv_transfer.MARKER, "kv_transfer", re.escape(kv_transfer.MARKER) + "(.*)", kv_transfer.plain_fields),
    )
)


def match(line: str, clock: Clock) -> tuple[str, dict, float | None, str | None, int | None] | None:
    """(kind, fields, ts, process, pid) when ``line`` is one of the shapes, else None.

    The caller has checked the line for ESC, caret and ``#033`` colour and carriage returns, as
    framing's fast shape requires."""
    if not line[:1].isalpha():  # framing's fast shape starts so
        return None
    for needle, kind, regex, groups, fields in _SHAPES:
        if needle in line:
            break
    else:
        return None
    text = line.rstrip()
    m = regex.fullmatch(text)
    # Only the wrapper can hold a colour reset: the messages' patterns have no "[" (and a KV body
    # holding one is not plain, so it goes the usual way).
    if m is None or BARE_RESET.search(text, 0, m.end(9)) is not None:
        return None
    ts = record_time(m, text, clock)
    if ts is NO_MONTH:
        return None
    if ts is None:
        ts = header_time(m, clock)
    proc, pid = m.group(10, 11)
    values = m.group(*groups)
    out = fields(*values) if len(groups) > 1 else fields(values)
    if out is None:
        return None
    return kind, out, ts, proc, int(pid) if pid is not None else None
