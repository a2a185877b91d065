"""Rules cost the lines they cannot take nothing (issue 37, "cheap when unused"): the fast path searches a
periodic line it reads (engine stats, spec decode, KV transfer) only for the needles that a message of that
shape can hold (exporter.parsers.reach, Families.shape_needles). These tests check that the reading never
leaves out a needle that such a message holds, and that a rule whose needle is in only some of those lines
still reads exactly those, line by line and batched, with the built-in events unchanged."""

import re
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from exporter.config.rules import load_rule_file, load_rules
from exporter.framing.clock import Clock
from exporter.parsers import engine_stats, kv_transfer, spec_decode
from exporter.parsers.reach import could_hold
from exporter.parsers.rules import families
from exporter.stream import fastpath
from exporter.stream.pipeline import Pipeline
from tests.both_ways import edited, outcome

ROOT = Path(__file__).resolve().parent.parent
SEED = (ROOT / "tests" / "fixtures" / "seed_article.log").read_text(encoding="utf-8").splitlines()
ENGINE = next(line for line in SEED if "Avg prompt throughput" in line and "Engine 000: " in line)
SPEC = next(line for line in SEED if "SpecDecoding metrics" in line and "Current speculative depth: 5" in line)
KV = next(line for line in SEED if "KV Transfer metrics" in line and "kv_offload_store_bytes=" in line)

# What fastpath reads each shape's messages by (its _SHAPES), as the fast path declares them.
SHAPES = {kind: where[2] for _, kind, _, _, where in fastpath._SHAPES}


def test_the_shapes_are_the_fast_paths():
    assert SHAPES == {
        "engine_stats": engine_stats.CURRENT_PATTERN,
        "spec_decode": re.escape(spec_decode.MARKER) + spec_decode.CURRENT_PATTERN,
        "kv_transfer": re.escape(kv_transfer.MARKER) + kv_transfer.PLAIN_BODY,
    }


def test_the_benchmarks_ten_unused_rules_are_searched_in_none_of_the_periodic_lines():
    fams = families(load_rule_file(str(ROOT / "bench" / "rules10_unused.yaml")))
    assert len(fams.needles_for("metrics.py")) == 10
    for kind, pattern in SHAPES.items():
        assert fams.shape_needles(kind, pattern, "") == (), kind
    # and the fast path reads those lines with the rules loaded as without them
    for line in (ENGINE, SPEC, KV):
        assert fastpath.match(line, Clock(year=2026), fams) == fastpath.match(line, Clock(year=2026))
        assert fastpath.match(line, Clock(year=2026)) is not None


def test_a_needle_a_message_may_hold_is_kept():
    assert could_hold(SHAPES["engine_stats"], "Running: 7 reqs")
    assert could_hold(SHAPES["engine_stats"], "hit rate: 8")
    assert could_hold(SHAPES["spec_decode"], "speculative depth: 7")
    assert could_hold(SHAPES["kv_transfer"], "kv_offload_store_bytes=")
    assert could_hold(SHAPES["kv_transfer"], "custom_key=1")  # a connector's key is anything without a space
    assert not could_hold(SHAPES["kv_transfer"], "Unlinked mmap file ")  # "d " follows no key or value
    assert not could_hold(SHAPES["engine_stats"], "SpecDecoding")
    assert not could_hold(SHAPES["spec_decode"], "Running: ")


@given(st.data())
@settings(max_examples=300, deadline=None)
def test_no_needle_a_match_holds_is_left_out(data):
    # any text the shape's pattern (or a small pattern of each construct) matches whole, any part of it
    pattern = data.draw(st.sampled_from(list(SHAPES.values()) + [
        r"ab?c(?:de|f)*g", r"x(?:y{2,3}|z)+\d", r"[^\s=]+=\d[\d\s.]*", r"(?:ab)?(?:cd)?e", r"a.c", r"(?>ab)c++"]))
    text = data.draw(st.from_regex(pattern, fullmatch=True))
    i = data.draw(st.integers(0, len(text)))
    j = data.draw(st.integers(i + 1, len(text) + 1)) if i < len(text) else i + 1
    needle = text[i:j]
    if needle:
        assert could_hold(pattern, needle), (pattern, text, needle)


_KEY = st.text(st.characters(blacklist_characters="=([{'\"", blacklist_categories=("Zs", "Zl", "Zp", "Cc", "Cs")),
               min_size=1, max_size=12)
