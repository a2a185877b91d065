"""The one-match shape for periodic lines gives exactly what framing + parsing give, or steps aside."""

import re

from hypothesis import given, settings, strategies as st

from exporter.stream import fastpath
from exporter.parsers.events import DERIVED_KINDS
from exporter.framing.clock import Clock
from exporter.framing.frame import JOURNALD_COMMON, _JOURNALD_RECORD, frame_line
from exporter.stream.pipeline import Pipeline
from tests.conftest import FIXTURES, SAMPLE, SAMPLE_V0
from tests.wrapped import STAMPS, rewrapped
from tests.both_ways import edited, outcome
from exporter.config.rules import load_rules
from exporter.parsers import BUILT_IN, echo
from exporter.parsers.rules import families as rule_families

_JOURNALD = (SAMPLE.read_text(encoding="utf-8").splitlines() + SAMPLE_V0.read_text(encoding="utf-8").splitlines()
             + (FIXTURES / "seed_article.log").read_text(encoding="utf-8").splitlines())
# ... and the same lines in the other commonest wrappers (none, an RFC 3339 stamp, a node log's)
_ALL = _JOURNALD + rewrapped(_JOURNALD)
PERIODIC = [line for line in _ALL if "Avg prompt throughput" in line or "metrics: " in line]


def general(line: str, clock: Clock):
    """What the usual path (framing, then the parsers) makes of one line, as fastpath.match reports it."""
    pipe = Pipeline(clock)
    _, events = pipe.feed(line)  # not `clean`: never the fast path
    events = [e for e in events if e.kind not in DERIVED_KINDS]  # a first stats window: "serving"
    if len(events) != 1 or events[0].kind not in ("engine_stats", "spec_decode", "kv_transfer"):
        return None
    ev = events[0]
    fields = dict(ev.fields)
    if ev.kind != "engine_stats":
        fields.pop("engine")  # attributed by the pipeline, not by the line
    return ev.kind, fields, ev.ts, ev.process, ev.pid


def check(line: str) -> bool:
    clock = Clock(year=2026)
    fast = fastpath.match(line, clock)
    if fast is not None:
        assert fast == general(line, Clock(year=2026)), line
    return fast is not None


def test_the_current_shapes_take_the_fast_path_and_agree():
    taken = [line for line in PERIODIC if check(line)]
    kinds = {fastpath.match(line, Clock(year=2026))[0] for line in taken}
    assert kinds == {"engine_stats", "spec_decode", "kv_transfer"}
    assert len(taken) > 50


def test_other_wordings_and_wrappers_step_aside():
    v0 = [line for line in SAMPLE_V0.read_text(encoding="utf-8").splitlines() if "Avg prompt throughput" in line]
    assert v0 and not any(fastpath.match(line, Clock(year=2026)) for line in v0)
    line = next(line for line in PERIODIC if check(line))
    bare = line.split(": ", 1)[1]
    for other in ("vllm-1  | " + bare, "[pod/vllm-0/vllm] " + bare,  # other wrappers
                  "2026-08-04T02:45:02 " + bare,  # a stamp with no zone
                  "2026-08-04T02:45:02Z stdout P " + bare,  # a node log's partial line
                  line.replace("INFO", "\x1b[32mINFO\x1b[0m"), line + "[0m", line.replace("Aug", "Xyz")):
        assert fastpath.match(other, Clock(year=2026)) is None, other
    # the commonest other wrappers take it, and agree
    for other in (bare, "2026-08-04T02:45:02Z " + bare, "2026-08-04T02:45:02.25+02:00 stderr F " + bare):
        assert check(other), other


def test_a_process_name_with_a_dash_takes_the_fast_path_too():
    # multiprocessing names vLLM's workers "VllmWorker-0" (vLLM 0.32.0 CPU build, captured here by
    # tools/capture_vllm_run.py); framing takes such names, so the fast shape must as well
    line = next(line for line in PERIODIC if "(APIServer pid=53) " in line and check(line))
    for name in ("VllmWorker-0", "SpawnProcess-1:2", "EngineCore_DP1"):
        other = line.replace("(APIServer pid=53) ", f"({name} pid=53) ")
        assert JOURNALD_COMMON.match(other) is not None and check(other), other
        assert fastpath.match(other, Clock(year=2026))[3] == name


