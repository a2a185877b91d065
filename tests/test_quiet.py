"""The batch's quiet lines found by two scans (exporter.stream.quiet) are lines the fast path calls ignorable,
and nearly all of them; a batch read with the scans gives what it gives without them."""

from __future__ import annotations

import random

import pytest
from hypothesis import given, settings, strategies as st

from exporter.framing.clock import Clock
from exporter.parsers import BUILT_IN
from exporter.parsers.rules import families as rule_families
from exporter.config.rules import load_rules
from exporter.stream import fastpath
from exporter.stream.batch import batch_unsafe
from exporter.stream import batch_reader
from exporter.stream.pipeline import Pipeline
from exporter.stream.quiet import QuietScan
from tests.conftest import SAMPLE
from tests.test_needles import LINES

pytestmark = pytest.mark.skipif(QuietScan(BUILT_IN)._flags is None, reason="no RE2 here: no scan, every line asked")

JOURNALD = "Dec 05 14:41:19 gpu-host vllm[4242]: "
# every fixture, capture and hostile line, bare and as journald holds it (the captures are bare files: in
# journald's shape most of their INFO lines are the scan's to find)
ALL = [line for line in LINES + [JOURNALD + x for x in LINES] + SAMPLE.read_text(encoding="utf-8").splitlines()
       if not batch_unsafe(line)]


def _rules():
    return rule_families(load_rules([
        {"name": "cuda_graphs", "pattern": r"Capturing CUDA graphs", "metrics": [{"name": "t_graphs_total", "type": "counter"}]},
        {"name": "chunked", "pattern": r"[Cc]hunked prefill is enabled with max_num_batched_tokens=(?P<n>\d+)",
         "fields": {"n": "int"}, "metrics": [{"name": "t_chunk_tokens", "type": "gauge", "value": "n"}]},
    ], "test: rules"))


def _answer(line: str, families):
    """The fast path's answer for a line it ignores (keeping nothing of it): True, else None."""
    q = fastpath.classify(line, Clock(year=2026), True, families)
    return True if q is fastpath.IGNORE and fastpath.ignorable(line, Clock(year=2026), families) else None


def _check(lines: list[str], families) -> tuple[int, int]:
    """(quiet lines the scans found, lines the fast path ignores); every one found is such."""
    quiet = QuietScan(families)(lines, list(range(len(lines))))
    for i in quiet:
        assert _answer(lines[i], families) is True, lines[i]
    return len(quiet), sum(_answer(line, families) is not None for line in lines)


@pytest.mark.parametrize("with_rules", [False, True])
def test_every_line_the_scans_find_quiet_is_ignorable_and_they_find_nearly_all(with_rules):
    families = _rules() if with_rules else BUILT_IN
    found = ignorable = 0
    for at in range(0, len(ALL), 1000):
        f, i = _check(ALL[at:at + 1000], families)
        found, ignorable = found + f, ignorable + i
    assert ignorable > 1500
    # (what they leave is asked line by line: lines in framing's wider shape only, a header without its date or
    # an empty message, and the request log's "Request ... aborted." lines, which hold the word of its records)
    assert found >= 0.85 * ignorable, (found, ignorable)


def test_the_scans_never_find_a_record_that_echoes_a_clients_text_quiet():
    """A record that echoes a client's text is never merely ignored: the pipeline learns it, so that its later lines
    (the client's text, under its header) are its own. The scans leave every such start to be asked, with rules or
    without, whatever follows the start; a start's words further on in a message stop a line too (asked, not lost)."""
    head = JOURNALD + "(EngineCore pid=7) INFO 12-05 14:41:19 [scheduler.py:9] "
    tails = ["Finished request cmpl-1.", "Finished request ", "Finished request \x1c", "Finished request \xa0",
             "Finished request é", "Finished request \u2028", "Finished request  x", "Finished requestx",
             " Finished request cmpl-1.", "Added request cmpl-2.", "response_body={}", "Foo] Finished request x",
             "zzz quiet"]
    lines = [head + t for t in tails]
    for families in (BUILT_IN, _rules()):
        quiet = QuietScan(families)(lines, list(range(len(lines))))
        answers = [fastpath.classify(line, Clock(year=2026), True, families) for line in lines]
        assert quiet == {7, 12}, quiet  # (no start's words in them)
        for i in (0, 4, 6, 9, 10):  # (an echo's start right after the header: the pipeline's to read)
            assert type(answers[i]) is tuple and answers[i][0] is fastpath.ECHO_RECORD, lines[i]
        # (a start with nothing after it that str.rstrip keeps is no start, as the usual way reads it: ignored)
        for i in (1, 2, 3, 5, 7, 8, 11, 12):
            assert answers[i] is fastpath.IGNORE, lines[i]
        _check(lines, families)


QUIET = [line for line in ALL if fastpath.ignorable(line, Clock(year=2026))]


