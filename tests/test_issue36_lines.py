"""Every line of tests/fixtures/real_lines/issue36.yaml through the pipeline: the families issue 36 asked
for and the contradictions the catalogue found (catalogue/findings.md), real lines where a public thread
holds one, else rendered from the released wheel's format string (labelled synthetic, with release and
file). Each entry says the event its line must give, field by field, and what the lifecycle must make of
it; the same lines with the family's words moved out of place give nothing of it (the trust boundary)."""

from __future__ import annotations

import pytest
import yaml

from tests.conftest import ROOT, metrics_of, run_lines

ENTRIES = yaml.safe_load((ROOT / "tests" / "fixtures" / "real_lines" / "issue36.yaml").read_text(encoding="utf-8"))
# a server that started and serves: what comes after it is a death, not a failed start
BANNER = ["(APIServer pid=1) INFO 12-04 09:59:00 [api_server.py:1] vLLM API server version 0.34.0",
          "(APIServer pid=1) INFO 12-04 09:59:30 [launcher.py:1] Application startup complete."]


def test_every_entry_names_its_origin_and_source():
    assert ENTRIES
    for e in ENTRIES:
        assert e["origin"] in ("real", "synthetic") and e["source"] and e["line"], e
        if e["origin"] == "synthetic":
            assert any(w in e["source"] for w in ("vllm ", "lmcache ", "nixl", "mooncake")), e["source"]


@pytest.mark.parametrize("i", range(len(ENTRIES)), ids=lambda i: f"{i}-{ENTRIES[i]['family'][:40]}")
def test_each_line_becomes_what_it_says(i):
    e = ENTRIES[i]
    lead = BANNER if e.get("serving") else []
    results, events = run_lines(lead + [e["line"]], derived=True)
    mine = [ev for ev in events if ev.line is not None and ev.line > len(lead)]
    if e["expect"] is None:
        assert [ev.kind for ev in mine if ev.kind not in ("server_state",)] == [], (e["line"], mine)
    else:
        kind, fields = e["expect"]
        ev = next((ev for ev in mine if ev.kind == kind), None)
        assert ev is not None, (e["line"], [(x.kind, x.fields) for x in mine])
        for k, v in fields.items():
            got = ev.fields.get(k)
            assert got == (pytest.approx(v) if isinstance(v, float) else v), (k, got, ev.fields)
    for want in e.get("derived", []):
        if want.startswith("not "):
            assert want[4:] not in {ev.kind for ev in events}, (e["line"], want)
        else:
            assert want in {ev.kind for ev in mine}, (e["line"], want, [ev.kind for ev in mine])




def _line(family: str) -> str:
    return next(e["line"] for e in ENTRIES if e["family"] == family)


def test_lmcache_lines_of_every_release_feed_the_hit_ratio_and_say_nothing_they_do_not_hold():
    """0.3.15+'s lookups count (the hit ratio is back); a retrieve logged without size and cost counts its
    tokens but no bytes or seconds (absent, not a measured 0), so bytes over seconds stays a rate of moves
    that logged both; LMCache's own warning counts by its level."""
    from tests.helpers import value

    s = metrics_of([ENTRIES[0]["line"], ENTRIES[1]["line"], _line("lmcache retrieve logged without its size and cost"),
                  _line("LMCache's own warning (counted by level)")])
    assert value(s, "vllm_log_lmcache_requested_tokens_total", server="s") == 1839 + 1848
    assert value(s, "vllm_log_lmcache_hit_tokens_total", server="s") == 1708
    assert value(s, "vllm_log_lmcache_tokens_total", server="s", direction="retrieve") == 1792
    assert value(s, "vllm_log_lmcache_bytes_total", server="s", direction="retrieve") is None
    assert value(s, "vllm_log_lmcache_seconds_total", server="s", direction="retrieve") is None
    assert value(s, "vllm_log_messages_total", server="s", level="warning") == 1


