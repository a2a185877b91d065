"""One failure logged by many processes is one error (exporter.incidents), in metrics and report alike."""

from exporter.framing import Clock
from exporter.incidents import DEATH_WINDOW_SECONDS, Deaths
from exporter.metrics import Metrics
from exporter.pipeline import Pipeline
from exporter.report.stats import RunStats
from tests.helpers import samples, value

BANNER = "(APIServer pid=53) INFO 08-04 02:43:00 [__init__.py:201] vLLM API server version 0.11.0"
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
    lines = [BANNER] + [d.format(t="02:45:00") for d in DEAD]
    lines += [d.format(t="02:45:01") for d in DEAD]  # still the same death
    lines += [BANNER] + [d.format(t="02:46:00") for d in DEAD]  # a new run, a new death
    s, stats = run(lines)
    assert value(s, "vllm_log_errors_total", kind="engine_dead") == 2
    assert value(s, "vllm_log_exporter_events_total", kind="engine_dead") == 9
    assert stats.errors["engine_dead"][0] == 2


def test_without_a_banner_signals_far_apart_are_two_deaths():
    d = Deaths()
    assert d.is_new(1000.0) and not d.is_new(1010.0) and not d.is_new(1005.0)
    assert d.is_new(1010.0 + DEATH_WINDOW_SECONDS + 1)
    d.started()
    assert d.is_new(None) and not d.is_new(None)


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
    from exporter.incidents import StartFailures

    t = StartFailures()
    assert t.signal(100.0, "other") == (True, [])            # "EngineCore failed to start."
    assert t.signal(100.5, "kv_cache_too_small") == (False, ["kv_cache_too_small"])  # its traceback says why
    assert t.signal(101.0, "other") == (False, [])           # "Engine core initialization failed"
    assert t.started() == []                                 # the next start: nothing left to count
    assert t.signal(500.0, "other") == (True, [])            # a failed start that never says why ...
    assert t.started() == ["other"]                          # ... is "other" once it is over
