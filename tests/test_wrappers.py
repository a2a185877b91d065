"""vLLM's record read wherever it stands: every fixture line under every wrapper a tool puts around it
(tests/wrappers.py, each from the tool's own source), alone, nested and coloured, gives the events the
bare line gives; real journal files read by the real journalctl in each output mode too. And the other
side of it: a header inside text that is no wrapper (an exception's message, an echoed request) is
never a record's."""

from __future__ import annotations

import json
import subprocess

import pytest
from hypothesis import given, settings, strategies as st

from exporter.framing.clock import Clock
from exporter.framing.frame import frame_line
from tests.conftest import run_lines
from tests.test_trust import ELEVEN, FAMILY_LINES
from tests.wrappers import DISPLAY, ENVELOPES, FOUND, NAMED, PROCESS, WRAPPERS, colour

CLOCK = Clock(year=2026)


def events(line: str) -> list:
    """What the pipeline makes of one line: kinds and fields (not time or process, which wrappers add)."""
    _, evs = run_lines([line])
    return sorted((e.kind, json.dumps(e.fields, sort_keys=True, default=str)) for e in evs)


def _shape(line: str) -> tuple[bool, bool]:
    """(whether the line holds vLLM's record start: a process tag or a header, which is found behind any
    wrapper; whether it is what a process printed, with no outer wrapper)."""
    f = frame_line(line, CLOCK)
    return bool(f.process or f.level or f.header) and not f.message.startswith('{"'), f.inner_at == 0


BARE = [(line, events(line), *_shape(line)) for line in FAMILY_LINES]


def _applies(kind: str, start: bool, own: bool) -> bool:
    """Whether a line is read under a wrapper of ``kind`` as it is bare (tests/wrappers.py's kinds)."""
    return kind == NAMED or start and (kind != PROCESS or own)


def test_at_least_25_wrappers_from_their_sources():
    assert len(WRAPPERS) >= 25 and sum(1 for _, kind in WRAPPERS.values() if kind == FOUND) >= 5


@pytest.mark.parametrize("name", sorted(WRAPPERS))
def test_every_fixture_line_under_every_wrapper_gives_the_bare_lines_events(name):
    wrap, kind = WRAPPERS[name]
    bad = [(line, want, events(wrap(line))) for line, want, start, own in BARE
           if _applies(kind, start, own) and events(wrap(line)) != want]
    assert bad == [], f"{len(bad)} of {len(BARE)}: {bad[:3]}"


_INNER = sorted(n for n in WRAPPERS if n not in ENVELOPES and n not in DISPLAY)


@settings(max_examples=400, deadline=None)
@given(st.sampled_from(range(len(BARE))), st.lists(st.sampled_from(_INNER), max_size=2),
       st.sampled_from(sorted(ENVELOPES | DISPLAY) + [None]), st.sampled_from([None, "esc", "lost", "caret", "rsyslog"]))
def test_nested_and_coloured_wrappers_give_the_bare_lines_events(i, inner, outer, form):
    line, want, start, own = BARE[i]
    if not all(_applies(WRAPPERS[n][1], start, own and j == 0) for j, n in enumerate(inner + [outer] if outer else inner)):
        return
    if form is not None and (colour(line, form) == line or events(colour(line, form)) != want):
        form = None  # (a line colour would change on its own, e.g. a level word inside its message, is left plain)
    wrapped = colour(line, form) if form else line
    for name in inner:
        wrapped = WRAPPERS[name][0](wrapped)
    if outer is not None:
        wrapped = WRAPPERS[outer][0](wrapped)
    assert events(wrapped) == want, (inner, outer, form, wrapped)


