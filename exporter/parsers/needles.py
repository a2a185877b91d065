"""Which of many fixed strings (the families' needles) a text holds, in one call whatever their number.

Every family says which substrings its lines must hold (``Parser.needles``). Trying them one by one costs a
line ~35-50 ns a needle, so the cost of a line grew with the vocabulary: a WARNING line was searched for
the ~150 needles of every family that reads WARNING lines, ~7 us before any family was asked. Here all of a
table's needles are searched at once by an RE2 set (google-re2, a declared dependency where wheels exist:
one automaton over the text, ~0.7 us a line for 50 or 200 needles, bench/needles.py), which says which
needles the text holds, so the line goes to those needles' families alone.

Without google-re2 (a platform with no wheel), or if the set cannot be built, the same answer comes from
Python's ``in``, needle by needle: the same indices in the same order, so the events are the same either
way (tests/test_needles.py runs both over every fixture line and over generated text). ``ENGINE`` says which
one is in use.

The text is searched as its UTF-8 bytes (lone surrogates, which a log's invalid bytes may decode to, passed
through) with RE2 reading bytes as Latin-1 and each needle as a literal: a byte string holds a needle's
bytes exactly when the text holds the needle (UTF-8 is self-synchronising), with no regular-expression
syntax, case folding or character classes in between.
"""

from __future__ import annotations

try:
    import re2
except ImportError:  # pragma: no cover - a declared dependency on Linux x86_64/aarch64; ``in`` answers without it
    re2 = None

ENGINE = "re2" if re2 is not None else "python"


def _python_hits(needles: tuple[str, ...]):
    """The fallback: indices of the needles the text holds, ascending (as the RE2 set's, sorted)."""
    numbered = tuple(enumerate(needles))

    def hits(text: str) -> list[int]:
        return [i for i, n in numbered if n in text]

    return hits


def _re2_hits(needles: tuple[str, ...]):
    options = re2.Options()
    options.encoding = re2.Options.Encoding.LATIN1
    options.literal = True
    s = re2.Set.SearchSet(options)
    for n in needles:
        s.Add(n.encode("utf-8", "surrogatepass"))
    s.Compile()
    # (the wrapper's own object when it is there: a call less per line; its public Match otherwise)
    raw = getattr(s, "_set", None)
    match = raw.Match if raw is not None and hasattr(raw, "Match") else s.Match

    def hits(text: str) -> list[int]:
        found = match(text.encode("utf-8", "surrogatepass"))
        if not found:
            return []
        if len(found) > 1:
            found = sorted(found)
        return found

    return hits


def matcher(needles: tuple[str, ...], engine: str | None = None):
    """A function from text to the indices (ascending) of the ``needles`` it holds. ``engine``: "re2" or
    "python" to choose (tests run both); by default RE2 where it loads. An empty needle is held by every text."""
    needles = tuple(needles)
    engine = engine or ENGINE
    if engine == "re2" and re2 is not None and needles and all(needles):
        try:
            return _re2_hits(needles)
        except Exception:  # noqa: BLE001 - RE2 refused the set (memory budget): the same answer the slow way
            pass
    return _python_hits(needles)
