"""What a run's report keeps of per-window values: memory bounded by the log's variety, not its length.

``Tally``: an exact multiset (value -> how often), so medians and hinges are exact. vLLM prints every
figure with fixed decimals (``85.3 tokens/s``, ``2.35``, ``61.3%``), so a month of 10-s windows
holds a few thousand distinct values at most, however many windows there were. Its mean is the sum
in arrival order, as summing a list of the values would give.

``Trace``: a time series for a chart, the exact points while there are few, then per-bucket minimum
and maximum points (what a chart a few hundred pixels wide can show), the bucket width doubling
whenever there are more buckets than ``cap``.

``BucketCounts``: counts by a key in time buckets (HTTP responses per minute by status class), the
same doubling.
"""

from __future__ import annotations

from array import array
from collections import Counter


_NAN = float("nan")
_INF = float("inf")


class Tally:
    """Values come in through ``add`` (an array append: it runs per stats line) and are folded into
    the counts a few thousand at a time."""

    __slots__ = ("counts", "n", "total", "lo", "hi", "pending")

    def __init__(self):
        self.counts: Counter = Counter()
        self.n = 0
        self.total = 0.0
        self.lo: float | None = None
        self.hi: float | None = None
        self.pending = array("d")

    def add(self, v: float) -> None:
        self.pending.append(v)
        if len(self.pending) >= 4096:
            self._fold()

    def maybe_fold(self) -> None:
        """For a caller that appends to ``pending`` itself (its bound ``append``: no Python frame)."""
        if len(self.pending) >= 4096:
            self._fold()

    def _fold(self) -> None:
        p = self.pending
        if not p:
            return
        self.counts.update(p)
        self.n += len(p)
        total = self.total
        for v in p:  # in arrival order, one addition at a time (sum() of floats compensates since 3.12)
            total += v
        self.total = total
        lo, hi = min(p), max(p)
        if self.lo is None or lo < self.lo:
            self.lo = lo
        if self.hi is None or hi > self.hi:
            self.hi = hi
        del p[:]  # in place: a caller may hold its append

    def __len__(self) -> int:
        return self.n + len(self.pending)

    def mean(self) -> float | None:
        self._fold()
        return self.total / self.n if self.n else None

    @property
    def low(self) -> float | None:
        self._fold()
        return self.lo

    @property
    def high(self) -> float | None:
        self._fold()
        return self.hi

    def _at(self, ranks: list[int]) -> list[float]:
        """The values at the given 0-based ranks of the sorted multiset (ranks ascending)."""
        out, seen, i = [], 0, 0
        for v in sorted(self.counts):
            seen += self.counts[v]
            while i < len(ranks) and ranks[i] < seen:
                out.append(v)
                i += 1
            if i == len(ranks):
                break
        return out

    def _median_of(self, start: int, n: int) -> float | None:
        """Median of the sorted ranks start .. start+n-1."""
        self._fold()
        if n <= 0:
            return None
        if n % 2:
            return self._at([start + n // 2])[0]
        a, b = self._at([start + n // 2 - 1, start + n // 2])
        return (a + b) / 2

    def median(self) -> float | None:
        self._fold()
        return self._median_of(0, self.n)

    def hinges(self) -> tuple[float, float] | None:
        """Tukey's hinges: medians of the lower and upper halves, each including the median when n is odd."""
        self._fold()
        if not self.n:
            return None
        half = (self.n + 1) // 2
        return self._median_of(0, half), self._median_of(self.n - half, half)


class Trace:
    """Points come in through ``add`` (two array appends) and are folded into buckets once there
    are more than the chart needs."""

    __slots__ = ("cap", "ts", "vs", "width", "origin", "buckets", "last_t", "last_v")

    def __init__(self, cap: int = 2048):
        self.cap = cap
        self.ts = array("d")  # points not yet folded (all of them while there are few)
        self.vs = array("d")
        self.width = 0.0  # 0: no buckets yet
        self.origin = 0.0
        self.buckets: dict[float, list[float]] = {}  # index -> [t of min, min, t of max, max]
        self.last_t = float("-inf")  # the latest point: the chart's line ends there
        self.last_v = 0.0

    def add(self, t: float | None, v: float) -> None:
        self.ts.append(_NAN if t is None else t)
        self.vs.append(v)
        if len(self.ts) > 2 * self.cap:
            self._fold()

    def maybe_fold(self) -> None:
        """For a caller that appends to ``ts`` and ``vs`` itself (NaN for no time)."""
        if len(self.ts) > 2 * self.cap:
            self._fold()

    def _fold(self) -> None:
        ts, vs = self.ts[:], self.vs[:]
        del self.ts[:], self.vs[:]  # in place: a caller may hold their appends
        total = sum(ts) + sum(vs)  # (NaN, or an infinity, anywhere makes the sum not finite: one C loop)
        if total != total or total in (_INF, -_INF):
            pairs = [(t, v) for t, v in zip(ts, vs) if t == t and v == v]
            ts, vs = array("d", [t for t, _ in pairs]), array("d", [v for _, v in pairs])
        if not ts:
            return
        if not self.width:
            lo, hi = min(ts), max(ts)
            self.origin = lo
            self.width = 1.0
            while (hi - lo) / self.width >= self.cap / 2:
                self.width *= 2
        latest = max(ts)
        if latest >= self.last_t:  # the last of the latest points, as a line drawn in arrival order ends
            self.last_t, self.last_v = latest, vs[len(ts) - 1 - ts[::-1].index(latest)]
        buckets, put = self.buckets, self._put
        for t, v in zip(ts, vs):
            b = buckets.get((t - self.origin) // self.width)
            if b is None:
                put(t, v, t, v)
                buckets = self.buckets  # (a doubling makes a new dict)
            elif v < b[1]:
                b[0], b[1] = t, v
            elif v > b[3]:
                b[2], b[3] = t, v

    def _put(self, t_lo: float, lo: float, t_hi: float, hi: float) -> None:
        t = min(t_lo, t_hi)
        i = (t - self.origin) // self.width
        b = self.buckets.get(i)
        while b is None and len(self.buckets) >= self.cap:
            self._double()
            i = (t - self.origin) // self.width
            b = self.buckets.get(i)
        if b is None:
            self.buckets[i] = [t_lo, lo, t_hi, hi]
            return
        if lo < b[1]:
            b[0], b[1] = t_lo, lo
        if hi > b[3]:
            b[2], b[3] = t_hi, hi

    def _double(self) -> None:
        old = self.buckets
        self.width *= 2
        self.buckets = {}
        for b in old.values():
            self._put(*b)

    def __len__(self) -> int:
        return sum(1 for t, v in zip(self.ts, self.vs) if t == t and v == v) + len(self.buckets)

    def points(self) -> list[tuple[float, float]]:
        """(time, value) in time order: every point, or each bucket's minimum and maximum (and the latest point)."""
        if not self.width:
            return sorted(((t, v) for t, v in zip(self.ts, self.vs) if t == t and v == v), key=lambda p: p[0])
        self._fold()
        out = []
        for i in sorted(self.buckets):
            t_lo, lo, t_hi, hi = self.buckets[i]
            out.extend(sorted({(t_lo, lo), (t_hi, hi)}))
        if self.last_t > out[-1][0]:
            out.append((self.last_t, self.last_v))
        return out


class BucketCounts:
    __slots__ = ("cap", "width", "buckets")

    def __init__(self, width: float = 60.0, cap: int = 2048):
        self.cap = cap
        self.width = width
        self.buckets: dict[int, dict[str, int]] = {}

    def add(self, t: float, key: str, n: int) -> None:
        i = int(t // self.width)
        b = self.buckets.get(i)
        while b is None and len(self.buckets) >= self.cap:
            old = self.buckets
            self.width *= 2
            self.buckets = {}
            for j, counts in old.items():
                merged = self.buckets.setdefault(j // 2, {})
                for k, c in counts.items():
                    merged[k] = merged.get(k, 0) + c
            i = int(t // self.width)
            b = self.buckets.get(i)
        if b is None:
            b = self.buckets[i] = {}
        b[key] = b.get(key, 0) + n

    def __bool__(self) -> bool:
        return bool(self.buckets)

    def items(self) -> list[tuple[float, dict[str, int]]]:
        """(bucket start, counts) in time order."""
        return [(i * self.width, self.buckets[i]) for i in sorted(self.buckets)]
