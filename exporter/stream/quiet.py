"""The lines of a batch that no family wants, found by two scans of the batch's text instead of line by line.

Most INFO and DEBUG lines are read by no family (exporter.stream.fastpath ``ignorable``). Asked line by line,
each costs a wrapper match, a needle search and a dozen substring tests (~5 us). Here the batch's candidate
lines are joined and scanned twice, each scan in C over the whole text, so a quiet line costs its share of two
scans and a set look-up, and no Python object is made for it:

- the wrapper: one ``re`` search for a line start that is *not* followed by framing's common journald shape at
  INFO or DEBUG with an English month (``NOT_QUIET_SHAPE``): it stops only at the lines that are not, which are
  few in a batch of quiet lines;
- the message: one RE2 search for a line holding, after its header's ``] ``, any needle of any family or user
  rule (``Families.filters``), any word the request log's records are counted by, a periodic line's start, a
  traceback's start or ``" ["`` (another record glued on); or a colour reset that lost its ESC anywhere.

A line that neither scan stops at is one ``fastpath.ignorable`` passes: every reason it has to decline a line
in that shape is a needle here (a superset: a line stopped here for nothing is simply asked line by line).

With a user's rules, such a line that begins a record echoing a client's text (``Finished request ...``) is one
the fast path answers ECHO: ignored, but kept, so that no rule without ``client_text`` reads the record's later
lines. A third scan (RE2) finds those: an echo record's start right after the line's first ``"] "`` (in the quiet
shape, the header's), with a visible character after a start that ends in a space (so that ``str.rstrip``
cannot cut into it). A line whose echo start has none is stopped by the second scan and asked.

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
# (and something not blank after it: the fast path matches the line without its trailing white space)
NOT_QUIET_SHAPE = re.compile(r"\n(?!" + QUIET_SHAPE_P + r"[^\n]*\S)")
# every word whose presence in the message may make the fast path decline a line in the quiet shape, kept beside
# the checks it stands for (fastpath.QUIET_DECLINES, QUIET_ECHOES with a user's rules), besides the needles
# a colour reset that lost its ESC, anywhere in the line (framing's BARE_RESET)
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
        self._flags = self._echoes = None
        if re2 is None:
            return
        options = re2.Options()
        options.encoding = re2.Options.Encoding.LATIN1
        words = _alternation((*families.filters, *QUIET_DECLINES))
        # a line start, then a needle after some "] " (the header's is the first: a needle after any of them is
        # in the message), or a bare colour reset anywhere
        pattern = b"(?m)^(?:[^\\n]*?\\] [^\\n]*?(?:" + words + b")|[^\\n]*?" + BARE_RESET.pattern.encode()
        echoes = None
        if families.rules:
            # ... or, with rules, an echo record's start that ends in a space with no visible character after it
            # (the third scan cannot tell what str.rstrip leaves of it: asked)
            spaced = [w for w in QUIET_ECHOES if w.endswith(" ")]
            pattern += b"|[^\\n]*?\\] (?:" + _alternation(spaced) + b")[^!-~\\n]*$"
            # the third scan: the line's first "] " (no "] " before it), then an echo record's start, whole
            solid = [w for w in QUIET_ECHOES if not w.endswith(" ")]
            echoes = (b"(?m)^(?:[^\\]\\n]|\\]+[^\\] \\n])*\\]+ (?:" + (_alternation(solid) + b"|" if solid else b"")
                      + b"(?:" + _alternation(spaced) + b")[^\\n]*[!-~])")
        try:
            self._flags = re2.compile(pattern + b")", options)
            self._match = self._flags._regexp.Match
            self._echoes = re2.compile(echoes, options)._regexp.Match if echoes is not None else None
            self._anchor = re2._Anchor.UNANCHORED
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
        stopped = {bisect_right(starts, m.start()) - 1 for m in NOT_QUIET_SHAPE.finditer("\n" + text)}
        data = text.encode("utf-8", "surrogatepass")
        if len(data) != len(text):  # (not ASCII: the RE2 scan's positions are bytes)
            starts = [0, *accumulate(len(t.encode("utf-8", "surrogatepass")) + 1 for t in texts)]
        # (RE2's own Match, not its wrapper's finditer: a wrapper's match object costs ~2.5 us, as much as the line
        # it saves; after a line is stopped, the search goes on from the next line)
        self._lines(self._match, data, starts, stopped)
        quiet = {i for k, i in enumerate(candidates) if k not in stopped}
        if self._echoes is None:
            return quiet, set()
        echoed: set[int] = set()
        self._lines(self._echoes, data, starts, echoed)
        return quiet, {i for k, i in enumerate(candidates) if k in echoed and k not in stopped}

    def _lines(self, match, data: bytes, starts: list[int], into: set[int]) -> None:
        """Adds to ``into`` the lines (their numbers in the scanned text) where ``match`` finds its pattern."""
        anchor, end, find = self._anchor, len(data), data.find
        at = 0
        while at < end:
            span = match(anchor, data, at, end)[0]
            if span[0] < 0:
                break
            into.add(bisect_right(starts, span[0]) - 1)
            at = find(b"\n", span[1]) + 1
            if at == 0:
                break
