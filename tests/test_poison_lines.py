"""One guard for every path (issue 32 item 5): a line whose reading raises costs that line (counted as
unparsed, named in one warning line), never the source, its neighbours or an offline command.

The first test is the issue's own reproduction against the real daemon. The others need a line that
makes the code raise; since every such line found is fixed, they use a stand-in: a function of the
real pipeline patched to raise on lines holding POISON, as an unknown future bug would."""

import json
import subprocess
import sys

import pytest
from structlog.testing import capture_logs

from exporter.framing.clock import Clock
from exporter.metrics import Metrics
from exporter.stream.pipeline import PARSED, UNPARSED, Pipeline
from tests.conftest import ROOT
from tests.helpers import Exporter, wait_until

ACCESS = 'Aug 04 02:50:{s:02d} h vllm[1]: (APIServer pid=53) INFO:     10.0.0.1:5 - "GET /health?n={n} HTTP/1.1" 200 OK'
BIG_PID = 'Aug 04 02:50:00 h vllm[1]: (APIServer pid=' + "9" * 5000 + ') INFO:     10.0.0.1:5 - "GET /v1/models HTTP/1.1" 200 OK'
STATS = ("Aug 04 02:50:{s:02d} h vllm[1]: (APIServer pid=53) INFO 08-04 02:50:{s:02d} [loggers.py:271] Engine 000: Avg "
         "prompt throughput: 0.0 tokens/s, Avg generation throughput: 9.0 tokens/s, Running: 1 reqs, Waiting: 0 reqs, "
         "GPU KV cache usage: 1.9%, Prefix cache hit rate: 0.0%")
POISON = "POISON"


def good(n):
    return [ACCESS.format(s=i % 60, n=i) for i in range(n)]


def test_a_5000_digit_pid_first_or_last_in_a_batch_loses_no_neighbour_and_restarts_no_source(tmp_path):
    """Issue 32 item 5 as reported: the source failed and restarted, and 4 of 13 valid lines were lost."""
    log = tmp_path / "gp.log"
    log.write_text("")
    ex = Exporter("--source", f"gp={log}").start()
    try:
        with open(log, "a") as f:  # one write: one batch, the poison line its first and its last
            f.write("\n".join([BIG_PID] + good(13) + [BIG_PID]) + "\n")
        total = lambda: sum(ex.value("vllm_log_exporter_lines_total", server="gp", result=r) or 0  # noqa: E731
                            for r in ("parsed", "ignored", "unparsed"))
        wait_until(lambda: total() >= 15, 15, what="15 lines counted")
        assert ex.value("vllm_log_http_requests_total", server="gp", endpoint="/health") == 13
        assert ex.value("vllm_log_exporter_source_restarts_total", server="gp") == 0
    finally:
        stderr = ex.stop()
    assert "Traceback" not in stderr and "task failed" not in stderr, stderr


@pytest.fixture
def poisoned(monkeypatch):
    """Framing and the fast path raise on a line holding POISON (a stand-in for a bug nobody knows yet)."""
    import exporter.stream.fastpath as fastpath
    import exporter.stream.batch_reader as batch_reader
    import exporter.stream.pipeline as pipeline

    real_frame, real_classify = pipeline.frame_line, fastpath.classify

    def frame_line(line, *a, **kw):
        if POISON in line:
            raise ValueError("a stand-in bug")
        return real_frame(line, *a, **kw)

    def classify(line, *a, **kw):
        if POISON in line:
            raise ValueError("a stand-in bug in the fast path")
        return real_classify(line, *a, **kw)

    monkeypatch.setattr(pipeline, "frame_line", frame_line)
    monkeypatch.setattr(batch_reader, "frame_line", frame_line)  # (an access span's edge)
    monkeypatch.setattr(fastpath, "classify", classify)


def bad_collector():
    seen = []
    return seen, lambda lineno, line, error: seen.append((lineno, line[:20], type(error).__name__))


@pytest.mark.parametrize("where", ["first", "middle", "last"])
@pytest.mark.parametrize("kind", ["access", "stats", "text"])
def test_feed_batch_counts_a_poison_line_unparsed_wherever_it_stands_and_keeps_its_neighbours(poisoned, where, kind):
    poison = {"access": ACCESS.format(s=1, n=POISON), "stats": STATS.format(s=1) + POISON,
              "text": f"{POISON} (APIServer pid=53) WARNING 08-04 02:50:01 [x.py:1] hi"}[kind]
    lines = good(6) + [STATS.format(s=i) for i in range(6)]
    at = {"first": 0, "middle": 3, "last": len(lines)}[where]
    lines.insert(at, poison)
    seen, on_bad = bad_collector()
    p = Pipeline(Clock(year=2026), on_bad_line=on_bad)
    counts, events, access, span = p.feed_batch(lines)
    assert sum(ev.kind == "engine_stats" for ev in events) == 6
    if kind == "access":
        # counted by its tail on the raw line, as every access line of a clean batch: a response like
        # the others; framing it (for the batch's time span, at its edges) raised, so the span at that
        # edge is unknown and nothing else is lost
        assert counts[UNPARSED] == 0 and counts[PARSED] == 13 and sum(access.values()) == 7
        assert (span[0] is None) == (where == "first") and (span[1] is None) == (where == "last")
    else:
        assert counts[UNPARSED] == 1 and counts[PARSED] == 12 and sum(access.values()) == 6
        assert seen == [(at + 1, poison[:20], "ValueError")]


