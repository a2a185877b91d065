"""Metric families kept as plain dicts and rendered at scrape time.

prometheus-client's metric objects take a lock and go through a child object on every update; for
the lines of a busy log that cost more than parsing them (bench/lines.py). Here a gauge or counter
sample is one dict entry, a histogram one list, keyed by the label values. Updates and scrapes run on
the daemon's one event-loop thread, so no lock is needed. The exposition is the same as
prometheus-client's own metrics would give: same names, types, ``le`` strings and
``_total``/``_bucket``/``_count``/``_sum`` samples, through ``collect()`` (any prometheus-client
consumer) or ``text()``, the text format written directly with each series' label text kept
(prometheus-client's generic writer checks and escapes every label of every sample on every
scrape; tests compare the two byte for byte). Each series' sample line is kept with the value it
was written for and written again only when the value changed: between two scrapes most series of a
big exporter have not moved, and formatting a float is most of the writing (bench/scrape.py).
"""

from __future__ import annotations

from bisect import bisect_left
from math import copysign
from typing import Iterator

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily
from prometheus_client.utils import floatToGoString

from exporter.framing.text import label

Labels = tuple[str, ...]


def _escape_value(v: str) -> str:
    v = label(v)  # no control character or surrogate in any exposition (exporter.framing.text)
    return v.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def _escape_help(v: str) -> str:
    return v.replace("\\", "\\\\").replace("\n", "\\n")


class _LabelText:
    """``{a="x",b="y"}`` for label values, names sorted as prometheus-client writes them, cached per
    series (a family has a few dozen series; their label text never changes)."""

    __slots__ = ("order", "names", "cache")

    def __init__(self, labelnames: list[str], extra: str | None = None):
        names = list(labelnames) + ([extra] if extra else [])
        self.order = sorted(range(len(names)), key=lambda i: names[i])
        self.names = names
        self.cache: dict[Labels, str] = {}

    def __call__(self, values: Labels) -> str:
        text = self.cache.get(values)
        if text is None:
            if not self.names:
                return ""
            if len(self.cache) > 10000:
                self.cache.clear()
            text = self.cache[values] = "{" + ",".join(
                f'{self.names[i]}="{_escape_value(values[i])}"' for i in self.order) + "}"
        return text


class _ValueFamily:
    """A family whose series are one number each: ``values[labels]``."""

    __slots__ = ("name", "doc", "labelnames", "values", "_labels", "_lines")
    _type = ""
    _suffix = ""
    _metric_class: type = GaugeMetricFamily

    def __init__(self, name: str, doc: str, labelnames: list[str]):
        self.name, self.doc, self.labelnames = name, doc, list(labelnames)
        self.values: dict[Labels, float] = {}
        self._labels = _LabelText(labelnames)
        self._lines: dict[Labels, tuple[float, str]] = {}

    def metric(self):
        m = self._metric_class(self.name, self.doc, labels=self.labelnames)
        for labels, value in self.values.items():
            m.add_metric([label(v) for v in labels], value)
        return m

    def text(self, out: list[str]) -> None:
        name = self.name + self._suffix
        out.append(f"# HELP {name} {_escape_help(self.doc)}\n# TYPE {name} {self._type}\n")
        lines = self._lines
        if len(lines) > 2 * len(self.values) + 64:  # series were dropped: forget their lines
            lines.clear()
        get = lines.get
        labels_of = self._labels
        for labels, value in self.values.items():
            c = get(labels)
            # (0.0 == -0.0, but they are written differently; NaN equals nothing, so it is rewritten)
            if c is not None and c[0] == value and (value or copysign(1.0, value) == copysign(1.0, c[0])):
                out.append(c[1])
            else:
                line = f"{name}{labels_of(labels)} {floatToGoString(value)}\n"
                lines[labels] = (value, line)
                out.append(line)


class GaugeFamily(_ValueFamily):
    """``values[labels] = v`` sets a sample; a new start-up of a server drops its samples."""

    __slots__ = ()
    _type = "gauge"


class LastingGaugeFamily(GaugeFamily):
    """A gauge that keeps its samples when a server starts again (the time of its last error)."""

    __slots__ = ()


