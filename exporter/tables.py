"""Metric families kept as plain dicts and rendered at scrape time.

prometheus-client's metric objects take a lock and go through a child object on every update; for
the lines of a busy log that cost more than parsing them (bench/lines.py). Here a gauge or counter
sample is one dict entry, a histogram one list, keyed by the label values. Updates and scrapes run on
the daemon's one event-loop thread (prometheus-client's aiohttp handler renders in the loop), so no
lock is needed. The exposition is the same as prometheus-client's own metrics would give: same
names, types, ``le`` strings and ``_total``/``_bucket``/``_count``/``_sum`` samples.
"""

from __future__ import annotations

from bisect import bisect_left
from typing import Iterator

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily
from prometheus_client.utils import floatToGoString

Labels = tuple[str, ...]


class GaugeFamily:
    """``values[labels] = v`` sets a sample; a new start-up of a server drops its samples."""

    __slots__ = ("name", "doc", "labelnames", "values")

    def __init__(self, name: str, doc: str, labelnames: list[str]):
        self.name, self.doc, self.labelnames = name, doc, list(labelnames)
        self.values: dict[Labels, float] = {}

    def metric(self):
        g = GaugeMetricFamily(self.name, self.doc, labels=self.labelnames)
        for labels, value in self.values.items():
            g.add_metric(labels, value)
        return g


class CounterFamily:
    """``inc(labels, n)``; ``touch(labels)`` makes a sample at 0 so ``increase()`` sees its first step.
    ``name`` is without ``_total``, as prometheus-client's Counter takes it."""

    __slots__ = ("name", "doc", "labelnames", "values")

    def __init__(self, name: str, doc: str, labelnames: list[str]):
        self.name, self.doc, self.labelnames = name, doc, list(labelnames)
        self.values: dict[Labels, float] = {}

    def inc(self, labels: Labels, amount: float = 1.0) -> None:
        if amount < 0:
            raise ValueError(f"{self.name}: counters only go up, not by {amount}")
        values = self.values
        values[labels] = values.get(labels, 0.0) + amount

    def touch(self, labels: Labels) -> None:
        self.values.setdefault(labels, 0.0)

    def metric(self):
        c = CounterMetricFamily(self.name, self.doc, labels=self.labelnames)
        for labels, value in self.values.items():
            c.add_metric(labels, value)
        return c


class HistogramFamily:
    """``observe(labels, v)``: one list per series, the count of each bucket (not cumulative; the last
    is +Inf) followed by the sum."""

    __slots__ = ("name", "doc", "labelnames", "bounds", "values", "_le")

    def __init__(self, name: str, doc: str, labelnames: list[str], buckets: tuple[float, ...]):
        bounds = sorted(float(b) for b in buckets)
        if bounds and bounds[-1] == float("inf"):
            bounds.pop()
        self.name, self.doc, self.labelnames = name, doc, list(labelnames)
        self.bounds = tuple(bounds)
        self._le = [floatToGoString(b) for b in bounds] + ["+Inf"]
        self.values: dict[Labels, list[float]] = {}

    def observe(self, labels: Labels, value: float) -> None:
        series = self.values.get(labels)
        if series is None:
            series = self.values[labels] = [0] * (len(self.bounds) + 1) + [0.0]
        if value == value:  # NaN falls in no bucket, as with prometheus-client
            series[bisect_left(self.bounds, value)] += 1
        series[-1] += value

    def metric(self):
        h = HistogramMetricFamily(self.name, self.doc, labels=self.labelnames)
        for labels, series in self.values.items():
            total = 0
            buckets = []
            for le, n in zip(self._le, series):
                total += n
                buckets.append((le, total))
            h.add_metric(labels, buckets, series[-1])
        return h


class Table:
    """A collector of such families; the first label of every family is ``server``."""

    def __init__(self):
        self.families: list = []

    def gauge(self, name: str, doc: str, labelnames: list[str]) -> GaugeFamily:
        return self._add(GaugeFamily(name, doc, labelnames))

    def counter(self, name: str, doc: str, labelnames: list[str]) -> CounterFamily:
        return self._add(CounterFamily(name, doc, labelnames))

    def histogram(self, name: str, doc: str, labelnames: list[str], buckets: tuple[float, ...]) -> HistogramFamily:
        return self._add(HistogramFamily(name, doc, labelnames, buckets))

    def _add(self, fam):
        self.families.append(fam)
        return fam

    def drop_gauges(self, server: str) -> None:
        """Forget a server's gauge samples (its start-up and last-window facts); counters stay."""
        for fam in self.families:
            if isinstance(fam, GaugeFamily):
                for labels in [k for k in fam.values if k[0] == server]:
                    del fam.values[labels]

    def collect(self) -> Iterator:
        for fam in self.families:
            yield fam.metric()