def test_the_block_override_is_the_count_the_server_runs_with():
    from tests.helpers import value

    s = metrics_of([_line("GPU block count overridden")])
    assert value(s, "vllm_log_kv_cache_blocks", server="s") == 512


def test_a_rank_dropped_by_fault_tolerance_counts_once_and_is_no_death():
    """Every surviving engine logs the same scale-down: the rank counts once; the failed engine waited for
    recovery instead of dying, so no death and the server stays serving."""
    from tests.helpers import value

    down = _line("FT scale-down done")
    lines = BANNER + [_line("FT engine fault (waits for recovery)"), down, down.replace("EngineCore_DP0 pid=11",
                      "EngineCore_DP1 pid=12").replace("Engine 0 scale", "Engine 1 scale")]
    _, events = run_lines(lines, derived=True)
    assert "engine_death" not in {e.kind for e in events}
    s = metrics_of(lines)
    assert value(s, "vllm_log_dp_ranks_lost_total", server="s") == 1
    assert value(s, "vllm_log_dp_dead_ranks", server="s") == 1
    assert value(s, "vllm_log_dp_fault_tolerance_events_total", server="s", event="scale_down") == 1
    assert value(s, "vllm_log_server_state", server="s", state="serving") == 1
    # the next start gives the ranks back
    s = metrics_of(lines + BANNER)
    assert value(s, "vllm_log_dp_dead_ranks", server="s") is None


def test_the_context_length_cut_and_the_failures_are_counted_with_bounded_labels():
    from tests.helpers import value

    s = metrics_of([_line("max_model_len cut (0.34, WARNING)"), _line("NIXL transfer failure"),
                  _line("Mooncake send failed, with its size"), _line("KV offload tier-poll stall"),
                  _line("request queue full (0.30-0.31)"), _line("weight-cache daemon exit")])
    assert value(s, "vllm_log_max_model_len_requested_tokens", server="s", engine="0") == 262144
    assert value(s, "vllm_log_max_model_len_tokens", server="s", engine="0") == 98304
    assert value(s, "vllm_log_kv_connector_failures_total", server="s", connector="nixl", reason="transfer") == 1
    assert value(s, "vllm_log_kv_connector_failures_total", server="s", connector="mooncake") == 1
    assert value(s, "vllm_log_kv_offload_failures_total", server="s", reason="tier_poll_stall") == 1
    assert value(s, "vllm_log_requests_rejected_total", server="s", reason="queue_full") == 1
    assert value(s, "vllm_log_weight_cache_daemon_exits_total", server="s", during="serving") == 1
    # no request id anywhere in the output
    from exporter.metrics import Metrics  # noqa: F401
    assert not any("cmpl-77" in str(k) for k in s)


def test_the_other_connectors_failures_are_counted_by_connector():
    """MoRIIO, P2P NCCL and a circuit breaker (which names no connector: `other`) in the same counter as
    NIXL's and Mooncake's; a request's id is no label."""
    from tests.helpers import value

    s = metrics_of([_line("MoRIIO RDMA read timed out, with its seconds"),
                  _line("P2P NCCL peer out of memory, with the tensor's size"),
                  _line("a connector's circuit breaker opened (0.34), no connector named"),
                  _line("KV offload P2P peer reaped with transfers running")])
    assert value(s, "vllm_log_kv_connector_failures_total", server="s", connector="moriio", reason="timeout") == 1
    assert value(s, "vllm_log_kv_connector_failures_total", server="s", connector="p2p_nccl",
                 reason="buffer_full") == 1
    assert value(s, "vllm_log_kv_connector_failures_total", server="s", connector="other",
                 reason="circuit_open") == 1
    assert value(s, "vllm_log_kv_offload_failures_total", server="s", reason="peer_down") == 1
    assert not any("cmpl-7f3a" in str(k) for k in s)


