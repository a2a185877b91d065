"""vLLM's JSON log records (issue 25 item 4): every family, traceback joining and the incident logic
on JSON records, bare and inside journald, compose and CRI wrappers.

No public paste of vLLM 0.34's JSON records exists: the three below were rendered from 0.34.0's own
formatter (vllm/logging_utils/formatter.py JSON_FORMAT, vllm/logger.py's record factory) under
python-json-logger 4.2.0 (see tests/fixtures/real_lines/issue25.yaml, docs/research/issue25-post-0.32.md).
"""

import json
import subprocess
import sys
from datetime import datetime, timezone
from zoneinfo import ZoneInfo

import pytest
import yaml

from exporter.framing.clock import Clock
from exporter.metrics import Metrics
from exporter.stream.pipeline import Pipeline
from tests.conftest import ROOT, run_lines
from tests.helpers import samples, value

REAL = {e["family"]: e["line"] for e in
        yaml.safe_load((ROOT / "tests" / "fixtures" / "real_lines" / "issue25.yaml").read_text())}
STATS, ERROR_TB, ACCESS, USER = (REAL["json_stats"], REAL["json_error_traceback"], REAL["json_access_log"],
                                 REAL["json_user_config"])
UTC = ZoneInfo("UTC")


def rec(message, **kw):
    base = {"asctime": "2026-12-04 18:07:07,802", "levelname": "INFO", "name": "vllm.entrypoints.openai.api_server",
            "processName": "MainProcess", "process": 1, "message": message, "vllm_process_name": "APIServer"}
    base.update(kw)
    return json.dumps(base)


def feed(lines, clock=None):
    p = Pipeline(clock or Clock(year=2026, tz=UTC))
    results, events = [], []
    for ln in lines:
        r, ev = p.feed(ln)
        results.append(r)
        events.extend(ev)
    events.extend(p.flush())
    return results, events


WRAPPERS = {
    "bare": lambda s: s,
    "journald": lambda s: "Dec 04 18:07:07 gpu1 vllm[4242]: " + s,
    "compose": lambda s: "vllm-1  | " + s,
    "cri": lambda s: "2026-12-04T18:07:07.900000000Z stdout F " + s,
}


@pytest.mark.parametrize("wrap", WRAPPERS)
def test_a_stats_record_is_an_engine_stats_event_with_the_record_s_level_process_and_time(wrap):
    results, events = feed([WRAPPERS[wrap](STATS)])
    (ev,) = [e for e in events if e.kind == "engine_stats"]
    assert results == ["parsed"] and ev.fields["running"] == 3 and ev.fields["kv_cache_usage"] == 0.123
    assert (ev.process, ev.pid) == ("APIServer", 1)
    if wrap == "cri":  # the runtime's RFC 3339 stamp is the better time
        assert ev.ts == datetime(2026, 12, 4, 18, 7, 7, 900000, tzinfo=timezone.utc).timestamp()
    else:
        assert ev.ts == pytest.approx(datetime(2026, 12, 4, 18, 7, 7, 802000, tzinfo=UTC).timestamp())


@pytest.mark.parametrize("wrap", WRAPPERS)
def test_an_exception_record_is_its_message_and_one_joined_traceback(wrap):
    _, events = feed([WRAPPERS[wrap](ERROR_TB)])
    kinds = [e.kind for e in events]
    assert kinds.count("traceback") == 1 and kinds.count("cuda_error") == 1 and kinds.count("engine_death") == 1
    (tb,) = [e for e in events if e.kind == "traceback"]
    assert tb.fields["exception"] == "RuntimeError" and tb.fields["where"] == "jsonrender.py:18 in <module>"
    assert tb.process == "EngineCore" and tb.pid == 185
    (err,) = [e for e in events if e.kind == "cuda_error"]
    assert "illegal memory access" in err.fields["message"] and '"' not in err.fields["message"][-3:]


def test_the_access_record_without_a_reason_phrase_is_counted():
    m = Metrics(process_metrics=False)
    m.add_server("s")
    _, events = feed([ACCESS, ACCESS.replace("200", "503", 1).replace('\\" 503', '\\" 503')])
    for e in events:
        m.observe("s", e)
    s = samples(m.render().decode())
    assert value(s, "vllm_log_http_requests_total", server="s", method="POST", endpoint="/v1/chat/completions",
                 status="200") == 1


def test_a_user_config_record_with_only_message_and_extras():
    _, (ev,) = run_lines([USER])
    assert ev.kind == "spec_decode" and ev.fields["accepted_tokens"] == 78 and ev.process == "APIServer"