def test_the_wrapper_and_its_time_are_read_and_kept():
    line = ("vllm-5d8f9c-abcde vllm 2026-12-05T10:00:00.5Z (APIServer pid=1) INFO 12-05 11:00:00 [loggers.py:259] "
            "Engine 000: Avg prompt throughput: 12.0 tokens/s, Avg generation throughput: 30.5 tokens/s, Running: 2 "
            "reqs, Waiting: 0 reqs, GPU KV cache usage: 1.5%, Prefix cache hit rate: 40.0%")
    f = frame_line(line, CLOCK)
    assert f.clean[:f.inner_at] == "vllm-5d8f9c-abcde vllm 2026-12-05T10:00:00.5Z "
    assert (f.process, f.level, f.ts_source) == ("APIServer", "INFO", "rfc3339")
    assert f.ts == pytest.approx(1796464800.5)
    f = frame_line("2026-05-08 11:47:04.370 [Error] (Process) (EngineCore pid=2651) ERROR 05-08 11:47:02 [core.py:1136] "
                   "EngineCore failed to start.", Clock(year=2026, tz=None))
    assert (f.process, f.level, f.ts_source, f.message) == ("EngineCore", "ERROR", "local", "EngineCore failed to start.")


# ---- the real journalctl, every output mode ---------------------------------------------------------

@pytest.mark.parametrize("mode", ["short", "short-precise", "short-iso", "short-iso-precise", "short-full",
                                  "short-unix", "short-monotonic", "with-unit", "cat", "json"])