def test_feed_line_by_line_counts_a_poison_line_unparsed_and_goes_on(poisoned):
    seen, on_bad = bad_collector()
    p = Pipeline(Clock(year=2026), on_bad_line=on_bad)
    lines = [STATS.format(s=1), STATS.format(s=2) + POISON, STATS.format(s=3)]
    results = [p.feed(line, clean=True)[0] for line in lines] + [p.feed(lines[1])[0]]
    assert results == [PARSED, UNPARSED, PARSED, UNPARSED] and p.lineno == 4
    assert [s[0] for s in seen] == [2, 4]


def test_without_a_handler_the_bug_is_not_hidden(poisoned):
    """Tests feed pipelines without on_bad_line: there a parser bug must still fail the test."""
    with pytest.raises(ValueError):
        Pipeline(Clock(year=2026)).feed_batch(good(3) + [ACCESS.format(s=1, n=POISON)])


def test_cri_joining_and_the_lifecycle_are_inside_the_guard(monkeypatch):
    import exporter.framing.cri as cri
    import exporter.stream.lifecycle as lifecycle

    def joiner_feed(self, lines):
        raise ValueError("a stand-in bug in joining")

    real_feed = lifecycle.Lifecycle.feed

    def lifecycle_feed(self, events):
        if any(e.kind == "engine_stats" and e.fields.get("running") == 7 for e in events):
            raise ValueError("a stand-in bug in the lifecycle")
        return real_feed(self, events)

    monkeypatch.setattr(cri.CriJoiner, "feed", joiner_feed)
    monkeypatch.setattr(lifecycle.Lifecycle, "feed", lifecycle_feed)
    seen, on_bad = bad_collector()
    p = Pipeline(Clock(year=2026), on_bad_line=on_bad)
    stats7 = STATS.format(s=5).replace("Running: 1 reqs", "Running: 7 reqs")
    lines = ["2026-08-04T02:50:00Z stdout P part one ", STATS.format(s=4), stats7]
    counts, events, _, _ = p.feed_batch(lines)
    assert sum(counts.values()) == 3 and len(seen) == 1  # the joiner's failure named once, lines fed unjoined
    assert sorted(e.fields.get("running") for e in events if e.kind == "engine_stats") == [1, 7]


def test_the_runner_warns_in_one_line_without_a_traceback_and_counts_every_line(poisoned):
    from exporter.daemon.runners import SourceRunner

    class Source:
        name, path = "gp", "/var/log/gp.log"

    m = Metrics(process_metrics=False)
    runner = SourceRunner(Source(), m, Clock(year=2026))
    with capture_logs() as logs:
        for _ in range(3):
            runner.feed([ACCESS.format(s=1, n=POISON)] + good(5) + [STATS.format(s=2) + POISON])
    warnings = [e for e in logs if e["log_level"] == "warning"]
    assert len(warnings) == 1 and "exc_info" not in warnings[0]  # rate-limited, one line, no traceback
    w = warnings[0]
    # (the poison access line is counted by its tail, as a response; the stats line's framing raises)
    assert (w["source"], w["path"], w["line"]) == ("gp", "/var/log/gp.log", 7) and "ValueError" in w["error"]
    from tests.helpers import value

    text = m.render().decode()
    assert value(text, "vllm_log_exporter_lines_total", server="gp", result="unparsed") == 3
    assert value(text, "vllm_log_exporter_lines_total", server="gp", result="parsed") == 18
    assert value(text, "vllm_log_http_requests_total", server="gp", endpoint="/health") == 18


# The offline commands, each in a child whose pipeline has the stand-in bug patched in.
OFFLINE = """
import sys
import exporter.stream.pipeline as p
real = p.frame_line
def frame_line(line, *a, **kw):
    if "POISON" in line:
        raise ValueError("a stand-in bug")
    return real(line, *a, **kw)
p.frame_line = frame_line
fast = p.fastpath.classify
def classify(line, *a, **kw):  # (the fast path reads such a line without framing it: the bug is there too)
    if "POISON" in line:
        raise ValueError("a stand-in bug")
    return fast(line, *a, **kw)
p.fastpath.classify = classify
from exporter.cli import main
sys.exit(main(sys.argv[1:]))
"""


@pytest.mark.parametrize("command", ["parse", "parse --stats", "parse --explain", "report", "report --since 1785811000",
                                     "compare", "backfill"])
def test_offline_commands_exit_0_and_name_the_file_and_line_of_a_poison_line(tmp_path, command):
    log = tmp_path / "run.log"
    lines = good(5) + [STATS.format(s=i) for i in range(5)]
    lines.insert(3, "(APIServer pid=53) WARNING 08-04 02:50:01 [x.py:1] POISON")
    log.write_text("\n".join(lines) + "\n")
    args = command.split() + [str(log)]
    if command == "compare":
        args.append(str(log))
    if command == "backfill":
        args += ["-o", str(tmp_path / "out.om")]
    r = subprocess.run([sys.executable, "-c", OFFLINE, *args, "--year", "2026"], cwd=ROOT, capture_output=True,
                       text=True, timeout=60)
    assert r.returncode == 0 and "Traceback" not in r.stderr, r.stderr
    assert f"{log}:4: line could not be read, counted as unparsed (ValueError: a stand-in bug)" in r.stderr
    if command == "report":
        assert "5 access" in r.stdout or "200" in r.stdout
    if command == "parse":
        assert sum(json.loads(x)["kind"] == "engine_stats" for x in r.stdout.splitlines()) == 5
