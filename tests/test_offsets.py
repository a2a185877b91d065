"""A read that begins mid-stream reports what a whole read reports from there on.

The daemon starts at a file's end, after a restart or a rotation, or reads a log a runtime cut: its
first line may be a traceback's middle or its exception. Every real capture under tests/fixtures/ is
read whole, and again from 20 offsets (as the daemon would from there, a fresh pipeline); from each
offset on, the cut read must report:

- every line's own facts (stats, access lines, start-up facts, log lines...) exactly as the whole read;
- the same errors: every exception and error kind (OOM, CUDA, NCCL, engine death, a failed start) the
  whole read reports with its exception's line at or after the offset (a traceback cut in its middle is
  still one, exporter.stream.pipeline's orphan traceback), and none it does not (compared as sets: the
  whole read folds a burst of one process's identical records into one traceback, issue 42);
- the same incidents (an engine's death, a failed start), never one the whole read does not report
  from there on, or as the episode it was in when the cut read began; a routine stop of a server that
  the whole read had already seen end (dead, failed, stopped) may be reported: the cut read saw only its end.
"""

from __future__ import annotations

import collections
import gzip
import json

import pytest

from exporter.framing.clock import Clock
from exporter.framing.frame import TRACEBACK_START, frame_line
from exporter.parsers.events import DERIVED_KINDS
from exporter.stream.pipeline import Pipeline
from tests.conftest import FIXTURES, run_lines

CAPTURES = sorted(p for p in FIXTURES.rglob("*.log.gz") if p.with_name(p.name[:-7] + ".truth.json").exists())
OFFSETS = 20
TRACEBACK_KINDS = frozenset({"oom", "cuda_error", "nccl_error", "engine_dead", "startup_failure"})
INCIDENTS = frozenset({"engine_death", "start_failed", "start_failure_reason"})
FINAL = frozenset({"stopped", "dead", "failed"})


def _read(lines: list[str], first: int = 0) -> tuple[list, dict]:
    """The events of a read of ``lines`` (their line numbers from ``first``), and the line of each traceback's
    last exception: (first line, process, pid) -> that line (a traceback is one event at its first line);
    under "inside", the lines the read took into tracebacks."""
    pipe = Pipeline(Clock(year=2026))
    out, spans, chains, sizes = [], {}, {}, {}
    inside = set()
    for line in lines:
        out.extend(pipe.feed(line)[1])
        for tb in pipe._tracebacks.values():  # (the test looks inside: each traceback's lines, its last exception's)
            key = (tb.line + first, tb.process, tb.pid)
            if sizes.get(key) != tb.lines:
                sizes[key] = tb.lines
                inside.add(pipe.lineno + first)
            if chains.get(key) != tb.chain:
                chains[key] = tb.chain
                spans[key] = pipe.lineno + first
    out.extend(pipe.flush())
    for ev in out:
        ev.line += first
    spans["inside"] = inside
    return out, spans


def _record_frame_before(lines: list[str], after: int, end: int, header: str) -> bool:
    """Whether a line of a logged traceback (a frame's ``File "..."`` line, its start) under ``header`` stands
    after line ``after`` and before ``end``: a read from there sees its traceback, not only its exception's line
    (the code and caret lines under a frame do not say they are a traceback's)."""
    clock = Clock(year=2026)
    for i in range(after, end - 1):
        f = frame_line(lines[i], clock)
        if f.header is not None and f.header.rstrip() == header and (
                f.message.lstrip().startswith(('File "', TRACEBACK_START))):
            return True
    return False


def _facts(events, spans, lines, after: int, whole: bool, skip=frozenset()):
    """(point facts, error facts, incidents, stops) of the events at lines after ``after``. A traceback's
    facts count where its last exception was printed; of a traceback logged under a record's header whose lines after ``after``
    are only its exception's, only the error kinds (the line says enough for them, not that a traceback
    was logged: a one-line error record says the same). ``skip``: lines whose error-line events do not count (a
    read that begins inside a logged traceback's frames counts their code lines as the record's error lines until
    the next frame's line starts the traceback for it; the whole read has them in its traceback)."""
    point, errors, incidents, stops = collections.Counter(), set(), collections.Counter(), collections.Counter()
    tb_header: dict = {}
    for ev in events:
        f = ev.fields
        if ev.kind == "traceback" or ev.kind in TRACEBACK_KINDS:
            start = (ev.line, ev.process, ev.pid)
            end = spans.get(start, ev.line)
            if end <= after:
                continue
            if ev.kind == "traceback":
                tb_header[start] = not f.get("uncaught")
                if whole and ev.line <= after and tb_header[start] and not _record_frame_before(
                        lines, after, end, _header_at(lines, ev.line)):
                    continue
                errors.add(("traceback", f.get("exception"), tuple(k for k in f.get("kinds", ()) if k)))
            else:  # (a failed start's reason is its chain's root cause, which a read from its middle may not see)
                errors.add((ev.kind, None if ev.kind == "startup_failure" else f.get("reason"), f.get("signature")))
        elif ev.line <= after:
            continue
        elif ev.kind in INCIDENTS:
            incidents[ev.kind] += 1
        elif ev.kind == "server_stop":
            stops[ev.kind] += 1
        elif ev.kind == "log" and ev.line in skip:
            continue
        elif whole and ev.kind == "request_log" and _echo_begun_by(lines, ev.line) <= after:
            continue  # (its facts on a later line of a record begun before the cut: the cut read cannot know it)
        elif ev.kind not in DERIVED_KINDS:
            point[(ev.kind, json.dumps(f, sort_keys=True, default=str))] += 1
    return point, errors, incidents, stops


