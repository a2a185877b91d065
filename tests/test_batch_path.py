"""The pipeline's batch path (access-log lines counted, not made into events) gives exactly what
feeding line by line gives: the same counts, metrics and report."""

import random
import sys

import pytest

from hypothesis import given, settings, strategies as st
from prometheus_client import generate_latest

from exporter.framing.clock import Clock
from exporter.metrics import Metrics
from exporter.stream.pipeline import Pipeline
from exporter.offline.report.stats import RunStats
from tests.conftest import FIXTURES, ROOT, SAMPLE, SAMPLE_V0

sys.path.insert(0, str(ROOT))
from bench.gen_log import generate  # noqa: E402

ANSI = "\x1b[1;36m(APIServer pid=1)\x1b[0;0m INFO:     1.2.3.4:5 - \"GET /health HTTP/1.1\" 200 OK"
TRICKY = [
    'INFO:     1.2.3.4:5 - "GET /metrics?x=1 HTTP/1.1" 200 OK',
    'INFO:     1.2.3.4:5 - "POST /v1/completions HTTP/1.1" 500 Internal Server Error',
    '(APIServer pid=1) INFO 01-01 00:00:00 [serving.py:1] proxied "GET /x HTTP/1.1" 200 for a client',
    'INFO:     1.2.3.4:5 - "GET /a HTTP/1.1" 200 OKINFO 07-28 06:41:19 [loggers.py:1] Engine 000: Avg prompt '
    'throughput: 5.0 tokens/s, Avg generation throughput: 6.0 tokens/s, Running: 2 reqs, Waiting: 0 reqs',
    "(APIServer pid=1) Traceback (most recent call last):",
    '(APIServer pid=1)   File "x.py", line 1, in f',
    '(APIServer pid=1) INFO:     1.2.3.4:5 - "GET /health HTTP/1.1" 200 OK',
    "(APIServer pid=1) ValueError: boom",
    ANSI,
    "HTTP/1.1 is mentioned here but this is no access line",
    '(APIServer pid=1) WARNING 01-01 00:00:00 [x.py:1] 1.2.3.4:5 - "GET /y HTTP/1.1" 404 Not Found',
    'INFO:      - "GET /z HTTP/1.1" 200 OK',
    'a - "GET /q HTTP/1.1" 200 OK - "POST /r HTTP/1.1" 500',
    '...hit rate: 0.0%INFO:     1.2.3.4:5 - "GET /glued HTTP/1.1" 200 OK',
    'INFO:     1.2.3.4:5\xa0 - "GET /nbsp HTTP/1.1" 200 OK',
    'INFO:     1.2.3.4:5\u3000 - "GET /ideographic-space HTTP/1.1" 200 OK',
]


def metrics_text(m: Metrics) -> list[str]:
    # Exposition order follows when each series was born, which the two paths may differ in.
    return sorted(generate_latest(m.registry).decode().splitlines())


def line_by_line(lines):
    p, m, s = Pipeline(Clock(year=2026)), Metrics(process_metrics=False), RunStats()
    m.add_server("x")
    counts = {"parsed": 0, "ignored": 0, "unparsed": 0}
    for line in lines:
        r, events = p.feed(line)
        counts[r] += 1
        for ev in events:
            m.observe("x", ev)
            s.add(ev)
    for ev in p.flush():
        m.observe("x", ev)
        s.add(ev)
    m.count_lines("x", counts, now=0)
    return counts, metrics_text(m), s.summary()


def batched(lines, sizes):
    p, m, s = Pipeline(Clock(year=2026)), Metrics(process_metrics=False), RunStats()
    m.add_server("x")
    counts = {"parsed": 0, "ignored": 0, "unparsed": 0}
    i = 0
    rng = random.Random(sizes)
    while i < len(lines):
        n = rng.randint(1, 400)
        c, events, access, span = p.feed_batch(lines[i:i + n])
        i += n
        for k, v in c.items():
            counts[k] += v
        for ev in events:
            m.observe("x", ev)
            s.add(ev)
        m.observe_access("x", access)
        s.add_access(access, span)
    for ev in p.flush():
        m.observe("x", ev)
        s.add(ev)
    m.count_lines("x", counts, now=0)
    return counts, metrics_text(m), s.summary()