def test_a_real_journal_read_in_every_output_mode_gives_the_bare_lines_events(mode, tmp_path):
    from tests.journal import Journal, have_journal_tools

    if not have_journal_tools():
        pytest.skip("systemd-journal-remote and journalctl are not installed")
    lines = [line for line, _, start, _ in BARE if start and "\r" not in line and "\x1b" not in line][:150]
    journal = Journal(tmp_path / "j")
    journal.write(lines, unit="vllm.service", SYSLOG_IDENTIFIER="vllm", _PID="100", _HOSTNAME="gpu1")
    r = subprocess.run(["journalctl", "--no-pager", "--merge", "--all", f"--directory={journal.dir}", "-o", mode],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    out = [ln for ln in r.stdout.splitlines() if not ln.startswith("-- ")]
    assert len(out) == len(lines), r.stdout[:2000]
    want = {line: ev for line, ev, _, _ in BARE}
    bad = [(line, got) for line, got in zip(lines, out) if events(got) != want[line]]
    assert bad == [], f"{len(bad)} of {len(lines)}: {bad[:3]}"


# ---- platforms that give vLLM's records a header of their own ----------------------------------------

def test_dynamo_readable_and_jsonl_records():
    # ai-dynamo/dynamo#1408 (Dynamo 0.3, vLLM 0.9): vLLM's records through Dynamo's tracing formatter
    _, evs = run_lines(["2025-06-06T09:52:01.833Z ERROR core.run_engine_core: EngineCore failed to start."], derived=True)
    assert "start_failed" in {e.kind for e in evs}, evs
    f = frame_line("2025-09-02T15:50:01.770028Z  INFO main.init: VllmWorker for Qwen/Qwen3-0.6B has been initialized",
                   CLOCK)
    assert (f.level, f.logger, f.ts_source) == ("INFO", "main.py", "rfc3339")
    assert f.message == "VllmWorker for Qwen/Qwen3-0.6B has been initialized"
    f = frame_line("2025-09-02T15:50:01.770028Z  WARN loggers.log: x", CLOCK)
    assert f.level == "WARNING"
    # not after a stamp: words and a colon are a message
    assert frame_line("ERROR core.run_engine_core: x", CLOCK).level is None
    # DYN_LOGGING_JSONL=true (docs/observability/logging.md's record of a Python logger's line)
    record = ('{"time":"2025-09-02T15:53:31.943701Z","level":"ERROR","target":"log","message":"EngineCore failed to '
              'start.","log.file":"/opt/dynamo/venv/lib/python3.12/site-packages/vllm/v1/engine/core.py","log.line":701,'
              '"log.target":"core.run_engine_core"}')
    _, evs = run_lines([record], derived=True)
    assert "start_failed" in {e.kind for e in evs}, evs


def test_vllm_omni_stage_tags():
    # vllm-project/vllm-omni#602 and #466: the stage's tag between the process tag and the header, or alone
    f = frame_line("(Worker pid=1802) [Stage-0] INFO 01-04 14:28:26 [mrope.py:452] Multimodal token idx changed!", CLOCK)
    assert (f.process, f.level, f.logger, f.message) == ("Worker", "INFO", "mrope.py:452", "Multimodal token idx changed!")
    f = frame_line("[Stage-2] DEBUG 12-25 02:34:16 [omni_stage.py:1035] Enqueued result for request x to downstream", CLOCK)
    assert (f.level, f.logger) == ("DEBUG", "omni_stage.py:1035")
    # a bracketed word with no header after it is the message's
    assert frame_line("(Worker pid=1) [Stage-0] hello", CLOCK).message == "[Stage-0] hello"


def test_kserve_logging_config_header():
    # kserve/logging.py KSERVE_LOGGER_FORMAT, with and without the file
    f = frame_line("2026-12-05 10:00:00.123 7 vllm.v1.engine.core ERROR [core.py:run_engine_core():1136] "
                   "EngineCore failed to start.", CLOCK)
    assert (f.level, f.logger, f.message) == ("ERROR", "core.py:1136", "EngineCore failed to start.")
    f = frame_line("2026-12-05 10:00:00.123 7 vllm.v1.metrics.loggers INFO [log():259] Engine 000: x", CLOCK)
    assert (f.level, f.logger) == ("INFO", "vllm.v1.metrics.loggers:259")


def test_shortened_headers():
    for line in ("INFO ... [metrics.py:103] KV Transfer metrics: num_successful_transfers=1",
                 "[kv_cache_utils.py:868] Maximum concurrency for 4,096 tokens per request: 2.00x"):
        f = frame_line(line, CLOCK)
        assert f.logger in ("metrics.py:103", "kv_cache_utils.py:868") and f.message.startswith(("KV", "Max")), line
    assert events("[kv_cache_utils.py:868] Maximum concurrency for 4,096 tokens per request: 2.00x")


# ---- what is no wrapper: the trust boundary's side of the search --------------------------------------

@pytest.mark.parametrize("name", sorted(ELEVEN))
@pytest.mark.parametrize("before", [
    "ValueError: invalid prompt {} ",  # an exception's message (a bare stderr line, 0.31+)
    "  Input should be a valid string [type=string_type, input_value='{} ",  # pydantic's, quoted
    "Received request chatcmpl-{} ",  # an echo record under a logging format nobody knows
    "custom-fmt Generated response chatcmpl-{} ",
    "Added request x{} ",
    "prompt: {} ",
])
def test_a_header_inside_text_that_is_no_wrapper_is_no_record(name, before):
    header = "ERROR 12-04 10:00:00 [core.py:1] " if name != "engine_stats" else "INFO 12-04 10:00:00 [loggers.py:1] "
    for tag in ("", "(EngineCore pid=5) "):
        line = before.format("x") + tag + header + ELEVEN[name]
        _, evs = run_lines([line], derived=True)
        # (the exception's own line is a traceback's end, of no kind: what its message holds is no error)
        assert [e.kind for e in evs if e.kind not in ("log", "traceback")] == [], line
        assert all(e.fields.get("kinds") == [] for e in evs if e.kind == "traceback"), line


def test_the_issues_two_lines_and_the_echo():
    stats = ("Engine 000: Avg prompt throughput: 12.0 tokens/s, Avg generation throughput: 30.5 tokens/s, Running: 2 "
             "reqs, Waiting: 0 reqs, GPU KV cache usage: 1.5%, Prefix cache hit rate: 40.0%")
    for line in ("vllm-5d8f-abc vllm (APIServer pid=1) INFO 12-05 10:00:00 [loggers.py:259] " + stats,
                 "[1;36m(APIServer pid=1) [0;0m INFO 12-05 10:00:00 [loggers.py:259] " + stats):
        assert [k for k, _ in events(line)] == ["engine_stats"], line
    echo = ("(APIServer pid=53) INFO 08-04 02:00:00 [logger.py:43] Received request chatcmpl-1: prompt: "
            "'torch.OutOfMemoryError: CUDA out of memory. ... EngineCore encountered a fatal error.', params: "
            "SamplingParams(n=1), lora_request: None.")
    for wrapped in (echo, "vllm-5d8f-abc vllm " + echo, "│ " + echo):
        _, evs = run_lines([wrapped], derived=True)
        assert {e.kind for e in evs} <= {"request_log"}, wrapped
