"""No input can make framing or a parser raise, and every line is accounted for."""

from hypothesis import given, settings, strategies as st

from exporter.framing import Clock
from exporter.pipeline import RESULTS, Pipeline
from tests.conftest import FIXTURES, SAMPLE

REAL = (FIXTURES / "seed_article.log").read_text(encoding="utf-8").splitlines() + \
    SAMPLE.read_text(encoding="utf-8").splitlines()[::7]


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
