"""The lines of a batch that no family wants, found by two scans of the batch's text instead of line by line.

Most INFO and DEBUG lines are read by no family (exporter.stream.fastpath ``ignorable``). Asked line by line,
each costs a wrapper match, a needle search and a dozen substring tests (~5 us). Here the batch's candidate
lines are joined and scanned twice, each scan in C over the whole text, so a quiet line costs its share of two
scans and a set look-up, and no Python object is made for it:

- the wrapper: one ``re`` search for a line start that is *not* followed by framing's common journald shape at
  INFO or DEBUG with an English month and a message that is not blank (``ShapeScan``): it stops only at the
  lines that are not, which are few in a batch of quiet lines;
- the message: one RE2 search for a line holding, after its header's ``] ``, any needle of any family or user
  rule (``Families.filters``), any word the request log's records are counted by, a periodic line's start, a
  traceback's start or ``" ["`` (another record glued on); or a colour reset that lost its ESC anywhere.

A line that neither scan stops at is one ``fastpath.ignorable`` passes: every reason it has to decline a line
in that shape is a needle here (a superset: a line stopped here for nothing is simply asked line by line).

With a user's rules, such a line whose message starts a record echoing a client's text (``Finished request
...``) is one the fast path answers ECHO: ignored, but kept, so that no rule without ``client_text`` reads the
record's later lines. The wrapper's scan finds those too, right where it has matched the shape: it stops at
them, telling them apart, and they are kept as the fast path keeps them.

tests/test_quiet.py compares the scans with the fast path over every fixture and capture line and generated
ones. Without RE2 (no wheel) there is no scan: every line is asked line by line, with the same result.
"""

from __future__ import annotations

import re
from bisect import bisect_right
from itertools import accumulate

from exporter.framing.frame import BARE_RESET, PROCESS_NAME_P
from exporter.framing.wrappers import MONTHS
from exporter.parsers import Families
from exporter.parsers.needles import re2
from exporter.stream.fastpath import QUIET_DECLINES, QUIET_ECHOES

# framing's JOURNALD_COMMON without its groups, at INFO or DEBUG, with the English month names only (a month
# framing knows: record_time never says NO_MONTH for one)
_ENGLISH = ("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec")
assert all(MONTHS.get(m.lower()) for m in _ENGLISH)
QUIET_SHAPE_P = (
    rf"(?:{'|'.join(_ENGLISH)}) {{1,2}}\d{{1,2}} \d\d:\d\d:\d\d [^\s:\[\]]+ [^\s\[:]+\[\d+\]: "
    rf"\((?:{PROCESS_NAME_P}) pid=\d+\) (?:INFO|DEBUG) \d\d-\d\d \d\d:\d\d:\d\d \[[^\s\]]+:\d+\] ")


def shape_scan(echoes: tuple[str, ...] = ()) -> re.Pattern:
    """The wrapper's scan, over the batch's lines each after a line feed: it matches at every line that is not in
    the quiet shape with a message that is not blank (the fast path matches the line without its trailing white
    space), and, given ``echoes``, at every line in the shape whose message starts with one of them, whole once
    the line is stripped as the fast path strips it (str.rstrip's white space is re's ``\\s``): those matches
    hold group 2. The shape, once matched, is not given up (an atomic group): a line in it is tried for an echo's
    start or a blank message, and for nothing else."""
    tail = r"(?![^\n]*\S)"  # a blank message
    if echoes:
        # (a start that ends in a space is whole after rstrip only with something not white after it)
        starts = [re.escape(w) + (r"(?=[^\n]*\S)" if w[-1:].isspace() else "") for w in echoes if w]
        tail = rf"(?:({'|'.join(starts)})|{tail})"
    return re.compile(rf"\n(?>({QUIET_SHAPE_P})|)(?(1){tail}|)")


NOT_QUIET_SHAPE = shape_scan()
# The same shape for RE2, which reads bytes: every class narrowed to ASCII (Python's \\s, \\d and \\w also take
# other characters; so does a message's last character that is not white, here a visible ASCII one somewhere in
# it), so that RE2 finds a subset of the lines ``re`` finds (a line it misses is asked). Matched anchored at a line
# start, as a run of whole lines: one call finds a run of quiet-shaped lines, however long.
_ASCII_NOT_WHITE = r"[^\t-\r\x1c-\x20\x80-\xff"  # (+ what else the class leaves out, and "]")
QUIET_RUN_P = (
    rf"(?:(?:{'|'.join(_ENGLISH)}) {{1,2}}[0-9]{{1,2}} [0-9][0-9]:[0-9][0-9]:[0-9][0-9] {_ASCII_NOT_WHITE}:\[\]]+ "
    rf"{_ASCII_NOT_WHITE}\[:]+\[[0-9]+\]: \((?:[A-Za-z_][0-9A-Za-z_.:-]{{0,63}}) pid=[0-9]+\) (?:INFO|DEBUG) "
    rf"[0-9][0-9]-[0-9][0-9] [0-9][0-9]:[0-9][0-9]:[0-9][0-9] \[{_ASCII_NOT_WHITE}\]]+:[0-9]+\] "
    r"[^\n]*[!-~][^\n]*(?:\n|\z))+")
