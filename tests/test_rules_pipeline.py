"""A user's rules in the stream and the metrics (exporter.parsers.rules, exporter.metrics.rules): they go
through the same framing as the built-in families (wrappers, JSON records, tracebacks, the fast path's
prefilter), only from where the rule says, never from a client's echoed text, and their series are
bounded like ours. Lines are the seed article's (tests/fixtures/seed_article.log, lines quoted from
/work/shared/seed-article.txt) unless said otherwise."""

import json
from pathlib import Path

import pytest

from exporter.config.rules import load_rules
from exporter.framing.clock import Clock
from exporter.metrics import Metrics
from exporter.parsers import BUILT_IN, NO_NEEDLE_FILTERS
from exporter.parsers.rules import families
from exporter.stream import fastpath
from exporter.stream.pipeline import IGNORED, PARSED, Pipeline

FIXTURES = Path(__file__).resolve().parent / "fixtures"
SEED = (FIXTURES / "seed_article.log").read_text(encoding="utf-8").splitlines()
UNLINKED = next(line for line in SEED if "Unlinked mmap file" in line)
SPEC_DECODE = next(line for line in SEED if "SpecDecoding metrics" in line)
B12X = next(line for line in SEED if "B12X MoE force-A8" in line)

RULES = [
    {"name": "offload_workers", "pattern": r"Unlinked mmap file \S+ after (?P<workers>\d+) workers mapped it",
     "logger": "shared_offload_region.py", "level": "INFO", "process": "Worker_TP*", "fields": {"workers": "int"},
     "metrics": [{"name": "custom_offload_region_workers", "type": "gauge", "value": "workers"},
                 {"name": "custom_offload_regions_total", "type": "counter"}]},
    {"name": "draft_depth",
     "pattern": r"Mean acceptance length: (?P<length>[\d.]+), Current speculative depth: (?P<depth>\d+)",
     "logger": "metrics.py", "fields": {"length": "float", "depth": "int"},
     "metrics": [{"name": "custom_draft_windows_total", "type": "counter", "labels": {"depth": {"max_values": 2}}},
                 {"name": "custom_draft_acceptance_length", "type": "histogram", "value": "length",
                  "buckets": [1, 2, 3, 4, 5, 6]}]},
    {"name": "quant_mode", "pattern": r"B12X MoE force-A8 enabled: using quant_mode=(?P<mode>\w+)",
     "metrics": [{"name": "custom_moe_quant_mode_info", "type": "gauge", "value": 1,
                  "labels": {"quant_mode": {"field": "mode", "values": ["w4a8_mx", "w4a16"]}}}]},
]


def specs(rules=RULES):
    return load_rules(rules, "t.yaml: rules")


def ruled(events):
    return [(e.fields["rule"], {k: v for k, v in e.fields.items() if k != "rule"}) for e in events if e.kind == "rule"]


def feed_each(lines, rules=RULES):
    p = Pipeline(Clock(year=2026), families=families(specs(rules)))
    out = []
    for line in lines:
        out += p.feed(line)[1]
    return out + p.flush()


def feed_batch(lines, rules=RULES):
    p = Pipeline(Clock(year=2026), families=families(specs(rules)))
    counts, events, _, _ = p.feed_batch(list(lines))
    return counts, events + p.flush()


def test_without_rules_nothing_changes_and_nothing_costs():
    assert families([]) is BUILT_IN and BUILT_IN.filters is NO_NEEDLE_FILTERS and BUILT_IN.rule_needles == ()
    assert not any(e.kind == "rule" for e in feed_each(SEED, []))


def test_rules_read_the_seed_lines_in_both_paths():
    want = [("quant_mode", {"mode": "w4a8_mx"}), ("offload_workers", {"workers": 2}),
            ("draft_depth", {"length": 5.9, "depth": 5}), ("draft_depth", {"length": 3.09, "depth": 5})]
    assert ruled(feed_each(SEED)) == want
    counts, events = feed_batch(SEED)
    assert ruled(events) == want


def test_a_quiet_line_holding_a_rules_needle_is_not_skipped_unframed():
    # without the rule, the fast path counts this INFO line as ignored without framing it
    assert fastpath.ignorable(UNLINKED, Clock(year=2026))
    fams = families(specs())
    assert not fastpath.ignorable(UNLINKED, Clock(year=2026), fams)
    counts, events = feed_batch([UNLINKED] * 3)
    assert counts[PARSED] == 3 and [r for r, _ in ruled(events)] == ["offload_workers"] * 3
    assert feed_batch([UNLINKED], [])[0][IGNORED] == 1


