from datetime import datetime, timezone
from zoneinfo import ZoneInfo

import pytest

from exporter.framing.clock import Clock
from exporter.framing.frame import frame_general, frame_line, strip_ansi

UTC = ZoneInfo("UTC")


def utc(*args) -> float:
    return datetime(*args, tzinfo=timezone.utc).timestamp()


@pytest.fixture
def uclock():
    return Clock(year=2026, tz=UTC)


def test_journald_prefix_and_vllm_header(uclock):
    f = frame_line(
        "Aug 04 02:44:21 compute-server grandpa[572062]: (EngineCore pid=179) INFO 08-04 02:44:21 "
        "[kv_cache_utils.py:2428] GPU KV cache size: 285,336 tokens",
        uclock,
    )
    assert (f.host, f.unit, f.process, f.pid) == ("compute-server", "grandpa", "EngineCore", 179)
    assert (f.level, f.logger) == ("INFO", "kv_cache_utils.py:2428")
    assert f.message == "GPU KV cache size: 285,336 tokens"
    assert f.ts == utc(2026, 8, 4, 2, 44, 21) and f.ts_source == "journald"


def test_journald_month_in_host_locale(uclock):
    f = frame_line("авг 18 14:15:04 llm python3[28059]: INFO 08-18 14:15:04 [loggers.py:123] x", uclock)
    assert f.ts == utc(2026, 8, 18, 14, 15, 4)
    assert f.unit == "python3"
    f = frame_line("Dez  3 01:02:03 h vllm[1]: INFO 12-03 01:02:03 [a.py:1] y", uclock)
    assert f.ts == utc(2026, 12, 3, 1, 2, 3)


def test_rfc3339_wins_over_journald_and_vllm(uclock):
    f = frame_line("2026-05-12T08:01:39.331095044Z (APIServer pid=1) INFO 05-12 10:01:39 [a.py:1] hello", uclock)
    assert f.ts == pytest.approx(utc(2026, 5, 12, 8, 1, 39) + 0.331095044)
    assert f.ts_source == "rfc3339"
    assert f.message == "hello"
    f = frame_line("2026-05-12T10:01:39+02:00 INFO 05-12 10:01:39 [a.py:1] hi", uclock)
    assert f.ts == utc(2026, 5, 12, 8, 1, 39)


def test_vllm_timestamp_when_nothing_else(uclock):
    f = frame_line("INFO 10-16 19:05:47 metrics.py:367] Avg prompt throughput: 1.0 tokens/s", uclock)
    assert f.ts == utc(2026, 10, 16, 19, 5, 47) and f.ts_source == "vllm"
    assert f.logger == "metrics.py:367"  # pre-0.8 header: no opening bracket
    assert f.message.startswith("Avg prompt")


def test_year_rolls_back_when_date_would_be_in_the_future():
    now = datetime(2026, 1, 5, 12, 0, tzinfo=timezone.utc).timestamp()
    c = Clock(tz=UTC, now=now)
    f = frame_line("INFO 12-31 23:59:59 [a.py:1] x", c)
    assert f.ts == utc(2025, 12, 31, 23, 59, 59)
    f = frame_line("INFO 01-05 11:00:00 [a.py:1] x", c)
    assert f.ts == utc(2026, 1, 5, 11, 0, 0)


def test_compose_and_kubectl_prefixes(uclock):
    f = frame_line("vllm-1  | (APIServer pid=1) INFO 05-12 10:01:39 [a.py:1] hi", uclock)
    assert f.unit == "vllm-1" and f.process == "APIServer" and f.message == "hi"
    f = frame_line("grandpa | INFO 05-12 10:01:39 [a.py:1] hi", uclock)
    assert f.unit == "grandpa" and f.message == "hi"
    f = frame_line("[pod/vllm-7d9c/vllm] INFO 05-12 10:01:39 [a.py:1] hi", uclock)
    assert f.unit == "vllm" and f.message == "hi"