def test_exc_info_as_a_list_and_two_records_in_the_same_millisecond_stay_two_tracebacks():
    tb = ["Traceback (most recent call last):", '  File "/x/core.py", line 3, in run', "    step()",
          "ValueError: boom"]
    a = rec("first", levelname="ERROR", exc_info=tb)
    b = rec("second", levelname="ERROR", exc_info="\n".join(tb[:-1] + ["KeyError: 'k'"]))
    _, events = feed([a, b])
    tbs = [e for e in events if e.kind == "traceback"]
    assert [t.fields["exception"] for t in tbs] == ["ValueError", "KeyError"]
    assert [e.fields["message"] for e in events if e.kind == "log"] == ["first", "second"]


def test_a_routine_stop_in_json_pages_nobody():
    """0.32+'s SIGTERM: the stop line, then an EngineDeadError traceback at ERROR: a stop, not a death."""
    dead_tb = ("Traceback (most recent call last):\n  File \"/v/async_llm.py\", line 9, in output_handler\n"
               "    outputs = await engine_core.get_output_async()\n"
               "vllm.v1.engine.exceptions.EngineDeadError: EngineCore encountered an issue. See stack trace (above) "
               "for the root cause.")
    lines = [rec("vLLM API server version 0.34.0"), rec("Application startup complete.", name="uvicorn.error"),
             rec("[shutdown] API server: shutdown triggered", name="vllm.entrypoints.launchers.launcher"),
             rec("AsyncLLM output_handler failed.", levelname="ERROR", name="vllm.v1.engine.async_llm",
                 exc_info=dead_tb)]
    _, events = run_lines(lines, derived=True)
    kinds = [e.kind for e in events]
    assert "server_stop" in kinds and "engine_death" not in kinds
    m = Metrics(process_metrics=False)
    m.add_server("s")
    for e in events:
        m.observe("s", e)
    s = samples(m.render().decode())
    assert value(s, "vllm_log_errors_total", server="s", kind="engine_dead") == 0
    assert value(s, "vllm_log_errors_total", server="s", kind="traceback") == 0


def test_otel_style_records_are_read_too():
    line = json.dumps({"timestamp": "2026-12-04T18:07:07.802Z", "severity_text": "WARN", "body":
                       "No available shared memory broadcast block found in 60 seconds.",
                       "resource": {"service.name": "vllm"}})
    _, (ev,) = run_lines([line])
    assert ev.kind == "shm_broadcast_wait"
    assert ev.ts == datetime(2026, 12, 4, 18, 7, 7, 802000, tzinfo=timezone.utc).timestamp()


@pytest.mark.parametrize("text", ['{"message": "unterminated', '{"a": 1}', '{"message": 5}', "[1, 2]",
                                  '{"message": "x", "exc_info": 7}', '{"levelname": "ERROR", "message": null}'])
def test_json_that_is_no_record_or_an_odd_one_never_crashes(text):
    results, _ = run_lines([text])
    assert results[0] in ("parsed", "ignored", "unparsed")


def test_parse_explain_shows_what_a_json_record_became():
    r = subprocess.run([sys.executable, "-m", "exporter", "parse", "--explain", "-", "--year", "2026"],
                       input="\n".join([STATS, ERROR_TB, ACCESS]) + "\n", capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    rows = [ln.split("\t") for ln in r.stdout.splitlines()]
    assert rows[0][1] == "parsed" and "engine_stats" in rows[0][2]
    assert "engine_dead" in rows[1][2] and "traceback" in rows[1][2] and "cuda_error" in rows[1][2]
    assert "access_log" in rows[2][2]


# The time keys of common JSON formatters (exporter.framing.json_records.TIME_KEYS), each the same
# instant: 2026-12-04T18:07:07.802341Z.
_T = 1796407627.802341


@pytest.mark.parametrize("key,value", [
    ("time", "2026-12-04T18:07:07.802341+00:00"),   # python-json-logger timestamp="time", Bunyan, slog
    ("timestamp", "2026-12-04T18:07:07.802341Z"),   # python-json-logger timestamp=True, structlog
    ("@timestamp", "2026-12-04T18:07:07.802341Z"),  # Logstash, ECS
    ("ts", _T),                                      # zap: epoch seconds
    ("time", int(_T * 1000)),                        # pino: epoch milliseconds
    ("created", _T),                                 # a dumped LogRecord
    ("asctime", "2026-12-04 18:07:07,802"),          # vLLM's own JSON_FORMAT (local time: UTC here)
])
def test_a_user_formatter_s_time_key_gives_the_record_its_time(key, value):
    record = {"levelname": "INFO", "name": "vllm.v1.metrics.loggers", "message": "Engine 000: Avg prompt throughput: "
              "1.0 tokens/s, Avg generation throughput: 2.0 tokens/s, Running: 1 reqs, Waiting: 0 reqs, GPU KV cache "
              "usage: 1.0%, Prefix cache hit rate: 0.0%", key: value}
    _, events = feed([json.dumps(record)])
    (ev,) = [e for e in events if e.kind == "engine_stats"]
    assert ev.ts == pytest.approx(_T, abs=0.001)