@settings(max_examples=1500, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(QUIET), st.lists(st.tuples(st.integers(0, 200), st.sampled_from(
    ["", " ", "  ", "\t", "\x85", "\u2028", "] ", "[", " [", "[0m", "[39m", "0m", "Engine 000: ", "metrics: ",
     "Received request ", "Request ", "Finished request ", "Added request ", "response_body={", "\x1c", "\xa0",
     "中", "finished", "memory", "KV cache", "é", "█", "\udcff", "WARNING", "INFO ",
     "DEBUG", "Dec", "Foo", "pid=", ":", "(", ")", "Traceback (most recent call last):"])), max_size=3)),
    min_size=1, max_size=12), st.booleans())
def test_mutated_quiet_lines_the_scans_find_quiet_are_ignorable(batch, with_rules):
    lines = []
    for line, edits in batch:
        for pos, text in edits:
            line = line[:pos] + text + line[pos + 1:]
        lines.append(line)
    lines = [line for line in lines if not batch_unsafe(line)]
    _check(lines, _rules() if with_rules else BUILT_IN)


def test_the_runs_of_quiet_lines_end_where_a_line_is_not_one_and_go_on_after_it():
    """RE2 finds runs of lines in the quiet shape, one call a run: an empty line, a line of another shape, or one
    whose message holds no visible ASCII (RE2 reads bytes: what Python calls white space beyond ASCII it cannot
    tell, so the line is asked) ends a run, at the batch's start, middle or end."""
    quiet = JOURNALD + "(Worker pid=7) INFO 12-05 14:41:19 [x.py:1] zzz"
    wide = JOURNALD + "(Worker pid=7) INFO 12-05 14:41:19 [x.py:1] \u00e9\u00e9"  # (quiet to the fast path)
    assert _answer(quiet, BUILT_IN) is True and _answer(wide, BUILT_IN) is True
    scan = QuietScan(BUILT_IN)
    for lines, want in (([quiet, quiet, "", quiet], {0, 1, 3}), (["", quiet, quiet], {1, 2}), ([quiet, ""], {0}),
                        ([quiet, "x", quiet, wide, quiet], {0, 2, 4}), ([wide, wide], set()), (["", ""], set()),
                        ([quiet], {0}), ([""], set())):
        assert scan(lines, list(range(len(lines)))) == want, lines


def test_a_line_holding_a_line_feed_turns_the_scans_off():
    lines = [QUIET[0], QUIET[1] + "\n" + QUIET[2]]
    assert QuietScan(BUILT_IN)(lines, [0, 1]) == set()


def _read(lines, scan: bool, monkeypatch, families=BUILT_IN):
    if scan:  # (every batch scanned: the scans never rest)
        monkeypatch.setattr(batch_reader, "REST_BATCHES", 0)
    else:
        monkeypatch.setattr(QuietScan, "__call__", lambda self, lines, candidates: set())
    pipe = Pipeline(Clock(year=2026), families=families)
    out = []
    for at in range(0, len(lines), 500):
        counts, events, access, span = pipe.feed_batch(lines[at:at + 500])
        out.append((counts, [(e.kind, e.fields, e.ts, e.process, e.pid, e.line) for e in events], access, span))
    out.append([(e.kind, e.fields, e.ts) for e in pipe.flush()])
    return out


def _mix() -> list[str]:
    """The quiet lines among the sample's, shuffled (no traceback stays open to turn the batch path off)."""
    lines = QUIET + SAMPLE.read_text(encoding="utf-8").splitlines()
    random.Random(7).shuffle(lines)
    return lines


def _echo_mix() -> list[str]:
    """The mix, with echo records whose next line (the same header: a client's text) holds a rule's words, and
    such lines after no echo record, each pair kept together where the shuffle put it."""
    lines = _mix()
    # (from the end, so that no pair is put between another's lines)
    for k, at in enumerate(sorted(random.Random(11).sample(range(len(lines)), 60), reverse=True)):
        head = JOURNALD + f"(EngineCore pid={k % 3}) INFO 12-05 14:41:{k % 60:02d} [scheduler.py:9] "
        lines[at:at] = [head + f"Finished request cmpl-{k}.", head + "Capturing CUDA graphs"] if k % 2 else \
            [head + "Capturing CUDA graphs"]
    return lines


@pytest.mark.parametrize("log,least,with_rules", [("fixtures", 1, False), ("mix", 500, False), ("mix", 500, True),
                                                  ("echo_mix", 500, True)])
def test_a_log_read_with_the_scans_gives_what_it_gives_without_them(monkeypatch, log, least, with_rules):
    # (the fixtures in journald's shape: their tracebacks, open for a while, keep the scans off most of the time)
    # (and no line the batch path reads line by line anyway: colour, a carriage return, a traceback's start)
    lines = [x for x in [JOURNALD + x for x in LINES] + SAMPLE.read_text(encoding="utf-8").splitlines()
             if not batch_unsafe(x)] if log == "fixtures" else _mix() if log == "mix" else _echo_mix()
    families = _rules() if with_rules else BUILT_IN
    found = []
    scan = QuietScan.__call__
    monkeypatch.setattr(QuietScan, "__call__", lambda self, lines, candidates: found.append(scan(self, lines, candidates))
                        or found[-1])
    with_scans = _read(lines, True, monkeypatch, families)
    assert sum(len(q) for q in found) >= least  # (the scans did find some)
    if log == "echo_mix":
        rules = sum(1 for batch in with_scans[:-1] for e in batch[1] if e[0] == "rule")
        graphs = sum("Capturing CUDA graphs" in x for x in lines)
        assert rules == graphs - 30  # (a rule reads every such line but the 30 that follow an echo record)
    monkeypatch.undo()
    assert with_scans == _read(lines, False, monkeypatch, families)