def test_mooncake_store_loads_count_by_tier():
    from tests.helpers import value

    s = metrics_of([_line("Mooncake store load by tier")] * 2)
    assert value(s, "vllm_log_mooncake_store_load_keys_total", server="s", tier="memory") == 40
    assert value(s, "vllm_log_mooncake_store_load_keys_total", server="s", tier="disk") == 8
    assert value(s, "vllm_log_mooncake_store_load_keys_total", server="s", tier="unknown") is None
    assert value(s, "vllm_log_mooncake_store_load_bytes_total", server="s", tier="disk") == 2 * 8388608
    assert value(s, "vllm_log_mooncake_store_load_failed_keys_total", server="s") == 2
    assert not any("cmpl-5" in str(k) for k in s)


def test_the_encoder_cache_connectors_failures_have_a_counter_of_their_own():
    """Encoder outputs are no KV: EC connectors' failures count in vllm_log_ec_connector_failures_total, not
    in the KV connectors' counter (nor its alert)."""
    from tests.helpers import value

    s = metrics_of([_line("EC connector (Mooncake) waited for a push that never came"),
                  _line("EC connector (NIXL) failed a request for want of its encoding")])
    assert value(s, "vllm_log_ec_connector_failures_total", server="s", connector="mooncake", reason="timeout") == 1
    assert value(s, "vllm_log_ec_connector_failures_total", server="s", connector="nixl", reason="missing") == 1
    assert value(s, "vllm_log_kv_connector_failures_total", server="s", connector="nixl", reason="missing") is None
    assert not any("cmpl-9" in str(k) for k in s)


def test_the_extensible_kv_cache_s_final_size_is_the_one_exported():
    """0.34 reserves the KV cache at start-up and commits its size after warm-up: the profile's KV memory
    before it was the budget; the extension's blocks and bytes are what the server runs with."""
    from tests.helpers import value

    s = metrics_of(["(Worker_TP0 pid=12) INFO 12-04 10:00:20 [gpu_worker.py:300] Available KV cache memory: 80.00 GiB",
                  _line("memory after warm-up (extensible KV cache)"), _line("KV cache extended to its final size")])
    assert value(s, "vllm_log_kv_cache_blocks", server="s") == 3721
    assert value(s, "vllm_log_kv_cache_memory_bytes", server="s", worker="Worker_TP0") == 62427349647
    assert value(s, "vllm_log_startup_memory_bytes", server="s", worker="Worker_TP0", component="peak_activation") == 3435973837
    assert value(s, "vllm_log_startup_memory_bytes", server="s", worker="Worker_TP0", component="transient_reserve") == 4402341478


def test_the_report_says_what_was_given_up_and_the_context_length_cut():
    from exporter.offline.report.markdown import render
    from exporter.offline.report.stats import RunStats

    lines = BANNER + [_line("max_model_len cut (0.34, WARNING)"), _line("FT scale-down done"),
                      _line("NIXL transfer failure"), _line("request queue full (0.30-0.31)")]
    _, events = run_lines(lines, derived=True)
    st = RunStats()
    for ev in events:
        st.add(ev)
    s = st.summary()
    assert s["given_up"] == {"KV connector nixl: transfer": 1, "data-parallel ranks dropped": 1,
                             "requests turned away: queue_full": 1}
    assert s["config"]["max_model_len"] == 98304 and s["config"]["max_model_len_requested"] == 262144
    text = render(s)
    assert "| data-parallel ranks dropped | 1 |" in text and "cut from 262,144" in text


