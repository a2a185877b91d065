"""Whether a literal can occur inside any text a pattern matches whole: decided once, from the pattern's
parse tree (Python's own ``re._parser``), never per line.

exporter.stream.fastpath reads the commonest periodic lines (engine stats, spec decode, KV transfer) by
matching each message whole against its family's exact pattern; a user's rule whose needle no such
message can hold need not be looked for in them (``Families.shape_needles``), so ten unused rules do
not cost each of those lines ten substring searches.

The test is on adjacent pairs of characters: every pair of consecutive characters in a matched text is
one the pattern can put next to each other (a character of one position followed by one of a position
that may come next: Glushkov's construction). A needle with a pair the pattern cannot produce (or, of
one character, a character it cannot produce) is in no text the pattern matches. The answer errs one
way only: ``could_hold`` may say True of a needle no match holds (a pair possible in two places that
never meet), never False of one that some match holds. A pattern it does not understand (case-folding
flags, lookarounds, backreferences, conditionals) holds every needle.
"""

from __future__ import annotations

import re
from functools import lru_cache
import re._constants as C  # noqa: N812 - the parser's opcode names
import re._parser as P  # noqa: N812

_ALL = lambda ch: True  # noqa: E731 - a position that may be any character


class _Unknown(Exception):
    """A construct this reading does not follow: the pattern may hold anything."""


def _category(cat, ch: str) -> bool:
    # (str patterns: the Unicode classes; an ASCII-only pattern matches fewer, so these are the wider answers)
    if cat in (C.CATEGORY_DIGIT, C.CATEGORY_UNI_DIGIT):
        return ch.isdecimal()
    if cat in (C.CATEGORY_NOT_DIGIT, C.CATEGORY_UNI_NOT_DIGIT):
        return not ch.isdecimal()
    if cat in (C.CATEGORY_SPACE, C.CATEGORY_UNI_SPACE):
        return ch.isspace()
    if cat in (C.CATEGORY_NOT_SPACE, C.CATEGORY_UNI_NOT_SPACE):
        return not ch.isspace()
    if cat in (C.CATEGORY_WORD, C.CATEGORY_UNI_WORD):
        return ch.isalnum() or ch == "_"
    if cat in (C.CATEGORY_NOT_WORD, C.CATEGORY_UNI_NOT_WORD):
        return not (ch.isalnum() or ch == "_")
    return True


def _in(items) -> object:
    """A character class as a test of one character."""
    negate = bool(items) and items[0][0] is C.NEGATE
    tests = []
    for op, av in items[1:] if negate else items:
        if op is C.LITERAL:
            tests.append(lambda ch, c=chr(av): ch == c)
        elif op is C.RANGE:
            tests.append(lambda ch, lo=av[0], hi=av[1]: lo <= ord(ch) <= hi)
        elif op is C.CATEGORY:
            tests.append(lambda ch, cat=av: _category(cat, ch))
        else:
            return _ALL  # (never narrower than the truth: negated or not)
    if negate:
        return lambda ch: not any(t(ch) for t in tests)
    return lambda ch: any(t(ch) for t in tests)


class _Reach:
    """What a piece of pattern can produce: whether it matches the empty text, the tests of the characters
    it can start and end with, the pairs (ends, starts) it can put next to each other, every character test.
    A test is one character (a literal) or a function of one."""

    __slots__ = ("empty", "first", "last", "pairs", "chars")

    def __init__(self, empty=True, first=(), last=(), pairs=(), chars=()):
        self.empty, self.first, self.last = empty, list(first), list(last)
        self.pairs, self.chars = list(pairs), list(chars)


def _one(test) -> _Reach:
    return _Reach(False, [test], [test], [], [test])


def _then(a: _Reach, b: _Reach) -> _Reach:
    """``a`` then ``b``, in ``a`` (a sequence's own, growing: no list copied per step)."""
    if a.last and b.first:
        a.pairs.append((tuple(a.last), tuple(b.first)))
    a.pairs += b.pairs
    a.chars += b.chars
    if a.empty:
        a.first += b.first
    a.last = b.last + a.last if b.empty else list(b.last)
    a.empty = a.empty and b.empty
    return a