def test_the_pipeline_uses_it_and_attributes_the_engine():
    stats = next(line for line in PERIODIC if "Engine 000: Avg prompt" in line and check(line))
    spec = next(line for line in PERIODIC if "SpecDecoding metrics: " in line and check(line))
    pipe = Pipeline(Clock(year=2026))
    _, a = pipe.feed(stats.replace("Engine 000", "Engine 003"), clean=True)
    _, b = pipe.feed(spec, clean=True)
    assert a[0].fields["engine"] == 3 and b[0].fields["engine"] == 3
    assert (a[0].line, b[0].line) == (1, 2)


def test_a_logger_with_two_line_numbers_reads_the_same_both_ways():
    # hypothesis found "[loggers.py:3:4]": the fast path read the file "loggers.py:3" (stem "loggers"),
    # the usual path "loggers.py:3:4" (stem "py:3", refused by the family's where): they disagreed
    stats = next(line for line in PERIODIC if "Avg prompt throughput" in line and "[loggers.py:" in line)
    head, _, rest = stats.partition("[loggers.py:")
    mangled = head + "[loggers.py:3:" + rest
    assert mangled != stats
    check(mangled)


def test_a_per_position_rate_above_one_is_dropped_both_ways():
    # each rate is a share of the drafts: a list holding 1.5 is no list of rates (the fast path checks the pattern's
    # rates itself, the usual way with _rates)
    spec = next(line for line in PERIODIC if "Per-position acceptance rate: " in line and check(line))
    head, _, rest = spec.partition("Per-position acceptance rate: ")
    for first in ("1.500", "9.9", "1.0000000001"):
        bad = head + "Per-position acceptance rate: " + first + ", " + rest
        assert check(bad), bad
        assert "per_position_acceptance_rate" not in fastpath.match(bad, Clock(year=2026))[1]
    edge = head + "Per-position acceptance rate: 1.000, " + rest
    assert check(edge) and fastpath.match(edge, Clock(year=2026))[1]["per_position_acceptance_rate"][0] == 1.0


@settings(max_examples=3000, deadline=None)
@given(st.sampled_from(PERIODIC), st.lists(st.tuples(st.integers(0, 400), st.sampled_from(
    ["", "0", "9", ".", "%", ",", ", ", " ", "(", ")", "[", "]", "Engine 001: ", "nan", "-", "[0m", "x", ":", "5.5",
     "Current speculative depth: 3, ", "External prefix cache hit rate: 1.0%", "\t", "авг", "=", "=1", "_", "e5",
     "nan", "(", "'", "{'a': 1}", ", x=1", " HTTP/", "Num ", "(ms)"])), max_size=3))
def test_mutated_lines_agree_with_the_usual_path(line, edits):
    for pos, text in edits:
        line = line[:pos] + text + line[pos + 1:]
    check(line)


def check_ignorable(line: str) -> bool:
    if not fastpath.ignorable(line, Clock(year=2026)):
        return False
    res, events = Pipeline(Clock(year=2026)).feed(line)  # the usual way
    assert (res, events) == ("ignored", []), line
    return True


def test_lines_no_parser_wants_leave_early_and_only_those():
    taken = [line for line in _ALL if check_ignorable(line)]
    assert len(taken) > 30  # the samples' INFO chatter
    # every family's lines, warnings and errors stay on the usual way
    assert not any(fastpath.ignorable(line, Clock(year=2026)) for line in PERIODIC)
    assert not any(fastpath.ignorable(line, Clock(year=2026)) for line in _ALL
                   if " WARNING " in line or " ERROR " in line or "Traceback" in line)


INFO_LINES = [line for line in _ALL if " INFO " in line or " DEBUG " in line]