def test_the_request_log_is_counted_by_adapter_and_finish_reason_with_bounded_labels():
    """--enable-log-requests / --enable-log-outputs: requests per LoRA adapter (which vLLM's /metrics does not
    give), responses per finish reason, abort calls; a client's disconnect, which vLLM logs twice, counts once;
    no id, prompt or output reaches a label. Beyond 32 adapter names, or a name that is no plain name: other."""
    from tests.helpers import value

    received, aborted = _line("request logged, with its LoRA adapter"), _line("requests aborted (0.10.2+)")
    base = received.split(", lora_request: ")[0] + ", lora_request: None."
    many = [received.replace("'sql-lora'", f"'a{i}'") for i in range(40)]
    odd = received.replace("'sql-lora'", "'x y{z}'")
    lines = [received, received, base, _line("response logged, with its finish reason"), aborted, aborted,
             _line("a client's disconnect, said twice by vLLM, counts once"), *many, odd]
    s = metrics_of(lines)
    assert value(s, "vllm_log_requests_logged_total", server="s", lora="sql-lora") == 2
    assert value(s, "vllm_log_requests_logged_total", server="s", lora="") == 1
    assert value(s, "vllm_log_requests_logged_total", server="s", lora="other") == 40 - 31 + 1
    assert value(s, "vllm_log_exporter_label_overflow_total", server="s", label="lora") == 10
    assert value(s, "vllm_log_responses_logged_total", server="s", finish_reason="length") == 1
    assert value(s, "vllm_log_request_aborts_total", server="s") == 2  # the same second, the same line of code: two
    assert not any("cmpl-77" in str(k) or "SELECT" in str(k) or "/adapters" in str(k) for k in s)
    # the batch path (the fast path's "ignorable" lines) gives the same events
    from exporter.framing.clock import Clock
    from exporter.stream.pipeline import Pipeline

    _, one_by_one = run_lines(lines)
    counts, batched, _, _ = Pipeline(Clock(year=2026)).feed_batch(lines)
    assert [(e.kind, e.fields) for e in batched] == [(e.kind, e.fields) for e in one_by_one]


def test_a_lora_adapter_s_events_are_counted_without_its_name():
    from tests.helpers import value

    s = metrics_of([_line("LoRA adapter loaded"), _line("LoRA adapter removed"),
                  _line("LoRA adapter a resolver failed to load")])
    for event in ("loaded", "removed", "load_failed"):
        assert value(s, "vllm_log_lora_adapter_events_total", server="s", event=event) == 1
    assert value(s, "vllm_log_messages_total", server="s", level="warning") == 1  # the failure, without its text
    assert not any("sql-lora" in str(k) for k in s)


def test_engine_step_time_is_a_histogram_by_what_the_batch_held():
    """--enable-logging-iteration-details: prefill-only, decode-only and mixed steps apart (a chunked prefill
    beside decodes is what stretches inter-token latency); a data-parallel rank's padding step is no step."""
    from tests.helpers import value

    decode = _line("iteration details, engine core (0.14-0.25)")
    mixed = _line("iteration details, stats logger (0.30+)")
    prefill = mixed.replace("14 generation requests, 14 generation tokens", "0 generation requests, 0 generation tokens")
    s = metrics_of([decode, decode, mixed, prefill, _line("iteration details, a data-parallel rank's padding step (0.23+)")])
    assert value(s, "vllm_log_iteration_seconds_count", server="s", engine="0", batch="decode") == 2
    assert value(s, "vllm_log_iteration_seconds_sum", server="s", engine="0", batch="decode") == pytest.approx(0.02198)
    assert value(s, "vllm_log_iteration_seconds_count", server="s", engine="1", batch="mixed") == 1
    assert value(s, "vllm_log_iteration_seconds_bucket", server="s", engine="1", batch="mixed", le="0.15") == 0
    assert value(s, "vllm_log_iteration_seconds_bucket", server="s", engine="1", batch="mixed", le="0.25") == 1
    assert value(s, "vllm_log_iteration_seconds_count", server="s", engine="1", batch="prefill") == 1
    assert value(s, "vllm_log_iteration_seconds_count", server="s", engine="0", batch="idle") is None