def _echo_begun_by(lines: list[str], n: int) -> int:
    """The line that began the request-log record whose facts line ``n`` holds: a line break in a request id
    pushes them onto a later line of the record (each under the same header)."""
    clock = Clock(year=2026)
    header = _header_at(lines, n)
    for i in range(n, max(n - 50, 0), -1):
        f = frame_line(lines[i - 1], clock)
        if f.header is None or f.header.rstrip() != header:
            return i + 1
        if f.message.startswith(("Generated response ", "Received request ", "Aborted request")):
            return i
    return n


def _header_at(lines: list[str], n: int) -> str | None:
    f = frame_line(lines[n - 1], Clock(year=2026))
    return f.header.rstrip() if f.header else None


@pytest.mark.parametrize("capture", CAPTURES, ids=lambda p: f"{p.parent.name}/{p.name[:-7]}")
def test_a_read_from_any_offset_reports_what_the_whole_read_reports_from_there(capture):
    lines = gzip.open(capture, "rt", encoding="utf-8").read().splitlines()
    whole, spans = _read(lines)
    bad = []
    for j in range(1, OFFSETS + 1):
        k = len(lines) * j // (OFFSETS + 1)
        cut, cut_spans = _read(lines[k:], k)
        w_point, w_errors, w_incidents, w_stops = _facts(whole, spans, lines, k, True)
        c_point, c_errors, c_incidents, c_stops = _facts(cut, cut_spans, lines, k, False, spans["inside"])
        before = {ev.kind for ev in whole if ev.line <= k and ev.kind in INCIDENTS}
        state = ([ev.fields["state"] for ev in whole if ev.kind == "server_state" and ev.line <= k] or [None])[-1]
        if w_point != c_point:
            bad.append((k, "facts", dict(w_point - c_point), dict(c_point - w_point)))
        if w_errors != c_errors:
            bad.append((k, "errors", w_errors - c_errors, c_errors - w_errors))
        if w_incidents - c_incidents or set(c_incidents - w_incidents) - before:
            bad.append((k, "incidents", dict(w_incidents), dict(c_incidents)))
        if w_stops - c_stops or (c_stops - w_stops and state not in FINAL):
            bad.append((k, "stops", dict(w_stops), dict(c_stops), state))
    assert bad == [], f"{capture.name}, {len(lines)} lines: {bad[:3]}"


# ---- an exception's line with no traceback open: the traceback it ends, read the same way --------------

SERVING = ["(APIServer pid=1) INFO 12-04 10:00:00 [api_server.py:1] Starting vLLM API server 0 on http://0.0.0.0:8000",
           "(APIServer pid=1) INFO 12-04 10:00:01 [loggers.py:1] Engine 000: Avg prompt throughput: 1.0 tokens/s, Avg "
           "generation throughput: 2.0 tokens/s, Running: 1 reqs, Waiting: 0 reqs, GPU KV cache usage: 1.0%, Prefix "
           "cache hit rate: 0.0%"]
FRAMES = ['Traceback (most recent call last):',
          '  File "/v/vllm/v1/engine/core.py", line 12, in run_engine_core',
          '    engine_core.run_busy_loop()']


@pytest.mark.parametrize("tag", ["", "(EngineCore_DP0 pid=5) "])
@pytest.mark.parametrize("exception", [
    "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB.",
    "RuntimeError: CUDA error: an illegal memory access was encountered",
    "RuntimeError: NCCL error: unhandled system error (run with NCCL_DEBUG=INFO for details)",
    "vllm.v1.engine.exceptions.EngineDeadError: EngineCore encountered an issue. See stack trace (above) for the root cause.",
    # ai-dynamo/dynamo#1408 (vLLM 0.9): a worker that failed to start
    "Exception: WorkerProc initialization failed due to an exception in a background process. See stack trace for "
    "root cause.",
    "TypeError: Cannot inspect kernel parameters for function",
    "KeyboardInterrupt",
])
def test_an_exception_line_without_its_start_is_its_traceback_and_the_lifecycle_reads_it_alike(tag, exception):
    def derived(lines):
        _, events = run_lines(lines, derived=True)
        return sorted((e.kind, e.fields.get("exception"), tuple(e.fields.get("kinds", ())), e.fields.get("state"))
                      for e in events if e.kind not in ("engine_stats", "ready", "version"))

    whole = derived(SERVING + [tag + line for line in FRAMES] + [tag + exception])
    assert [k for k in whole if k[0] == "traceback"], whole
    for cut_at in (1, 2, 3):  # its start lost, then its first frame, then all its frames
        lines = SERVING + [tag + line for line in FRAMES[cut_at:]] + [tag + exception]
        got = derived(lines)
        assert got == whole, (cut_at, got, whole)


def test_an_exception_line_that_is_no_traceback_s_is_none():
    # inside a record (its header: an error record's own words), echoed, or glued to words: no traceback
    for line in ("(APIServer pid=1) ERROR 12-04 10:00:00 [serving.py:1] ValueError: bad request",
                 "(APIServer pid=1) INFO 12-04 10:00:00 [request_logger.py:1] Received request x: prompt: 'ValueError: x'",
                 "the worker said ValueError: x",
                 "(EngineCore pid=5) note: ValueError: x"):
        _, events = run_lines([line], derived=True)
        assert "traceback" not in {e.kind for e in events}, line