@settings(max_examples=3000, deadline=None)
@given(st.sampled_from(INFO_LINES), st.lists(st.tuples(st.integers(0, 300), st.sampled_from(
    ["", " ", "[", "]", " [", "INFO ", "WARNING ", "ERROR 08-04 02:45:02 [x.py:1] ", "Traceback (most recent call last)",
     "[0m", "Xyz", "авг", " HTTP/", "out of memory", "CUDA error", "KV Transfer metrics: a=1", "Engine 000: ", "\t",
     "(APIServer pid=1) ", "█", "[W", "nccl", " took ", "version ", "0", ":"])), max_size=3))
def test_mutated_info_lines_leave_early_only_when_the_usual_way_ignores_them(line, edits):
    for pos, text in edits:
        line = line[:pos] + text + line[pos + 1:]
    check_ignorable(line)


@settings(max_examples=2000, deadline=None)
@given(st.sampled_from(_ALL), st.lists(st.tuples(st.integers(0, 120), st.sampled_from(
    ["", " ", "  ", "[", "]", "(", ")", ":", ".", "0", "x", "Xyz", "авг", " rank=1", ", ip=1.2.3.4", "INFO", "WARNING",
     "\t", "_", "-", "pid=", "08-04 ", ".123"])), max_size=3))
def test_the_common_wrapper_shape_reads_a_line_as_the_whole_pattern_does(line, edits):
    for pos, text in edits:
        line = line[:pos] + text + line[pos + 1:]
    common = JOURNALD_COMMON.match(line)
    if common is not None:
        whole = _JOURNALD_RECORD.match(line)
        assert whole is not None and whole.span() == common.span(), line
        assert [whole.span(i) for i in range(20)] == [common.span(i) for i in range(20)], line


def test_classify_answers_both_questions_as_they_are_answered_one_by_one():
    handed_on = 0
    for line in _ALL:
        got = fastpath.classify(line, Clock(year=2026))
        shape = fastpath.match(line, Clock(year=2026))
        if shape is not None:
            assert got[:5] == shape and got[5].string == line.rstrip(), line  # (the wrapper's match last)
        elif got is fastpath.IGNORE:
            assert fastpath.ignorable(line, Clock(year=2026)), line
        elif type(got) is tuple:  # a WARNING-or-worse record's log event (test_a_warning_no_family_wants_...), or a
            # request-log record's (test_a_request_log_record_...)
            assert got[0] in ("log", fastpath.ECHO_RECORD) and not fastpath.ignorable(line, Clock(year=2026)), line
        else:  # the usual way decides, with the wrapper's match when the fast path made one
            assert not fastpath.ignorable(line, Clock(year=2026)), line
            assert got is None or got is False or isinstance(got, re.Match), (line, got)
            handed_on += got is not None
    assert any(fastpath.classify(line, Clock(year=2026)) is fastpath.IGNORE for line in _ALL)
    assert handed_on > 100


def _same_frame_with_the_handed_match(line: str) -> bool:
    got = fastpath.classify(line, Clock(year=2026))
    if not isinstance(got, re.Match):
        return False
    assert frame_line(line, Clock(year=2026), True, got) == frame_line(line, Clock(year=2026), True), line
    return True


def test_a_declined_line_is_framed_from_the_fast_paths_match_as_without_it():
    """The wrapper's match the fast path hands on with a line it declines gives the very frame framing makes
    when it matches the line itself (every fixture line in the fast shape)."""
    assert sum(_same_frame_with_the_handed_match(line) for line in _ALL) > 100


@settings(max_examples=2000, deadline=None)
@given(st.sampled_from(_ALL), st.lists(st.tuples(st.integers(0, 160), st.sampled_from(
    ["", " ", "[", "]", "(", ")", ":", "0", "x", "Xyz", "авг", "INFO", "WARNING", "ERROR ", "\t", "pid=", "08-04 ",
     "[0m", "[39m", "Traceback (most recent call last):", " [x.py:1] ", "Engine 000: ", "Avg prompt throughput"])),
    max_size=3))
def test_a_mutated_declined_line_is_framed_from_the_handed_match_as_without_it(line, edits):
    for pos, text in edits:
        line = line[:pos] + text + line[pos + 1:]
    _same_frame_with_the_handed_match(line)