def test_the_report_shows_the_request_log_and_the_engine_steps():
    from exporter.offline.report.markdown import render
    from exporter.offline.report.stats import RunStats

    received = _line("request logged, with its LoRA adapter")
    lines = BANNER + [received, received.replace("'sql-lora'", "'a|b'"), _line("response logged, with its finish reason"),
                      _line("requests aborted (0.10.2+)"), _line("LoRA adapter loaded"),
                      _line("iteration details, engine core (0.14-0.25)"),
                      _line("iteration details, a data-parallel rank's padding step (0.23+)")]
    _, events = run_lines(lines, derived=True)
    st = RunStats()
    for ev in events:
        st.add(ev)
    s = st.summary()
    assert s["request_log"] == {"lora": {"sql-lora": 1, "other": 1}, "finish_reason": {"length": 1},
                                "aborts": {"abort calls": 1}, "lora_events": {"loaded": 1}}
    assert s["steps"] == {"decode": {"count": 1, "mean_seconds": pytest.approx(0.01099), "max_seconds": 0.01099}}
    text = render(s)
    assert "| sql-lora | 1 |" in text and "| decode | 1 | 10.99 ms | 10.99 ms |" in text and "a|b" not in text


def test_the_access_log_switched_off_is_said_not_read_as_no_traffic():
    """--disable-uvicorn-access-log leaves the HTTP counts empty: a state series and /healthz say why (and what
    to use instead); filtering endpoints, the advice, raises nothing; the next start forgets it."""
    from exporter.metrics import Metrics
    from tests.helpers import samples, value

    off = _line("access log switched off (non-default args)")
    s = metrics_of(BANNER[:1] + [off])
    assert value(s, "vllm_log_access_log_disabled", server="s", reason="flag") == 1
    assert value(s, "vllm_log_access_log_disabled", server="s", reason="log_level") is None
    quiet = off.replace("'disable_uvicorn_access_log': True", "'uvicorn_log_level': 'warning'")
    assert value(metrics_of(BANNER[:1] + [quiet]), "vllm_log_access_log_disabled", server="s", reason="log_level") == 1
    assert value(metrics_of(BANNER[:1] + [_line("access log filtered by endpoint (still counted)")]),
                 "vllm_log_access_log_disabled", server="s", reason="flag") is None
    assert value(metrics_of(BANNER[:1] + [off] + BANNER[:1]), "vllm_log_access_log_disabled", server="s", reason="flag") is None
    _, events = run_lines(BANNER[:1] + [off], derived=True)
    m = Metrics(process_metrics=False)
    m.add_server("s")
    m.observe_many("s", events)
    assert "--disable-access-log-for-endpoints" in m.notes()["s"]
    assert samples(m.render().decode())  # renders


def test_a_tool_call_parser_failure_is_the_model_s_not_a_server_traceback():
    """A tool parser's logger.exception (vllm-project/vllm#21544: the header and the traceback's first lines
    are the issue's; the first line and the exception line rendered from 0.9.2's hermes_tool_parser.py): one
    tool_call_parser_failure, its level counted, no `traceback` error (VllmTraceback stays quiet: the model
    wrote a tool call the parser could not read), and none of the model's output kept anywhere."""
    from exporter.alerts.from_events import Alerts
    from tests.helpers import value

    h = "ERROR 07-24 10:16:06 [hermes_tool_parser.py:370] "
    record = [_line("tool-call parser failure, logger.exception's first line"),
              h + "Traceback (most recent call last):",
              h + '  File "/usr/local/lib/python3.12/dist-packages/vllm/entrypoints/openai/tool_parsers/'
                  'hermes_tool_parser.py", line 241, in extract_tool_calls_streaming',
              h + "    current_tool_call = partial_json_parser.loads(tool_call_portion or \"{}\", flags)",
              h + "partial_json_parser.core.exceptions.MalformedJSON: Malformed node or string: mkdir -p test/{test1,test2"]
    lines = BANNER + record
    s = metrics_of(lines)
    assert value(s, "vllm_log_tool_call_parser_failures_total", server="s", parser="hermes") == 1
    assert value(s, "vllm_log_errors_total", server="s", kind="traceback") == 0
    assert value(s, "vllm_log_messages_total", server="s", level="error") == 1
    _, events = run_lines(lines, derived=True)
    assert "mkdir" not in repr([e.fields for e in events])
    alerts = Alerts(instance="127.0.0.1:10825")
    alerts.observe("s", events, now=1e9)
    assert alerts.pending(now=1e9) == []
    # the same traceback from a file that is no tool parser is still a traceback
    other = [ln.replace("hermes_tool_parser.py:370", "serving_chat.py:370") for ln in record]
    assert value(metrics_of(BANNER + other), "vllm_log_errors_total", server="s", kind="traceback") == 1