def _either(options: list[_Reach]) -> _Reach:
    out = _Reach(False)
    for r in options:
        out.empty |= r.empty
        out.first += r.first
        out.last += r.last
        out.pairs += r.pairs
        out.chars += r.chars
    return out


def _seq(nodes) -> _Reach:
    out = _Reach()
    for op, av in nodes:
        out = _then(out, _node(op, av))
    return out


def _node(op, av) -> _Reach:
    if op is C.LITERAL:
        return _one(chr(av))
    if op is C.NOT_LITERAL:
        return _one(lambda ch, c=chr(av): ch != c)
    if op is C.ANY:
        return _one(_ALL)
    if op is C.IN:
        return _one(_in(av))
    if op is C.AT:
        return _Reach()
    if op is C.SUBPATTERN:
        _, add_flags, del_flags, sub = av
        if add_flags & (re.IGNORECASE | re.LOCALE):
            raise _Unknown
        return _seq(sub)
    if op is C.ATOMIC_GROUP:
        return _seq(av)
    if op is C.BRANCH:
        return _either([_seq(b) for b in av[1]])
    if op in (C.MAX_REPEAT, C.MIN_REPEAT, C.POSSESSIVE_REPEAT):
        lo, hi, sub = av
        r = _seq(sub)
        if hi == 0:
            return _Reach()
        out = _Reach(r.empty or lo == 0, r.first, r.last, r.pairs, r.chars)
        if hi > 1 and r.last and r.first:
            out.pairs.append((tuple(r.last), tuple(r.first)))  # one round's end, the next one's start
        return out
    raise _Unknown  # lookarounds, backreferences, conditionals: not followed


def _has(tests, ch: str) -> bool:
    return any(t == ch if t.__class__ is str else t(ch) for t in tests)


class _Table:
    """A pattern's pairs made quick to ask: those of two literal characters in a set, the others (a class on
    one side or both) kept as (ends, starts) tests; its literal characters and its classes."""

    __slots__ = ("literal_pairs", "other_pairs", "literals", "classes")

    def __init__(self, r: _Reach):
        self.literal_pairs: set[str] = set()
        self.other_pairs = []
        for ends, starts in r.pairs:
            lit_ends = [t for t in ends if t.__class__ is str]
            lit_starts = [t for t in starts if t.__class__ is str]
            self.literal_pairs.update(a + b for a in lit_ends for b in lit_starts)
            if len(lit_ends) < len(ends) or len(lit_starts) < len(starts):
                self.other_pairs.append((ends, starts))
        self.literals = {t for t in r.chars if t.__class__ is str}
        self.classes = [t for t in r.chars if t.__class__ is not str]

    def pair(self, a: str, b: str) -> bool:
        return a + b in self.literal_pairs or any(
            _has(ends, a) and _has(starts, b) for ends, starts in self.other_pairs)

    def char(self, ch: str) -> bool:
        return ch in self.literals or any(t(ch) for t in self.classes)


@lru_cache(maxsize=32)
def _table(pattern: str) -> _Table | None:
    """What ``pattern`` can produce, read once per pattern (None: it may hold anything)."""
    try:
        tree = P.parse(pattern)
        if tree.state.flags & (re.IGNORECASE | re.LOCALE):
            return None
        return _Table(_seq(tree))
    except (_Unknown, re.error, RecursionError):
        return None


def could_hold(pattern: str, needle: str) -> bool:
    """False only when no text that ``pattern`` matches whole (``fullmatch``) holds ``needle``."""
    t = _table(pattern)
    if t is None or not needle:
        return True
    if len(needle) == 1:
        return t.char(needle)
    return all(t.pair(a, b) for a, b in zip(needle, needle[1:]))


__all__ = ["could_hold"]
