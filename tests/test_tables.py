"""The plain-dict families render exactly what prometheus-client's own metric objects render."""

import math

import pytest
from hypothesis import given, settings, strategies as st
from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, disable_created_metrics, generate_latest
from prometheus_client.openmetrics.exposition import generate_latest as generate_openmetrics

from exporter.framing.text import label
from exporter.metrics.tables import Table

BUCKETS = (0.1, 0.5, 1.0, 2.5, 1e8, 5e10)
LABELS = st.sampled_from([("a", "x"), ("a", "y"), ("b", "x"), ('q"uote', "back\\slash"), ("new\nline", "ünï"),
                          ("esc\x1b]0;title\x07", "c1\x9b31m"), ("nul\x00", "tab\t")])
VALUES = st.one_of(st.floats(-10, 1e12, allow_nan=False), st.sampled_from([0.1, 0.5, 1.0, 2.5, 1e8, 5e10, 0.0]))


def both():
    disable_created_metrics()
    ours, theirs = CollectorRegistry(), CollectorRegistry()
    table = Table()
    ours.register(table)
    return table, ours, theirs


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(["gauge", "counter", "hist"]), LABELS, VALUES), max_size=40))
def test_same_exposition_as_prometheus_client(updates):
    table, ours, theirs = both()
    g, c, h = (table.gauge("t_gauge", "A gauge.", ["server", "k"]), table.counter("t_things", "Things\\ and\nmore.", ["server", "k"]),
               table.histogram("t_rate", "A rate.", ["server", "k"], BUCKETS))
    pg = Gauge("t_gauge", "A gauge.", ["server", "k"], registry=theirs)
    pc = Counter("t_things", "Things\\ and\nmore.", ["server", "k"], registry=theirs)
    ph = Histogram("t_rate", "A rate.", ["server", "k"], buckets=BUCKETS, registry=theirs)
    for kind, labels, v in updates:
        shown = [label(x) for x in labels]  # a label value holds no control character (exporter.framing.text)
        if kind == "gauge":
            g.values[labels] = float(v)
            pg.labels(*shown).set(v)
        elif kind == "counter":
            c.inc(labels, abs(v))
            pc.labels(*shown).inc(abs(v))
        else:
            h.observe(labels, v)
            ph.labels(*shown).observe(v)
        # each series' line is kept from the scrape before: it must follow every change
        assert table.text() == generate_latest(ours).decode()
    for render in (generate_latest, generate_openmetrics):
        assert sorted(render(ours).decode().splitlines()) == sorted(render(theirs).decode().splitlines())
    # the direct writer: exactly what prometheus-client writes from the same table
    assert table.text() == generate_latest(ours).decode()


def test_touched_counter_is_exported_at_zero_and_counters_refuse_to_go_down():
    table, ours, theirs = both()
    c = table.counter("t_errors", "Errors.", ["server", "kind"])
    c.touch(("s", "oom"))
    assert 't_errors_total{kind="oom",server="s"} 0.0' in generate_latest(ours).decode()
    with pytest.raises(ValueError, match="t_errors"):
        c.inc(("s", "oom"), -1)


def test_nan_is_summed_but_counted_in_no_bucket_like_prometheus_client():
    table, ours, theirs = both()
    table.histogram("t_h", "H.", ["server"], BUCKETS).observe(("s",), math.nan)
    Histogram("t_h", "H.", ["server"], buckets=BUCKETS, registry=theirs).labels("s").observe(math.nan)
    assert sorted(generate_latest(ours).decode().splitlines()) == sorted(generate_latest(theirs).decode().splitlines())


def test_dropping_a_server_forgets_its_gauges_only():
    table, ours, _ = both()
    g = table.gauge("t_g", "G.", ["server"])
    c = table.counter("t_c", "C.", ["server"])
    g.values[("s",)] = 1.0
    g.values[("t",)] = 2.0
    c.inc(("s",), 3)
    table.drop_gauges("s")
    assert g.values == {("t",): 2.0} and c.values == {("s",): 3.0}


def test_the_text_of_the_exporters_own_metrics_is_what_prometheus_client_writes():
    from exporter.metrics import Metrics
    from tests.conftest import SAMPLE, SAMPLE_V0, run_lines

    m = Metrics(process_metrics=False)
    for server, path in (("a", SAMPLE), ("b", SAMPLE_V0)):
        m.add_server(server)
        _, events = run_lines(path.read_text(encoding="utf-8").splitlines())
        m.observe_many(server, events)
    only_table = CollectorRegistry()
    only_table.register(m._table)
    assert m._table.text() == generate_latest(only_table).decode()
    body = m.render().decode()
    assert sorted(body.splitlines()) == sorted(generate_latest(m.registry).decode().splitlines())