def test_a_newer_parser_s_tool_call_failure_is_no_server_traceback_either():
    """vllm/parser/mistral.py (0.27+) is read by file and wording (its file's name is also the tokenizer's):
    its logger.exception counts one tool_call_parser_failure{parser="mistral"} and its traceback is that
    failure; the same traceback after another record of mistral.py is still a traceback."""
    from tests.helpers import value

    h = "(APIServer pid=10) ERROR 12-04 10:00:20 [mistral.py:188] "
    tb = [h + "Traceback (most recent call last):",
          h + '  File "/usr/local/lib/python3.12/site-packages/vllm/parser/mistral.py", line 180, in extract',
          h + "json.decoder.JSONDecodeError: Expecting value: line 1 column 1 (char 0)"]
    s = metrics_of(BANNER + [h + "Error in extracting tool call from response."] + tb)
    assert value(s, "vllm_log_tool_call_parser_failures_total", server="s", parser="mistral") == 1
    assert value(s, "vllm_log_errors_total", server="s", kind="traceback") == 0
    s = metrics_of(BANNER + [h + "Failed to convert the token list."] + tb)
    assert value(s, "vllm_log_tool_call_parser_failures_total", server="s", parser="mistral") is None
    assert value(s, "vllm_log_errors_total", server="s", kind="traceback") == 1


def test_the_start_up_memory_lines_of_0_18_and_later_are_exported():
    from tests.helpers import value

    s = metrics_of([_line("CUDA graph memory estimate (0.18-0.33)"), _line("persisted start-up plan sizes the KV cache (0.26+)"),
                  _line("XPU worker's memory before profiling (0.9-0.15)")])
    assert value(s, "vllm_log_startup_memory_bytes", server="s", worker="EngineCore", component="cuda_graph_estimate") \
        == pytest.approx(622770257.92)
    assert value(s, "vllm_log_kv_cache_memory_bytes", server="s", worker="EngineCore_DP0") == 8589934592
    assert value(s, "vllm_log_model_weights_bytes", server="s", worker="EngineCore_0") == 2516582400


def test_a_collective_timeout_keeps_its_numbers_and_counts_once_however_many_ranks_say_so():
    from tests.helpers import value

    first = _line("watchdog timeout (PyTorch's NCCL process group)")
    lines = [first, first.replace("[rank0]", "[rank1]").replace("[Rank 0]", "[Rank 1]"),
             _line("watchdog timeout, the watchdog thread's exception (the same collective)"),
             _line("watchdog timeout on another rank, a reduce-scatter")]
    s = metrics_of(lines)
    assert value(s, "vllm_log_collective_timeouts_total", server="s", op="ALLREDUCE") == 1
    assert value(s, "vllm_log_collective_timeouts_total", server="s", op="_REDUCE_SCATTER_BASE") == 1


def test_the_other_platforms_ooms_keep_their_numbers_in_the_report():
    from exporter.offline.report.markdown import render
    from exporter.offline.report.stats import RunStats

    lines = BANNER + [_line("Ascend NPU out of memory (torch_npu's old-form numbers with 'current active')"),
                      _line("TPU (XLA) out of HBM at compile")]
    _, events = run_lines(lines, derived=True)
    st = RunStats()
    for ev in events:
        st.add(ev)
    s = st.summary()
    assert [o.get("device") for o in s["ooms"]] == ["npu", "tpu"]
    text = render(s)
    assert "needed 49.34 GiB of 32.00 GiB: 17.34 GiB over" in text


