"""What a user's pattern may cost, and the literal every match of it holds: read from the pattern's parse
tree (Python's own ``re._parser``), before any line is matched.

Python's ``re`` backtracks, and nothing can stop a match once it runs (no timeout, the GIL held). So a
rule's pattern is refused at load time when its worst case grows faster than the square of the text's
length, and a rule sees at most ``max_chars`` of a message (exporter.config.rules), which bounds the
square. What is refused, with the reason in the error:

- a quantifier on something that itself varies in length (``(a+)+``, ``(\\d+,)*``, ``(a|ab)*``): the
  text splits exponentially many ways (a character class, ``[\\d, ]*``, says the same without it);
- alternatives under a quantifier that can start with the same character (``(?:\\w|\\d)*``): the same;
- two unbounded repeats that can trade the same characters, with only such characters between them
  (``.*foo.*bar``, ``\\d+\\d+``): together with the search's start positions that is a cube; the search
  already looks anywhere, so a leading ``.*`` is never needed;
- backreferences, and unbounded repeats inside a lookaround (a scan of the rest of the text at every
  position).

Possessive quantifiers (``\\d++``) and atomic groups (``(?>...)``) never give back what they took, so they
trade nothing. The check is conservative: it may refuse a pattern that would have been fine; the error says
how to write it otherwise. Measured worst cases of what it lets through, and of what it refuses, are in
docs/benchmarks.md.
"""

from __future__ import annotations

import re
import re._constants as C  # noqa: N812 - the parser's opcode names
import re._parser as P  # noqa: N812

# A repeat with more than this many steps counts as unbounded ({1,1000} behaves as +).
LONG_REPEAT = 64
MIN_NEEDLE = 3
MAX_TOKENS = 4000  # a pattern that unrolls to more single characters than this is refused as too complex

_ASCII = [chr(i) for i in range(128)]
# Characters outside ASCII that stand for their classes when classes are compared (a letter, a digit, a
# space, a symbol, a CJK letter); a pattern's own literals and range ends are added per pattern.
_EXTRA = ["é", "Ж", "٣", "\u00a0", "\u2028", "€", "中", "\U0001f600"]


class Unsafe(ValueError):
    """Why a pattern is refused, in words for the user."""


class _Ctx:
    def __init__(self, probes: list[str], flags: int):
        self.probes = probes
        self.flags = int(flags)  # (a plain int: a RegexFlag's "&" is an enum call, ~1 us, and runs per probe)


# -- character sets, as the probe characters they hold ----------------------------------------------

def _category(cat, ch: str) -> bool:
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
    return True  # anything else: assume the worst (it overlaps everything)


_IGNORECASE, _DOTALL = int(re.IGNORECASE), int(re.DOTALL)


def _folded(ch: str, flags: int) -> set[str]:
    return {ch, ch.lower(), ch.upper()} if flags & _IGNORECASE else {ch}


def _in_class(items, ch: str, flags: int) -> bool:
    negate = False
    hit = False
    for op, av in items:
        if op is C.NEGATE:
            negate = True
        elif op is C.LITERAL:
            hit = hit or ch in _folded(chr(av), flags)
        elif op is C.RANGE:
            lo, hi = av
            hit = hit or any(lo <= ord(c) <= hi for c in _folded(ch, flags))
        elif op is C.CATEGORY:
            hit = hit or _category(av, ch)
        else:
            hit = True
    return hit != negate


def _charset(op, av, ctx: _Ctx) -> frozenset[str] | None:
    """The probe characters one single-character item matches; None when ``op`` is no such item."""
    flags = ctx.flags
    if op is C.LITERAL:
        folded = _folded(chr(av), flags)
        return frozenset(c for c in ctx.probes if c in folded)
    if op is C.NOT_LITERAL:
        folded = _folded(chr(av), flags)
        return frozenset(c for c in ctx.probes if c not in folded)
    if op is C.ANY:
        return frozenset(c for c in ctx.probes if flags & _DOTALL or c != "\n")
    if op is C.IN:
        return frozenset(c for c in ctx.probes if _in_class(av, c, flags))
    if op is C.CATEGORY:
        return frozenset(c for c in ctx.probes if _category(av, c))
    return None


# -- the pattern as a line of tokens ----------------------------------------------------------------
# ("fix", chars): one character that must be there; ("rep", chars): a repeat that can run long and give
# characters back. A group or alternative is flattened into such tokens, conservatively.