def test_a_rule_bound_to_its_file_leaves_other_files_lines_on_the_fast_path():
    # the same words from another file: the bound rule cannot take it, so the fast path may skip it
    other = UNLINKED.replace("[shared_offload_region.py:176]", "[other_file.py:9]")
    assert fastpath.ignorable(other, Clock(year=2026), families(specs()))
    unbound = [{k: v for k, v in RULES[0].items() if k != "logger"}]
    assert not fastpath.ignorable(other, Clock(year=2026), families(specs(unbound)))
    spec_other = SPEC_DECODE.replace("[metrics.py:125]", "[loggers.py:125]")
    assert fastpath.match(spec_other, Clock(year=2026), families(specs())) is not None  # draft_depth: metrics.py
    assert fastpath.match(SPEC_DECODE, Clock(year=2026), families(specs())) is None


def test_a_periodic_line_the_fast_path_reads_reaches_the_rules_and_keeps_its_builtin_event():
    assert fastpath.match(SPEC_DECODE, Clock(year=2026))[0] == "spec_decode"
    counts, events = feed_batch([SPEC_DECODE])
    assert [e.kind for e in events] == ["spec_decode", "rule"]
    base = Pipeline(Clock(year=2026)).feed(SPEC_DECODE)[1][0]
    assert events[0].fields == base.fields  # the built-in event unchanged by the rule
    # a warning a rule reads still counts as a warning
    assert [e.kind for e in feed_each([B12X])] == ["log", "rule"]


WRAPPED = [
    # journald (the seed's own), podman logs -t, CRI (kubelet), compose, colour
    UNLINKED,
    "2026-08-04T02:44:22.123456789+00:00 " + UNLINKED.split(": ", 1)[1],
    "2026-08-04T02:44:22.123456789Z stdout F " + UNLINKED.split(": ", 1)[1],
    "grandpa  | " + UNLINKED.split(": ", 1)[1],
    "\x1b[32m" + UNLINKED.split(": ", 1)[1].replace("INFO", "INFO\x1b[0m", 1),
    # vLLM 0.34's JSON record (--logging-config.formatter json): the same message from the same file
    json.dumps({"asctime": "08-04 02:44:22", "levelname": "INFO", "name": "vllm.shared_offload_region",
                "processName": "Worker_TP0", "process": 264, "vllm_process_name": "Worker_TP0",
                "filename": "shared_offload_region.py", "lineno": 176,
                "message": UNLINKED.split("] ", 1)[1]}),
]


@pytest.mark.parametrize("line", WRAPPED, ids=["journald", "podman", "cri", "compose", "colour", "json"])
def test_every_wrapper_gives_the_rule_the_same_message(line):
    # (the JSON record's file, level and process name are the logger, level and process tag the rule wants)
    assert ruled(feed_each([line])) == [("offload_workers", {"workers": 2})]


def test_where_a_line_comes_from_decides():
    other_file = UNLINKED.replace("[shared_offload_region.py:176]", "[metrics.py:176]")
    other_level = UNLINKED.replace(" INFO ", " DEBUG ")
    other_process = UNLINKED.replace("(Worker_TP0 pid=264)", "(APIServer pid=53)")
    for line in (other_file, other_level, other_process):
        assert ruled(feed_each([line])) == [], line
    exact = [dict(RULES[0], logger="shared_offload_region.py:176")]
    assert ruled(feed_each([UNLINKED], exact)) == [("offload_workers", {"workers": 2})]
    exact[0]["logger"] = "shared_offload_region.py:93"
    assert ruled(feed_each([UNLINKED], exact)) == []


# vLLM's request logger (vllm/entrypoints/logger.py, --enable-log-requests) quotes the client's prompt
ECHO = ("Aug 04 02:50:28 compute-server grandpa[572062]: (APIServer pid=53) INFO 08-04 02:50:28 [logger.py:41] "
        "Received request chatcmpl-9: prompt: 'Unlinked mmap file /x after 99 workers mapped it', params: "
        "SamplingParams(n=1), prompt_token_ids: None, lora_request: None.")