@pytest.mark.parametrize(
    "coloured",
    [
        "\x1b[1;36m(VllmWorker rank=1 pid=219)\x1b[0;0m INFO 05-12 10:01:39 [a.py:1] hi",
        "[1;36m(VllmWorker rank=1 pid=219)[0;0m INFO 05-12 10:01:39 [a.py:1] hi",
        "^[[0;36m(VllmWorker rank=1 pid=219)^[[0;0m INFO 05-12 10:01:39 [a.py:1] hi",
        "#033[1;36m(VllmWorker rank=1 pid=219)#033[0;0m INFO 05-12 10:01:39 [a.py:1] hi",
        "(VllmWorker rank=1 pid=219) \x1b[32mINFO\x1b[0m \x1b[90m05-12 10:01:39\x1b[0m \x1b[90m[a.py:1]\x1b[0m hi",
    ],
)
def test_ansi_in_every_form(coloured, uclock):
    f = frame_line(coloured, uclock)
    assert (f.process, f.pid, f.level, f.message) == ("VllmWorker rank=1", 219, "INFO", "hi")


def test_bare_colour_codes_kept_when_line_was_not_coloured():
    assert strip_ansi("rate(x[5m]) is fine") == "rate(x[5m]) is fine"


def test_nested_process_tags_keep_the_innermost(uclock):
    f = frame_line("(EngineCore pid=925) (RayWorkerProc pid=8272) INFO 05-12 10:01:39 [a.py:1] hi", uclock)
    assert (f.process, f.pid) == ("RayWorkerProc", 8272)


# vLLM 0.32.0 CPU build, captured here by tools/capture_vllm_run.py (scenarios traffic and dp2): the
# multiprocessing name of a worker is "VllmWorker-0"; before the "-" was allowed, every line it
# logged was left unparsed.
_TAGGED = "WARNING 12-04 15:33:15 [vllm.py:725] Model Runner V2 requires Triton; using the V1 model runner instead."


@pytest.mark.parametrize("tag, process, pid", [
    ("(VllmWorker-0 pid=10614) ", "VllmWorker-0", 10614),  # the capture's
    ("(VllmWorker rank=0 pid=123) ", "VllmWorker rank=0", 123),
    ("(EngineCore_DP0 pid=1) ", "EngineCore_DP0", 1),  # the dp2 capture's
    ("(VLLM_DP_Coordinator pid=15899) ", "VLLM_DP_Coordinator", 15899),  # the dp2 capture's
    ("(SpawnProcess-1:2 pid=77) ", "SpawnProcess-1:2", 77),  # a nested multiprocessing name
])
@pytest.mark.parametrize("wrapper", ["", "Dec 04 15:33:15 cpu-host vllm[4242]: ", "2026-12-04T15:33:15.5Z "])
def test_process_names_with_dashes_and_ranks_are_framed_like_any_other(tag, process, pid, wrapper, uclock):
    line = wrapper + tag + _TAGGED
    f = frame_line(line, uclock)
    assert (f.process, f.pid, f.level, f.logger) == (process, pid, "WARNING", "vllm.py:725")
    assert f.message.startswith("Model Runner V2 requires Triton")
    assert f == frame_general(line, uclock)


def test_a_parenthesis_that_is_no_process_tag_stays_in_the_message(uclock):
    for text in ("(Vllm Worker-0 pid=1) hi", "(VllmWorker-0 pid=) hi"):
        f = frame_line(text, uclock)
        assert f.process is None and f.message.startswith("("), text
    # no process's tag, but a wrapper before the header, which is found behind it
    f = frame_line("(-x pid=1) INFO 05-12 10:01:39 [a.py:1] hi", uclock)
    assert (f.process, f.level, f.message, f.clean[:f.inner_at]) == (None, "INFO", "hi", "(-x pid=1) ")


def test_crlf_trailing_space_and_tqdm_redraws(uclock):
    f = frame_line("INFO 05-12 10:01:39 [a.py:1] hi   \r", uclock)
    assert f.message == "hi"
    f = frame_line("(Worker_TP0 pid=264) \rCapturing CUDA graphs: 10%\rCapturing CUDA graphs: 100%", uclock)
    assert f.process == "Worker_TP0" and f.message == "Capturing CUDA graphs: 100%"


def test_uvicorn_prefix_and_date_less_header(uclock):
    f = frame_line('(APIServer pid=1) INFO:     ::1:51556 - "GET /health HTTP/1.1" 200 OK', uclock)
    assert f.uvicorn and f.level == "INFO" and f.message.startswith("::1:51556")
    f = frame_line("(Worker_TP0 pid=496) INFO [quant_config.py:75] DeepSeek V4 expert_dtype", uclock)
    assert f.logger == "quant_config.py:75" and f.ts is None


