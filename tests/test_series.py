"""exporter.offline.report.series against the plain list computations it replaces (property tests)."""

import math
import sys

from hypothesis import given, settings, strategies as st

from exporter.offline.report.series import BucketCounts, Tally, Trace


# What the multiset must agree with: the plain list computations (the report's before it kept
# multisets).
def median(xs) -> float | None:
    s = sorted(xs)
    n = len(s)
    if not n:
        return None
    return s[n // 2] if n % 2 else (s[n // 2 - 1] + s[n // 2]) / 2


def tukey_hinges(xs) -> tuple[float, float] | None:
    """Tukey's hinges: medians of the lower and upper halves, each including the median when n is odd."""
    s = sorted(xs)
    n = len(s)
    if not n:
        return None
    half = (n + 1) // 2
    return median(s[:half]), median(s[n - half:])


def mean(xs) -> float | None:
    return sum(xs) / len(xs) if len(xs) else None

# values as vLLM prints them: fixed decimals, so repeats are common
printed = st.integers(min_value=0, max_value=3000).map(lambda n: n / 10)
values = st.lists(st.one_of(printed, st.floats(min_value=-1e6, max_value=1e6, allow_nan=False)), max_size=300)


@given(values)
def test_tally_gives_exactly_the_medians_hinges_mean_and_extremes_of_the_list(xs):
    t = Tally()
    for x in xs:
        t.add(x)
    assert len(t) == len(xs)
    assert t.median() == median(xs)
    assert t.hinges() == tukey_hinges(xs)
    # the mean of the values summed one by one in arrival order (sum() of floats compensates since 3.12)
    total = 0.0
    for x in xs:
        total += x
    assert t.mean() == (total / len(xs) if xs else None)
    if sys.version_info < (3, 12):
        assert t.mean() == mean(xs)
    assert t.high == (max(xs) if xs else None)
    assert t.low == (min(xs) if xs else None)


def test_tally_memory_follows_distinct_values_not_their_count():
    t = Tally()
    for i in range(200_000):
        t.add((i * 7919 % 1000) / 10)
    assert len(t) == 200_000
    t.median()
    assert len(t.counts) == 1000 and len(t.pending) == 0
    assert t.median() == median([(i * 7919 % 1000) / 10 for i in range(200_000)])


points = st.lists(st.tuples(st.floats(min_value=0, max_value=1e7, allow_nan=False),
                            st.floats(min_value=-1e3, max_value=1e3, allow_nan=False)), max_size=600)


@settings(max_examples=300)
@given(points, st.integers(min_value=4, max_value=64), st.booleans())
def test_trace_keeps_few_points_exactly_and_many_as_bounded_extremes(pts, cap, in_time_order):
    if in_time_order:  # a log: the span keeps growing, so buckets keep doubling
        pts = sorted(pts)
    tr = Trace(cap=cap)
    for t, v in pts:
        tr.add(t, v)
    out = tr.points()
    if len(pts) <= 2 * cap:
        assert out == sorted(pts, key=lambda p: p[0])
        return
    assert len(out) <= 2 * cap + 1  # at most cap buckets, two points each, and the latest
    assert set(out) <= set(pts)  # only points that were given
    assert [p[0] for p in out] == sorted(p[0] for p in out)
    assert out[-1][0] == max(t for t, _ in pts)
    vs = [v for _, v in pts]
    assert max(v for _, v in out) == max(vs) and min(v for _, v in out) == min(vs)


def test_trace_of_a_year_of_windows_stays_small_and_keeps_the_spike():
    tr = Trace()
    t0 = 1.7e9
    for i in range(3_153_600):  # a year of 10-s windows
        tr.add(t0 + 10 * i, 50.0 + (1000.0 if i == 1_234_567 else 0.0))
    out = tr.points()
    assert len(out) <= 2 * tr.cap + 1
    assert (t0 + 10 * 1_234_567, 1050.0) in out
    assert out[0][0] == t0 and out[-1][0] == t0 + 10 * 3_153_599


def test_trace_skips_points_without_time():
    tr = Trace()
    tr.add(None, 1.0)
    tr.add(float("nan"), 1.0)
    tr.add(5.0, 2.0)
    assert tr.points() == [(5.0, 2.0)]


@given(st.lists(st.tuples(st.floats(min_value=0, max_value=1e8, allow_nan=False), st.sampled_from(["2xx", "5xx"]),
                          st.integers(min_value=1, max_value=50)), max_size=400), st.integers(min_value=2, max_value=32))
def test_bucket_counts_keep_every_response_and_stay_bounded(adds, cap):
    b = BucketCounts(60.0, cap=cap)
    for t, k, n in adds:
        b.add(t, k, n)
    items = b.items()
    assert len(items) <= cap
    for k in ("2xx", "5xx"):
        assert sum(c.get(k, 0) for _, c in items) == sum(n for _, kk, n in adds if kk == k)
    # every response sits in the bucket covering its time
    for t, k, n in adds:
        start = math.floor(t / b.width) * b.width
        assert any(s == start and c.get(k) for s, c in items)
