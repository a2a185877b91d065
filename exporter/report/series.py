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

import math
from array import array


class Tally:
    __slots__ = ("counts", "n", "total", "lo", "hi")

    def __init__(self):
        self.counts: dict[float, int] = {}
        self.n = 0
        self.total = 0  # as sum() starts
        self.lo: float | None = None
        self.hi: float | None = None

    def add(self, v: float) -> None:
        c = self.counts
        c[v] = c.get(v, 0) + 1
        self.n += 1
        self.total += v
        if self.lo is None or v < self.lo:
            self.lo = v
        if self.hi is None or v > self.hi:
            self.hi = v

    def __len__(self) -> int:
        return self.n

    def mean(self) -> float | None:
        return self.total / self.n if self.n else None

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
        if n <= 0:
            return None
        if n % 2:
            return self._at([start + n // 2])[0]
        a, b = self._at([start + n // 2 - 1, start + n // 2])
        return (a + b) / 2

    def median(self) -> float | None:
        return self._median_of(0, self.n)

    def hinges(self) -> tuple[float, float] | None:
        """Tukey's hinges: medians of the lower and upper halves, each including the median when n is odd."""
        if not self.n:
            return None
        half = (self.n + 1) // 2
        return self._median_of(0, half), self._median_of(self.n - half, half)


class Trace:
    __slots__ = ("cap", "ts", "vs", "width", "origin", "buckets", "last")

    def __init__(self, cap: int = 2048):
        self.cap = cap
        self.ts = array("d")
        self.vs = array("d")
        self.width = 0.0  # 0: exact points kept in ts/vs
        self.origin = 0.0
        self.buckets: dict[int, list[float]] = {}  # index -> [t of min, min, t of max, max]
        self.last: tuple[float, float] | None = None  # the latest point: the chart's line ends there

    def add(self, t: float | None, v: float) -> None:
        if t is None or math.isnan(t) or math.isnan(v):
            return
        if self.last is None or t >= self.last[0]:
            self.last = (t, v)
        if not self.width:
            self.ts.append(t)
            self.vs.append(v)
            if len(self.ts) > 2 * self.cap:
                self._to_buckets()
            return
        self._put(t, v, t, v)

    def _put(self, t_lo: float, lo: float, t_hi: float, hi: float) -> None:
        t = min(t_lo, t_hi)
        i = math.floor((t - self.origin) / self.width)
        b = self.buckets.get(i)
        while b is None and len(self.buckets) >= self.cap:
            self._double()
            i = math.floor((t - self.origin) / self.width)
            b = self.buckets.get(i)
        if b is None:
            self.buckets[i] = [t_lo, lo, t_hi, hi]
            return
        if lo < b[1]:
            b[0], b[1] = t_lo, lo
        if hi > b[3]:
            b[2], b[3] = t_hi, hi

    def _to_buckets(self) -> None:
        lo, hi = min(self.ts), max(self.ts)
        self.origin = lo
        self.width = 1.0
        while (hi - lo) / self.width >= self.cap / 2:
            self.width *= 2
        ts, vs = self.ts, self.vs
        self.ts, self.vs = array("d"), array("d")
        for t, v in zip(ts, vs):
            self._put(t, v, t, v)

    def _double(self) -> None:
        old = self.buckets
        self.width *= 2
        self.buckets = {}
        for b in old.values():
            self._put(*b)

    def __len__(self) -> int:
        return len(self.ts) if not self.width else len(self.buckets)

    def points(self) -> list[tuple[float, float]]:
        """(time, value) in time order: every point, or each bucket's minimum and maximum (and the latest point)."""
        if not self.width:
            return sorted(zip(self.ts, self.vs), key=lambda p: p[0])
        out = []
        for i in sorted(self.buckets):
            t_lo, lo, t_hi, hi = self.buckets[i]
            out.extend(sorted({(t_lo, lo), (t_hi, hi)}))
        if self.last is not None and self.last[0] > out[-1][0]:
            out.append(self.last)
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