def test_requests_a_stop_aborted_or_drained_are_counted():
    from tests.helpers import value

    s = metrics_of(BANNER + [_line("stop aborting in-flight requests (0.23+)"), _line("stop draining in-flight requests (0.18-0.22)")])
    assert value(s, "vllm_log_stop_requests_total", server="s", action="aborted") == 7
    assert value(s, "vllm_log_stop_requests_total", server="s", action="drained") == 3


def test_lmcache_s_multiprocess_server_counts_its_tokens_not_a_rate_it_cannot_give():
    from tests.helpers import value

    s = metrics_of([_line("LMCache multiprocess server's store (tokens and seconds, no size)"),
                  _line("LMCache multiprocess server's retrieve (0.3.15-0.4.1)")])
    assert value(s, "vllm_log_lmcache_tokens_total", server="s", direction="store") == 2048
    assert value(s, "vllm_log_lmcache_tokens_total", server="s", direction="retrieve") == 1792
    assert value(s, "vllm_log_lmcache_bytes_total", server="s", direction="store") is None
    assert value(s, "vllm_log_lmcache_seconds_total", server="s", direction="store") is None


def test_engine_ops_series_count_what_the_lines_say():
    """Sleep mode counts transitions and their seconds by action; EPLB's balance is the last step's, its
    rearrangements leave out the start-up profile run's; an elastic scaling counts once (the coordinator's
    word for it is not read) and sets the data-parallel size; V0's preemption warning adds what its count
    grew by; an engine hang counts by source."""
    from tests.helpers import value

    s = metrics_of([_line("sleep mode, falling asleep (an RL reward server's measurement, the message alone)"),
                  _line("sleep mode, waking up by tags (0.11.2+)"), _line("sleep mode, waking up (0.7.3's wording, the message alone)"),
                  _line("EPLB step (0.9.2-0.10.2)"), _line("EPLB step with the balance of the experts' load (0.14.1+)"),
                  _line("EPLB rearranged the experts while serving (0.14.1+, the argument is a space when not the profile run)"),
                  _line("EPLB rearranged the experts in the start-up profile run (0.9.2-0.13.0)"),
                  _line("EPLB skipped a rearrangement (0.27.1+)"),
                  _line("elastic data-parallel scale-up completed (0.10.2+)"),
                  _line("elastic data-parallel scale-down completed (0.10.2+)"),
                  _line("the coordinator's word for the same scaling (not counted twice)"),
                  _line("the watchdog dumped the stacks of a loop not fed in time (0.33+)")])
    assert value(s, "vllm_log_sleep_mode_transitions_total", server="s", action="wake_up") == 2
    assert value(s, "vllm_log_sleep_mode_seconds_total", server="s", action="wake_up") == pytest.approx(2.513807 + 0.779162)
    assert value(s, "vllm_log_sleep_mode_seconds_total", server="s", action="sleep") == pytest.approx(0.744026)
    assert value(s, "vllm_log_eplb_balancedness", server="s") == pytest.approx(0.7275)
    assert value(s, "vllm_log_eplb_rearrangements_total", server="s", mode="sync") == 1
    assert value(s, "vllm_log_eplb_rearrangement_seconds_total", server="s", mode="sync") == pytest.approx(1.87)
    assert value(s, "vllm_log_eplb_rearrangements_skipped_total", server="s") == 1
    assert value(s, "vllm_log_dp_scalings_total", server="s", direction="up") == 1
    assert value(s, "vllm_log_dp_scalings_total", server="s", direction="down") == 1
    assert value(s, "vllm_log_data_parallel_size", server="s") == 2
    assert value(s, "vllm_log_engine_hangs_total", server="s", source="watchdog") == 1
    assert value(s, "vllm_log_preemptions_total", server="s", engine="0") is None  # no line said any


