"""One failure logged by many processes is one error (exporter.stream.incidents), in metrics and report alike."""

import pytest

from exporter.framing.clock import Clock
from exporter.parsers.events import Event
from exporter.stream.lifecycle import DEATH_WINDOW_SECONDS, FAILED_START_QUIET_SECONDS, Lifecycle
from exporter.metrics import Metrics
from exporter.stream.pipeline import Pipeline
from exporter.offline.report.stats import RunStats
from tests.helpers import samples, value

BANNER = "(APIServer pid=53) INFO 08-04 02:43:00 [__init__.py:201] vLLM API server version 0.11.0"
READY = "(APIServer pid=53) INFO:     Application startup complete."
DEAD = [
    "(EngineCore pid=179) ERROR 08-04 {t} [core.py:710] EngineCore encountered a fatal error.",
    "(APIServer pid=53) ERROR 08-04 {t} [async_llm.py:480] AsyncLLM output_handler failed.",
    "(EngineCore pid=179) ERROR 08-04 {t} [core_client.py:564] Engine core proc EngineCore died unexpectedly, shutting down client.",
]
GENERIC_TB = [
    "(APIServer pid=53) ERROR 08-04 02:50:00 [serving_chat.py:1000] Error in chat completion stream generator.",
    "(APIServer pid=53) Traceback (most recent call last):",
    '(APIServer pid=53)   File "/v/serving_chat.py", line 10, in gen',
    "(APIServer pid=53)     json.loads(x)",
    "(APIServer pid=53) json.decoder.JSONDecodeError: Expecting value: line 1 column 1 (char 0)",
    "(APIServer pid=53) INFO 08-04 02:50:09 [loggers.py:1] after",
]


def run(lines):
    m = Metrics(process_metrics=False)
    m.add_server("s")
    stats = RunStats()
    p = Pipeline(Clock(year=2026))
    events = []
    for line in lines:
        events.extend(p.feed(line)[1])
    events.extend(p.flush())
    for ev in events:
        m.observe("s", ev)
        stats.add(ev)
    return samples(m.render().decode()), stats


def test_a_death_logged_by_three_processes_is_one_and_a_restart_makes_the_next_one_new():
    lines = [BANNER, READY] + [d.format(t="02:45:00") for d in DEAD]
    lines += [d.format(t="02:45:01") for d in DEAD]  # still the same death
    lines += [BANNER, READY] + [d.format(t="02:46:00") for d in DEAD]  # a new run, a new death
    s, stats = run(lines)
    assert value(s, "vllm_log_errors_total", kind="engine_dead") == 2
    assert value(s, "vllm_log_exporter_events_total", kind="engine_dead") == 9
    assert stats.errors["engine_dead"][0] == 2


def derived(life, kind, ts, **fields):
    return [(e.kind, e.fields.get("reason")) for e in life.feed([Event(kind, fields, ts)])
            if e.kind in ("engine_death", "start_failed", "start_failure_reason", "server_stop")]


def test_without_a_banner_signals_far_apart_are_two_deaths():
    life = Lifecycle()
    assert derived(life, "engine_dead", 1000.0) == [("engine_death", None)]
    assert derived(life, "engine_dead", 1010.0) == [] and derived(life, "engine_dead", 1005.0) == []
    assert derived(life, "engine_dead", 1010.0 + DEATH_WINDOW_SECONDS + 1) == [("engine_death", None)]
    life.feed([Event("version", {"version": "x"}, None), Event("ready", {}, None)])
    assert derived(life, "engine_dead", None) == [("engine_death", None)]
    assert derived(life, "engine_dead", None) == []


def test_a_traceback_is_counted_as_traceback_only_when_it_is_none_of_the_named_kinds():
    oom = [
        "(EngineCore pid=179) Traceback (most recent call last):",
        '(EngineCore pid=179)   File "/v/gpu_model_runner.py", line 1, in f',
        "(EngineCore pid=179) torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB.",
        "(EngineCore pid=179) INFO 08-04 02:51:09 [loggers.py:1] after",
    ]
    s, stats = run(GENERIC_TB + oom)
    assert value(s, "vllm_log_errors_total", kind="traceback") == 1
    assert value(s, "vllm_log_errors_total", kind="oom") == 1
    assert value(s, "vllm_log_exporter_events_total", kind="traceback") == 2
    assert stats.errors["traceback"][0] == 1 and stats.errors["traceback"][2].startswith("json.decoder.JSONDecodeError")


