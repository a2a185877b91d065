"""A bound on every logical line (issue 32 item 1): in every source, in Kubernetes' CRI parts and in
JSON records; what is cut is counted and said once per source, and the line's facts that survive
(its level, its exception at the end) still count. The daemon under a real memory cgroup of half the
chart's limit reads each line that crash-looped it, with its state file."""

import json
import re
import time

import pytest
from structlog.testing import capture_logs

from exporter.config import settings
from exporter.framing import lines as lines_mod
from exporter.framing.clock import Clock
from exporter.framing.cri import CriJoiner
from exporter.framing.lines import MAX_LINE_BYTES, MAX_RECORD_LINES, LineSplitter, cut_line
from exporter.sources.container import Demuxer
from exporter.sources.journald import entry_to_lines
from exporter.stream.pipeline import MAX_PROCESSES, Pipeline
from exporter.stream.traceback import MAX_EXCEPTIONS
from tests.helpers import Exporter, MemoryCgroup, peak_rss_bytes, wait_until
from tests.hostile import OOM_LINE, json_exc_list, json_newlines, write_cri_giant, write_plain_giant


def test_the_config_s_bounds_are_framing_s():
    assert (settings.MAX_LINE_BYTES, settings.MIN_LINE_BYTES, settings.MAX_MAX_LINE_BYTES) == \
        (lines_mod.MAX_LINE_BYTES, lines_mod.MIN_LINE_BYTES, lines_mod.MAX_MAX_LINE_BYTES)


def cri(tag, text):
    return f"2026-08-04T02:50:00Z stderr {tag} {text}"


def test_cri_parts_are_joined_up_to_the_bound_then_cut_and_counted():
    cuts = []
    j = CriJoiner(MAX_LINE_BYTES, cuts.append)
    parts = [cri("P", "x" * 16384) for _ in range(512)]  # an 8 MiB logical line
    out = j.feed(parts) + j.feed([cri("F", OOM_LINE)])
    assert len(out) == 1 and len(out[0]) <= MAX_LINE_BYTES + 40
    assert out[0].endswith(OOM_LINE) and cuts == [512 * 16384 + len(OOM_LINE)]


def test_an_unending_cri_line_holds_no_more_than_the_bound_while_it_runs():
    j = CriJoiner(MAX_LINE_BYTES)
    for _ in range(20):
        j.feed([cri("P", "x" * 16384) for _ in range(64)])
        held = sum(len(p.head or "") + len(p.tail) + sum(map(len, p.texts)) for p in j.pending.values())
        assert held <= 2 * MAX_LINE_BYTES


def test_an_oom_in_a_huge_cri_line_still_counts(clock):
    # (an error counts only at the start of its message: the trust boundary; the head is kept)
    cuts = []
    p = Pipeline(clock, on_cut=cuts.append)
    counts, events, _, _ = p.feed_batch([cri("P", "(EngineCore_DP0 pid=7) ERROR 08-04 02:50:00 [core.py:1] "
                                             "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate ")]
                                        + [cri("P", "x" * 16384) for _ in range(200)] + [cri("F", " 2.00 GiB")])
    assert sum(counts.values()) == 1 and len(cuts) == 1
    assert [e.kind for e in events if e.kind == "oom"] == ["oom"]


@pytest.mark.parametrize("record", ["exc_list", "newlines"])
def test_a_json_record_of_a_million_lines_keeps_its_first_and_last_thousand(clock, record):
    line = json_exc_list() if record == "exc_list" else json_newlines()
    cuts = []
    p = Pipeline(clock, on_cut=cuts.append)
    seen = []
    import exporter.stream.pipeline as pipeline

    real = p._framed
    p._framed = lambda *args: (lambda got: (seen.append(len(got[0])), got)[1])(real(*args))
    result, events = p.feed(line)
    events += p.flush()
    assert seen == [MAX_RECORD_LINES] and len(cuts) == 1 and pipeline.UNPARSED != result
    if record == "exc_list":  # the exception at the end of the traceback is still read
        assert "oom" in {e.kind for e in events}