assert PROCESS_NAME_P == r"[A-Za-z_][\w.:-]{0,63}"  # (QUIET_RUN_P spells it out in ASCII)
# (the message scan's words besides the needles: those that may make the fast path decline a line in the quiet
# shape, kept beside the checks they stand for, fastpath.QUIET_DECLINES; and a colour reset that lost its ESC,
# anywhere in the line, framing's BARE_RESET)
assert BARE_RESET.pattern == r"\[(?:0|39|0;0)m"


def _alternation(words) -> bytes:
    return b"|".join(re.escape(w.encode("utf-8", "surrogatepass")) for w in sorted(set(words), key=len, reverse=True))


class QuietScan:
    """The quiet lines of a batch for one set of families (the built-in ones and a user's rules)."""

    _made: dict[int, QuietScan] = {}  # (the scans of the last few sets of families: one per reload of the rules)

    @classmethod
    def of(cls, families: Families) -> QuietScan:
        scan = cls._made.get(id(families))
        if scan is None or scan.families is not families:
            if len(cls._made) >= 8:
                cls._made.clear()
            scan = cls._made[id(families)] = cls(families)
        return scan

    def __init__(self, families: Families):
        self.families = families
        self._flags = None
        if re2 is None:
            return
        options = re2.Options()
        options.encoding = re2.Options.Encoding.LATIN1
        words = _alternation((*families.filters, *QUIET_DECLINES))
        # a line start, then a needle after some "] " (the header's is the first: a needle after any of them is
        # in the message), or a bare colour reset anywhere
        pattern = b"(?m)^(?:[^\\n]*?\\] [^\\n]*?(?:" + words + b")|[^\\n]*?" + BARE_RESET.pattern.encode() + b")"
        # the wrapper's scan: with rules, ``re``'s, which also tells the echo records' starts exactly; else RE2's runs
        self._shape = shape_scan(QUIET_ECHOES) if families.rules else None
        try:
            self._flags = re2.compile(pattern, options)
            self._match = self._flags._regexp.Match
            self._anchor = re2._Anchor.UNANCHORED
            self._runs = re2.compile(QUIET_RUN_P.encode(), options)._regexp.Match if self._shape is None else None
            self._at_start = re2._Anchor.ANCHOR_START
        except Exception:  # noqa: BLE001 - no scan: every line is asked line by line (same answers)
            self._flags = None

    def __call__(self, lines: list[str], candidates: list[int]) -> tuple[set[int], set[int]]:
        """The indices among ``candidates`` (into ``lines``, checked as the fast path requires: no ESC, caret
        or #033 colour, no carriage return) of the lines ``fastpath.ignorable`` would pass, and those of them the
        fast path answers ECHO (with a user's rules only)."""
        if self._flags is None or not candidates:
            return set(), set()
        texts = [lines[i] for i in candidates]
        text = "\n".join(texts)
        if text.count("\n") != len(texts) - 1:
            return set(), set()  # (a line holding a line feed: the scans' lines would not be the batch's)
        # line k starts at starts[k] (characters); the scans' positions are mapped back by bisection
        starts = [0, *accumulate(len(t) + 1 for t in texts)]
        stopped, echoed = set(), set()
        if self._shape is not None:
            for m in self._shape.finditer("\n" + text):
                (echoed if m.lastindex == 2 else stopped).add(bisect_right(starts, m.start()) - 1)
        data = text.encode("utf-8", "surrogatepass")
        if len(data) != len(text):  # (not ASCII: the RE2 scans' positions are bytes)
            starts = [0, *accumulate(len(t.encode("utf-8", "surrogatepass")) + 1 for t in texts)]
        if self._shape is None:
            self._off_shape(data, starts, stopped)
        # (RE2's own Match, not its wrapper's finditer: a wrapper's match object costs ~2.5 us, as much as the line
        # it saves; after a line is stopped, the search goes on from the next line)
        match, anchor, end, find = self._match, self._anchor, len(data), data.find
        at = 0
        while at < end:
            span = match(anchor, data, at, end)[0]
            if span[0] < 0:
                break
            stopped.add(bisect_right(starts, span[0]) - 1)
            at = find(b"\n", span[1]) + 1
            if at == 0:
                break
        return ({i for k, i in enumerate(candidates) if k not in stopped},
                {i for k, i in enumerate(candidates) if k in echoed and k not in stopped} if echoed else set())

    def _off_shape(self, data: bytes, starts: list[int], stopped: set[int]) -> None:
        """Adds to ``stopped`` the lines (their numbers in ``data``, which start at ``starts``) that are not in a
        run of quiet-shaped lines: a call per run and per line between runs."""
        match, anchor, end, find = self._runs, self._at_start, len(data), data.find
        at = line = 0
        while at < end:
            span = match(anchor, data, at, end)[0]
            if span[0] < 0:  # this line is not: the next one may start a run
                stopped.add(line)
                line += 1
                at = find(b"\n", at) + 1
                if at == 0:
                    break
                continue
            at = span[1]
            line = bisect_right(starts, at - 1)  # (the run ends at a line's start, or at the end)
        stopped.update(range(line, len(starts) - 1))  # (an empty last line, or an empty text's one line)

