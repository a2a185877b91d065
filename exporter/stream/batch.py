"""The batch path's pure helpers: which batches may be counted on their raw lines, and that count.

Access-log lines are most of a busy server's log; when a batch holds nothing framing would change and
no traceback is open, they are counted by their tail without being framed (exporter.stream.pipeline
decides when). Pure: lines in, tally out.
"""

from __future__ import annotations

from exporter.framing.frame import BARE_RESET, TRACEBACK_START
from exporter.parsers import access_log

# Anything that makes the raw text of a line differ from what framing hands the parsers (colour,
# carriage returns), or that makes line order matter (a traceback starting): a batch holding one of
# these takes the line-by-line path.
BATCH_UNSAFE = ("\x1b", "\r", "^[", "#033[", TRACEBACK_START)


def batch_unsafe(text: str) -> bool:
    """Whether ``text`` holds one of BATCH_UNSAFE. A one-character find is a memchr; the others are
    searched only when their first character occurs (CPython's search for a two-character needle
    is slow on a megabyte)."""
    return framing_unsafe(text) or TRACEBACK_START in text


def framing_unsafe(text: str) -> bool:
    """Whether ``text`` holds one of BATCH_UNSAFE that framing would change (all but a traceback's start): a
    line free of them may take the fast path while no traceback is open, even where its batch holds one."""
    return "\x1b" in text or "\r" in text or ("^" in text and "^[" in text) or ("#" in text and "#033[" in text)


# What str.isspace() calls space, as a set: a set lookup beats a method call on every access line
# (tests check the list against str.isspace over all of Unicode).
_WHITESPACE = frozenset("\t\n\x0b\x0c\r\x1c\x1d\x1e\x1f \x85\xa0\u1680\u2000\u2001\u2002\u2003\u2004\u2005"
                        "\u2006\u2007\u2008\u2009\u200a\u2028\u2029\u202f\u205f\u3000")


# What count_access finds in a batch: how often each access-line tail occurs, the positions of the
# other lines (in order), and the positions of the first and last line counted (-1: none).
Tally = tuple[dict[str, int], list[int], int, int]


def count_access(lines: list[str]) -> Tally:
    """The batch path's count of ``lines``, which the caller found free of BATCH_UNSAFE.

    The common access line is counted by its tail, the text after the client address (what that
    text means is looked up once per distinct text, later): a line whose text before the separator
    holds no vLLM header (a record of vLLM's that quotes a client's request line is not uvicorn's
    access line) and whose tail is a whole request line and status (access_log.whole_tail: nothing
    after the reason phrase, so no record glued on either) holding no colour reset that lost its ESC
    (framing strips those, so the path would read otherwise). Every other line is one of the others,
    which the pipeline feeds one by one. Pure: lines in, tally out."""
    sep = access_log.SEP
    header_end = access_log.HEADER_END
    whole_tail = access_log.whole_tail
    bare_reset = BARE_RESET.search
    ws = _WHITESPACE
    tails: dict[str, int] = {}
    get = tails.get
    others: list[int] = []
    other = others.append
    for i, line in enumerate(lines):
        # (partition, not find: str.find parses its arguments the slow way)
        head, found, tail = line.partition(sep)
        # (a header's end holds "]": one memchr clears most heads, journald's "vllm[42]: " needs the search)
        if found and head and head[-1] not in ws and ("]" not in head or header_end not in head):
            n = get(tail)
            if n is not None:
                tails[tail] = n + 1
                continue
            # (a colour reset that lost its ESC, which framing strips, changes what the usual way reads: such a
            # tail is asked line by line; searched once a batch per distinct tail, not per line)
            if whole_tail(tail) is not None and bare_reset(tail) is None:
                tails[tail] = 1
                continue
        other(i)
    if not tails:
        return tails, others, -1, -1
    # the counted lines are the gaps in `others`: the first gap from either end
    first = next((j for j, i in enumerate(others) if i != j), len(others))
    n = len(lines)
    last = n - 1 - next((j for j, i in enumerate(reversed(others)) if i != n - 1 - j), len(others))
    return tails, others, first, last


def merged(parts: list[tuple]) -> tuple[dict[str, int], list, dict[tuple, int], tuple[float | None, float | None]]:
    """One batch's result (counts, events, access-log counts, the span of the access lines counted) from those of
    its consecutive parts (exporter.stream.pipeline cuts a batch where a traceback starts)."""
    counts: dict[str, int] = {}
    events: list = []
    access: dict[tuple, int] = {}
    first = last = None
    for c, ev, acc, (a, b) in parts:
        for k, v in c.items():
            counts[k] = counts.get(k, 0) + v
        events += ev
        for k, v in acc.items():
            access[k] = access.get(k, 0) + v
        if a is not None and first is None:
            first = a
        if b is not None:
            last = b
    return counts, events, access, (first, last)