def test_a_json_record_longer_than_the_bound_keeps_its_head_and_tail_and_stays_a_record(clock):
    exc = "Traceback (most recent call last):\n" + '  File "x.py", line 1, in f\n' * 200_000 \
        + "torch.OutOfMemoryError: CUDA out of memory."
    rec = json.dumps({"levelname": "ERROR", "name": "vllm.v1.engine.core", "message": "EngineCore hit an exception",
                      "exc_info": exc}).encode()
    assert len(rec) > 4 * MAX_LINE_BYTES
    split = LineSplitter("t", on_cut=lambda n: None)
    got = []
    for i in range(0, len(rec), 65536):
        got += split.feed(rec[i:i + 65536])
    got += split.feed(b"\n")
    assert len(got) == 1 and len(got[0].encode()) <= MAX_LINE_BYTES and got[0] == cut_line(rec, MAX_LINE_BYTES)
    json.loads(got[0])  # the cut fell inside one string: still a record
    p = Pipeline(clock)
    events = p.feed(got[0])[1] + p.flush()
    assert {"traceback", "oom"} <= {e.kind for e in events}


def test_a_splitter_in_a_cut_line_holds_the_bound_and_checkpoints_at_the_line_s_start():
    split = LineSplitter("t", max_line=1 << 16, on_cut=lambda n: None)
    assert split.feed(b"first\n" + b"z" * 100) == ["first"]
    for _ in range(200):
        assert split.feed(b"z" * 65536) == []
        assert len(split.head) + len(split.tail) + len(split.buf) <= (1 << 16) + 1  # (the tail keeps one byte more)
    assert split.held == 100 + 200 * 65536  # a restart reads the line again from its start, cut again
    assert split.feed(b"end\nnext\n") == [cut_line(b"z" * (100 + 200 * 65536) + b"end", 1 << 16), "next"]
    assert split.held == 0


def test_a_journal_message_is_bounded_in_bytes_and_lines():
    cuts = []
    got = entry_to_lines({"MESSAGE": "a" * (3 << 20) + "\nb"}, MAX_LINE_BYTES, cuts.append)
    assert max(map(len, got)) <= MAX_LINE_BYTES and got[-1] == "b" and len(cuts) == 1
    assert len(entry_to_lines({"MESSAGE": "\n" * 10 ** 6}, MAX_LINE_BYTES, cuts.append)) == MAX_RECORD_LINES


def test_a_container_frame_announcing_gigabytes_is_passed_on_as_it_arrives():
    d = Demuxer()
    header = bytes([1, 0, 0, 0]) + (4 << 30 - 1).to_bytes(4, "big")
    out = d.feed(header + b"x" * 1000)
    for _ in range(100):
        out += d.feed(b"y" * 65536)
        assert len(d.buf) < 8
    assert len(out) == 1000 + 100 * 65536


def test_a_traceback_keeps_a_bounded_part_of_each_exception_line(clock):
    p = Pipeline(clock)
    lines = ["Traceback (most recent call last):", '  File "x.py", line 1, in f']
    for i in range(200):
        lines += [f"ValueError: {i} " + "v" * 100_000, "Traceback (most recent call last):", '  File "x.py", line 1, in f']
    for line in lines:
        p.feed(line)
    (tb,) = p._tracebacks.values()
    assert len(tb.exceptions) <= MAX_EXCEPTIONS and sum(len(x) for e in tb.exceptions for x in e) < 200_000
    (ev,) = [e for e in p.flush() if e.kind == "traceback"]
    assert ev.fields["chain_length"] == 200 and ev.fields["root_message"].startswith("0 ")


def test_endless_processes_cannot_grow_the_pipeline_s_memory(clock):
    p = Pipeline(clock)
    for i in range(3 * MAX_PROCESSES):
        p.feed(f"(P{i} pid={i}) ERROR 08-04 02:50:00 [core.py:1] Traceback (most recent call last):")
        p.feed(f"(E{i} pid={i}) INFO 08-04 02:50:00 [loggers.py:1] Engine 001: Avg prompt throughput: 0.0 tokens/s, "
               "Avg generation throughput: 1.0 tokens/s, Running: 1 reqs, Waiting: 0 reqs, GPU KV cache usage: 1.0%, "
               "Prefix cache hit rate: 0.0%")
        assert len(p._tracebacks) <= MAX_PROCESSES and len(p._engine_of) <= MAX_PROCESSES


def total_lines(ex, server):
    return sum(ex.value("vllm_log_exporter_lines_total", server=server, result=r) or 0
               for r in ("parsed", "ignored", "unparsed"))