class CounterFamily(_ValueFamily):
    """``inc(labels, n)``; ``touch(labels)`` makes a sample at 0 so ``increase()`` sees its first step.
    ``name`` is without ``_total``, as prometheus-client's Counter takes it."""

    __slots__ = ()
    _type = "counter"
    _suffix = "_total"
    _metric_class = CounterMetricFamily

    def inc(self, labels: Labels, amount: float = 1.0) -> None:
        if amount < 0:
            raise ValueError(f"{self.name}: counters only go up, not by {amount}")
        values = self.values
        values[labels] = values.get(labels, 0.0) + amount

    def touch(self, labels: Labels) -> None:
        self.values.setdefault(labels, 0.0)


class HistogramFamily:
    """``observe(labels, v)``: one list per series, the count of each bucket (not cumulative; the last
    is +Inf) followed by the sum."""

    __slots__ = ("name", "doc", "labelnames", "bounds", "values", "_le", "_labels", "_bucket_labels", "_blocks")

    def __init__(self, name: str, doc: str, labelnames: list[str], buckets: tuple[float, ...]):
        bounds = sorted(float(b) for b in buckets)
        if bounds and bounds[-1] == float("inf"):
            bounds.pop()
        self.name, self.doc, self.labelnames = name, doc, list(labelnames)
        self.bounds = tuple(bounds)
        self._le = [floatToGoString(b) for b in bounds] + ["+Inf"]
        self.values: dict[Labels, list[float]] = {}
        self._labels = _LabelText(labelnames)
        self._bucket_labels = _LabelText(labelnames, "le")
        self._blocks: dict[Labels, tuple[list, str]] = {}  # each series' lines, with the counts they show

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
            h.add_metric([label(v) for v in labels], buckets, series[-1])
        return h

    def text(self, out: list[str]) -> None:
        name = self.name
        out.append(f"# HELP {name} {_escape_help(self.doc)}\n# TYPE {name} histogram\n")
        bucket_labels, labels_of = self._bucket_labels, self._labels
        blocks = self._blocks
        if len(blocks) > 2 * len(self.values) + 64:
            blocks.clear()
        for labels, series in self.values.items():
            c = blocks.get(labels)
            if c is not None and c[0] == series and (series[-1] or copysign(1.0, series[-1]) == copysign(1.0, c[0][-1])):
                out.append(c[1])
                continue
            part = []
            total = 0
            for le, n in zip(self._le, series):
                total += n
                part.append(f"{name}_bucket{bucket_labels(labels + (le,))} {floatToGoString(total)}\n")
            lt = labels_of(labels)
            part.append(f"{name}_count{lt} {floatToGoString(total)}\n{name}_sum{lt} {floatToGoString(series[-1])}\n")
            block = "".join(part)
            blocks[labels] = (list(series), block)
            out.append(block)


class Table:
    """A collector of such families; the first label of every family is ``server``."""

    def __init__(self):
        self.families: list = []

    def gauge(self, name: str, doc: str, labelnames: list[str], lasting: bool = False) -> GaugeFamily:
        return self._add((LastingGaugeFamily if lasting else GaugeFamily)(name, doc, labelnames))

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
            if isinstance(fam, GaugeFamily) and not isinstance(fam, LastingGaugeFamily):
                for labels in [k for k in fam.values if k[0] == server]:
                    del fam.values[labels]

    def forget(self, server: str) -> int:
        """Drop every series of a server, counters too (its source is gone for good: a replaced pod).
        Returns how many series went."""
        n = 0
        for fam in self.families:
            cache = getattr(fam, "_lines", None)
            if cache is None:
                cache = getattr(fam, "_blocks", None)
            for labels in [k for k in fam.values if k[0] == server]:
                del fam.values[labels]
                n += 1
                if cache is not None:
                    cache.pop(labels, None)
        return n

    def collect(self) -> Iterator:
        for fam in self.families:
            yield fam.metric()

    def text(self) -> str:
        """Every family in the text format (0.0.4), as generate_latest would write it."""
        out: list[str] = []
        for fam in self.families:
            fam.text(out)
        return "".join(out)