def test_a_clients_echoed_text_matches_no_rule_unless_the_rule_says_so():
    loose = [{k: v for k, v in RULES[0].items() if k not in ("logger", "level", "process")}]
    assert ruled(feed_each([ECHO], loose)) == []
    loose[0]["client_text"] = True
    assert ruled(feed_each([ECHO], loose)) == [("offload_workers", {"workers": 99})]
    # uvicorn's access lines are the access-log family's, always
    access = next(line for line in SEED if '"POST /v1/chat/completions' in line)
    anything = [{"name": "posts", "pattern": r"POST (?P<path>/v1/\w+)", "client_text": True,
                 "metrics": [{"name": "custom_posts_total", "type": "counter"}]}]
    assert ruled(feed_each([access], anything)) == []


# The trust boundary of issue 32 (exporter.parsers.echo, exporter.stream.boundary) holds for rules as for the
# built-in families: every record that echoes a client's text, its continuation lines and a JSON record's
# later message lines are read by no rule but one that says client_text: true. The text is the line a
# loose rule (no logger, level or process) reads.
TEXT = "Unlinked mmap file /x after 99 workers mapped it"
API = "Aug 04 02:50:28 compute-server grandpa[572062]: (APIServer pid=53) {level} 08-04 02:50:28 [{file}] "
ECHOES = {
    # the engine client logs a request's id, which is the client's X-Request-Id
    "added request": [API.format(level="INFO", file="async_llm.py:350") + f"Added request {TEXT}."],
    "request failed": [API.format(level="WARNING", file="async_llm.py:512") + f"Request {TEXT} failed (bad request)."],
    # a LoRA adapter loaded at run time: its name is the client's
    "lora name": [API.format(level="INFO", file="serving.py:232") + f"Loaded new LoRA adapter: name '{TEXT}', path '/a'"],
    "response body": [API.format(level="INFO", file="log_response.py:40") + f'response_body={{"text": "{TEXT}"}}'],
    # an id holding a newline: vLLM repeats the echo's header on the next line, whose text is the client's
    # (the first line holds no needle: the fast path must still let the pipeline see it)
    "continuation": [API.format(level="INFO", file="async_llm.py:350") + "Added request abc",
                     API.format(level="INFO", file="async_llm.py:350") + TEXT + "."],
    # a JSON record's message: its later lines are its text (a request id holding a line break)
    "json message": [json.dumps({"asctime": "08-04 02:50:28", "levelname": "WARNING", "name": "vllm.entrypoints.api",
                                 "filename": "api_server.py", "lineno": 98, "vllm_process_name": "APIServer",
                                 "process": 53, "message": f"HTTPException caught. Request id: x\n{TEXT}"})],
}


@pytest.mark.parametrize("lines", ECHOES.values(), ids=ECHOES.keys())
def test_no_rule_reads_text_echoed_from_a_client_but_one_that_says_client_text(lines):
    loose = [{k: v for k, v in RULES[0].items() if k not in ("logger", "level", "process")}]
    assert ruled(feed_each(lines, loose)) == []
    assert ruled(feed_batch(lines, loose)[1]) == []
    reader = [dict(loose[0], client_text=True)]
    assert ruled(feed_each(lines, reader)) == [("offload_workers", {"workers": 99})]
    assert ruled(feed_batch(lines, reader)[1]) == [("offload_workers", {"workers": 99})]
    # and a client_text rule adds to what the built-in families made of the lines, never changes it
    kinds = [e.kind for e in feed_each(lines, []) if e.kind != "rule"]
    assert [e.kind for e in feed_each(lines, reader) if e.kind != "rule"] == kinds


def test_lines_inside_a_traceback_are_the_tracebacks():
    tb = ["ERROR 08-04 02:50:00 [core.py:398] Traceback (most recent call last):",
          "ERROR 08-04 02:50:00 [core.py:398]   File \"x.py\", line 1, in f",
          "ERROR 08-04 02:50:00 [core.py:398]     raise ValueError('Unlinked mmap file /x after 7 workers mapped it')",
          "ERROR 08-04 02:50:00 [core.py:398] ValueError: Unlinked mmap file /x after 7 workers mapped it"]
    loose = [{k: v for k, v in RULES[0].items() if k not in ("logger", "level", "process")}]
    events = feed_each(tb + [UNLINKED], loose)
    assert ruled(events) == [("offload_workers", {"workers": 2})]  # the line after it, not the traceback's
    assert "traceback" in [e.kind for e in events]