def same(lines, seed=1, monotonic=True):
    a, b = line_by_line(lines), batched(lines, seed)
    assert a[0] == b[0]
    assert a[1] == b[1]
    if not monotonic:  # the batch path dates its access lines by the first and last of each batch
        a[2].pop("range"), b[2].pop("range")
    assert a[2] == b[2]


@pytest.fixture(autouse=True)
def fixed_clock(monkeypatch):
    # last-line and undated-error timestamps are wall-clock readings: make them equal in both runs
    import exporter.metrics

    monkeypatch.setattr(exporter.metrics.time, "time", lambda: 1e9)


def test_samples_and_seed():
    for path in (SAMPLE, SAMPLE_V0, FIXTURES / "seed_article.log"):
        same(path.read_text(encoding="utf-8").splitlines())


def test_generated_busy_log_with_tricky_lines_mixed_in():
    lines = generate(20000, seed=3)
    rng = random.Random(7)
    for t in TRICKY * 5:
        lines.insert(rng.randrange(len(lines)), t)
    for seed in range(3):
        same(lines, seed)


def test_the_batch_path_really_counts_access_lines_in_bulk():
    p = Pipeline(Clock(year=2026))
    counts, events, access, _ = p.feed_batch(['INFO:     1.2.3.4:5 - "GET /health?a=1 HTTP/1.1" 200 OK'] * 3)
    assert counts["parsed"] == 3 and events == [] and access == {("GET", "/health", 200, "1.1"): 3}
    counts, events, access, _ = p.feed_batch([ANSI])  # colour: framing changes the text, so line by line
    assert access == {} and [e.kind for e in events] == ["access_log"]


def test_an_access_line_whose_request_holds_a_colour_reset_that_lost_its_esc_reads_the_same_both_ways():
    # A collector that drops ESC bytes leaves "[0m" where a colour ended; framing strips such codes from the line, so
    # line by line the path below is /v1/chat/completions: the bulk count must not count it with the code in it.
    plain = 'Aug 04 00:02:{:02d} gpu-host vllm[4242]: (APIServer pid=53) INFO:     10.0.0.{}:4{} - "{} HTTP/1.1" 200 OK'
    lines = [plain.format(i, i, i, req) for i, req in enumerate(
        ["POST /v1/chat/completions", "POST /v1/chat/co[0mpletions", "GET /metr[39mics", "GET /health[0;0m",
         "POST /v1/chat/completions", "GET /v1/[0mmodels"] * 3)]
    same(lines)
    _, _, access, _ = Pipeline(Clock(year=2026)).feed_batch(lines)
    assert access == {("POST", "/v1/chat/completions", 200, "1.1"): 6}  # the others read one by one


def test_an_access_line_after_a_traceback_whose_start_the_batch_lacks_is_read_in_order():
    # A traceback's frame line with no start before it opens a traceback (the log began inside one); a later line of
    # another process ends it, an access line too: the batch must not count that access line in bulk, or the next
    # frame line joins the first traceback (one traceback, where line by line reads two). Found by the property
    # test below.
    frame = ('Aug 04 02:52:52 gpu-host vllm[4242]: (EngineCore pid=179) ERROR 08-04 02:52:52 [core.py:842]   File '
             '"/usr/local/lib/python3.12/dist-packages/vllm/v1/engine/core.py", line 860, in run_busy_loop')
    access = ('Aug 04 03:01:12 gpu-host vllm[4242]: (APIServer pid=53) INFO:     10.10.10.2:58859 - '
              '"POST /v1/chat/completions HTTP/1.1" 200 OK')
    lines = [access, frame, access, access, frame, access]
    same(lines)
    p = Pipeline(Clock(year=2026))
    counts, events, access_counts, _ = p.feed_batch(lines)
    events += p.flush()
    assert counts == {"parsed": 6, "ignored": 0, "unparsed": 0}
    assert [e.kind for e in events].count("traceback") == 2, [e.kind for e in events]
    assert sum(access_counts.values()) == 1  # the one before the traceback, counted in bulk; the others read