def test_every_family_line_at_info_or_debug_leaves_early_only_when_the_usual_way_ignores_it():
    """The fast path's filters hold only the needles of families that read INFO or DEBUG lines: any family's
    line (the real-line fixtures, the failure families' included) moved to INFO or DEBUG is either kept for the
    usual way or ignored by it too."""
    import yaml

    lines = [e["line"] for path in sorted((FIXTURES / "real_lines").glob("*.yaml"))
             for e in yaml.safe_load(path.read_text(encoding="utf-8"))] + _ALL
    moved = [line.replace(f" {level} ", f" {quiet} ", 1) for line in lines for level in ("WARNING", "ERROR", "CRITICAL")
             if f" {level} " in line for quiet in ("INFO", "DEBUG")]
    assert len(moved) > 100
    taken = [line for line in moved if check_ignorable(line)]
    assert taken  # (some do leave early: the failure families' words at INFO are no failure)


# --- WARNING-or-worse records no family wants: a `log` event made unframed --------------------------------------

def _real_lines() -> list[str]:
    import gzip

    import yaml

    lines = [e["line"] for path in sorted((FIXTURES / "real_lines").glob("*.yaml"))
             for e in yaml.safe_load(path.read_text(encoding="utf-8"))]
    lines += (FIXTURES / "warning_signs.log").read_text(encoding="utf-8").splitlines()
    for path in sorted(FIXTURES.glob("vllm-*-cpu/*.log.gz")):
        lines += gzip.decompress(path.read_bytes()).decode("utf-8", "replace").splitlines()
    return lines


_REAL_LINES = _real_lines()
# every fixture and capture line, and each in journald's wrapper (the captures are bare files)
_EVERY = _ALL + _REAL_LINES + ["Aug 04 02:45:02 gpu-host vllm[4242]: " + line for line in _REAL_LINES]
_PROBLEMS = [line for line in _EVERY if " WARNING " in line or " ERROR " in line or " CRITICAL " in line]


def _outcome(lines: list[str], clean: bool, families=BUILT_IN):
    return outcome(lines, clean, families, timed=True)


# a user's rules: one whose words some warnings hold (the fast path leaves those to the usual way, which reads the
# rule), and one no line holds
_RULES = rule_families(load_rules([
    {"name": "ignored_fields", "pattern": r"present in the request but ignored", "level": "WARNING",
     "metrics": [{"name": "t_ignored_total", "type": "counter"}]},
    {"name": "xyz", "pattern": r"Xyz frobnicated", "metrics": [{"name": "t_xyz_total", "type": "counter"}]},
], "test: rules"))


def test_a_warning_no_family_wants_is_the_log_event_the_usual_way_makes():
    from exporter.stream.batch import framing_unsafe

    lines = [line for line in _PROBLEMS if not framing_unsafe(line)]
    logged = [line for line in lines if type(got := fastpath.classify(line, Clock(year=2026))) is tuple
              and got[0] == "log"]
    assert len(logged) > 200, len(logged)  # (most: what families want, tracebacks, echo records go the usual way)
    for line in lines:
        assert _outcome([line], True) == _outcome([line], False), line
    # in a stream, where a traceback opens with the record before it and an echo record takes its later lines; and
    # with a user's rules, one of which reads some of these lines
    assert _outcome(lines, True) == _outcome(lines, False)
    ruled = _outcome(lines, True, _RULES)
    assert ruled == _outcome(lines, False, _RULES)
    assert any(e[0] == "rule" for _, evs in ruled[0] for e in evs)  # (the rule read some)


