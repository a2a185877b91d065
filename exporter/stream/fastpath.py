"""The commonest periodic lines, framed and parsed without a Frame or the parser table in between.

A busy server logs an engine-stats, a spec-decode and a KV-transfer line per engine every few
seconds, always in the same shape: a wrapper (journald's text, the RFC 3339 stamp the journald and
container sources add, a node log's, or none), process tag, vLLM header, then the current release's
exact wording (for KV transfers, plain ``key=number`` pairs). Here the wrapper is matched by
framing's own fast-shape regexes (``common_match``), the message's first word picks the family, and the family's
exact-wording pattern is matched in place. A match means framing + parsing would give these very
fields (tests compare the two on real and mutated lines); anything else goes the usual way.

``ignorable`` is the same idea for the lines no parser wants (most INFO lines): in that shape, at
INFO or DEBUG, with no parser's needle in the message and nothing glued on, the usual way would
count the line as ignored and make nothing of it; so it is not framed at all. A WARNING-or-worse
record that no family wants is, the usual way, a ``log`` event and nothing else: that event is made
here too (``_logged``), and the pipeline asks its own state before taking it. A record that echoes a client's text
(exporter.parsers.echo) is never merely ignored: the pipeline is handed it (``ECHO_RECORD``), so that the stream's
echo state knows it and its later lines (the client's text, under its header) are its own, whatever they say; and
the pipeline asks that state before it takes a periodic or WARNING line read here.

With a user's rules (exporter.parsers.Families), a line holding the needle of a rule that may take it
(one bound to no logger file and level, or to this line's) goes the usual way, so the rules see it framed,
as the built-in families do. A periodic line read whole is searched only for the needles its shape's
message can hold (exporter.parsers.reach): a rule whose words are no engine-stats, spec-decode or KV
words costs those lines a dictionary look-up, not a substring search.
"""

from __future__ import annotations

import re

from exporter.framing.clock import Clock
from exporter.framing.frame import (BARE_RESET, COMMON_STARTS, LEVEL_WORDS, NO_MONTH, PLAIN_COMMON, STAMPED_COMMON,
                                    TRACEBACK_START, common_header, common_match, record_time)
from exporter.parsers import BUILT_IN, NO_NEEDLE_FILTERS, Families, echo, engine_stats, kv_transfer, spec_decode, tool_parser
from exporter.parsers._values import has_long_run
from exporter.parsers.base import logger_stem
from exporter.parsers.needles import matcher
from exporter.stream.traceback import CHAIN

# what the lines of the commonest shapes start with (framing's common_match): a letter (journald), else these
_STARTS = COMMON_STARTS
# the shapes whose time holds no month name (record_time never says NO_MONTH for them)
_NO_MONTH_NAME = (PLAIN_COMMON, STAMPED_COMMON)

# (what the message starts with, kind, its exact pattern, fields from that pattern's groups, the family's
# parser: its ``where`` says which levels and loggers its lines come from, so both ways keep the same
# boundary; the answer per (level, file) is remembered, they are few; and a pattern every message the fast
# path answers matches whole, from which a user's rules' needles that no such message holds are known,
# Families.shape_needles: the KV body's ``(.*)`` is only read when plain, kv_transfer.PLAIN_BODY)
_SHAPES = tuple(
    (start, kind, regex, fields, (parser.where, {}, reach))
    for start, kind, regex, fields, parser, reach in (
        ("Engine ", "engine_stats", re.compile(engine_stats.CURRENT_PATTERN), engine_stats.current_fields,
         engine_stats.PARSER, engine_stats.CURRENT_PATTERN),
        (spec_decode.MARKER, "spec_decode", re.compile(re.escape(spec_decode.MARKER) + spec_decode.CURRENT_PATTERN),
         spec_decode.current_fields, spec_decode.PARSER,
         re.escape(spec_decode.MARKER) + spec_decode.CURRENT_PATTERN),
        (kv_transfer.MARKER, "kv_transfer", re.compile(re.escape(kv_transfer.MARKER) + "(.*)"), kv_transfer.plain_fields,
         kv_transfer.PARSER, re.escape(kv_transfer.MARKER) + kv_transfer.PLAIN_BODY),
    ))


IGNORE = "ignore"  # what classify says of a line that ignorable() would pass


