"""The parser registry: every line family, in the order they are tried.

Adding a log line means one new module here with a ``Parser`` and its tests, and one entry below.
Every parser says where vLLM prints its lines (``Parser.where``, exporter.parsers.base): a family is tried
only on such a line, so a client's text echoed inside another record (exporter.parsers.echo) is not
one of its lines.
"""

from __future__ import annotations

from exporter.parsers.events import Event
from exporter.framing.frame import Frame
from exporter.parsers import (
    access_log,
    engine_ops,
    engine_stats,
    errors,
    iteration,
    kv_capacity,
    kv_failures,
    kv_transfer,
    lifecycle,
    lmcache,
    memory,
    recovery,
    request_error,
    serving_capacity,
    shm_broadcast,
    spec_decode,
    startup,
    stats_disabled,
    supervisor,
    torch_glog,
    warning_signs,
)
from exporter.parsers._values import SQUEEZE_FROM_CHARS, bounded, has_long_run, squeeze_digits
from exporter.parsers.base import ANYWHERE, Parser, Where
from exporter.parsers.needles import matcher
from exporter.parsers.reach import could_hold

# Most frequent first: access-log lines dominate real logs, then the periodic stats families.
PARSERS: tuple[Parser, ...] = (
    access_log.PARSER,
    engine_stats.PARSER,
    engine_stats.MFU,
    iteration.PARSER,  # one line per engine step, when --enable-logging-iteration-details is on
    spec_decode.PARSER,
    spec_decode.CALIBRATION,
    spec_decode.DIFFUSION,
    kv_transfer.PARSER,
    kv_transfer.MOONCAKE_LOAD_TIERS,
    lmcache.PARSER,
    lmcache.OWN_HEADER,
    *recovery.PARSERS,
    *kv_failures.PARSERS,
    *serving_capacity.PARSERS,
    *engine_ops.PARSERS,  # sleep mode, EPLB, elastic DP, V0 preemptions, engine hangs
    # before the error families: its message is the client's text, which may hold any error's words
    request_error.PARSER,
    # vLLM's warning signs before a hang or death (exporter.parsers.warning_signs): none of their
    # lines is also an error family's, and the fatal-signal line gets its exact signature here
    *warning_signs.PARSERS,
    *errors.ERROR_PARSERS,
    engine_stats.PREFIX_V0,
    kv_capacity.KV_SIZE,
    kv_capacity.KV_MEMORY,
    kv_capacity.GPU_BLOCKS,
    kv_capacity.OFFLOAD_POOL,
    memory.MEMORY_PROFILE,
    memory.MODEL_LOAD,
    memory.CUDA_GRAPH,
    memory.KV_CACHE_EXTENDED,
    startup.INIT_ENGINE,
    startup.VERSION,
    startup.ENGINE_CONFIG,
    startup.WARMUP,
    startup.SUPPORTED_TASKS,
    shm_broadcast.PARSER,
    stats_disabled.PARSER,
    lifecycle.PARSER,
    supervisor.PARSER,
    torch_glog.PARSER,  # after the error families: an NCCL watchdog line in glog form is an nccl_error
)


def _needle_table(parsers: tuple[Parser, ...]) -> tuple[tuple[str, Parser], ...]:
    """(needle, parser) in trying order, flat: one loop per line."""
    return tuple((needle, p) for p in parsers for needle in p.needles)


def _fewest(strings: tuple[str, ...]) -> tuple[str, ...]:
    """The strings less those that hold another of them: a text holds one of the result exactly when it
    holds one of ``strings``."""
    strings = tuple(dict.fromkeys(strings))
    return tuple(f for f in strings if not any(g != f and g in f for g in strings))


