"""All of a table's needles searched at once (exporter.parsers.needles) give what trying them in turn gives.

RE2's set is the engine where google-re2 loads; Python's ``in``, needle by needle, is the fallback. Both are
run here: over every line of the fixtures and captures (the events of parse_frame, the one search against
each needle tried in turn) and over generated text (which needles a text holds)."""

from __future__ import annotations

import gzip
import json

import pytest
from hypothesis import given, settings, strategies as st

import exporter.parsers as parsers
from exporter.framing.clock import Clock
from exporter.framing.frame import frame_line
from exporter.parsers import needles
from tests.conftest import FIXTURES, SAMPLE, SAMPLE_LMCACHE, SAMPLE_V0

ENGINES = ["python"] + (["re2"] if needles.re2 is not None else [])


def _fixture_lines() -> list[str]:
    out: list[str] = []
    for path in (SAMPLE, SAMPLE_V0, SAMPLE_LMCACHE, *sorted(FIXTURES.rglob("*.log")), *sorted(FIXTURES.rglob("*.log.gz"))):
        raw = gzip.open(path, "rb").read() if path.suffix == ".gz" else path.read_bytes()
        out += raw.decode("utf-8", "surrogateescape").splitlines()
    for line in (FIXTURES / "hostile" / "found.jsonl").read_text(encoding="utf-8").splitlines():
        rec = json.loads(line)
        out += [v for v in rec.values() if isinstance(v, str)] + [
            x for v in rec.values() if isinstance(v, list) for x in v if isinstance(x, str)]
    return out


LINES = _fixture_lines()


def _events(evs):
    return None if evs is None else [(e.kind, e.fields, e.ts) for e in evs]


@pytest.mark.parametrize("engine", ENGINES)
def test_every_fixture_line_gives_the_same_events_as_each_needle_in_turn(engine, monkeypatch):
    for name, table in (("_DISPATCH", parsers.PARSERS), ("_ERROR_DISPATCH", parsers.EXCEPTION_PARSERS),
                        ("_CONTINUATION_DISPATCH", parsers.CONTINUATION_PARSERS)):
        monkeypatch.setattr(parsers, name, parsers._Dispatch(table, engine))
    assert len(LINES) > 5000
    found = 0
    for line in LINES:
        clock = Clock(year=2026)
        for table, in_turn in ((parsers.PARSERS, None), (parsers.EXCEPTION_PARSERS, parsers._ERROR_TABLE),
                               (parsers.CONTINUATION_PARSERS, parsers._CONTINUATION_TABLE)):
            one = _events(parsers.parse_frame(frame_line(line, clock), table))
            turn = _events(parsers.parse_frame_in_turn(frame_line(line, Clock(year=2026)), in_turn))
            assert one == turn, (engine, line[:300])
            found += one is not None
    assert found > 1000  # (the fixtures hold many families' lines: the comparison is not of Nones)


_NEEDLES = parsers.NEEDLES


@st.composite
def texts(draw):
    """Text around some of the families' needles, pieces of them, lone surrogates, NULs and wide characters."""
    parts = draw(st.lists(st.one_of(
        st.sampled_from(_NEEDLES), st.sampled_from(_NEEDLES).map(lambda n: n[1:] or n), st.sampled_from(_NEEDLES).map(
            lambda n: n[:-1] or n), st.text(max_size=12), st.sampled_from(["\ud800", "\x00", "█", "é", "\udcff"])),
        max_size=8))
    return "".join(parts)


@settings(max_examples=300, deadline=None)
@given(texts())
def test_the_engines_find_the_same_needles(text):
    want = [i for i, n in enumerate(_NEEDLES) if n in text]
    for engine in ENGINES:
        assert list(needles.matcher(_NEEDLES, engine)(text)) == want, engine


def test_a_set_it_cannot_build_falls_back_to_python():
    assert needles.matcher(("", "x"))("ax") == [0, 1]  # (an empty needle: every text holds it)
    assert needles.matcher(())("anything") == []


def _rule_events_in_turn(fams, frame, echo=False):
    """Families.rule_events by trying each rule's needles in turn (the way before the one search)."""
    out, tried = [], None
    for needle, p in (fams.client_text_table if echo else fams.rule_table):
        if p is not tried and needle in frame.message:
            tried = p
            out.extend(p.parse(frame) or [])
    return out


def test_the_rules_get_the_same_lines_as_by_each_needle_in_turn():
    from exporter.config.rules import load_rule_file
    from exporter.parsers.rules import families
    from tests.conftest import ROOT

    specs = [s for f in ("examples/custom-build.rules.yaml", "bench/rules10.yaml", "bench/rules10_unused.yaml")
             for s in load_rule_file(str(ROOT / f))]
    specs = list({s.name: s for s in specs}.values())
    fams = families(specs)
    lines = LINES + [line.replace("INFO", "WARNING") for line in LINES[:3000]]
    moved = 0
    for line in lines:
        for echo in (False, True):
            f = frame_line(line, Clock(year=2026))
            got = [(e.kind, e.fields) for e in fams.rule_events(f, echo)]
            assert got == [(e.kind, e.fields) for e in _rule_events_in_turn(fams, frame_line(line, Clock(year=2026)), echo)]
            moved += bool(got)
    assert moved > 100  # (some rules read the fixtures' lines: the comparison is not of empty lists)


def test_families_parse_is_parse_frame_then_rule_events():
    from exporter.config.rules import load_rule_file
    from exporter.parsers.rules import families
    from tests.conftest import ROOT

    fams = families(load_rule_file(str(ROOT / "examples/custom-build.rules.yaml")) + load_rule_file(
        str(ROOT / "bench/rules10_unused.yaml")))
    both = 0
    for line in LINES:
        events, ruled = fams.parse(frame_line(line, Clock(year=2026)))
        f = frame_line(line, Clock(year=2026))
        want = _events(parsers.parse_frame(f)), [(e.kind, e.fields) for e in fams.rule_events(f)]
        assert (_events(events), [(e.kind, e.fields) for e in ruled]) == want, line[:300]
        both += bool(events) and bool(ruled)
    assert both > 10  # (lines that both a family and a rule read)
