"""A worker's exception inside a call the engine answers is that call's failure, not a death; the
lifecycle decides deaths by what the engine core logs next. The lines are vLLM 0.32's, cut from the
capture tests/fixtures/vllm-0.32-cpu/lora_tools (a LoRA load from a path that does not exist, and a
collective_rpc of a method the worker lacks), the tracebacks shortened; the other wordings are 0.32's
format strings (``v1/engine/core.py`` "EngineCore encountered a fatal error.", ``entrypoints/openai/
models/serving.py`` "Failed to load LoRA '%s' resolved by %s: %s. Trying next resolver.")."""

from __future__ import annotations

from exporter.metrics import Metrics
from tests.conftest import run_lines
from tests.helpers import samples

READY = "INFO:     Application startup complete."
W = "(Worker pid=8038) ERROR 12-05 09:47:13 [multiproc_executor.py:1063] "
E = "(EngineCore pid=7792) ERROR 12-05 09:47:13 [core.py:1750] "
API = "(APIServer pid=6324) "
WORKER_RECORD = [
    W + "WorkerProc hit an exception.",
    W + "Traceback (most recent call last):",
    W + '  File "/v/vllm/v1/executor/multiproc_executor.py", line 1055, in _execute_worker_rpc',
    W + "    output = func(*args, **kwargs)",
    W + '  File "/v/vllm/lora/worker_manager.py", line 168, in _load_adapter',
    W + "    raise LoRAAdapterNotFoundError(",
    W + "vllm.exceptions.LoRAAdapterNotFoundError: Loading lora a3 failed: No adapter found for /tmp/x/no-such-adapter",
    W + "Traceback (most recent call last):",  # the note 0.32 adds (e.add_note(traceback.format_exc()))
    W + '  File "/v/vllm/lora/worker_manager.py", line 168, in _load_adapter',
    W + "    raise LoRAAdapterNotFoundError(",
    W + "vllm.exceptions.LoRAAdapterNotFoundError: Loading lora a3 failed: No adapter found for /tmp/x/no-such-adapter",
    W + "",
]
ENGINE_RECORD = [
    E + "Invocation of add_lora method failed",
    E + "Traceback (most recent call last):",
    E + '  File "/v/vllm/v1/engine/core.py", line 1740, in _invoke_utility_method',
    E + "    result = get_result()",
    E + "RuntimeError: Worker failed with error 'Loading lora a3 failed: No adapter found for /tmp/x/no-such-adapter', "
        "please check the stack trace above for the root cause",
]
ACCESS_404 = 'INFO:     127.0.0.1:60430 - "POST /v1/load_lora_adapter HTTP/1.1" 404 Not Found'
STATS = (API + "INFO 12-05 09:47:15 [loggers.py:335] Engine 000: Avg prompt throughput: 0.0 tokens/s, Avg generation "
         "throughput: 30.0 tokens/s, Running: 1 reqs, Waiting: 0 reqs, CPU KV cache usage: 0.1%, Prefix cache hit rate: 0.0%")
STOP = API + "INFO 12-05 09:47:41 [launcher.py:254] [shutdown] API server: shutdown triggered"
FATAL = "(EngineCore pid=7792) ERROR 12-05 09:47:13 [core.py:1017] EngineCore encountered a fatal error."


def metrics(lines: list[str]):
    _, events = run_lines(lines, derived=True)
    m = Metrics(process_metrics=False)
    m.add_server("s")
    m.observe_many("s", events)
    s = samples(m.render().decode())

    def val(name, **labels):
        return sum(v for (n, lbls), v in s.items() if n == name and all(dict(lbls).get(k) == w for k, w in labels.items()))
    return val, events


def derived(events) -> list[str]:
    return [e.kind for e in events if e.kind in ("engine_death", "server_stop", "start_failed")]


def test_a_failed_lora_load_is_a_load_failure_and_the_server_serves_on_to_a_routine_stop():
    val, events = metrics([READY, *WORKER_RECORD, *ENGINE_RECORD, ACCESS_404, STATS, STOP])
    assert derived(events) == ["server_stop"]
    assert val("vllm_log_errors_total") == 0  # neither traceback is an error: the call failed, not the server
    assert val("vllm_log_engine_call_failures_total", method="add_lora") == 1
    assert val("vllm_log_lora_adapter_events_total", event="load_failed") == 1
    assert val("vllm_log_server_state", state="stopped") == 1
    assert {e.fields.get("during") for e in events if e.kind in ("traceback", "engine_dead")} == {"call"}


def test_the_same_worker_exception_is_a_death_when_the_engine_core_dies_of_it():
    """The call was the engine's own step: the engine core logs its fatal error next, at once."""
    val, events = metrics([READY, *WORKER_RECORD, FATAL])
    (death,) = [e for e in events if e.kind == "engine_death"]
    assert death.fields["signature"] == "WorkerProc hit an exception"  # the first signal's words
    assert val("vllm_log_errors_total", kind="engine_dead") == 1 and val("vllm_log_engine_call_failures_total") == 0


def test_a_worker_exception_nothing_follows_is_an_error_not_a_death():
    val, events = metrics([READY, *WORKER_RECORD, STATS])
    assert derived(events) == [] and val("vllm_log_server_state", state="serving") == 1
    assert val("vllm_log_errors_total", kind="traceback") == 1  # what the engine lived through is still an error