_VALUE = st.one_of(st.integers(0, 10**12).map(str), st.floats(0, 1e12).map(repr),
                   st.floats(0, 1e12).map(lambda v: f"{v:e}"), st.integers(0, 99).map(lambda v: f"{v} "),
                   st.text("0123456789.eE+-", min_size=1, max_size=8).map(lambda v: "7" + v),
                   st.sampled_from(["١٢", "1\u2003", "3e+05", "0.5"]))


@given(st.lists(st.tuples(_KEY, _VALUE), min_size=1, max_size=6))
@settings(max_examples=400, deadline=None)
def test_every_kv_body_the_fast_path_reads_matches_its_reach_pattern(pairs):
    body = ", ".join(f"{k}={v}" for k, v in pairs)
    for _ in range(2):  # the second time through the template the first one left
        if kv_transfer.plain_fields(body) is not None:
            assert re.fullmatch(kv_transfer.PLAIN_BODY, body), body


def test_every_real_kv_line_matches_its_reach_pattern():
    lines = [line for line in SEED if kv_transfer.MARKER in line]
    assert lines
    for line in lines:
        body = line.rstrip().split(kv_transfer.MARKER, 1)[1]
        if kv_transfer.plain_fields(body) is not None:
            assert re.fullmatch(kv_transfer.PLAIN_BODY, body)


# A rule per shape whose needle is in some of its lines only (the needle is the pattern: a literal).
RULES = [
    {"name": "seven_running", "pattern": "Running: 7 reqs", "metrics": [{"name": "t_seven_total", "type": "counter"}]},
    {"name": "depth_seven", "pattern": "Current speculative depth: 7,",
     "metrics": [{"name": "t_depth_total", "type": "counter"}]},
    {"name": "store_bytes", "pattern": r"vllm:kv_offload_store_bytes=(?P<b>\d+)", "fields": {"b": "int"},
     "metrics": [{"name": "t_store_value", "type": "gauge", "value": "b"}]},
]
LINES = [
    ENGINE, ENGINE.replace("Running: 1 reqs", "Running: 7 reqs"),
    SPEC, SPEC.replace("Current speculative depth: 5,", "Current speculative depth: 7,"),
    KV.replace("vllm:kv_offload_store_bytes=", "vllm:kv_offload_stored_bytes="), KV,
]
WANT = [("seven_running", {}), ("depth_seven", {}), ("store_bytes", {"b": 1415335680})]


def _ruled(events):
    return [(e.fields["rule"], {k: v for k, v in e.fields.items() if k != "rule"}) for e in events if e.kind == "rule"]


def _builtin(events):
    return [(e.kind, e.fields) for e in events if e.kind != "rule"]


def test_a_rule_whose_needle_is_in_some_periodic_lines_reads_exactly_those_in_both_paths():
    fams = families(load_rules(RULES, "t.yaml: rules"))
    assert len(set(LINES)) == 6  # (each change made)
    # the fast path leaves the lines holding a needle to the usual way, and reads the others itself
    clock = Clock(year=2026)
    assert [fastpath.match(line, clock, fams) is None for line in LINES] == [False, True] * 3
    assert all(fastpath.match(line, clock) is not None for line in LINES)
    each = Pipeline(Clock(year=2026), families=fams)
    events_each = [ev for line in LINES for ev in each.feed(line, True)[1]] + each.flush()
    batch = Pipeline(Clock(year=2026), families=fams)
    counts, events_batch, _, _ = batch.feed_batch(list(LINES))
    events_batch += batch.flush()
    plain = Pipeline(Clock(year=2026))
    events_plain = [ev for line in LINES for ev in plain.feed(line, True)[1]] + plain.flush()
    for events in (events_each, events_batch):
        assert _ruled(events) == WANT
        assert [e.line for e in events if e.kind == "rule"] == [2, 4, 6]
        assert _builtin(events) == _builtin(events_plain)  # the built-in events as without rules


