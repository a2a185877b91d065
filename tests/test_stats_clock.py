"""The stats clock's estimate of vLLM's interval, kept from its sorted gaps, is the one the plain scan of them gives.

exporter.stream.windows.StatsClock keeps an engine's last gaps sorted as they come (no sort per stats line) and,
with whole-second stamps, reads the gaps near the median off that list by bisection. ``Scanned`` below is the
estimate written the plain way (sort the gaps, scan them, sum those near the median in their order): every
window length, interval, owed second and first window must be the same, stamp for stamp."""

from __future__ import annotations

from collections import deque

from hypothesis import given, settings, strategies as st

from exporter.stream import windows
from exporter.stream.windows import StatsClock


class Scanned(StatsClock):
    """The plain estimate: the gaps sorted and scanned on every line that changes them."""

    def _observe(self, key, gap, precise):
        gaps = self._gaps.get(key)
        if gaps is None:
            gaps = self._gaps[key] = deque(maxlen=windows.MAX_GAPS)
        gaps.append(gap)
        self._judged[key] = precise
        if len(gaps) < windows.MIN_GAPS:
            return
        ordered = sorted(gaps)
        median = ordered[len(ordered) // 2]
        slack = 0.5 * median + (0 if precise else 1.0)
        near = [g for g in gaps if abs(g - median) <= slack]
        if len(near) < windows.MIN_GAPS:
            return
        est = sum(near) / len(near)
        if not precise and abs(sum(near) - len(near) * self.configured) <= 1.0:
            est = self.configured
        self._interval[key] = est
        if key in self._pending:
            self._decide(key, est, True)
        server = key[0]
        if server not in self._warned and abs(est - self.configured) > windows.DISAGREE * self.configured \
                and (precise or abs(est - self.configured) > 0.5):
            self._warned.add(server)
            if self.warn is not None:
                self.warn(server, est, self.configured)


def _answers(clock: StatsClock, steps) -> list:
    out, warned = [], []
    clock.warn = lambda *a: warned.append(a)
    for server, engine, step, busy, ready, restart in steps:
        key = (server, engine)
        if restart:
            clock.forget(server)
        if ready is not None:
            clock.ready(server, ready)
        out.append((clock.window(key, step, busy), clock.shown(key), clock.take_owed(key), clock.take_first(key)))
    for server in ("a", "b"):
        clock.settle(server)
        out.append([clock.take_first(k) for k in sorted(clock.pending())])
    return out + [warned]


# gaps of a steady logger (whole seconds: 10 s, a held-up 11 s, a lost line's 20 s, hidden idle windows' 30-60 s),
# or with fractions (sub-second stamps)
_WHOLE = st.sampled_from([10, 10, 10, 10, 11, 9, 20, 30, 60, 2, 3, 1, 4, 16, 5, 15])
_FRACTION = st.sampled_from([0.0, 0.0, 0.25, 0.001, 0.999, 0.5])


@st.composite
def runs(draw):
    steps, t = [], {("a", 0): 1_754_265_600.0, ("a", 1): 1_754_265_600.0, ("b", 0): 1_754_265_700.0}
    for _ in range(draw(st.integers(1, 140))):
        key = draw(st.sampled_from(sorted(t)))
        t[key] += draw(_WHOLE) + draw(_FRACTION)
        ready = t[key] - draw(st.sampled_from([11, 2, 30])) if draw(st.integers(0, 30)) == 0 else None
        steps.append((key[0], key[1], t[key], draw(st.booleans()) or draw(st.booleans()), ready,
                      draw(st.integers(0, 60)) == 0))
    return steps


@settings(max_examples=120, deadline=None)  # (~3 s; the fixed examples below hold the edges)
@given(runs(), st.sampled_from([10.0, 2.0, 5.0]))
def test_the_kept_order_gives_the_plain_scans_answers(steps, configured):
    assert _answers(StatsClock(configured), steps) == _answers(Scanned(configured), steps)


def test_a_long_steady_run_with_changing_gaps_gives_the_same_answers():
    # (fixed examples, run everywhere: past MAX_GAPS, where the kept list drops the gap the deque gives up; gaps on
    # the slack's very edge, 4 and 16 s about a 10 s median; and, from a clock near zero, sub-second gaps whose sum
    # depends on its order, which the estimate with such stamps keeps)
    for fraction, start in ((0.0, 1_754_265_600.0), (0.125, 1_754_265_600.0), (0.1, 0.3), (0.7, 0.1)):
        for pattern in ([10, 10, 20, 10, 30, 10, 11, 9], [2, 3, 2, 2, 60, 2], [10] * 40 + [20] * 40 + [10] * 40,
                        [10, 10, 10, 4, 16, 10, 10, 3, 17, 10]):
            t, steps = start, []
            for i in range(300):
                t += pattern[i % len(pattern)] + (fraction if i % 3 == 0 else 0.0)
                steps.append(("a", 0, t, i % 5 != 4, t - 11 if i == 0 else None, i == 200))
            for configured in (10.0, 2.0):
                got = _answers(StatsClock(configured), steps)
                assert got == _answers(Scanned(configured), steps), (pattern, fraction, configured)
                assert any(row[1] is not None for row in got[:300])  # the interval was shown (the estimate ran)