def test_user_logging_config_header(uclock):
    f = frame_line("2024-12-19 21:40:35 ERROR 56542 [async_llm_engine.py:64] Engine background task failed", uclock)
    assert f.level == "ERROR" and f.logger == "async_llm_engine.py:64"
    assert f.message == "Engine background task failed"
    assert f.ts == utc(2024, 12, 19, 21, 40, 35)


def test_line_with_nothing_recognisable_is_left_alone(uclock):
    f = frame_line("just some text", uclock)
    assert f.message == "just some text" and f.level is None and f.ts is None


# The one-match journald shape must frame every line exactly as the general loop does.
from hypothesis import given, settings, strategies as st

from exporter.framing.frame import frame_general
from tests.conftest import FIXTURES, SAMPLE, SAMPLE_V0

from tests.wrapped import rewrapped  # noqa: E402

_REAL = (SAMPLE.read_text(encoding="utf-8").splitlines() + SAMPLE_V0.read_text(encoding="utf-8").splitlines()
         + (FIXTURES / "seed_article.log").read_text(encoding="utf-8").splitlines())
_REAL += rewrapped(_REAL)  # (the common shapes behind no wrapper, an RFC 3339 stamp, a node log's tag)


def test_fast_shape_agrees_on_real_lines(uclock):
    for line in _REAL:
        assert frame_line(line, uclock) == frame_general(line, uclock), line


@settings(max_examples=3000, deadline=None)
@given(st.sampled_from(_REAL), st.lists(st.tuples(st.integers(0, 120), st.sampled_from(
    ["", "(", ")", "(X pid=1) ", "(X-0 pid=1) ", "[", "]", " ", "0m", "[0;0m", "авг", "Zzz", "INFO ", "32", ":", "|",
     "-", "\r", "\t", "T", "Z", "+02:00", "stdout F ", "P", ".5", "٣", "2026-13-40T25:61:61Z "])),
    max_size=3))
def test_fast_shape_agrees_with_the_general_loop(line, edits):
    clock = Clock(year=2026, tz=UTC)
    for pos, text in edits:
        line = line[:pos] + text + line[pos + 1:]
    assert frame_line(line, clock) == frame_general(line, clock)


# --- wrappers of log viewers, CI runners, collectors and embedding frameworks (issue 28) ----------

def test_viewer_stamp_and_bar_is_a_wrapper_with_local_time(uclock):
    # A viewer that puts its own dated stamp and a bar in front of each container line.
    f = frame_line("2025-06-03 10:11:12.123 | (APIServer pid=1) INFO 06-03 10:11:12 [loggers.py:123] "
                   "Engine 000: Avg prompt throughput: 1.0 tokens/s", uclock)
    assert f.process == "APIServer" and f.level == "INFO" and f.logger == "loggers.py:123"
    assert f.message.startswith("Engine 000: Avg prompt")
    assert f.ts == utc(2025, 6, 3, 10, 11, 12) + 0.123 and f.ts_source == "local"
    # with a zone it is an RFC 3339 stamp; then a padded compose name inside it
    f = frame_line("2025-06-03T10:11:12,5+02:00 | vllm-1      | INFO 06-03 08:11:12 [a.py:1] hi", uclock)
    assert f.ts == utc(2025, 6, 3, 8, 11, 12) + 0.5 and f.ts_source == "rfc3339"
    assert f.unit == "vllm-1" and f.message == "hi"


def test_a_bar_inside_vllm_s_own_message_is_no_wrapper(uclock):
    line = "(VllmWorker rank=0 pid=7) Loading safetensors checkpoint shards: 100% Completed | 1/1 [00:00<00:00]"
    f = frame_line(line, uclock)
    assert f.message == "Loading safetensors checkpoint shards: 100% Completed | 1/1 [00:00<00:00]"
    f = frame_line("INFO 06-03 10:11:12 [a.py:1] 2025-06-03 10:11:12 | not a wrapper", uclock)
    assert f.message == "2025-06-03 10:11:12 | not a wrapper"
    # a date without a time is no stamp either (the header behind it is found; its time is the header's)
    f = frame_line("2025-06-03 | INFO 06-03 10:11:12 [a.py:1] hi", uclock)
    assert f.message == "hi" and f.level == "INFO" and f.ts_source == "vllm"


