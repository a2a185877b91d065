"""The batch path of a stream's pipeline: many lines read at once, counted alike where their order does not matter.

A busy server's lines come in batches (a file's new bytes, a journal's or a container's entries). Its
access-log lines, and the lines no family wants, are most of them and carry nothing but a count: here they
are counted on the raw lines (exporter.stream.batch, exporter.stream.quiet) while no traceback is open and
framing would change no line; every other line goes through the pipeline's ``feed`` steps, in order. The
counts and events are those of feeding each line (tests compare both ways).
"""

from __future__ import annotations

from bisect import bisect_left

from exporter.framing.frame import TRACEBACK_START, frame_line
from exporter.framing.cri import may_hold_parts
from exporter.framing.lines import joined
from exporter.parsers import access_log
from exporter.stream import fastpath
from exporter.stream.batch import count_access, framing_unsafe, merged
from exporter.stream.quiet import QuietScan
from exporter.stream.results import IGNORED, PARSED, UNPARSED

REST_BATCHES = 64  # batches read without the quiet scans after they found less than half a batch quiet


class BatchReader:
    """``feed_batch`` for exporter.stream.pipeline.Pipeline, whose state and steps it uses: its open tracebacks,
    CRI joiner, clock, families and line count; ``join_parts``, ``_fast_events``, ``_feed_usual``, ``_lifecycle``
    and ``_bad``."""

    def feed_batch(self, lines: list[str], on_error=None, span: bool = True) -> tuple[
            dict[str, int], list[Event], dict[tuple, int], tuple[float | None, float | None]]:
        """Account many lines; return counts by result, the events, access-log responses counted by
        (method, path, status, http version) instead of one event each, and the timestamps of the
        first and last access line so counted (for a run's time range).

        Access-log lines are most of a busy server's log and carry nothing but those three values,
        so when no traceback is open and the batch holds nothing that framing would change, they are
        counted on the raw lines (``count_access``) and every other line goes through ``feed``. The
        result is the same as feeding each line (tests compare both paths); only the per-line access
        events (their timestamps and line numbers) are not made.

        A line whose reading raises is counted as unparsed and handed to on_bad_line (``on_error``,
        if given, instead: ``on_error(line)``). ``span=False``: the span is not read ((None, None)): the daemon,
        which keeps no run's time range, is spared framing two access lines a batch the general way.
        """
        text = joined(lines)
        if self._cri.pending or may_hold_parts(text):
            lines = self.join_parts(lines, text)
            text = "\n".join(lines)
        # framing changes none of the lines (each may take the fast path while no traceback is open); and, further,
        # no traceback starts in the batch (line order does not matter: its access lines may be counted in bulk)
        framed_as_is = not framing_unsafe(text)
        no_traceback = not framed_as_is or TRACEBACK_START not in text  # (searched only where it decides)
        if no_traceback or len(lines) < 2:
            return self._feed_lines(lines, framed_as_is, framed_as_is and no_traceback, on_error, span)
        # A traceback starts in the batch: the lines before it are a batch of their own, the lines from it on are
        # read one by one until no traceback is open, and the rest as a batch again (as if the batches were cut
        # there): one traceback does not send a whole batch's access lines the one-by-one way.
        starts = [i for i, line in enumerate(lines) if TRACEBACK_START in line]
        parts, i, n = [], 0, len(lines)
        while i < n:
            k = starts[bisect_left(starts, i)] if starts[-1] >= i else n
            if self._tracebacks:
                k = i
            if k > i:
                parts.append(self._feed_lines(lines[i:k], True, True, on_error, span))
            i = k
            while i < n:
                parts.append(self._feed_lines(lines[i:i + 1], True, False, on_error, span))
                i += 1
                if not self._tracebacks:
                    break
        return merged(parts)

    def _feed_lines(self, lines: list[str], framed_as_is: bool, clean: bool, on_error, span: bool = True) -> tuple[
            dict[str, int], list[Event], dict[tuple, int], tuple[float | None, float | None]]:
        """``feed_batch`` of lines joined already: ``framed_as_is``, framing changes none of them; ``clean``, and no
        traceback starts in them."""
        counts = {PARSED: 0, IGNORED: 0, UNPARSED: 0}
        events: list[Event] = []
        start = self.lineno
        others, first, last = range(len(lines)), -1, -1
        access: dict[tuple, int] = {}
        # Line order matters (a traceback is open or may start) or framing changes the text: every
        # line is fed. Else the access lines are counted on their raw text.
        if clean and not self._tracebacks:
            try:
                access, others, first, last = self._tally(lines)
            except Exception:  # noqa: BLE001 - the guard: every line is fed on its own instead
                if self.on_bad_line is None and on_error is None:
                    raise
                others, first, last, access = range(len(lines)), -1, -1, {}
        classify, clock, ignore, families = fastpath.classify, self.clock, fastpath.IGNORE, self.families
        fast_events, usual = self._fast_events, self._feed_usual
        # the lines no family wants, found by scanning the batch (exporter.stream.quiet): each is what the fast
        # path would call ignorable, counted without being looked at, while no traceback is open (an open one may
        # take a line: it is asked as every line is). The scans cost every line they see ~0.5 us, and a call for each
        # line they stop, so they run where they pay: while they find at least half the batch's other lines quiet (a
        # start-up, a DEBUG log); when they find fewer (a busy server's periodic lines, the request log's), they rest
        # for REST_BATCHES batches, then try again. Either way the counts and events are the same.
        scan = clean and not self._tracebacks and len(others) > 1
        if scan and self._scan_rest:
            self._scan_rest -= 1
            scan = False
        quiet = ()
        if scan:
            try:
                quiet = QuietScan.of(families)(lines, others)
            except Exception:  # noqa: BLE001 - the guard: every line is asked on its own instead
                quiet = ()
        if scan and 2 * len(quiet) < len(others):
            self._scan_rest = REST_BATCHES
        # the lines counted without being read: the access lines (up to ``last``) and the quiet ones
        asked, bulk, counted_quiet = others, last, ()
        if quiet:
            asked = [i for i in others if i not in quiet]
            counted_quiet, bulk = quiet, max(last, max(quiet))
            counts[IGNORED] += len(counted_quiet)
        tracebacks = self._tracebacks
        done = -1  # the last line read
        for i in asked:
            if tracebacks and done < bulk:
                break  # a traceback opened: the lines counted after it are read in order (below)
            done = i
            line = lines[i]
            self.lineno = start + i  # feed() counts this line
            try:
                # feed()'s own steps, unrolled: most of these lines are periodic or ignored ones
                fast = classify(line, clock, True, families) if framed_as_is and not self._tracebacks else None
                if fast is ignore:
                    counts[IGNORED] += 1
                    continue
                # (a tuple: the fast path's event, unless this stream's state takes the line; else the usual way, with
                # the wrapper's match if it made one)
                if type(fast) is tuple and (ev := fast_events(fast)) is not None:
                    res = PARSED if ev else IGNORED
                else:
                    res, ev = usual(line, framed_as_is, fast if type(fast) is not tuple else None)
            except Exception as e:  # noqa: BLE001 - the guard: one line, never its neighbours
                self.lineno = start + i + 1
                counts[UNPARSED] += 1
                if on_error is not None:
                    on_error(line)
                else:
                    self._bad(line, e)
                continue
            counts[res] += 1
            if ev:
                events.extend(ev)
        rest = None
        if tracebacks and done < bulk:
            # A traceback opened whose start the batch does not hold (a frame's or an exception's line: the log began
            # inside it, exporter.stream.pipeline's orphan traceback): a line counted unread may end it (an access
            # line: a later line of another process does) or belong to it, so the lines after the one that opened it
            # are read one by one; those before it stay counted (they come before any traceback).
            rest = lines[done + 1:]
            lines = lines[:done + 1]
            access, others, first, last = self._tally(lines)
            counts[IGNORED] -= sum(1 for i in counted_quiet if i > done)
        self.lineno = start + len(lines)
        counts[PARSED] += len(lines) - len(others)
        if events:
            events = self._lifecycle(events)
        edges = (None, None)
        if first >= 0 and span:
            edges = (self._ts(lines[first], on_error), self._ts(lines[last], on_error))
        if rest is not None:
            return merged([(counts, events, access, edges), self._feed_lines(rest, framed_as_is, False, on_error, span)])
        return counts, events, access, edges

    @staticmethod
    def _tally(lines: list[str]) -> tuple[dict[tuple, int], list[int], int, int]:
        """count_access's answer with each tail read: the responses counted by (method, path, status, version),
        the other lines' positions, the first and last counted line's (-1: none)."""
        tails, others, first, last = count_access(lines)
        whole_tail = access_log.whole_tail
        access: dict[tuple, int] = {}
        for tail, n in tails.items():
            r = whole_tail(tail)
            access[r] = access.get(r, 0) + n
        return access, others, first, last

    def _ts(self, line: str, on_error) -> float | None:
        """A counted access line's time (an edge of the batch's span); None if framing it raises
        (the line is counted; only where the span begins or ends is unknown)."""
        try:
            return frame_line(line, self.clock).ts
        except Exception:  # noqa: BLE001
            if self.on_bad_line is None and on_error is None:
                raise
            return None