def test_a_rule_sees_max_chars_of_the_message():
    padded = UNLINKED.replace("Unlinked", "x" * 3000 + " Unlinked")
    assert ruled(feed_each([padded])) == []
    wide = [dict(RULES[0], max_chars=4096)]
    assert ruled(feed_each([padded], wide)) == [("offload_workers", {"workers": 2})]


def test_a_capture_that_is_no_number_is_absent_and_counted():
    rules = [dict(RULES[0], pattern=r"Unlinked mmap file \S+ after (?P<workers>\S+) workers mapped it")]
    line = UNLINKED.replace("after 2 workers", "after 99999999999999999999999999999999999 workers")
    (ev,) = [e for e in feed_each([line], rules) if e.kind == "rule"]
    assert "workers" not in ev.fields and ev.fields["_invalid"] == ["workers"]
    m = Metrics(process_metrics=False)
    m.set_rules(specs(rules))
    m.add_server("g")
    m.observe("g", ev)
    text = m.render().decode()
    assert 'vllm_log_rule_invalid_values_total{field="workers",rule="offload_workers",server="g"} 1.0' in text
    assert "custom_offload_region_workers{" not in text  # absent, not 0
    assert 'custom_offload_regions_total{server="g"} 1.0' in text  # the line still counts


def metrics_after(lines, rules=RULES):
    m = Metrics(process_metrics=False)
    m.set_rules(specs(rules))
    m.add_server("g")
    p = Pipeline(Clock(year=2026), families=families(specs(rules)))
    for line in lines:
        m.observe_many("g", p.feed(line)[1])
    return m


def test_series_of_the_seed_lines():
    text = metrics_after(SEED).render().decode()
    for sample in ('custom_offload_region_workers{server="g"} 2.0', 'custom_offload_regions_total{server="g"} 1.0',
                   'custom_draft_windows_total{depth="5",server="g"} 2.0',
                   'custom_draft_acceptance_length_bucket{le="4.0",server="g"} 1.0',
                   'custom_draft_acceptance_length_bucket{le="6.0",server="g"} 2.0',
                   'custom_draft_acceptance_length_sum{server="g"} 8.99',
                   'custom_moe_quant_mode_info{quant_mode="w4a8_mx",server="g"} 1.0',
                   'vllm_log_rule_lines_total{rule="draft_depth",server="g"} 2.0',
                   'vllm_log_exporter_events_total{kind="rule",server="g"} 4.0'):
        assert sample in text, sample
    assert "# TYPE custom_draft_acceptance_length histogram" in text
    assert "vllm_log_rule_" not in Metrics(process_metrics=False).render().decode()  # only with rules


def test_labels_are_bounded_and_the_overflow_counted():
    depths = [SPEC_DECODE.replace("depth: 5", f"depth: {d}") for d in (5, 3, 7, 9, 3)]
    b12x = [B12X.replace("w4a8_mx", mode) for mode in ("w4a8_mx", "nvfp4", "w4a16")]
    text = metrics_after(depths + b12x).render().decode()
    assert 'custom_draft_windows_total{depth="5",server="g"} 1.0' in text
    assert 'custom_draft_windows_total{depth="3",server="g"} 2.0' in text
    assert 'custom_draft_windows_total{depth="other",server="g"} 2.0' in text  # 7 and 9: beyond max_values 2
    assert 'vllm_log_rule_label_overflow_total{label="depth",metric="custom_draft_windows_total",server="g"} 2.0' in text
    assert 'custom_moe_quant_mode_info{quant_mode="other",server="g"} 1.0' in text  # nvfp4: not among values
    assert 'custom_moe_quant_mode_info{quant_mode="w4a16",server="g"} 1.0' in text
    many = [SPEC_DECODE.replace("depth: 5", f"depth: {d}") for d in range(10_000)]
    assert sum(1 for line in metrics_after(many).render().decode().splitlines()
               if line.startswith("custom_draft_windows_total{")) == 3


def test_a_restart_drops_the_rules_gauges_and_keeps_their_counters():
    m = metrics_after(SEED + [SEED[0]])  # the version banner again: a new start
    text = m.render().decode()
    assert "custom_offload_region_workers{" not in text and "custom_moe_quant_mode_info{" not in text
    assert 'custom_offload_regions_total{server="g"} 1.0' in text
    assert m.forget_server("g") > 0
    assert 'server="g"' not in m.render().decode()