def test_a_rule_bound_to_levels_costs_other_levels_lines_nothing_and_reads_its_own():
    unlinked = next(line for line in SEED if "Unlinked mmap file" in line)
    assert " INFO " in unlinked
    warning = unlinked.replace(" INFO ", " WARNING ", 1)
    rule = {"name": "unlinked", "pattern": r"Unlinked mmap file \S+ after (?P<workers>\d+) workers",
            "fields": {"workers": "int"}, "metrics": [{"name": "t_workers", "type": "gauge", "value": "workers"}]}
    running = {"name": "running", "pattern": "Running: 7 reqs", "metrics": [{"name": "t_running_total", "type": "counter"}]}
    clock = Clock(year=2026)
    at_warning = families(load_rules([{**rule, "level": "WARNING"}, {**running, "level": "WARNING"}], "t.yaml: rules"))
    at_info = families(load_rules([{**rule, "level": ["INFO", "WARNING"]}, {**running, "level": "INFO"}], "t.yaml: rules"))
    seven = ENGINE.replace("Running: 1 reqs", "Running: 7 reqs")
    # a WARNING rule: the INFO lines stay on the fast path (its needles are not looked for)
    assert fastpath.ignorable(unlinked, clock, at_warning) and fastpath.match(seven, clock, at_warning) is not None
    # one that reads INFO: they go the usual way
    assert not fastpath.ignorable(unlinked, clock, at_info) and fastpath.match(seven, clock, at_info) is None
    for fams, want in ((at_warning, [("unlinked", {"workers": 2})]),
                       (at_info, [("running", {}), ("unlinked", {"workers": 2}), ("unlinked", {"workers": 2})])):
        each = Pipeline(Clock(year=2026), families=fams)
        events_each = [ev for line in (seven, unlinked, warning) for ev in each.feed(line, True)[1]] + each.flush()
        batch = Pipeline(Clock(year=2026), families=fams)
        events_batch = batch.feed_batch([seven, unlinked, warning])[1] + batch.flush()
        assert _ruled(events_each) == _ruled(events_batch) == want


# Rules whose needles some periodic or quiet lines hold and others not (some bound to a file or a level), and
# one whose needle holds a built-in filter ("memory"), against lines of every kind, mutated.
_PROPERTY_RULES = [
    {"name": "running", "pattern": r"Running: (?P<n>\d+) reqs", "fields": {"n": "int"},
     "metrics": [{"name": "p_running", "type": "gauge", "value": "n"}]},
    {"name": "hit", "pattern": r"hit rate: 8\d", "level": "INFO", "metrics": [{"name": "p_hit_total", "type": "counter"}]},
    {"name": "store", "pattern": r"kv_offload_store_bytes=(?P<b>\d+)", "logger": "metrics.py", "fields": {"b": "int"},
     "metrics": [{"name": "p_store_value", "type": "gauge", "value": "b"}]},
    {"name": "depth", "pattern": r"speculative depth: (?P<d>\d+)", "level": "WARNING", "fields": {"d": "int"},
     "metrics": [{"name": "p_depth", "type": "gauge", "value": "d"}]},
    {"name": "unlinked", "pattern": r"Unlinked mmap file", "metrics": [{"name": "p_unlinked_total", "type": "counter"}]},
    {"name": "pool", "pattern": r"memory pool of (?P<n>\d+)", "fields": {"n": "int"},
     "metrics": [{"name": "p_pool", "type": "gauge", "value": "n"}]},
    {"name": "xyz", "pattern": r"Xyz frobnicated", "metrics": [{"name": "p_xyz_total", "type": "counter"}]},
]
_FAMS = families(load_rules(_PROPERTY_RULES, "t.yaml: rules"))
_SAMPLES = [line for line in SEED if " INFO " in line or " DEBUG " in line] + [
    line for line in (ROOT / "exporter" / "data" / "sample.log").read_text(encoding="utf-8").splitlines()
    if " INFO " in line][:200]


@settings(max_examples=1500, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(_SAMPLES), st.lists(st.tuples(st.integers(0, 400), st.sampled_from(
    ["", "7", "8", " ", "Running: 7 reqs", "hit rate: 85", "kv_offload_store_bytes=9", "speculative depth: 4",
     "Unlinked mmap file", "memory pool of 3", "Xyz frobnicated", " WARNING ", " DEBUG ", "[metrics.py:1] ",
     "[other.py:2] ", "Finished request ", "Xyz", "memory"])), max_size=3)), min_size=1, max_size=4))
def test_with_rules_the_fast_path_makes_of_every_line_what_the_usual_way_makes(batch):
    lines = edited(batch)
    if lines:
        assert outcome(lines, True, _FAMS) == outcome(lines, False, _FAMS), lines