def classify(line: str, clock: Clock, quiet: bool = True, families: Families = BUILT_IN):
    """``match``'s answer for a line of one of the shapes (a tuple), IGNORE for one that ``ignorable``
    passes (unless ``quiet`` is False), else the usual way decides: with the wrapper's match when the
    line has framing's common shape (an ``re.Match``, for ``frame_line``'s ``shape``: not matched twice),
    False when it was looked for and the line has none (framing does not look again), else None. Both
    questions in one call, as the pipeline asks them."""
    if line[:1] not in _STARTS and not line[:1].isalpha():  # framing's common shapes start so
        return None
    text = line.rstrip()
    m = common_match(text)
    if m is None:
        return False  # (in no common shape: framing need not look again)
    # Which family, if any, by its message's first characters (one slice and one look-up: three substring tests of the
    # whole line cost a line that is none of them 0.5 µs); a decline below hands the match on, so that the usual way
    # frames the line with it
    end = m.end()
    shape = _BY_START.get(text[end:end + 3])
    if shape is not None and text.startswith(shape[0], end):
        return _shape(text, m, clock, shape, families)
    if not quiet:
        return m
    q = _quiet(text, m, clock, families)
    return IGNORE if q is True else q


def match(line: str, clock: Clock, families: Families = BUILT_IN
          ) -> tuple[str, dict, float | None, str | None, int | None] | None:
    """(kind, fields, ts, process, pid) when ``line`` is one of the shapes, else None.

    The caller has checked the line for ESC, caret and ``#033`` colour and carriage returns, as
    framing's fast shape requires."""
    got = classify(line, clock, quiet=False, families=families)
    return got[:5] if type(got) is tuple else None


def _admitted(where, level: str, file: str) -> bool:
    # (the stem of "file:line", as framing's logger is: a file holding a colon, "loggers.py:3", is no loggers.py)
    return (where.levels is None or level in where.levels) and (
        where.loggers is None or logger_stem(file + ":0") in where.loggers)


def _shape(text: str, m, clock: Clock, shape: tuple, families: Families):
    """A periodic line whose message starts with its ``shape``'s start (``text``: the line, white space stripped from
    its end; ``m``: its common match): ``match``'s tuple, else the match."""
    _, kind, regex, fields, (parser_where, admitted, reach) = shape
    level_file = m.group(12, 18)
    ok = admitted.get(level_file)
    if ok is None:
        if len(admitted) > 256:
            admitted.clear()
        ok = admitted[level_file] = _admitted(parser_where, *level_file)
    if not ok:
        return m  # not where the family's lines come from: the usual way decides (and declines it too)
    end = m.end()
    if families.rules:
        # (only the needles that a message of this shape can hold: most rules' hold none, and cost nothing here)
        if families.by_origin:
            key = (kind, level_file[0] if families.by_level else "", level_file[1] if families.by_file else "")
            needles = families.shape_cache.get(key)
            if needles is None:
                needles = families.shape_needles(kind, reach, key[2], key[1])
        else:
            needles = families.shape_any.get(kind)
            if needles is None:
                needles = families.shape_needles(kind, reach, "", "")
        for needle in needles:
            if needle in text:
                return m  # a rule may want it too: framed the usual way
    b = regex.fullmatch(text, end)
    # Only the wrapper can hold a colour reset: the messages' patterns have no "[" (and a KV body
    # holding one is not plain, so it goes the usual way). (Searched in the wrapper alone: two finds of "0m" and
    # "9m" in the whole line first cost a stats line twice what the search does, a KV line four times.)
    if b is None or BARE_RESET.search(text, 0, end) is not None:
        return m
    when = record_time(m, text, clock)
    if when is NO_MONTH:
        return m
    out = fields(*b.groups())
    if out is None:
        return m
    proc, pid = m.group(10, 11)
    # (the match last: the pipeline reads the header from it only when the process has an echo record open)
    return kind, out, when[0], proc, int(pid) if pid is not None and len(pid) <= 10 else None, m  # (pid: pid_of's)