def test_a_failed_start_logged_three_times_is_one_with_its_reason_and_one_without_any_is_other():
    life = Lifecycle()
    life.feed([Event("version", {"version": "x"}, 99.0)])
    assert derived(life, "startup_failure", 100.0, reason="other") == [("start_failed", "other")]
    assert derived(life, "startup_failure", 100.5, reason="kv_cache_too_small") == [
        ("start_failure_reason", "kv_cache_too_small")]                          # its traceback says why
    assert derived(life, "startup_failure", 101.0, reason="other") == []          # "Engine core initialization failed"
    assert derived(life, "version", 200.0) == []                                  # the next start: nothing left
    assert derived(life, "startup_failure", 201.0, reason="other") == [("start_failed", "other")]
    # a failed start that never says why is "other" once it is over: at the next start ...
    assert derived(life, "version", 300.0) == [("start_failure_reason", "other")]
    # ... when the log moves on past it without another signal ...
    assert derived(life, "startup_failure", 301.0, reason="other") == [("start_failed", "other")]
    assert derived(life, "log", 301.0 + FAILED_START_QUIET_SECONDS + 1) == [("start_failure_reason", "other")]
    assert derived(life, "startup_failure", 320.0, reason="kv_cache_too_small") == []  # over: nothing more
    # ... or at the end of the input
    life.feed([Event("version", {"version": "x"}, 400.0)])
    derived(life, "startup_failure", 401.0, reason="other")
    assert [(e.kind, e.fields["reason"]) for e in life.tick(None)] == [("start_failure_reason", "other")]
    assert life.tick(None) == []


def test_a_busy_window_after_a_stop_does_not_arm_the_stall_check():
    stop = "(APIServer pid=53) INFO 08-04 02:47:00 [launcher.py:254] [shutdown] API server: shutdown triggered"
    busy = ("(APIServer pid=53) INFO 08-04 02:47:01 [loggers.py:335] Engine 000: Avg prompt throughput: 10.0 tokens/s, "
            "Avg generation throughput: 50.0 tokens/s, Running: 3 reqs, Waiting: 0 reqs, GPU KV cache usage: 5.0%, "
            "Prefix cache hit rate: 0.0%")
    m = Metrics(process_metrics=False, stats_interval=10)
    m.add_server("s")
    p = Pipeline(Clock(year=2026))
    for line in (BANNER, READY, busy, stop, busy):
        m.observe_many("s", p.feed(line)[1])
    m.go_idle(10_000.0, log_time=True)  # long after: a busy engine would read stalled
    s = samples(m.render().decode())
    assert value(s, "vllm_log_engine_stalled", server="s", engine="0") == 0
    assert value(s, "vllm_log_server_stops_total", server="s") == 1
    assert value(s, "vllm_log_server_state", server="s", state="stopped") == 1


def _window(engine: int, sec: int, running: int) -> str:
    return (f"(APIServer pid=53) INFO 08-04 02:48:{sec:02d} [loggers.py:335] Engine {engine:03d}: Avg prompt throughput: "
            f"0.0 tokens/s, Avg generation throughput: {40.0 * running:.1f} tokens/s, Running: {running} reqs, "
            "Waiting: 0 reqs, GPU KV cache usage: 5.0%, Prefix cache hit rate: 0.0%")


def test_a_dp_engine_vllm_stopped_logging_while_another_logs_is_not_stalled():
    """vllm-ascend#10049: under data parallel the log leaves out engines that /metrics still has (vLLM
    logs an engine's window only when that engine sent outputs). Engine 1's last window counted a
    request, then it is never logged again while engine 0 keeps logging: no stall. When the whole
    server goes quiet after busy windows, it is one."""
    m = Metrics(process_metrics=False, stats_interval=10)
    m.add_server("s")
    p = Pipeline(Clock(year=2026))
    lines = [BANNER, READY, _window(0, 0, 2), _window(1, 0, 1)] + [_window(0, sec, 2) for sec in range(10, 60, 10)]
    for line in lines:
        m.observe_many("s", p.feed(line)[1])
    events = p.feed(_window(0, 59, 2))[1]
    m.observe_many("s", events)
    last = events[0].ts
    m.go_idle(last + 5, log_time=True)  # engine 1 silent for 59 s, engine 0 logged 5 s ago
    s = samples(m.render().decode())
    assert value(s, "vllm_log_engine_stalled", server="s", engine="1") == 0
    m.go_idle(last + 45, log_time=True)  # now both are silent after busy windows
    s = samples(m.render().decode())
    assert value(s, "vllm_log_engine_stalled", server="s", engine="0") == 1
    assert value(s, "vllm_log_engine_stalled", server="s", engine="1") == 1