def _tokens(seq, ctx: _Ctx) -> tuple[list, bool]:
    """(tokens, whether the width varies) of a parsed sequence."""
    out: list = []
    varies = False
    for op, av in seq:
        chars = _charset(op, av, ctx)
        if chars is not None:
            out.append(("fix", chars))
            continue
        if op is C.AT:
            continue
        if op is C.SUBPATTERN:
            _group, add, remove, sub = av
            inner = _Ctx(ctx.probes, (ctx.flags | add) & ~remove)
            toks, v = _tokens(sub, inner)
            out += toks
            varies = varies or v
        elif op is C.ATOMIC_GROUP:
            toks, v = _tokens(av, ctx)
            _check_chains(toks, anchored=False)  # within the group it may still backtrack, at every start
            out += [("fix", t[1]) for t in toks]
            varies = varies or v
        elif op is C.BRANCH:
            _none, branches = av
            parts = [_tokens(b, ctx) for b in branches]
            union = frozenset().union(*(t[1] for toks, _ in parts for t in toks))
            widths = {len(toks) for toks, _ in parts}
            any_rep = any(t[0] == "rep" for toks, _ in parts for t in toks)
            if any_rep:
                out.append(("rep", union))
            elif all(toks for toks, _ in parts):
                out.append(("fix", union))
            varies = varies or any_rep or len(widths) > 1 or any(v for _, v in parts)
        elif op in (C.MAX_REPEAT, C.MIN_REPEAT, C.POSSESSIVE_REPEAT):
            lo, hi, sub = av
            toks, v = _tokens(sub, ctx)
            inner_rep = v or any(t[0] == "rep" for t in toks)
            if hi != 1 and inner_rep:
                raise Unsafe("a quantifier on something that itself varies in length (like (a+)+ or (\\d+,)*) "
                             "can split a line exponentially many ways; use a character class ([\\d, ]*) or "
                             "a possessive quantifier (\\d++)")
            if hi != 1 and _branches_overlap(sub, ctx):
                raise Unsafe("alternatives under a quantifier that can start with the same character (like "
                             "(?:\\w|\\d)*) can split a line exponentially many ways; use one character class")
            chars = frozenset().union(*(t[1] for t in toks)) if toks else frozenset()
            long = hi is C.MAXREPEAT or hi > LONG_REPEAT
            if op is C.POSSESSIVE_REPEAT:
                # takes what it can and gives nothing back: a fixed stretch to whatever comes before it
                if lo >= 1 and chars:
                    out.append(("fix", chars))
                varies = varies or lo != hi
                continue
            if hi == 1:  # optional: what it holds may be there or not, and separates nothing
                out += [t for t in toks if t[0] == "rep"]
                varies = True
                continue
            if len(toks) * min(lo, 4) + len(out) > MAX_TOKENS:
                raise Unsafe(f"too complex to check (it unrolls to more than {MAX_TOKENS} characters)")
            out += toks * min(lo, 4)
            if lo != hi:
                varies = True
                if long and chars:
                    out.append(("rep", chars))
        elif op in (C.GROUPREF, C.GROUPREF_EXISTS):
            raise Unsafe("backreferences ((?P=name), \\1) are not allowed: they can make a match take "
                         "exponential time")
        elif op in (C.ASSERT, C.ASSERT_NOT):
            _direction, sub = av
            toks, _v = _tokens(sub, ctx)
            if any(t[0] == "rep" for t in toks):
                raise Unsafe("an unbounded repeat inside a lookaround scans the rest of the line at every "
                             "position; match the text itself instead")
        else:
            raise Unsafe(f"unsupported construct in the pattern ({op})")
    return out, varies


def _first_chars(seq, ctx: _Ctx) -> frozenset[str] | None:
    """What a sequence's first character can be (None: it can be empty or is unknown)."""
    for op, av in seq:
        chars = _charset(op, av, ctx)
        if chars is not None:
            return chars
        if op is C.AT:
            continue
        if op is C.SUBPATTERN:
            return _first_chars(av[3], ctx)
        return None
    return None


def _branches_overlap(sub, ctx: _Ctx) -> bool:
    for op, av in sub:
        if op is C.SUBPATTERN:
            return _branches_overlap(av[3], ctx)
        if op is C.BRANCH:
            firsts = [_first_chars(b, ctx) for b in av[1]]
            if any(f is None for f in firsts):
                return True
            seen: set[str] = set()
            for f in firsts:
                if seen & f:
                    return True
                seen |= f
        return False
    return False


def _check_chains(tokens: list, anchored: bool) -> int:
    """The longest run of repeats that can trade characters; Unsafe beyond what the text's square bounds."""
    best = [0] * len(tokens)
    longest = 0
    for j, (kind, cj) in enumerate(tokens):
        if kind != "rep":
            continue
        best[j] = 1
        # A repeat before it links to it when a text repeating one stretch can be split between the two in
        # many ways: each character between them (the fixed ones; a repeat between can match nothing) must
        # be one that both repeats also match. ``between``: those characters' sets, nearest first.
        between: list[frozenset[str]] = []
        for i in range(j - 1, -1, -1):
            ki, ci = tokens[i]
            if ki == "rep":
                both = ci & cj
                if both and all(ck & both for ck in between):
                    best[j] = max(best[j], best[i] + 1)
                continue
            if not ci & cj:
                break  # no repeat further back can link across a character this one never matches
            between.append(ci)
        longest = max(longest, best[j])
    degree = longest + (0 if anchored else 1)
    if degree > 2:
        raise Unsafe("two unbounded repeats that can match the same characters, with only such characters "
                     "between them (like .*foo.*bar or \\d+\\d+), can take the cube of the line's length; "
                     "the pattern is searched anywhere in the message, so drop a leading .*, and make the "
                     "repeats exclude what follows them ([^,]* instead of .*) or possessive (\\d++)")
    return degree