def test_a_batch_read_without_its_span_gives_the_same_counts_and_events():
    # (the daemon keeps no run's time range: it asks for no span, and framing two access lines a batch is spared)
    lines = generate(3000, seed=5)
    a, b = Pipeline(Clock(year=2026)), Pipeline(Clock(year=2026))
    for i in range(0, len(lines), 400):
        with_span, without = a.feed_batch(lines[i:i + 400]), b.feed_batch(lines[i:i + 400], span=False)
        assert with_span[:3] == without[:3] and without[3] == (None, None)
        assert None not in with_span[3]  # (every batch of the generated log holds access lines)


REAL = SAMPLE.read_text(encoding="utf-8").splitlines()[::5] + TRICKY


@settings(max_examples=150, deadline=None)
@given(st.lists(st.one_of(st.sampled_from(REAL), st.text(max_size=80)), min_size=1, max_size=60), st.integers(0, 1000))
def test_any_mix_gives_the_same_answer(lines, seed):
    same(lines, seed, monotonic=False)


@settings(max_examples=2000, deadline=None)
@given(st.lists(st.sampled_from(["\x1b", "\r", "^", "[", "^[", "#", "033", "#033[", "Traceback (most recent call last)",
                                 "Traceback", "x", " "]), max_size=12).map("".join))
def test_batch_unsafe_is_exactly_the_listed_substrings(text):
    from exporter.stream.batch import BATCH_UNSAFE, batch_unsafe

    assert batch_unsafe(text) == any(u in text for u in BATCH_UNSAFE)
    from exporter.framing.frame import TRACEBACK_START
    from exporter.stream.batch import framing_unsafe

    assert framing_unsafe(text) == any(u in text for u in BATCH_UNSAFE if u != TRACEBACK_START)


def test_whitespace_set_is_what_isspace_says():
    from exporter.stream.batch import _WHITESPACE

    assert _WHITESPACE == {chr(c) for c in range(0x110000) if chr(c).isspace()}


@given(st.lists(st.sampled_from(TRICKY[:3] + TRICKY[10:] + ['INFO:     9.9.9.9:1 - "GET /v1/models HTTP/1.1" 200 OK']),
                max_size=40))
def test_count_access_tallies_every_line_once(lines):
    from exporter.stream.batch import count_access

    tails, others, first, last = count_access(lines)
    counted = [i for i in range(len(lines)) if i not in set(others)]
    assert others == sorted(others) and sum(tails.values()) == len(counted)
    assert (first, last) == ((counted[0], counted[-1]) if counted else (-1, -1))


# A WARNING-or-worse record, the traceback it opens and that call's next record, in the commonest shapes: the
# fast path may read the lines around it, and the traceback's own lines are its while it is open.
HEADERED_TRACEBACK = [
    "{w}(EngineCore pid=9) ERROR 01-01 00:00:05 [core.py:9] EngineCore hit a snag",
    "{w}(EngineCore pid=9) ERROR 01-01 00:00:05 [core.py:9] Traceback (most recent call last):",
    '{w}(EngineCore pid=9) ERROR 01-01 00:00:05 [core.py:9]   File "/x/core.py", line 9, in step',
    "{w}(EngineCore pid=9) ERROR 01-01 00:00:05 [core.py:9] ValueError: boom",
    "{w}(EngineCore pid=9) ERROR 01-01 00:00:05 [core.py:9] Skipping a step as asked",
    "{w}(APIServer pid=1) INFO 01-01 00:00:06 [api.py:1] next",
]


@pytest.mark.parametrize("wrapper", ["", "2026-01-01T00:00:05.5Z ", "Jan 01 00:00:05 host vllm[7]: "])
def test_a_batch_holding_a_traceback_reads_the_lines_around_it_as_line_by_line(wrapper):
    lines = generate(3000, seed=5)
    block = [t.format(w=wrapper) for t in HEADERED_TRACEBACK]
    for at in (2900, 1500, 10):
        lines[at:at] = block
    for seed in range(3):
        same(lines, seed)