def test_a_warning_line_of_an_echo_record_and_the_traceback_after_a_warning_read_the_same_both_ways():
    head = "Aug 04 02:45:02 gpu-host vllm[4242]: (APIServer pid=53) "
    lines = [
        # an echo record logged at WARNING, and a line of its client's text with the same header
        head + "WARNING 08-04 02:45:02 [serving.py:1] Aborted request chatcmpl-1 with text:",
        head + "WARNING 08-04 02:45:02 [serving.py:1] the disk is full, please help",
        # a WARNING record, then the traceback it opens (its first words are the traceback's opening)
        head + "ERROR 08-04 02:45:03 [core.py:9] Skipping the pre-flight check as asked",
        head + "ERROR 08-04 02:45:03 [core.py:9] Traceback (most recent call last):",
        head + 'ERROR 08-04 02:45:03 [core.py:9]   File "/x/core.py", line 9, in step',
        head + "ERROR 08-04 02:45:03 [core.py:9] ValueError: boom",
        # the same call's next record: its opening words end the traceback (not one of its lines)
        head + "ERROR 08-04 02:45:03 [core.py:9] Skipping the pre-flight check as asked",
        head + "INFO 08-04 02:45:09 [api_server.py:1] next",
        # a chain's words at WARNING open nothing; the traceback after them has no opening words
        head + "WARNING 08-04 02:45:10 [core.py:9] During handling of the above exception, another exception occurred:",
        head + "WARNING 08-04 02:45:10 [core.py:9] Traceback (most recent call last):",
        head + 'WARNING 08-04 02:45:10 [core.py:9]   File "/x/core.py", line 9, in step',
        head + "WARNING 08-04 02:45:10 [core.py:9] KeyError: 'x'",
        head + "WARNING 08-04 02:45:10 [core.py:9] During handling of the above exception, another exception occurred:",
        head + "INFO 08-04 02:45:19 [api_server.py:1] next",
        # a JSON record logged at WARNING, and a message whose long digit run the usual way squeezes
        head + 'WARNING 08-04 02:45:20 [core.py:9] {"level": "ERROR", "message": "disk full", "time": "2026-08-04T02:45:20Z"}',
        head + "WARNING 08-04 02:45:21 [core.py:9] Skipping a block " + "7" * 300 + " of the pre-flight check as asked",
    ]
    fast, usual = _outcome(lines, True), _outcome(lines, False)
    assert fast == usual
    # the fast path answers both, and the pipeline's state decides: the echo record takes the first, and the second
    # gives the traceback its opening words
    assert [fastpath.classify(lines[i], Clock(year=2026))[0] for i in (1, 2)] == ["log", "log"]
    assert usual[0][1][1] == [] and any(e[0] == "log" for e in usual[0][2][1])


@settings(max_examples=800, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(_PROBLEMS), st.lists(st.tuples(st.integers(0, 200), st.sampled_from(
    ["", " ", "  ", "[", "]", " [", "{", '{"', "Traceback (most recent call last):", "INFO ", "ERROR 08-04 02:45:02 [x.py:1] ",
     "[0m", "Aborted request ", "Finished request ", "hermes_tool_parser.py", "request_logger.py", "out of memory",
     "CUDA error", "\t", "During handling of the above exception, another exception occurred", "0" * 40,
     "(APIServer pid=7) ", "   File \"x.py\", line 1", "é", "\u2028", "Xyz", "present in the request but ignored",
     "Xyz frobnicated"])), max_size=3)), min_size=1, max_size=5))
def test_mutated_warnings_read_the_same_both_ways(batch):
    lines = edited(batch)
    if lines:
        assert _outcome(lines, True) == _outcome(lines, False), lines
        assert _outcome(lines, True, _RULES) == _outcome(lines, False, _RULES), lines


# --- the request log's records whose facts are counted: read unframed -----------------------------------------

def _capture(name: str) -> list[str]:
    import gzip

    return gzip.decompress((FIXTURES / name).read_bytes()).decode("utf-8", "replace").splitlines()


# a real vLLM 0.32's request log (LoRA adapters loaded, requests received naming them, responses and their streaming
# deltas, a request id holding line breaks), in order, in each of the commonest wrappers
_LORA = _capture("vllm-0.32-cpu/lora_tools.log.gz")
_REQUESTS = [line for line in _EVERY if any(w in line for w in echo.COUNTED + echo.FACT_WORDS)]
# a user's rule that reads a client's text (the fast path leaves the request log's records to the frame then)
_CLIENT_RULES = rule_families(load_rules([
    {"name": "sql", "pattern": r"lora_name='sql", "client_text": True, "metrics": [{"name": "t_sql_total", "type": "counter"}]},
], "test: rules"))