def check(pattern: str) -> None:
    """Unsafe (with the reason) when the pattern's worst case grows faster than the text's square."""
    parsed = P.parse(pattern)
    probes = _ASCII + _EXTRA + _pattern_chars(parsed.data if hasattr(parsed, "data") else list(parsed))
    ctx = _Ctx(list(dict.fromkeys(probes)), parsed.state.flags)
    seq = list(parsed)
    anchored = bool(seq) and seq[0][0] is C.AT and seq[0][1] in (C.AT_BEGINNING, C.AT_BEGINNING_STRING) \
        and not ctx.flags & re.MULTILINE
    tokens, _ = _tokens(seq, ctx)
    _check_chains(tokens, anchored)


def _pattern_chars(seq) -> list[str]:
    """The pattern's own literals and range ends: probes for classes the fixed probes miss."""
    out: list[str] = []

    def walk(items):
        for op, av in items:
            if op in (C.LITERAL, C.NOT_LITERAL):
                out.append(chr(av))
            elif op is C.RANGE:
                out.extend((chr(av[0]), chr(av[1])))
            elif op is C.IN:
                walk(av)
            elif op is C.SUBPATTERN:
                walk(av[3])
            elif op in (C.MAX_REPEAT, C.MIN_REPEAT, C.POSSESSIVE_REPEAT):
                walk(av[2])
            elif op is C.BRANCH:
                for b in av[1]:
                    walk(b)
            elif op in (C.ASSERT, C.ASSERT_NOT):
                walk(av[1])
            elif op is C.ATOMIC_GROUP:
                walk(av)

    walk(seq)
    return out


# -- needles: literals every match holds ------------------------------------------------------------

def _runs(seq, flags: int) -> tuple[list[str], list[list[list[str]]]]:
    """(literal runs every match of ``seq`` holds, in order; the alternatives of each branch every match
    passes through, as their own runs). A run breaks at anything that is not one case-sensitive literal."""
    runs: list[str] = []
    branches: list[list[list[str]]] = []
    cur: list[str] = []

    def cut():
        if cur:
            runs.append("".join(cur))
            cur.clear()

    for op, av in seq:
        if op is C.LITERAL and not flags & _IGNORECASE:
            cur.append(chr(av))
        elif op is C.AT:
            continue
        elif op is C.SUBPATTERN:
            _group, add, remove, sub = av
            inner_flags = (flags | add) & ~remove
            r, b = _runs(sub, inner_flags)
            # the group's first and last runs join what stands beside them when the group is all literal
            if len(r) == 1 and not b and _all_literal(sub, inner_flags):
                cur.append(r[0])
            else:
                cut()
                runs += r
                branches += b
        elif op is C.ATOMIC_GROUP:
            cut()
            r, b = _runs(av, flags)
            runs += r
            branches += b
        elif op is C.BRANCH:
            cut()
            branches.append([_runs(b, flags)[0] for b in av[1]])
        elif op in (C.MAX_REPEAT, C.MIN_REPEAT, C.POSSESSIVE_REPEAT) and av[0] >= 1:
            cut()
            r, b = _runs(av[2], flags)  # its first time through is certain
            runs += r
            branches += b
        else:
            cut()
    cut()
    return runs, branches


def _all_literal(seq, flags: int) -> bool:
    return all(op is C.LITERAL for op, _ in seq) and not flags & _IGNORECASE


def derive_needles(pattern: str) -> tuple[str, ...]:
    """The longest literal every match holds, or one per alternative of a branch every match passes (each
    the longest of its alternative); () when there is none of MIN_NEEDLE characters."""
    parsed = P.parse(pattern)
    runs, branches = _runs(list(parsed), int(parsed.state.flags))
    best = max(runs, key=len, default="")
    if len(best) >= MIN_NEEDLE:
        return (best,)
    for alts in branches:
        picks = [max(r, key=len, default="") for r in alts]
        if all(len(p) >= MIN_NEEDLE for p in picks):
            return tuple(dict.fromkeys(picks))
    return ()


def needles_cover(pattern: str, needles: tuple[str, ...]) -> bool:
    """Whether every match of ``pattern`` holds one of ``needles`` (so a line holding none of them can be
    skipped without trying the pattern)."""
    parsed = P.parse(pattern)
    runs, branches = _runs(list(parsed), int(parsed.state.flags))
    if any(n in r for r in runs for n in needles):
        return True
    return any(all(any(n in r for r in alt for n in needles) for alt in alts) for alts in branches)