def test_the_daemon_counts_cut_lines_warns_once_per_source_and_takes_the_flag(tmp_path):
    log = tmp_path / "gp.log"
    log.write_text("")
    ex = Exporter("--source", f"gp={log}", "--max-line-bytes", "65536").start()
    try:
        with open(log, "a") as f:
            for _ in range(3):
                f.write(json.dumps({"levelname": "ERROR", "name": "vllm.core", "message": "boom",
                                    "exc_info": "Traceback (most recent call last):\n" + "  f\n" * 50_000
                                    + "torch.OutOfMemoryError: CUDA out of memory."}) + "\n")
        wait_until(lambda: total_lines(ex, "gp") == 3, 20, what="three lines")
        assert ex.value("vllm_log_exporter_lines_truncated_total", server="gp") == 3
        assert ex.value("vllm_log_errors_total", server="gp", kind="oom") == 3
    finally:
        stderr = ex.stop()
    assert len(re.findall("line longer than --max-line-bytes", stderr)) == 1, stderr


@pytest.mark.parametrize("value,ok", [("16384", True), ("67108864", True), ("16383", False), ("x", False)])
def test_max_line_bytes_from_flag_env_and_file_is_checked(tmp_path, value, ok):
    import subprocess
    import sys

    from tests.conftest import ROOT

    cfg = tmp_path / "c.yaml"
    cfg.write_text(f"max_line_bytes: {value}\nsources: [{{name: a, type: stdin}}]\n")
    for args, env in ((["--max-line-bytes", value, "--source", "-"], {}),
                      (["--source", "-"], {"VLLM_LOG_EXPORTER_MAX_LINE_BYTES": value}),
                      (["--config", str(cfg)], {})):
        import os

        r = subprocess.run([sys.executable, "-c", "import sys; from exporter.cli import build_parser; "
                            "from exporter.config.flags import build; "
                            "print(build(build_parser().parse_args(['serve'] + sys.argv[1:])).max_line_bytes)", *args],
                           cwd=ROOT, capture_output=True, text=True, timeout=30, env={**os.environ, **env})
        if ok:
            assert r.returncode == 0 and r.stdout.strip() == value, r.stderr
        else:
            assert r.returncode != 0 and "max_line_bytes" in r.stderr.lower().replace("-", "_"), r.stderr


HALF_THE_CHART = 128 << 20  # deploy/helm/vllm-log-exporter/values.yaml: limits.memory 256Mi


@pytest.mark.skipif(not MemoryCgroup.available(), reason="no writable cgroup v1 memory controller here")
def test_under_half_the_chart_s_memory_limit_no_single_line_kills_the_daemon_and_its_state_passes_it(tmp_path):
    """The crash-loop of the issue: the line OOM-killed the pod, the saved offset never passed it."""
    log, state = tmp_path / "gp.log", tmp_path / "state.json"
    log.write_text("")
    write_cri_giant(log, 40 << 20)  # (the bench runs the 93 MB one)
    with open(log, "a") as f:
        f.write(json_exc_list() + "\n" + json_newlines() + "\n")
    write_plain_giant(log, 40 << 20)
    with open(log, "a") as f:
        f.write(OOM_LINE + "\n")
    size = log.stat().st_size
    with MemoryCgroup(HALF_THE_CHART) as cg:
        for run in range(2):  # and again after a restart, from the state file
            ex = Exporter("--source", f"gp={log}", "--from-start", "--state-file", str(state),
                          wrapper=cg.prefix).start()
            try:
                if run == 0:
                    wait_until(lambda: total_lines(ex, "gp") == 5, 60, what="the five lines")
                    assert ex.value("vllm_log_exporter_lines_truncated_total", server="gp") == 4
                    assert ex.value("vllm_log_errors_total", server="gp", kind="oom") >= 2
                else:
                    time.sleep(1.0)
                    assert total_lines(ex, "gp") == 0  # resumed after them: nothing read twice
                peak = peak_rss_bytes(ex.proc.pid)
            finally:
                ex.stop()
            assert ex.proc.returncode in (0, -15), ex.proc.returncode  # stopped, not killed by the limit
            assert cg.oom_kills == 0 and peak < HALF_THE_CHART
    assert json.loads(state.read_text())["sources"]["gp"]["checkpoint"]["offset"] == size