def test_a_request_log_record_is_read_unframed_as_the_usual_way_reads_it():
    from exporter.stream.batch import framing_unsafe

    stamped = [STAMPS[1] + line for line in _LORA]
    journald = ["Dec 05 09:47:03 gpu-host vllm[4242]: " + line for line in _LORA]
    for lines in (_LORA, stamped, journald):
        lines = [line for line in lines if not framing_unsafe(line)]
        fast = [line for line in lines if type(got := fastpath.classify(line, Clock(year=2026))) is tuple
                and got[0] is fastpath.ECHO_RECORD]
        assert len(fast) > 300, len(fast)  # (most of the capture's request log)
        usual = _outcome(lines, False)
        assert _outcome(lines, True) == usual
        kinds = [e[0] for _, evs in usual[0] for e in evs]
        assert kinds.count("request_log") > 50 and "lora_adapter" in kinds  # (the facts were read, both ways)
        for families in (_RULES, _CLIENT_RULES):
            assert _outcome(lines, True, families) == _outcome(lines, False, families)
    lines = [line for line in _REQUESTS if not framing_unsafe(line)]
    assert _outcome(lines, True) == _outcome(lines, False)


def test_a_request_ids_line_break_and_a_clients_text_read_the_same_both_ways():
    head = "2026-08-04T02:45:02.5Z (APIServer pid=53) INFO 08-04 02:45:02 [request_logger.py:65] "
    lines = [
        # an id with a line break: the facts on the next line (same header), read there
        head + "Received request chatcmpl-1",
        head + "x: params: SamplingParams(n=1), lora_request: LoRARequest(lora_name='sql', lora_int_id=1).",
        # a line of the client's text that starts with another record's words, under the same header
        head + "Received request chatcmpl-2: prompt: 'hello",
        head + "Aborted request(s) chatcmpl-9 is what I typed', params: SamplingParams(n=1), lora_request: None.",
        # LMCache's own header, a colour reset that lost its ESC, an unknown month in journald's wrapper
        head.replace("[request_logger", "[LMCache request_logger") + "Aborted request(s) chatcmpl-3.",
        head + "Aborted request(s) chatcmpl-4 [0m.",
        "Foo 04 02:45:03 gpu-host vllm[4242]: (APIServer pid=53) INFO 08-04 02:45:03 [request_logger.py:108] "
        "Generated response chatcmpl-5: output: 'x', finish_reason: stop",
        head.replace("02:45:02 [", "02:45:04 [") + "Generated response chatcmpl-6: output: 'x', finish_reason: stop",
        # a message longer than the usual way reads whole
        head + "Generated response chatcmpl-7: output: '" + "y" * 70_000 + "', finish_reason: length",
    ]
    got = [fastpath.classify(line, Clock(year=2026)) for line in lines]
    assert [type(g) is tuple for g in got] == [True, False, True, True, False, False, False, True, True]
    for families in (BUILT_IN, _RULES, _CLIENT_RULES):
        fast, usual = _outcome(lines, True, families), _outcome(lines, False, families)
        assert fast == usual
    facts = [e[1] for _, evs in usual[0] for e in evs if e[0] == "request_log"]
    assert {"record": "received", "lora": "sql"} in facts and {"record": "aborted"} not in facts[:2], facts


@settings(max_examples=600, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(_REQUESTS + _LORA[:400]), st.lists(st.tuples(st.integers(0, 200), st.sampled_from(
    ["", " ", "[", "]", " [", "{", "Traceback (most recent call last):", "INFO ", "WARNING ", "ERROR 08-04 02:45:02 [x.py:1] ",
     "[0m", "Aborted request ", "Received request ", "Generated response ", ", finish_reason: stop",
     ", lora_request: LoRARequest(lora_name='sql'", "LMCache", "request_logger.py", "Engine 000: ", "\t", "é",
     "\u2028", "(APIServer pid=7) ", "0" * 40, "Foo "])), max_size=3)), min_size=1, max_size=6))
def test_mutated_request_log_records_read_the_same_both_ways(batch):
    lines = edited(batch)
    if lines:
        assert _outcome(lines, True) == _outcome(lines, False), lines
        assert _outcome(lines, True, _CLIENT_RULES) == _outcome(lines, False, _CLIENT_RULES), lines