def test_v0_preemption_warnings_add_what_the_count_grew_by():
    line = _line("V0 preemption warning (every 50th preemption, with the count so far)")
    first = line.replace("=51", "=1")
    restarted = line.replace("=51", "=1")
    from tests.helpers import value

    s = metrics_of([first, line])
    assert value(s, "vllm_log_preemptions_total", server="s", engine="0") == 51
    s = metrics_of([first, line, restarted])  # the count went back: a new engine, its 1 preemption added
    assert value(s, "vllm_log_preemptions_total", server="s", engine="0") == 52


def test_v0_iteration_timeout_marks_a_serving_engine_stalled():
    from tests.helpers import value

    s = metrics_of(BANNER + [_line("V0's engine iteration timed out (the engine is marked dead)")])
    assert value(s, "vllm_log_engine_hangs_total", server="s", source="iteration_timeout") == 1
    assert value(s, "vllm_log_engine_stalled", server="s", engine="0") == 1


def test_the_watchdog_s_feed_timeout_marks_a_serving_engine_stalled_and_its_dumps_at_a_stop_count_nothing():
    """0.34's watchdog dumps the stacks on a feed timeout (300 s by default, suspended while the engine waits
    for work) and also at every stop (SIGTERM, a worker's parent gone): only the first is a hang."""
    from tests.helpers import value

    hang = _line("the watchdog dumped the stacks of a loop not fed in time (0.33+)")
    s = metrics_of(BANNER + [hang])
    assert value(s, "vllm_log_engine_hangs_total", server="s", source="watchdog") == 1
    assert value(s, "vllm_log_engine_stalled", server="s", engine="0") == 1
    stop = [_line("the watchdog's dump at a stop (the engine core's SIGTERM handler calls handle_failure), no hang"),
            _line("the watchdog's dump when a worker's parent exited (vllm/v1/executor/multiproc_executor.py), no hang")]
    s = metrics_of(BANNER + stop)
    assert value(s, "vllm_log_engine_hangs_total", server="s", source="watchdog") in (0, None)  # no hang counted
    assert value(s, "vllm_log_engine_stalled", server="s", engine="0") in (0, None)


def test_start_up_download_and_encoder_graphs_are_series():
    from tests.helpers import value

    s = metrics_of([_line("time spent downloading the weights (0.7.3+)"),
                  _line("the multimodal encoder's CUDA graphs captured (0.31+)")])
    assert value(s, "vllm_log_weights_download_seconds", server="s", worker="EngineCore_DP0") == pytest.approx(73.125402)
    assert value(s, "vllm_log_startup_memory_bytes", server="s", worker="EngineCore_DP0",
                 component="encoder_cuda_graph") == pytest.approx(0.52 * 2**30)


def test_diffusion_decoding_counts_its_windows_for_the_engine_of_the_stats_line_before():
    from tests.helpers import value

    line = _line("diffusion decoding's window (0.24+)")
    stats = ("(EngineCore_DP1 pid=12) INFO 12-04 10:00:10 [loggers.py:257] Engine 001: Avg prompt throughput: 0.0 "
             "tokens/s, Avg generation throughput: 41.2 tokens/s, Running: 1 reqs, Waiting: 0 reqs, GPU KV cache usage: "
             "1.0%, Prefix cache hit rate: 0.0%")
    s = metrics_of([line, stats, line.replace("EngineCore_DP0 pid=11", "EngineCore_DP1 pid=12")])
    assert value(s, "vllm_log_diffusion_committed_tokens_total", server="s", engine="0") == 412
    assert value(s, "vllm_log_diffusion_committed_tokens_total", server="s", engine="1") == 412
    assert value(s, "vllm_log_diffusion_denoising_steps_total", server="s", engine="1") == 100
    assert value(s, "vllm_log_diffusion_canvas_positions_total", server="s", engine="0") == 3200