_TABLE = _needle_table(PARSERS)
# Per level a frame may carry, the needles of the families whose ``where`` admits it: an INFO line is not
# tested for the needles of families that read only WARNING and worse (it could never be theirs), so the
# failure families cost the commonest lines nothing. A frame of any other level (none, a level vLLM does
# not print) is tested against the whole table.
_TABLE_BY_LEVEL = {level: tuple((n, p) for n, p in _TABLE if p.where.levels is None or level in p.where.levels)
                   for level in ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")}
# Every needle once: a message holding none of them is recognised by no family.
NEEDLES: tuple[str, ...] = tuple(dict.fromkeys(needle for needle, _ in _TABLE))
# Fewer strings with the same answer to "does the message hold a needle?": every needle holds one of
# them (a needle that holds none of the hints is a filter itself), so a message holding none of
# them holds no needle. The hints only make the test shorter; which ones is a matter of speed.
_FILTER_HINTS = ("metrics: ", "Engine", "memory", "Memory", "error", "KV cache", " engine ", "erver", "exit", "died",
                 "killed", "retrieve", "KV load failure", "tart")


def _quiet_needles(parsers: tuple[Parser, ...]) -> tuple[str, ...]:
    """The needles of the families that read INFO or DEBUG lines (their ``where`` admits those levels): the
    only ones an INFO or DEBUG line can be parsed by (but for LMCache's lines under its own header, which the
    fast path never takes for one of vLLM's quiet lines: lmcache.OWN_HEADER). The failure families (WARNING and above) add none, so
    the lines nobody parses, most of them INFO, do not pay for them."""
    quiet = {"INFO", "DEBUG"}
    return tuple(dict.fromkeys(n for p in parsers if (p.where.levels is None or p.where.levels & quiet)
                               and p is not lmcache.OWN_HEADER for n in p.needles))


_QUIET_NEEDLES = _quiet_needles(PARSERS)
_QUIET_HINTS = tuple(h for h in _FILTER_HINTS if any(h in n for n in _QUIET_NEEDLES))  # (one covering none: a wasted scan)
# What exporter.stream.fastpath checks an INFO or DEBUG line for: a line holding none of these is read by no family.
NO_NEEDLE_FILTERS: tuple[str, ...] = _fewest(
    _QUIET_HINTS + tuple(n for n in _QUIET_NEEDLES if not any(h in n for h in _QUIET_HINTS)))
# What a traceback's exception lines are run through: the error families, and the warning signs
# that only ever end a traceback (an RPC timeout, a process monitor's "died with exit code", JIT in
# error mode).
EXCEPTION_PARSERS: tuple[Parser, ...] = (
    warning_signs.RPC_TIMEOUT, warning_signs.FATAL_SIGNAL, warning_signs.WORKER_DIED, warning_signs.RAY_ACTOR_DIED,
    recovery.JIT_DURING_INFERENCE, *errors.ERROR_PARSERS)
_ERROR_TABLE = _needle_table(EXCEPTION_PARSERS)
# The families vLLM prints on the later lines of a multi-line record: the banner's version and model
# lines, V0's memory profile. A JSON record's message lines after its first are tried by these only
# (any other family's words there are text the record quotes: a request id holding a line break).
CONTINUATION_PARSERS: tuple[Parser, ...] = (startup.VERSION, memory.MEMORY_PROFILE)
_CONTINUATION_TABLE = _needle_table(CONTINUATION_PARSERS)


class _Dispatch:
    """One table's needles searched at once (exporter.parsers.needles): which families a message may be
    for, in trying order, from one call whatever the number of needles. ``families[i]``: the positions (in
    the table's parser order) of the families holding needle i."""

    __slots__ = ("parsers", "hits", "families")

    def __init__(self, parsers: tuple[Parser, ...], engine: str | None = None):
        self.parsers = parsers
        needles = tuple(dict.fromkeys(n for p in parsers for n in p.needles))
        index = {n: i for i, n in enumerate(needles)}
        holders: list[list[int]] = [[] for _ in needles]
        for pos, p in enumerate(parsers):
            for n in dict.fromkeys(p.needles):
                holders[index[n]].append(pos)
        self.families = tuple(tuple(h) for h in holders)
        self.hits = matcher(needles, engine)

    def candidates(self, msg: str) -> tuple[int, ...] | list[int]:
        hits = self.hits(msg)
        if not hits:
            return ()
        if len(hits) == 1:
            return self.families[hits[0]]
        fams = self.families
        return sorted({pos for i in hits for pos in fams[i]})


_DISPATCH = _Dispatch(PARSERS)
_ERROR_DISPATCH = _Dispatch(EXCEPTION_PARSERS)
_CONTINUATION_DISPATCH = _Dispatch(CONTINUATION_PARSERS)


def parse_frame(frame: Frame, parsers: tuple[Parser, ...] = PARSERS) -> list[Event] | None:
    """Events of one framed line, or None when no family recognises it.

    Families are tried in order. A family is tried once, when one of its needles is in the message
    and the line comes from where the family's lines come from (its ``where``: level, logger, start);
    one that finds nothing passes the line on to the next family. Every event's numbers are within
    exporter.parsers._values.LIMIT (those that are not are left out).

    Which families hold a needle of the message is found by one search for all the table's needles
    (``_Dispatch``): a line costs the same whatever the number of families, and goes to the families
    whose needles it holds alone. The same families in the same order as trying each needle in turn
    (``parse_frame_in_turn``, which a table of other parsers still uses; tests compare the two)."""
    if parsers is PARSERS:
        d = _DISPATCH
    elif parsers is EXCEPTION_PARSERS:
        d = _ERROR_DISPATCH
    elif parsers is CONTINUATION_PARSERS:
        d = _CONTINUATION_DISPATCH
    else:
        return parse_frame_in_turn(frame, _needle_table(parsers))
    msg = frame.message
    if len(msg) > SQUEEZE_FROM_CHARS and has_long_run(msg):
        msg = frame.message = squeeze_digits(msg)
    cands = d.candidates(msg)
    return _first_events(frame, d.parsers, cands) if cands else None


def _first_events(frame: Frame, table: tuple[Parser, ...], cands) -> list[Event] | None:
    """The events of the first of the families at positions ``cands`` (ascending) that reads the frame."""
    for pos in cands:
        p = table[pos]
        w = p.where
        # (admits asks the level first: a family that reads no line of this one's level is passed at once)
        if w is not ANYWHERE and not w.admits(frame):
            continue
        try:
            events = p.parse(frame)
        except (ValueError, ArithmeticError):
            # a number Python will not convert (past 4,300 digits) or that overflows a float:
            # no line vLLM writes, so this family declines it
            continue
        if events:
            for ev in events:
                bounded(ev.fields)
            return events
    return None


def parse_frame_in_turn(frame: Frame, table: tuple[tuple[str, Parser], ...] | None = None) -> list[Event] | None:
    """``parse_frame`` by trying each needle of ``table`` (default: the built-in families', per level) in turn:
    the reference the one search is tested against, and the way for a table of other parsers."""
    if table is None:
        table = _TABLE_BY_LEVEL.get(frame.level, _TABLE)  # (a level no family admits is skipped by admits anyway)
    msg = frame.message
    if len(msg) > SQUEEZE_FROM_CHARS and has_long_run(msg):
        msg = frame.message = squeeze_digits(msg)
    held, tried = [], None
    for needle, p in table:
        if p is not tried and needle in msg:
            tried = p
            held.append(p)
    return _first_events(frame, held, range(len(held))) if held else None


class Families:
    """What one stream's lines are tried against: the built-in families, then a user's rules
    (exporter.parsers.rules). A rule adds its events to what the built-in families made of a line and
    never changes them, so every rule is tried on every frame holding one of its needles.

    ``filters``: NO_NEEDLE_FILTERS with the rules' needles: a message holding none is wanted by no family
    and no rule (the fast path skips such lines unframed). ``rule_needles``: the rules' needles alone (a
    periodic line the fast path reads holding one of them goes the usual way, so the rules see it).
    ``loggers``, ``levels``: per rule, the logger files and the levels it takes lines from (empty: any); the
    fast path, which knows a line's file and level before framing it, tests only the needles of the rules
    that could take it (``needles_for``, ``quiet_needles``): a rule bound to its file or its levels costs other
    files' and levels' lines nothing; and of a periodic line it reads whole, only the needles its message can
    hold (``shape_needles``). ``client_text``: per rule, whether it may read a record that echoes a client's
    text (the trust boundary: ``rule_events(frame, echo=True)`` tries only those rules).

    What the fast path reads per line, without a call: ``by_file``, ``by_level`` (some rule is bound to a
    logger file, a level: the needles depend on the line's; else that part of the keys is ""), ``by_origin``
    (either), ``quiet_any`` (``quiet_needles`` when no rule names either), ``quiet_cache`` ((level, file) ->
    ``quiet_needles``), ``shape_any`` (shape -> ``shape_needles``, when no rule names either) and
    ``shape_cache`` ((shape, level, file) -> ``shape_needles``)."""

    __slots__ = ("rules", "rule_table", "client_text_table", "rule_needles", "filters", "_origins", "_needles_for",
                 "by_file", "by_level", "by_origin", "quiet_any", "quiet_cache", "shape_any", "shape_cache",
                 "_rule_dispatch", "_client_text_dispatch", "quiet_holds_any", "quiet_holds_cache", "_both",
                 "log_hits", "log_plain")

    def __init__(self, rules: tuple[Parser, ...] = (), loggers: tuple[tuple[str, ...], ...] | None = None,
                 client_text: tuple[bool, ...] | None = None, levels: tuple[tuple[str, ...], ...] | None = None):
        self.rules = tuple(rules)
        self.rule_table = _needle_table(self.rules)
        readers = client_text if client_text is not None else (False,) * len(self.rules)
        self.client_text_table = _needle_table(tuple(p for p, ok in zip(self.rules, readers) if ok))
        self.rule_needles = _fewest(tuple(n for n, _ in self.rule_table))
        self.filters = _fewest(NO_NEEDLE_FILTERS + self.rule_needles) if self.rules else NO_NEEDLE_FILTERS
        files = loggers if loggers is not None else ((),) * len(self.rules)
        lvls = levels if levels is not None else ((),) * len(self.rules)
        # per rule: its needles, the logger files it takes (a "file.py:12" as its file), its levels (None: any)
        self._origins = tuple((p.needles, frozenset(lg.partition(":")[0] for lg in fs) or None, frozenset(lv) or None)
                              for p, fs, lv in zip(self.rules, files, lvls))
        self._needles_for: dict[tuple[str, str], tuple[str, ...]] = {}
        self.by_file = any(fs is not None for _, fs, _ in self._origins)
        self.by_level = any(lv is not None for _, _, lv in self._origins)
        self.by_origin = self.by_file or self.by_level
        self.quiet_cache: dict[tuple[str, str], tuple[str, ...]] = {}
        self.shape_cache: dict[tuple[str, str, str], tuple[str, ...]] = {}
        self.shape_any: dict[str, tuple[str, ...]] = {}
        self.quiet_any = self.quiet_needles("", "")
        # every rule's needles searched at once, as the families' are (_Dispatch): a line costs the same for 1 rule
        # or 200, and goes to the rules whose needles it holds alone
        self._rule_dispatch = _Dispatch(self.rules)
        self._client_text_dispatch = _Dispatch(tuple(p for p, ok in zip(self.rules, readers) if ok))
        # the families' needles and the rules' in one search (``parse``): a framed line is searched once
        self._both = _Dispatch(PARSERS + self.rules) if self.rules else None
        # which of those needles a message holds (the families' alone without rules): a WARNING-or-worse line holding
        # none is a ``log`` event and nothing else, which the fast path makes unframed
        self.log_hits = (self._both or _DISPATCH).hits
        # what the fast path found of such a line's message (exporter.stream.fastpath: whether it is a plain ``log``
        # event's), for messages it met before: a server repeats its warnings; bounded there
        self.log_plain: dict[str, bool] = {}
        # what the fast path searches a quiet line for, NO_NEEDLE_FILTERS and the rules' quiet needles at once
        # (``quiet_holds``); per (level, file) when some rule names either
        self.quiet_holds_cache: dict[tuple[str, str], object] = {}
        self.quiet_holds_any = matcher(NO_NEEDLE_FILTERS + self.quiet_any) if self.rules else None

    def quiet_holds(self, file: str, level: str = ""):
        """A function telling whether a quiet line's message holds one of NO_NEEDLE_FILTERS or of
        ``quiet_needles(file, level)``: all searched at once (exporter.parsers.needles)."""
        got = self.quiet_holds_cache.get((level, file))
        if got is None:
            got = matcher(NO_NEEDLE_FILTERS + self.quiet_needles(file, level))
            if len(self.quiet_holds_cache) < 1024:
                self.quiet_holds_cache[(level, file)] = got
        return got

    def needles_for(self, file: str, level: str = "") -> tuple[str, ...]:
        """The needles of the rules that may take a line from logger file ``file`` (file.py) at ``level``
        ("": any level; a file "" when no rule names one)."""
        got = self._needles_for.get((level, file))
        if got is None:
            got = _fewest(tuple(n for needles, files, levels in self._origins
                                if (files is None or file in files) and (levels is None or not level or level in levels)
                                for n in needles))
            if len(self._needles_for) < 1024:  # (files are few; an endless variety is not cached)
                self._needles_for[(level, file)] = got
        return got

    def quiet_needles(self, file: str, level: str = "") -> tuple[str, ...]:
        """``needles_for(file, level)`` less those holding one of NO_NEEDLE_FILTERS: what the fast path searches
        a quiet line for once it holds none of those (a message holding such a needle holds its filter too)."""
        got = self.quiet_cache.get((level, file))
        if got is None:
            got = tuple(n for n in self.needles_for(file, level) if not any(f in n for f in NO_NEEDLE_FILTERS))
            if len(self.quiet_cache) < 1024:
                self.quiet_cache[(level, file)] = got
        return got

    def shape_needles(self, shape: str, pattern: str, file: str, level: str = "") -> tuple[str, ...]:
        """``needles_for(file, level)`` less those no message ``pattern`` matches whole can hold
        (exporter.parsers.reach): the ones a line of that shape (exporter.stream.fastpath) is searched for."""
        got = self.shape_cache.get((shape, level, file))
        if got is None:
            got = tuple(n for n in self.needles_for(file, level) if could_hold(pattern, n))
            if len(self.shape_cache) < 1024:
                self.shape_cache[(shape, level, file)] = got
            if not file and not level:
                self.shape_any[shape] = got
        return got

    def parse(self, frame: Frame) -> tuple[list[Event] | None, list[Event]]:
        """(``parse_frame(frame)``, ``rule_events(frame)``) from one search for the families' and the rules'
        needles together."""
        if self._both is None:
            return parse_frame(frame), []
        msg = frame.message
        if len(msg) > SQUEEZE_FROM_CHARS and has_long_run(msg):
            msg = frame.message = squeeze_digits(msg)
        cands = self._both.candidates(msg)
        if not cands:
            return None, []
        n = len(PARSERS)
        events = _first_events(frame, PARSERS, [c for c in cands if c < n]) if cands[0] < n else None
        if events and events[0].kind == "access_log":
            # an access line (a client's path) is never a rule's, whatever framed it: not only uvicorn's own frames
            # (the rules' origin check), but a line whose wrapper lost its record start too, which the batch path
            # counts with the others unframed
            return events, []
        out: list[Event] = []
        rules = self.rules
        for pos in cands:
            if pos >= n:
                ruled = rules[pos - n].parse(frame)
                if ruled:
                    out.extend(ruled)
        return events, out

    def rule_events(self, frame: Frame, echo: bool = False) -> list[Event]:
        """The events of every rule that matches the frame (in the rules' order). ``echo``: the frame is (or
        continues) a record that echoes a client's text (exporter.parsers.echo), or a JSON record's later
        message line: only the rules with ``client_text: true`` are tried."""
        out: list[Event] = []
        d = self._client_text_dispatch if echo else self._rule_dispatch
        rules = d.parsers
        for pos in d.candidates(frame.message):
            events = rules[pos].parse(frame)
            if events:
                out.extend(events)
        return out


# The families of a stream without rules.
BUILT_IN = Families()


def parse_errors(frame: Frame) -> list[Event]:
    """Only the error families and the warning signs that end tracebacks: used on a traceback's
    exception lines."""
    return parse_frame(frame, EXCEPTION_PARSERS) or []


__all__ = ["BUILT_IN", "CONTINUATION_PARSERS", "Families", "NEEDLES", "NO_NEEDLE_FILTERS", "PARSERS", "Parser", "Where",
           "parse_frame", "parse_errors"]
