"""The lines of a batch that no family wants, found by scanning the batch's text instead of line by line.

Most INFO and DEBUG lines are read by no family (exporter.stream.fastpath ``ignorable``). Asked line by line,
each costs a wrapper match, a needle search and a dozen substring tests (~5 us). Here the batch's candidate
lines are joined and scanned by RE2 over the whole text, in C, so a quiet line costs its share of the scans and
a set look-up, and no Python object is made for it:

- the wrapper: runs of whole lines in framing's common shapes (journald's with an English month, vLLM's own
  record with no wrapper, or behind an RFC 3339 stamp and a node log's tag) at INFO or DEBUG, with a message
  that holds something visible (``QUIET_RUN_P``), one anchored call a run however long: a line
  outside every run is stopped;
- the message: lines holding, after their header's ``] ``, any needle of any family or user rule
  (``Families.filters``), the start of any record that echoes a client's text (the pipeline learns each such
  record), any word the request log's facts follow, a periodic line's start, a traceback's start or ``" ["``
  (another record glued on); or a colour reset that lost its ESC anywhere: each such line is stopped.

A line neither scan stops is one ``fastpath.ignorable`` passes: every reason it has to decline a line in that
shape is a needle here (a superset: a line stopped for nothing is simply asked line by line). RE2 reads bytes,
so the shape is written in ASCII classes (Python's ``\\s``, ``\\d`` and ``\\w`` take more characters): it finds a
subset of the lines the fast path's pattern does, never a line that pattern would not match.

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
from exporter.stream.fastpath import QUIET_DECLINES

# framing's common shapes (frame.common_match) without their groups, at INFO or DEBUG, journald's with the English
# month names only (a month framing knows: record_time never says NO_MONTH for one), every class narrowed to ASCII
# (+ what else the class leaves out): a subset of the lines framing's patterns match
_ENGLISH = ("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec")
assert all(MONTHS.get(m.lower()) for m in _ENGLISH)
assert PROCESS_NAME_P == r"[A-Za-z_][\w.:-]{0,63}"  # (spelt out in ASCII below)
_NOT_WHITE = r"[^\t-\r\x1c-\x20\x80-\xff"  # (not white space to Python, and ASCII: + more, and "]")
_JOURNALD_ASCII = (rf"(?:{'|'.join(_ENGLISH)}) {{1,2}}[0-9]{{1,2}} [0-9][0-9]:[0-9][0-9]:[0-9][0-9] {_NOT_WHITE}:\[\]]+ "
                   rf"{_NOT_WHITE}\[:]+\[[0-9]+\]: ")
# ... and framing's STAMPED_COMMON's wrapper (an RFC 3339 stamp with a zone, a node log's full-line tag), or none
# (PLAIN_COMMON): the time of neither holds a month name
_STAMPED_ASCII = (r"[0-9]{4}-[0-9][0-9]-[0-9][0-9]T[0-9][0-9]:[0-9][0-9]:[0-9][0-9](?:\.[0-9]+)?"
                  r"(?:Z|[+-][0-9][0-9]:?[0-9][0-9]) (?:(?:stdout|stderr) F )?")
QUIET_SHAPE_P = (
    rf"(?:{_JOURNALD_ASCII}|{_STAMPED_ASCII})?\((?:[A-Za-z_][0-9A-Za-z_.:-]{{0,63}}) pid=[0-9]+\) (?:INFO|DEBUG) "
    rf"[0-9][0-9]-[0-9][0-9] [0-9][0-9]:[0-9][0-9]:[0-9][0-9] \[{_NOT_WHITE}\]]+:[0-9]+\] ")
# a run of whole lines in the shape whose message holds something visible (so it is not blank to the fast path,
# which matches the line without its trailing white space)
QUIET_RUN_P = rf"(?:{QUIET_SHAPE_P}[^\n]*[!-~][^\n]*(?:\n|\z))+"
# a colour reset that lost its ESC, anywhere in the line (framing's BARE_RESET)
assert BARE_RESET.pattern == r"\[(?:0|39|0;0)m"


def _alternation(words) -> str:
    return "|".join(re.escape(w) for w in sorted(set(words), key=len, reverse=True))


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
        # (the message scan's words besides the needles: those that may make the fast path decline a line in the
        # quiet shape, kept beside the checks they stand for, fastpath.QUIET_DECLINES)
        words = _alternation((*families.filters, *QUIET_DECLINES))
        # a line start, then a needle after some "] " (the header's is the first: a needle after any of them is
        # in the message), or a bare colour reset anywhere
        flags = rf"(?m)^(?:[^\n]*?\] [^\n]*?(?:{words})|[^\n]*?{BARE_RESET.pattern})"
        try:
            compiled = [re2.compile(p.encode("utf-8", "surrogatepass"), options) for p in (flags, QUIET_RUN_P)]
            self._flags = compiled[0]
            self._match, self._runs = compiled[0]._regexp.Match, compiled[1]._regexp.Match
            self._anywhere, self._at_start = re2._Anchor.UNANCHORED, re2._Anchor.ANCHOR_START
        except Exception:  # noqa: BLE001 - no scan: every line is asked line by line (same answers)
            self._flags = None

    def __call__(self, lines: list[str], candidates: list[int]) -> set[int]:
        """The indices among ``candidates`` (into ``lines``, checked as the fast path requires: no ESC, caret
        or #033 colour, no carriage return) of the lines ``fastpath.ignorable`` would pass."""
        if self._flags is None or not candidates:
            return set()
        texts = [lines[i] for i in candidates]
        text = "\n".join(texts)
        if text.count("\n") != len(texts) - 1:
            return set()  # (a line holding a line feed: the scans' lines would not be the batch's)
        data = text.encode("utf-8", "surrogatepass")
        # line k starts at starts[k] (bytes); the scans' positions are mapped back by bisection
        if len(data) == len(text):
            starts = [0, *accumulate(len(t) + 1 for t in texts)]
        else:
            starts = [0, *accumulate(len(t.encode("utf-8", "surrogatepass")) + 1 for t in texts)]
        stopped: set[int] = set()
        self._off_shape(data, starts, stopped)
        self._matched(self._match, data, starts, stopped)
        return {i for k, i in enumerate(candidates) if k not in stopped}

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

    def _matched(self, match, data: bytes, starts: list[int], into: set[int]) -> None:
        """Adds to ``into`` the lines (their numbers in ``data``) that ``match``'s matches hold (each within a line);
        the search goes on from the next line.
        (RE2's own Match, not its wrapper's finditer: a wrapper's match object costs ~2.5 us, as much as the line
        it saves.)"""
        anchor, end, find = self._anywhere, len(data), data.find
        at = 0
        while at < end:
            span = match(anchor, data, at, end)[0]
            if span[0] < 0:
                break
            into.update(range(bisect_right(starts, span[0]) - 1, bisect_right(starts, span[1] - 1)))
            at = find(b"\n", span[1] - 1) + 1  # (the next line's start, or 0 at the end)
            if at == 0:
                break