def test_every_rank_s_exception_in_one_call_is_the_call_s():
    tp1 = [line.replace("(Worker pid=8038)", "(Worker_TP1 pid=8039)") for line in WORKER_RECORD]
    val, events = metrics([READY, *WORKER_RECORD, *tp1, *ENGINE_RECORD, STATS])
    assert derived(events) == [] and val("vllm_log_errors_total") == 0
    assert val("vllm_log_engine_call_failures_total") == 1


def test_a_failed_call_the_caller_lets_through_is_one_failure():
    """/collective_rpc (dev mode) lets the engine client's exception through to uvicorn, whose traceback ends
    with the failure message the engine core wrote (v1/engine/core_client.py raises it)."""
    e = E.replace("09:47:13", "09:47:20")
    caller = ["ERROR:    Exception in ASGI application", "Traceback (most recent call last):",
              '  File "/v/vllm/v1/engine/core_client.py", line 1291, in _call_utility_async',
              "    return await future",
              "Exception: Call to release_kv_cache_memory method failed: release_kv_cache_memory() requires a "
              "completed pause first"]
    lines = [READY, e + "Invocation of release_kv_cache_memory method failed", e + "Traceback (most recent call last):",
             e + '  File "/v/vllm/v1/engine/core.py", line 1031, in release_kv_cache_memory',
             e + "    raise RuntimeError(",
             e + "RuntimeError: release_kv_cache_memory() requires a completed pause first",
             API + "ERROR 12-05 09:47:20 [exception.py:16] Exception caught. Request id: None",
             'INFO:     127.0.0.1:34082 - "POST /release_kv_cache_memory HTTP/1.1" 500 Internal Server Error',
             *caller, STATS.replace("09:47:15", "09:47:21")]
    val, events = metrics(lines)
    assert val("vllm_log_errors_total") == 0 and derived(events) == []
    assert val("vllm_log_engine_call_failures_total", method="release_kv_cache_memory") == 1
    # the same caller's traceback with no failed call before it is an error
    val, _ = metrics([READY, *caller])
    assert val("vllm_log_errors_total", kind="traceback") == 1


def test_a_resolvers_failed_load_after_the_engines_is_one_failure():
    resolver = (API + "WARNING 12-05 09:47:13 [serving.py:339] Failed to load LoRA 'a3' resolved by FilesystemResolver: "
                "Call to add_lora method failed: Loading lora a3 failed. Trying next resolver.")
    val, _ = metrics([READY, *WORKER_RECORD, *ENGINE_RECORD, resolver, STATS])
    assert val("vllm_log_lora_adapter_events_total", event="load_failed") == 1
    val, _ = metrics([READY, resolver, STATS])  # a resolver's alone (an engine that logged nothing of it)
    assert val("vllm_log_lora_adapter_events_total", event="load_failed") == 1


def test_an_in_place_reload_is_a_reload_only():
    """0.31+: ``Reloaded LoRA adapter '%s' in place ...`` then ``Loaded new LoRA adapter`` for the same load."""
    reload = [API + "WARNING 12-05 09:47:13 [serving.py:217] Reloaded LoRA adapter 'a2' in place from the same path "
                    "'/tmp/a'. Prefix-cache blocks computed with its previous weights are not invalidated; load changed "
                    "weights from a new path to avoid reusing them.",
              API + "INFO 12-05 09:47:13 [serving.py:226] Loaded new LoRA adapter: name 'a2', path '/tmp/a'"]
    load = API + "INFO 12-05 09:47:30 [serving.py:226] Loaded new LoRA adapter: name 'a4', path '/tmp/b'"
    val, _ = metrics([READY, *reload, load])
    assert val("vllm_log_lora_adapter_events_total", event="reloaded") == 1
    assert val("vllm_log_lora_adapter_events_total", event="loaded") == 1  # a4's only


def test_a_record_from_the_same_call_site_with_other_arguments_starts_a_record_too():
    """Records of one call site in one second share their prefix; "Invocation of %s method failed" with
    another method is a family's line, so it starts a record (tests/test_record_bursts.py has the rest)."""
    h = "(EngineCore pid=90) ERROR 12-04 10:00:05 [core.py:1750] "

    def record(method: str, exc: str) -> list[str]:
        return [h + f"Invocation of {method} method failed", h + "Traceback (most recent call last):",
                h + '  File "/v/vllm/v1/engine/core.py", line 1740, in _invoke_utility_method',
                h + "    result = get_result()", h + exc]

    lines = record("add_lora", "RuntimeError: Worker failed with error 'Loading lora a3 failed', please check "
                               "the stack trace above for the root cause") + \
        record("release_kv_cache_memory", "RuntimeError: release_kv_cache_memory() requires a completed pause first")
    _, events = run_lines(lines)
    tbs = [e for e in events if e.kind == "traceback"]
    assert [t.fields["message"][:30] for t in tbs] == ["Worker failed with error 'Load", "release_kv_cache_memory() requ"]
    assert [e.fields["method"] for e in events if e.kind == "engine_call_failed"] == ["add_lora", "release_kv_cache_memory"]