_QUIET_LEVELS = frozenset({"INFO", "DEBUG"})
# a message holding none of these is read by no family (exporter.parsers.NO_NEEDLE_FILTERS)
_HOLDS_A_NEEDLE = matcher(NO_NEEDLE_FILTERS)
# what the records that echo a client's text start with (exporter.parsers.echo: counted or not)
_ECHO_STARTS = tuple(s for s, _ in echo.STARTS)


# The words besides the needles that may make _quiet decline a line in the quiet shape, one for each of its checks
# below (the periodic shapes' starts: classify hands a line whose message starts so to its shape; the scans decline
# a line holding them anywhere, which asks a few more lines than needed): exporter.stream.quiet finds
# the quiet lines of a batch by their absence, so a check added below adds its word here.
QUIET_DECLINES = (*_ECHO_STARTS, *echo.FACT_WORDS, echo.REQUEST, TRACEBACK_START, " [",
                  *(start for start, *_ in _SHAPES))
# the periodic shapes by their start's first three characters (classify's dispatch on a message's start)
_BY_START = {shape[0][:3]: shape for shape in _SHAPES}
assert len(_BY_START) == len(_SHAPES) and all(len(shape[0]) >= 3 for shape in _SHAPES)


def ignorable(line: str, clock: Clock, families: Families = BUILT_IN) -> bool:
    """True when the usual way (framing, glue check, parsers) would count ``line`` as ignored and
    make no event of it. Same caller's checks as ``match``; a False says nothing."""
    # (the quiet checks alone, not classify's dispatch to the periodic shapes: tests hold classify's IGNORE to this)
    if line[:1] not in _STARTS and not line[:1].isalpha():
        return False
    text = line.rstrip()
    m = common_match(text)
    return m is not None and _quiet(text, m, clock, families) is True


def _quiet(text: str, m, clock: Clock, families: Families):
    """True, or not: the wrapper's match, or another answer of classify's; for a line (white space stripped from its
    end) in a common shape (``m``) whose message starts none of the periodic shapes."""
    level = m.group(12)
    if level not in _QUIET_LEVELS:
        return _logged(m, text, level, clock, families)
    msg = text[m.end():]
    # (the echo records' words first: a few prefix and substring tests, where the needles' search costs ~1 us)
    if msg.startswith(echo.REQUEST) and echo.VALIDATION in msg:
        return m  # the engine core's refusal of a request, counted without its id (the same module)
    if msg.startswith(_ECHO_STARTS):
        return _echo_record(m, text, msg, clock)  # a record that echoes a client's text (its facts counted, if any)
    if echo.FACT_WORDS[0] in msg or echo.FACT_WORDS[1] in msg:
        return m  # ... and the request log's later lines, when a line break in the id pushed their facts on
    # (the needles: all searched at once, exporter.parsers.needles; with a user's rules, theirs too: those of the
    # rules that may take this logger file's and level's lines, Families.quiet_holds)
    ruled = families.rules
    if not ruled:
        holds = _HOLDS_A_NEEDLE
    elif families.by_origin:
        key = (m.group(12) if families.by_level else "", m.group(18) if families.by_file else "")
        holds = families.quiet_holds_cache.get(key)
        if holds is None:
            holds = families.quiet_holds(key[1], key[0])
    else:
        holds = families.quiet_holds_any
    if holds(msg):
        return m
    if TRACEBACK_START in msg or (" [" in msg and any(w in msg for w in LEVEL_WORDS)):
        return m  # a traceback starting, or maybe another record glued on: the usual way decides
    if not _framed_as_matched(m, text, clock):
        return m
    return True


# the first item of classify's answer for a record of the request log (below)
ECHO_RECORD = "echo record"


def _echo_record(m, text: str, msg: str, clock: Clock):
    """``(ECHO_RECORD, record, match, text, header)`` for an INFO or DEBUG record that echoes a client's text
    (exporter.parsers.echo: the request log's, whose bounded facts are counted, a request received, a response
    generated, an abort, a LoRA adapter; and those that count none, a request added or finished, a response's body),
    one the usual way frames as the wrapper's match says: what the pipeline reads unframed (``Pipeline._fast_echo``: its
    state says whether the line begins a record or is a line of the last one's client text, and learns the record);
    else the wrapper's match."""
    header = common_header(m)
    record = echo.begun(msg, header)
    if not record or not _framed_as_matched(m, text, clock):
        return m
    return ECHO_RECORD, record, m, text, header


