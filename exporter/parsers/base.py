"""What a parser is: cheap substrings to test first, where the family's lines come from, then a
function from frame to events."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Callable

from exporter.parsers.events import Event
from exporter.framing.frame import Frame

# What vLLM (or Python) may print before an error's words when the line is an exception's: its type,
# module path included, and the types it is wrapped in ("RuntimeError: ", "torch.OutOfMemoryError: ",
# "ray.exceptions.RayTaskError(OutOfMemoryError): "), each one word ending in a colon and a space.
EXCEPTION_P = r"(?:[A-Za-z_][\w.]*(?:\([\w.]*\))?: )*"

# A header framing could not read (a paste mangled it: "ERROR 10-20 03:20:50 [async_llm.py:485[] "): a
# problem family's words may follow it. Client text never starts a message but on a continuation
# line, whose header framing reads.
UNREAD_HEADER_P = r"(?:(?:WARNING|ERROR|CRITICAL) \d\d-\d\d \d\d:\d\d:\d\d \[[^\s\]]*\]+ )?"

# Levels, as framing reads them; NO_LEVEL stands for a line without one: output that did not go
# through a logger of vLLM's (stderr, an exception line, a supervisor's or a library's line).
NO_LEVEL = ""
ALL_LEVELS = frozenset({"DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL", NO_LEVEL})
# The levels of vLLM's periodic and start-up facts (a stats line goes to DEBUG when the engine idles).
INFO_LEVELS = frozenset({"DEBUG", "INFO", NO_LEVEL})
# The levels an error, a death or a warning sign is logged at: never INFO or DEBUG, the levels of the
# lines that echo a client's text (a request logger's, a LoRA adapter's name).
PROBLEM_LEVELS = frozenset({"WARNING", "ERROR", "CRITICAL", NO_LEVEL})

_STEMS: dict[str, str] = {}


class LazyPattern:
    """A compiled ``re`` pattern, compiled when first used: most families' lines never come in a given run
    (a failure family's, an old release's wording), and compiling every family's patterns at import was the
    largest part of the daemon's start-up after the web framework (bench/startup.py). The first call of a
    method compiles and puts the compiled pattern's methods in this object's own dictionary, so every later
    ``p.match(...)`` is the compiled pattern's own method, with no call in between; found there it still costs
    ~50 ns a call more than a compiled pattern's, so the families read on every periodic or access line
    (engine stats, spec decode, KV transfer, access log, echo records, the value helpers) compile theirs at
    import."""

    __slots__ = ("pattern", "flags", "_rx", "__dict__")

    def __init__(self, pattern: str, flags: int = 0):
        self.pattern = pattern
        self.flags = flags
        self._rx = None

    def _compiled(self) -> re.Pattern:
        rx = self._rx
        if rx is None:
            rx = self._rx = re.compile(self.pattern, self.flags)
            self.flags = rx.flags
            d = self.__dict__
            for name in _PATTERN_METHODS:
                d[name] = getattr(rx, name)
        return rx

    @property
    def groups(self) -> int:
        return self._compiled().groups

    @property
    def groupindex(self):
        return self._compiled().groupindex

    def __repr__(self) -> str:
        return f"LazyPattern({self.pattern!r})"


# A compiled pattern's methods LazyPattern stands in for: the first call compiles (the class's method, below), and
# puts the compiled pattern's own method where every later call finds it first (_compiled)
_PATTERN_METHODS = ("match", "search", "fullmatch", "finditer", "findall", "sub", "subn", "split")


def _compiling(name: str):
    def method(self, *a, **k):
        return getattr(self._compiled(), name)(*a, **k)

    method.__name__ = name
    return method


for _name in _PATTERN_METHODS:
    setattr(LazyPattern, _name, _compiling(_name))


def lazy_compile(pattern: str, flags: int = 0) -> LazyPattern:
    """``re.compile``, put off until the pattern is first used (LazyPattern)."""
    return LazyPattern(pattern, flags)


def logger_stem(logger: str) -> str:
    """The file (or module) a record's logger names, without directory, ``.py`` or line:
    ``loggers.py:335`` -> ``loggers``, ``entrypoints/.../serving.py:1267`` -> ``serving``, a JSON
    record's ``vllm.v1.metrics.loggers`` -> ``loggers``."""
    stem = _STEMS.get(logger)
    if stem is None:
        # Every trailing ":N" goes ("loggers.py:3:4" as a mangled wrapper can frame it), so the usual
        # path and the fast path (which reads the file from the wrapper itself) agree on the stem.
        name = logger
        while True:
            head, colon, line = name.rpartition(":")
            if not colon or not line.isdigit():
                break
            name = head
        name = name.rpartition("/")[2]
        stem = name[:-3] if name.endswith(".py") else name.rpartition(".")[2]
        if len(_STEMS) > 4096:
            _STEMS.clear()
        _STEMS[logger] = stem
    return stem


@dataclass(frozen=True, slots=True)
class Where:
    """Where vLLM prints a family's lines: a line from anywhere else is not tried (the trust boundary
    of issue 32: text a client chose, which vLLM echoes in its own lines, reaches the parsers only
    inside such lines, never at their start). Each field narrows; the default admits any line.

    - ``levels``: the levels a line of the family carries (NO_LEVEL: none, e.g. an exception line
      or stderr output); ``None``: any.
    - ``loggers``: the logger stems (``logger_stem``) a record of the family comes from; a line
      with no logger (no vLLM header, or a pasted line that lost it) passes. ``None``: any.
    - ``untagged``: only lines with neither a vLLM process tag nor a vLLM header (a supervisor's).
    - ``start``: what the message begins with, matched at its start: the family's own words, after
      whatever vLLM prints before them (an exception's type, ``Engine 000: ``). ``None``: anything
      (the family's parse anchors its own patterns).
    """

    levels: frozenset[str] | None = None
    loggers: frozenset[str] | None = None
    untagged: bool = False
    start: re.Pattern | None = None

    def admits(self, frame: Frame) -> bool:
        levels = self.levels
        if levels is not None and (frame.level or NO_LEVEL) not in levels:
            return False
        loggers = self.loggers
        if loggers is not None and frame.logger is not None and logger_stem(frame.logger) not in loggers:
            return False
        if self.untagged and (frame.process is not None or frame.header is not None):
            return False
        start = self.start
        return start is None or start.match(frame.message) is not None


ANYWHERE = Where()


def where(levels=None, loggers=None, untagged: bool = False, start: str | None = None) -> Where:
    """A Where from plain values: ``start`` a pattern (compiled here), ``levels`` and ``loggers`` any
    iterables."""
    return Where(frozenset(levels) if levels is not None else None,
                 frozenset(loggers) if loggers is not None else None,
                 untagged, lazy_compile(start) if start is not None else None)


@dataclass(frozen=True, slots=True)
class Parser:
    """``needles``: a line can only match if it contains one of them (checked before any regex).

    ``where``: where vLLM prints the family's lines (``Where``); a line from elsewhere is not
    offered to ``parse``, whatever it holds.

    ``parse`` returns the events of the line, or None when the line is not of this family after all.
    """

    name: str
    needles: tuple[str, ...]
    parse: Callable[[Frame], list[Event] | None]
    where: Where = ANYWHERE