def test_set_rules_again_keeps_what_is_declared_alike_and_drops_the_rest():
    m = metrics_after(SEED)
    changed = [dict(RULES[1], metrics=[dict(RULES[1]["metrics"][0]),
                                       dict(RULES[1]["metrics"][1], buckets=[2, 4, 6])])]
    m.set_rules(specs(changed))
    text = m.render().decode()
    assert 'custom_draft_windows_total{depth="5",server="g"} 2.0' in text  # declared alike: it goes on
    assert "custom_draft_acceptance_length_count{" not in text  # new buckets: a new histogram
    assert "custom_offload_region" not in text and "custom_moe" not in text  # their rules are gone
    assert 'rule="offload_workers"' not in text
    assert 'vllm_log_rule_lines_total{rule="draft_depth",server="g"} 2.0' in text
    m.set_rules([])
    assert "vllm_log_rule_" not in m.render().decode() and "custom_" not in m.render().decode()


def test_test_says_why_a_rule_refused_an_echo():
    from exporter.framing.frame import frame_line
    from exporter.parsers.rules import refusal

    spec = specs()[0]  # offload_workers: from shared_offload_region.py, INFO, Worker_TP*
    head = UNLINKED[:UNLINKED.index("] Unlinked") + 2]
    for line in (head + "Added request " + TEXT, head + f"Loaded new LoRA adapter: name '{TEXT}', path '/a'"):
        f = frame_line(line, Clock(year=2026))
        assert spec.regex.search(f.message)
        assert refusal(spec, f).startswith("it echoes a client's text")
        assert ruled(feed_batch([line])[1]) == []
    assert refusal(spec, frame_line(UNLINKED, Clock(year=2026))) is None


def test_an_echo_the_fast_path_reads_still_marks_its_continuation_lines():
    # the continuation case above, in the batch path: the first line is needle-free, and the fast path hands it to
    # the pipeline unframed (with rules or without), which learns the record and so takes the later line for it
    first, second = ECHOES["continuation"]
    for rules in (families(specs()), BUILT_IN):
        got = fastpath.classify(first, Clock(year=2026), True, rules)
        assert type(got) is tuple and got[0] is fastpath.ECHO_RECORD
    loose = [{k: v for k, v in RULES[0].items() if k not in ("logger", "level", "process")}]
    counts, events = feed_batch([first, second], loose)
    assert counts["ignored"] == 2 and ruled(events) == []
    # another echo of the process since, with another header: its line is its own again
    later = API.format(level="INFO", file="async_llm.py:350").replace(":28", ":29") + TEXT + "."
    counts, events = feed_batch([first, API.format(level="INFO", file="async_llm.py:350") + "Added request b",
                                 later], loose)
    assert ruled(events) == [("offload_workers", {"workers": 99})]


def test_an_access_line_without_uvicorns_level_prefix_is_no_rules_either_way():
    """uvicorn's access line with its level prefix gone (a --log-config whose access format has no
    %(levelprefix)s, or a wrapper that lost the record's start) is still the access log's: a client's path,
    which no rule reads. Line by line it used to reach the rules (its frame is no uvicorn frame); in a batch
    it is counted with the other access lines, unframed."""
    from exporter.parsers.rules import refusal
    from exporter.framing.clock import Clock as _Clock
    from exporter.framing.frame import frame_line

    rules = [{"name": "gets", "pattern": r'"(?P<method>GET|POST) /v1/', "metrics": [{"name": "custom_gets_total",
                                                                                  "type": "counter"}]}]
    lines = ['10.0.0.1:5 - "GET /v1/models HTTP/1.1" 200 OK',
             'Aug 04 02:46:33 gpu-host vllm[4242]: 10.0.0.1:5 - "POST /v1/completions HTTP/1.1" 200 OK']
    each = feed_each(lines, rules)
    assert ruled(each) == []
    assert [(e.fields["method"], e.fields["path"]) for e in each if e.kind == "access_log"] == [
        ("GET", "/v1/models"), ("POST", "/v1/completions")]
    counts, events = feed_batch(lines, rules)
    assert ruled(events) == [] and counts[PARSED] == 2
    # and `vllm-log-exporter test` says why the pattern's match counts nothing
    (spec,) = specs(rules)
    assert "access-log line" in refusal(spec, frame_line(lines[0], _Clock(year=2026)))
    # a line of vLLM's own that quotes a request line stays the rule's
    own = '(APIServer pid=1) INFO 08-04 02:46:33 [serving.py:1] proxied "GET /v1/models HTTP/1.1" for a client'
    assert ruled(feed_each([own], rules)) == [("gets", {"method": "GET"})]