def _framed_as_matched(m, text: str, clock: Clock) -> bool:
    """Whether framing frames ``text`` from its common shape's match ``m``: no colour reset that lost its ESC (the
    general way strips bare colour codes then), and, behind journald's text, a month name it knows (else the general
    way reads the line otherwise)."""
    # (every bare colour reset holds "0m" or "9m": two finds before the regex)
    if ("0m" in text or "9m" in text) and BARE_RESET.search(text) is not None:
        return False
    if m.re not in _NO_MONTH_NAME:
        # (the minute's stamp is cached by framing: most lines only look it up)
        known = clock.minutes.get(text[:m.start(5)])
        if (known is None or known is NO_MONTH) and record_time(m, text, clock) is NO_MONTH:
            return False
    return True


_LOG_LEVELS = frozenset({"WARNING", "ERROR", "CRITICAL"})
# a message longer than this goes the usual way (which reads the first 64 KiB of one, and squeezes long digit runs)
_LOG_CHARS = 4096
# logger file -> whether its records may be read otherwise than as a ``log`` event: a tool-call parser's (its
# failures are counted without their text) or an echo-only logger's (a client's text); bounded
_OTHER_LOGGERS: dict[str, bool] = {}


def _logged(m, text: str, level: str, clock: Clock, families: Families):
    """``("log", fields, ts, process, pid, header)`` for a WARNING-or-worse record the usual way would make a
    ``log`` event of and nothing else (no family's or rule's needle, no traceback, no glued record, no tool parser
    or echo logger, the usual way's message): what ``Pipeline._classify`` makes of it; else the wrapper's match.
    The pipeline still asks its own state: an open traceback or echo record may take the line
    (``Pipeline._fast_events``)."""
    if level not in _LOG_LEVELS:
        return m
    msg = text[m.end():]
    # (what the message says is the same each time it is met: the answer for the last _PLAIN_MESSAGES short ones is
    # kept, a warning that a server repeats costs a look-up)
    known = families.log_plain
    plain = known.get(msg)
    if plain is None:
        plain = _plain(msg, families)
        if len(msg) <= _PLAIN_CHARS:
            if len(known) >= _PLAIN_MESSAGES:
                known.clear()
            known[msg] = plain
    if not plain:
        return m
    if ("0m" in text or "9m" in text) and BARE_RESET.search(text) is not None:
        return m
    logger = text[m.start(18):m.end(19)]
    other = _OTHER_LOGGERS.get(logger)
    if other is None:
        stem = logger_stem(logger)
        other = stem in echo.LOGGERS or stem in tool_parser.BY_WORDS or tool_parser.parser_of(logger) is not None
        if len(_OTHER_LOGGERS) > 256:
            _OTHER_LOGGERS.clear()
        _OTHER_LOGGERS[logger] = other
    if other:
        return m
    when = record_time(m, text, clock)
    if when is NO_MONTH:
        return m
    proc, pid = m.group(10, 11)
    return ("log", {"level": level.lower(), "logger": logger, "message": msg[:1000]}, when[0], proc,
            int(pid) if pid is not None and len(pid) <= 10 else None, common_header(m))


# the messages whose answer _logged keeps (per set of families), and the longest kept
_PLAIN_MESSAGES, _PLAIN_CHARS = 1024, 512
# what a message that is a record's continuation (a traceback's, a chain's) or an echo record's starts with
_NOT_PLAIN_STARTS = (TRACEBACK_START, *CHAIN, *_ECHO_STARTS)


def _plain(msg: str, families: Families) -> bool:
    """Whether a WARNING-or-worse record's message is a plain ``log`` event's to the usual way, by its words alone: no
    traceback's, chain's, JSON record's or echo record's start, no record glued on, no family's or rule's needle; and
    nothing the usual way reads otherwise (longer than _LOG_CHARS, a long digit run it squeezes before searching the
    needles)."""
    c = msg[:1]
    if not c or c.isspace() or c == "{" or len(msg) > _LOG_CHARS or msg.startswith(_NOT_PLAIN_STARTS) \
            or (" [" in msg and any(w in msg for w in LEVEL_WORDS)):
        return False
    return not has_long_run(msg) and not families.log_hits(msg)
