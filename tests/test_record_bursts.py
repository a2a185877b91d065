"""A record is its header line, not its prefix: records from one process, one second and one call site
share a byte-identical prefix (``(APIServer pid=N) ERROR 12-04 10:00:05 [file.py:117] ``), and every
one of a burst after the first must still be a record of its own, not a run-on line of the first
one's traceback. The lines are vLLM 0.32's (``tool_parsers/hermes_tool_parser.py:117``,
``logger.exception("Error in extracting tool call from response.")``, the JSONDecodeError the standard
library raises; ``v1/executor/multiproc_executor.py:1063``, ``logger.exception("WorkerProc hit an
exception.")`` after ``e.add_note(traceback.format_exc())``). The real bursts are in the captures
(tests/test_real_vllm_captures.py)."""

from __future__ import annotations

from exporter.framing.clock import Clock
from exporter.metrics import Metrics
from exporter.stream.pipeline import Pipeline
from tests.helpers import samples

H = "(APIServer pid=81) ERROR 12-04 10:00:05 [hermes_tool_parser.py:117] "


def hermes_record(h: str = H) -> list[str]:
    return [
        h + "Error in extracting tool call from response.",
        h + "Traceback (most recent call last):",
        h + '  File "/v/vllm/tool_parsers/hermes_tool_parser.py", line 89, in extract_tool_calls',
        h + "    json.loads(match[0] if match[0] else match[1])",
        h + '  File "/usr/lib/python3.11/json/__init__.py", line 346, in loads',
        h + "    return _default_decoder.decode(s)",
        h + "           ^^^^^^^^^^^^^^^^^^^^^^^^^^",
        h + "json.decoder.JSONDecodeError: Expecting value: line 1 column 1 (char 0)",
    ]


def fed(lines: list[str], batch: bool = False):
    pipe = Pipeline(Clock(year=2026))
    events = []
    if batch:
        events += pipe.feed_batch(lines)[1]
    else:
        for line in lines:
            events += pipe.feed(line)[1]
    events += pipe.flush()
    return events


def test_a_burst_of_identical_multi_line_errors_in_one_second_is_every_record():
    lines = [x for _ in range(5) for x in hermes_record()]
    for batch in (False, True):
        events = fed(lines, batch)
        assert sum(e.kind == "tool_call_parser_failure" for e in events) == 5, batch
        tbs = [e for e in events if e.kind == "traceback"]
        assert len(tbs) == 5 and all(t.fields["exception"] == "json.decoder.JSONDecodeError" for t in tbs), batch
        assert [t.fields["chain_length"] for t in tbs] == [1] * 5
        m = Metrics(process_metrics=False)
        m.add_server("s")
        m.observe_many("s", events)
        s = samples(m.render().decode())
        assert s[("vllm_log_tool_call_parser_failures_total", frozenset({("parser", "hermes"), ("server", "s")}))] == 5
        assert s[("vllm_log_errors_total", frozenset({("kind", "traceback"), ("server", "s")}))] == 0  # model output


def test_an_exception_message_that_runs_on_stays_one_record():
    """What the rule must not split: an exception whose message runs on under the record's header
    (CUDA's advice after the error), and 0.32's worker record, whose exception carries the traceback
    again as a note (``e.add_note(traceback.format_exc())``, multiproc_executor.py)."""
    h = "(Worker pid=91) ERROR 12-04 10:00:05 [multiproc_executor.py:1063] "
    lines = [h + "WorkerProc hit an exception.", h + "Traceback (most recent call last):",
             h + '  File "/v/vllm/v1/executor/multiproc_executor.py", line 1050, in _execute_worker_rpc',
             h + "    output = func(*args, **kwargs)",
             h + "RuntimeError: CUDA error: an illegal memory access was encountered",
             h + "CUDA kernel errors might be asynchronously reported at some other API call.",
             h + "For debugging consider passing CUDA_LAUNCH_BLOCKING=1",
             h + "Traceback (most recent call last):",
             h + '  File "/v/vllm/v1/executor/multiproc_executor.py", line 1050, in _execute_worker_rpc',
             h + "    output = func(*args, **kwargs)",
             h + "RuntimeError: CUDA error: an illegal memory access was encountered",
             h + ""]
    tbs = [e for e in fed(lines) if e.kind == "traceback"]
    assert len(tbs) == 1 and tbs[0].fields["lines"] == len(lines) - 1
