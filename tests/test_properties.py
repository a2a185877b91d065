"""No input can make framing or a parser raise, and every line is accounted for."""

from hypothesis import given, settings, strategies as st

from exporter.framing.clock import Clock
from exporter.stream.pipeline import RESULTS, Pipeline
from tests.conftest import FIXTURES, SAMPLE, SAMPLE_LMCACHE, SAMPLE_V0

REAL = (FIXTURES / "seed_article.log").read_text(encoding="utf-8").splitlines() + \
    SAMPLE.read_text(encoding="utf-8").splitlines()[::7] + \
    SAMPLE_V0.read_text(encoding="utf-8").splitlines() + SAMPLE_LMCACHE.read_text(encoding="utf-8").splitlines()[::5]


def _check(lines):
    p = Pipeline(Clock(year=2026))
    results = [p.feed(line)[0] for line in lines]
    p.flush()
    assert len(results) == len(lines) and set(results) <= set(RESULTS)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.binary(max_size=300), max_size=20))
def test_random_bytes(blobs):
    _check([b.decode("utf-8", "replace") for b in blobs])


@settings(max_examples=300, deadline=None)
@given(st.lists(st.text(max_size=300), max_size=20))
def test_random_text(texts):
    _check(texts)


@st.composite
def mutated(draw):
    line = draw(st.sampled_from(REAL))
    for _ in range(draw(st.integers(1, 4))):
        op = draw(st.sampled_from(["cut", "insert", "replace", "dup"]))
        i = draw(st.integers(0, max(0, len(line) - 1)))
        if op == "cut":
            line = line[:i] + line[i + draw(st.integers(1, 40)):]
        elif op == "insert":
            line = line[:i] + draw(st.text(max_size=10)) + line[i:]
        elif op == "replace":
            line = line[:i] + draw(st.sampled_from([",", ":", "=", "%", "(", ")", "{", "'", "\r", "nan", "9" * 30])) + line[i + 1:]
        else:
            line = line + line
    return line


@settings(max_examples=500, deadline=None)
@given(st.lists(mutated(), min_size=1, max_size=10))
def test_mutated_real_lines(lines):
    _check(lines)


@settings(max_examples=200, deadline=None)
@given(st.integers(0, 10**7), st.integers(0, 10**7), st.floats(0, 1e3, allow_nan=False), st.floats(0.0001, 1e6, allow_nan=False))
def test_lmcache_store_lines_keep_their_numbers(tokens, of_tokens, gib, ms):
    from exporter.framing.frame import frame_line
    from exporter.parsers import parse_frame

    line = (f"(Worker_TP0 pid=1) [2026-01-29 04:52:51,168] LMCache INFO: Stored {tokens} out of total {of_tokens} "
            f"tokens. size: {gib:.4f} gb, cost {ms:.4f} ms, throughput: 1.0 GB/s")
    (ev,) = parse_frame(frame_line(line, Clock(year=2026)))
    f = ev.fields
    assert (ev.kind, f["tokens"], f["of_tokens"]) == ("lmcache", tokens, of_tokens)
    assert f["bytes"] == round(float(f"{gib:.4f}") * 2**30) and f["seconds"] == float(f"{ms:.4f}") / 1000


@settings(max_examples=200, deadline=None)
@given(st.integers(1, 10**7), st.floats(0.01, 1e4, allow_nan=False), st.floats(0.01, 1e4, allow_nan=False),
       st.integers(1, 10**7))
def test_kv_cache_too_small_keeps_its_numbers(max_len, need, have, estimate):
    from exporter.framing.frame import frame_line
    from exporter.parsers import parse_frame

    line = (f"ValueError: To serve at least one request with the models's max seq len ({max_len}), ({need:.2f} GiB KV "
            f"cache is needed, which is larger than the available KV cache memory ({have:.2f} GiB). Based on the "
            f"available memory, the estimated maximum model length is {estimate}. Try increasing")
    (ev,) = parse_frame(frame_line(line, Clock(year=2026)))
    f = ev.fields
    assert (ev.kind, f["reason"], f["max_model_len"], f["estimated_max_model_len"]) == (
        "startup_failure", "kv_cache_too_small", max_len, estimate)
    assert f["needed_bytes"] == round(float(f"{need:.2f}") * 2**30)