def test_bracketed_ci_stamp(uclock):
    # Buildkite's stamp, as in vllm-project/vllm#22587's log:
    # "[2025-08-12T08:42:31Z] (EngineCore_0 pid=13564) DEBUG 08-12 01:42:31 [core.py:464] Has DP Coordinator: ..."
    f = frame_line("[2025-08-12T08:42:31Z] (EngineCore_0 pid=13564) DEBUG 08-12 01:42:31 [core.py:464] "
                   "Has DP Coordinator: False, stats publish address: None", uclock)
    assert f.process == "EngineCore_0" and f.pid == 13564 and f.level == "DEBUG"
    assert f.ts == utc(2025, 8, 12, 8, 42, 31) and f.ts_source == "rfc3339"
    assert f.message == "Has DP Coordinator: False, stats publish address: None"


@pytest.mark.parametrize("name", ["vllm", "vllm-server", "llm.gpu0", "Qwen3_32B"])
def test_collector_service_prefix(name, uclock):
    f = frame_line(f"[{name}]: (APIServer pid=1) ERROR 06-03 10:11:12 [core.py:1] EngineCore encountered a fatal error.",
                   uclock)
    assert f.unit == name and f.process == "APIServer" and f.level == "ERROR"
    assert f.message == "EngineCore encountered a fatal error."


def test_rank_prefix_is_not_a_service(uclock):
    f = frame_line("[rank0]: Traceback (most recent call last):", uclock)
    assert f.unit is None and f.message == "Traceback (most recent call last):"


def test_logging_cookbook_header_of_embedding_frameworks(uclock):
    # xorbitsai/inference#3787 (vLLM 0.9.1 inside Xinference):
    f = frame_line("2025-07-08 17:24:00 - vllm.engine.metrics - INFO - Avg prompt throughput: 2.8 tokens/s, "
                   "Avg generation throughput: 0.1 tokens/s, Running: 1 reqs, Swapped: 0 reqs, Pending: 0 reqs, "
                   "GPU KV cache usage: 0.2%, CPU KV cache usage: 0.0%.", uclock)
    assert f.level == "INFO" and f.logger == "vllm.engine.metrics"
    assert f.message.startswith("Avg prompt throughput: 2.8 tokens/s")
    assert f.ts == utc(2025, 7, 8, 17, 24, 0)


@pytest.mark.parametrize("tag, process, pid", [
    # LMCache#889: another field between the rank and the pid
    ("(VllmWorker rank=4 engine_index=0 pid=31778) ", "VllmWorker rank=4", 31778),
    # vllm-project/vllm#43009, verl#6583: vLLM's own process name with no pid
    ("(EngineCore) ", "EngineCore", None),
    ("(EngineCore_DP1) ", "EngineCore_DP1", None),
    ("(APIServer) ", "APIServer", None),
])
def test_process_tags_with_more_fields_or_no_pid(tag, process, pid, uclock):
    for wrapper in ("", "Dec 04 10:11:12 gpu1 vllm[9]: "):
        f = frame_line(wrapper + tag + "ERROR 12-04 10:11:12 [core.py:1] EngineCore encountered a fatal error.", uclock)
        assert (f.process, f.pid, f.level, f.message) == (process, pid, "ERROR", "EngineCore encountered a fatal error.")


@pytest.mark.parametrize("text", ["(Note) the server restarts", "(1) The process is killed", "(see below) x",
                                  "(Worker died) x"])
def test_a_parenthesis_without_pid_that_names_no_vllm_process_stays_text(text, uclock):
    assert frame_line(text, uclock).message == text and frame_line(text, uclock).process is None