def test_the_scans_rest_where_they_find_few_quiet_lines_and_come_back_where_they_find_many(monkeypatch):
    calls = []
    scan = QuietScan.__call__
    monkeypatch.setattr(QuietScan, "__call__", lambda self, lines, candidates: calls.append(1) or scan(self, lines, candidates))
    asked = [JOURNALD + "(APIServer pid=7) INFO 12-05 14:41:19 [serving.py:9] Received request cmpl-%d: params: x" % i
             for i in range(50)]
    pipe = Pipeline(Clock(year=2026))
    for _ in range(1 + batch_reader.REST_BATCHES):
        pipe.feed_batch(asked)
    assert len(calls) == 1  # found none quiet: the next REST_BATCHES batches are not scanned
    for _ in range(3):
        counts = pipe.feed_batch(QUIET[:200])[0]
        assert counts["ignored"] == 200
    assert len(calls) == 4  # scanned again, and it pays: scanned on


def test_an_echo_records_later_lines_are_its_own_in_batches_as_line_by_line(monkeypatch):
    """A client's text after an echo record's first line (the same header) holds a rule's words, or a periodic line's:
    no rule without client_text and no family may read it, in batches (where the scans leave the record's start to
    the pipeline, which learns it) as line by line; once another record of the process began, a line with the first
    one's header is no longer its; and a record that ends a batch keeps its later line, the next batch's first."""
    monkeypatch.setattr(batch_reader, "REST_BATCHES", 0)
    found = []
    scan = QuietScan.__call__
    monkeypatch.setattr(QuietScan, "__call__", lambda self, lines, candidates: found.append(scan(self, lines, candidates))
                        or found[-1])

    def head(second):
        return JOURNALD + f"(EngineCore pid=7) INFO 12-05 14:41:{second:02d} [scheduler.py:9] "

    def both_ways(*batches):
        kinds = []
        for batched in (True, False):
            pipe = Pipeline(Clock(year=2026), families=_rules())
            if batched:
                kinds.append([e.kind for lines in batches for e in pipe.feed_batch(lines)[1]])
            else:
                kinds.append([e.kind for lines in batches for line in lines for e in pipe.feed(line)[1]])
        assert kinds[0] == kinds[1], batches
        return kinds[0]

    first, later = head(19) + "Finished request cmpl-1.", head(19) + "Capturing CUDA graphs"
    kv = head(19) + "KV Transfer metrics: vllm:kv_offload_store_bytes=1000000, vllm:kv_offload_store_time=1.0"
    other = head(20) + "Finished request cmpl-2."  # (another record of the process, with another header)
    assert both_ways(QUIET[:50] + [later]) == ["rule"]  # (the rule reads that line when no echo came before)
    assert both_ways(QUIET[:50] + [first, later]) == []
    assert 50 not in found[-1] and len(found[-1]) > 40  # (the scans left the record's start to be asked)
    assert both_ways(QUIET[:30] + [first, kv, later, other] + QUIET[:30]) == []
    assert both_ways(QUIET[:30] + [first, other, later] + QUIET[:30]) == ["rule"]
    assert both_ways(QUIET[:30] + [first], [later, kv] + QUIET[:30]) == []
    assert both_ways(QUIET[:30] + [first, other], [later] + QUIET[:30]) == ["rule"]
    assert both_ways(QUIET[:30] + [kv]) == ["kv_transfer"]


def test_a_scan_that_fails_leaves_every_line_to_be_asked(monkeypatch):
    def fail(self, lines, candidates):
        raise MemoryError("the scan's text")
    monkeypatch.setattr(QuietScan, "__call__", fail)
    counts = Pipeline(Clock(year=2026)).feed_batch(QUIET[:100])[0]
    assert counts["ignored"] == 100 and counts["unparsed"] == 0


def test_a_quiet_line_with_a_record_glued_on_is_not_the_scans_to_skip():
    """A lost newline glued a WARNING record onto a quiet line: the fast path declines it (the usual way splits
    the records off), so the scans must stop at it: its ' [' and level word are behind the first header."""
    glued = JOURNALD + "(Worker pid=7) INFO 12-05 14:41:19 [x.py:1] zzz(Worker pid=7) WARNING 12-05 14:41:19 " \
        "[y.py:2] zzz"  # (no family's needle in it: only its ' [' can stop the scans)
    plain = JOURNALD + "(Worker pid=7) INFO 12-05 14:41:19 [x.py:1] zzz"
    lines = [plain, glued, plain]
    assert not fastpath.ignorable(glued, Clock(year=2026))
    assert QuietScan(BUILT_IN)(lines, [0, 1, 2]) == {0, 2}