# What a requested stop logs, by version (vLLM's entrypoints/launcher.py; 0.32: launchers/launcher.py
# and v1/engine/core.py): each makes the EngineDeadError after it part of the stop.
@pytest.mark.parametrize("stop", [
    "(APIServer pid=53) INFO 08-04 02:47:00 [launcher.py:254] [shutdown] API server: shutdown triggered",
    "(EngineCore pid=179) INFO 08-04 02:47:00 [core.py:1454] [shutdown] EngineCore: trigger received signal=SIGTERM",
    "(APIServer pid=53) INFO 08-04 02:47:00 [launcher.py:99] Shutting down FastAPI HTTP server.",
    "INFO 08-04 02:47:00 launcher.py:67] Gracefully stopping http server",
])
def test_every_versions_stop_line_makes_the_engine_dead_error_after_it_part_of_the_stop(stop):
    dead = "(APIServer pid=53) ERROR 08-04 02:47:01 [async_llm.py:906] AsyncLLM output_handler failed."
    s, stats = run([BANNER, READY, stop, dead])
    assert value(s, "vllm_log_errors_total", kind="engine_dead") == 0
    assert value(s, "vllm_log_server_stops_total", server="s") == 1 and stats.stops


def test_uvicorns_own_shutting_down_is_no_stop_a_death_before_it_stays_a_death():
    lines = [BANNER, READY, DEAD[0].format(t="02:45:00"), "(APIServer pid=53) INFO:     Shutting down",
             "(APIServer pid=53) INFO:     Finished server process [53]"]
    s, stats = run(lines)
    assert value(s, "vllm_log_errors_total", kind="engine_dead") == 1
    assert value(s, "vllm_log_server_stops_total", server="s") == 0


# A start that fails for a reason none of the known ones names, as vLLM 0.32 logs it on a CPU host
# asked for native KV offload (the worker's exception, its traceback, the engine core's failure):
# the wording of the exception is from vLLM 0.32's v1/worker/cpu_worker.py.
UNKNOWN_FAILED_START = [
    "(APIServer pid=1) INFO 12-04 15:37:00 [api_utils.py:347] vLLM API server version 0.32.0",
    "(Worker pid=9) ERROR 12-04 15:37:20 [multiproc_executor.py:812] WorkerProc hit an exception.",
    "(Worker pid=9) ERROR 12-04 15:37:20 [multiproc_executor.py:812] Traceback (most recent call last):",
    '(Worker pid=9) ERROR 12-04 15:37:20 [multiproc_executor.py:812]   File "/v/cpu_worker.py", line 88, in init_device',
    "(Worker pid=9) ERROR 12-04 15:37:20 [multiproc_executor.py:812]     raise Exception(",
    "(Worker pid=9) ERROR 12-04 15:37:20 [multiproc_executor.py:812] Exception: CPU Offloading is currently only "
    "supported on CUDA-alike and XPU GPUs",
    "(EngineCore pid=7) ERROR 12-04 15:37:21 [core.py:1510] EngineCore failed to start.",
]


def test_an_engine_that_dies_while_starting_is_one_failed_start_with_its_root_cause_not_a_death():
    s, stats = run(UNKNOWN_FAILED_START)
    assert value(s, "vllm_log_errors_total", kind="engine_dead") == 0
    assert value(s, "vllm_log_errors_total", kind="traceback") == 0  # the failed start's own
    assert value(s, "vllm_log_errors_total", kind="startup_failure") == 1
    assert value(s, "vllm_log_startup_failures_total", reason="other") == 1  # at the end of the input
    (sf,) = stats.startup_failures
    assert sf["reason"] == "other"
    assert sf["cause"] == "Exception: CPU Offloading is currently only supported on CUDA-alike and XPU GPUs"


def test_the_pushed_alert_of_a_failed_start_holds_its_root_cause():
    from exporter.alerts.from_events import Alerts

    p = Pipeline(Clock(year=2026))
    events = [e for line in UNKNOWN_FAILED_START for e in p.feed(line)[1]] + p.flush()
    alerts = Alerts()
    alerts.observe("s", events, now=0.0)
    (a,) = alerts.pending(now=0.0)  # released by its reason: no wait
    assert a.labels["alertname"] == "VllmStartupFailed" and a.annotations["reason"] == "other"
    assert "CPU Offloading is currently only supported on CUDA-alike and XPU GPUs" in a.annotations["description"]