@pytest.mark.parametrize("line, host, unit", [
    # journalctl --no-hostname (systemd/systemd#3166's paste)
    ("May 01 17:03:06 systemd[1]: fail-on-restart.service: Unit entered failed state.", None, "systemd"),
    # journalctl -o short-iso (bennettoxford/openprescribing#5431)
    ("2026-02-08T00:40:07.136808+00:00 largeweb2 systemd[1]: user@1021.service: A process of this unit has been "
     "killed by the OOM killer.", "largeweb2", "systemd"),
    # a syslog file's dated stamp with a space (home-assistant/operating-system#48)
    ("2026-06-25 15:41:19.454 homeassistant systemd[1]: systemd-tmpfiles-clean.service: Deactivated successfully.",
     "homeassistant", "systemd"),
    # a paste that lost the stamp (systemd/systemd#32203)
    ("systemd[1]: Failed to start foo.service - FooBar Service.", None, "systemd"),
])
def test_syslog_tags_without_host_with_iso_stamps_or_alone(line, host, unit, uclock):
    f = frame_line(line, uclock)
    assert (f.host, f.unit) == (host, unit)
    assert not f.message.startswith(("systemd[", "largeweb2", "homeassistant", "May "))


def test_a_word_and_a_bracketed_number_inside_a_message_is_no_tag(uclock):
    f = frame_line("INFO 12-04 10:00:00 [x.py:1] worker[3]: started", uclock)
    assert f.message == "worker[3]: started" and f.unit is None


@pytest.mark.parametrize("stamp", [
    "2026-12-31T23:59:60Z ",  # a leap second: read as :59, as the general loop reads it
    "2026-02-30T10:00:00Z ",  # no such day: the header's time
    "1800-01-01T00:00:00Z ",  # no plausible time: the header's
    "2026-08-04T10:00:00.000000001+05:30 stdout F ", "2026-08-04T10:00:00,5Z ", "2026-08-04T10:00:00-0800 ",
    "2026-08-04T10:00:00+2400 ",  # a zone Python refuses: the header's time
])
def test_a_stamped_record_is_framed_in_one_match_as_the_general_loop_frames_it(stamp, uclock):
    from exporter.framing.frame import common_match
    line = stamp + "(APIServer pid=7) INFO 12-31 23:59:58 [api_server.py:1] hello"
    assert frame_line(line, uclock) == frame_general(line, uclock), line
    assert (common_match(line) is not None) == ("," not in stamp), line  # (a comma's fraction: another wrapper)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(st.one_of(st.integers(1999, 2101), st.integers(1, 9999)), st.integers(0, 13), st.integers(0, 32), st.integers(0, 25),
                          st.integers(0, 61), st.integers(0, 61), st.sampled_from(["", ".5", ".000000001", ".999999"]),
                          st.sampled_from(["Z", "+05:30", "-0800", "+23:59", "-23:59", "+2400", "+00:00"])),
                min_size=1, max_size=8))
def test_stamps_of_any_date_and_zone_are_read_in_one_match_as_the_general_loop_reads_them(stamps):
    # one clock for all (its caches of minutes and days carry over from stamp to stamp, as in a stream)
    from exporter.framing.clock import Clock

    clock = Clock(year=2026)
    for y, mo, d, hh, mm, ss, frac, zone in stamps:
        line = f"{y:04d}-{mo:02d}-{d:02d}T{hh:02d}:{mm:02d}:{ss:02d}{frac}{zone} (APIServer pid=7) INFO 12-31 23:59:58 [a.py:1] hi"
        assert frame_line(line, clock) == frame_general(line, Clock(year=2026)), line


@pytest.mark.parametrize("zone, ts, source", [
    ("+0200", "2024-12-05T08:00:00+00:00", "rfc3339"), ("-0800", "2024-12-05T18:00:00+00:00", "rfc3339"),
    ("UTC", "2024-12-05T10:00:00+00:00", "rfc3339"), ("CET", None, "local"),
    # an offset Python refuses (24 hours or more): the stamp names no time, the header's is read, in the clock's year
    # (framing raised before: the line was counted unparsed)
    ("+9999", "2026-12-05T10:00:00+00:00", "vllm"), ("-2400", "2026-12-05T10:00:00+00:00", "vllm"),
])
def test_journalctl_short_full_zones_and_an_impossible_one(zone, ts, source, uclock):
    line = f"Thu 2024-12-05 10:00:00 {zone} gpu1 vllm[100]: (APIServer pid=1) INFO 12-05 10:00:00 [a.py:1] hi"
    f = frame_line(line, uclock)
    assert (f.host, f.unit, f.message, f.ts_source) == ("gpu1", "vllm", "hi", source)
    if ts is not None:
        assert f.ts == datetime.fromisoformat(ts).timestamp()
