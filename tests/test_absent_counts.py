"""What the log cannot say is absent, not zero: the request log's counts (aborts above all) exist only when
the log shows requests are logged, and the report says why a section is empty instead of a confident 0.
Lines are vLLM 0.32's (``entrypoints/serve/utils/api_utils.py`` "non-default args: %s", the request
logger's and AsyncLLM's records); the real runs are tests/fixtures/vllm-0.32-cpu/quiet_log and lora_tools."""

from __future__ import annotations

import json

from exporter.commands.report import read_run
from exporter.framing.clock import Clock
from exporter.metrics import Metrics
from tests.conftest import run_lines
from tests.helpers import samples

H = "(APIServer pid=10) INFO 12-05 10:00:00 "
ARGS = H + "[api_utils.py:286] non-default args: {'model_tag': '/m', 'model': '/m', 'max_model_len': 2048%s}"
READY = "INFO:     Application startup complete."
RECEIVED = (H + "[request_logger.py:65] Received request chatcmpl-1: params: SamplingParams(n=1, temperature=0.0, "
            "max_tokens=16), lora_request: None.")
ABORTED = H + "[async_llm.py:922] Aborted request(s) chatcmpl-2."


def series(lines: list[str]) -> dict:
    _, events = run_lines(lines, derived=True)
    m = Metrics(process_metrics=False)
    m.add_server("s")
    m.observe_many("s", events)
    return {n: v for (n, labels), v in samples(m.render().decode()).items()
            if n in ("vllm_log_request_aborts_total", "vllm_log_requests_logged_total")}


def test_aborts_are_absent_unless_the_log_shows_requests_are_logged():
    assert series([ARGS % "", READY]) == {}  # 0.32's default: no request log, no abort logged
    assert series([ARGS % ", 'enable_log_requests': True", READY]) == {"vllm_log_request_aborts_total": 0}
    # no arguments line (a log joined late, an old release logging by default): a record shows it is on
    assert series([READY, RECEIVED]) == {"vllm_log_request_aborts_total": 0, "vllm_log_requests_logged_total": 1}
    assert series([READY, ABORTED]) == {"vllm_log_request_aborts_total": 1}


def test_http_counts_are_absent_when_the_access_log_is_off():
    _, events = run_lines([ARGS % ", 'disable_uvicorn_access_log': True", READY], derived=True)
    m = Metrics(process_metrics=False)
    m.add_server("s")
    assert any(n == "vllm_log_http_requests_total" for n, _ in samples(m.render().decode()))  # born at 0 ...
    m.observe_many("s", events)
    s = samples(m.render().decode())
    assert not any(n == "vllm_log_http_requests_total" for n, _ in s)  # ... and gone when the log cannot hold them
    assert s[("vllm_log_access_log_disabled", frozenset({("server", "s"), ("reason", "flag")}))] == 1


def _report(tmp_path, lines: list[str]) -> dict:
    log = tmp_path / "vllm.log"
    log.write_text("\n".join(lines) + "\n")
    _, summary = read_run(str(log), Clock(year=2026), None, None)
    return json.loads(json.dumps(summary))


def test_the_report_says_the_access_log_was_off_not_that_nothing_was_answered(tmp_path):
    s = _report(tmp_path, [ARGS % ", 'disable_uvicorn_access_log': True", READY])
    assert s["http"]["responses"] is None and s["http"]["share_200"] is None
    assert "--disable-uvicorn-access-log" in s["http"]["why_empty"]
    from exporter.offline.report.markdown import render as markdown

    text = markdown(s)
    assert "the access log was off (--disable-uvicorn-access-log)" in text
    assert "No access-log lines in this range." not in text
    s = _report(tmp_path, [ARGS % ", 'uvicorn_log_level': 'warning'", READY])
    assert "--uvicorn-log-level above info" in s["http"]["why_empty"]
    # an access log that was on and logged nothing is a count of 0
    s = _report(tmp_path, [ARGS % "", READY])
    assert s["http"]["responses"] == 0 and "why_empty" not in s["http"]


def test_the_report_says_why_its_request_log_is_empty(tmp_path):
    s = _report(tmp_path, [ARGS % "", READY])
    assert s["request_log"] == {"why_empty": s["request_log"]["why_empty"]}
    assert "--enable-log-requests" in s["request_log"]["why_empty"]
    from exporter.offline.report.markdown import render as markdown

    assert "## Request log" in markdown(s) and "--enable-log-requests" in markdown(s)
    s = _report(tmp_path, [ARGS % ", 'enable_log_requests': True", READY])
    assert s["request_log"] == {}  # on, and nothing came: nothing to say
    s = _report(tmp_path, [READY, RECEIVED])
    assert s["request_log"] == {"lora": {"(base model)": 1}}
