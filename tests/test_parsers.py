"""Each family against lines built from vLLM's format strings across releases (our own fixtures)."""

import pytest

from tests.conftest import one, run_lines

GIB = 2**30
MIB = 2**20


# ---- engine_stats --------------------------------------------------------------------------

def test_v1_stats_with_optional_segments_in_any_order():
    e = one("INFO 06-16 10:03:14 [loggers.py:335] Engine 001: Avg prompt throughput: 12.5 tokens/s, "
            "Avg generation throughput: 834.0 tokens/s, Running: 7 reqs, Waiting: 3 reqs, Deferred: 1 reqs, "
            "KV fetch: 2 waiting to start, 1 in progress, 0 completed waiting, Preemptions: 4, "
            "XPU KV cache usage: 100.0%, Prefix cache hit rate: 57.9%, Corrupted: 0 reqs, "
            "External prefix cache hit rate: 3.0%, MM cache hit rate: 12.5%")
    f = e.fields
    assert e.kind == "engine_stats"
    assert f["engine"] == 1
    assert f["prompt_tokens_per_second"] == 12.5 and f["generation_tokens_per_second"] == 834.0
    assert (f["running"], f["waiting"], f["deferred"], f["preemptions"], f["corrupted"]) == (7, 3, 1, 4, 0)
    assert (f["kv_fetch_waiting"], f["kv_fetch_in_progress"], f["kv_fetch_completed_waiting"]) == (2, 1, 0)
    assert f["device"] == "XPU" and f["kv_cache_usage"] == 1.0
    assert f["prefix_cache_hit_rate"] == 0.579
    assert f["external_prefix_cache_hit_rate"] == 0.03 and f["mm_cache_hit_rate"] == 0.125


def test_v1_stats_without_engine_prefix_and_aggregated():
    e = one("INFO 03-01 10:00:00 [loggers.py:80] Avg prompt throughput: 0.0 tokens/s, Avg generation "
            "throughput: 1.0 tokens/s, Running: 1 reqs, Waiting: 0 reqs, GPU KV cache usage: 0.1%, "
            "Prefix cache hit rate: 0.0%")
    assert e.fields["engine"] == 0 and e.fields["kv_cache_usage"] == 0.001
    e = one("INFO 03-01 10:00:00 [loggers.py:335] 4 Engines Aggregated: Avg prompt throughput: 1.0 tokens/s, "
            "Avg generation throughput: 2.0 tokens/s, Running: 9 reqs, Waiting: 0 reqs, GPU KV cache usage: 5.0%")
    assert e.fields["aggregated_engines"] == 4 and e.fields["running"] == 9
    assert "prefix_cache_hit_rate" not in e.fields  # optional since 0.31


def test_v0_stats_and_prefix_line():
    e = one("INFO 10-16 19:05:47 metrics.py:351] Avg prompt throughput: 512.3 tokens/s, Avg generation "
            "throughput: 45.1 tokens/s, Running: 3 reqs, Swapped: 1 reqs, Pending: 2 reqs, GPU KV cache usage: "
            "12.4%, CPU KV cache usage: 0.5%.")
    f = e.fields
    assert (f["engine"], f["running"], f["swapped"], f["waiting"]) == (0, 3, 1, 2)
    assert f["kv_cache_usage"] == 0.124 and f["swap_kv_cache_usage"] == 0.005
    e = one("INFO 10-16 19:05:47 metrics.py:367] Prefix cache hit rate: GPU: 43.21%, CPU: 0.00%")
    assert e.kind == "prefix_cache" and e.fields == {"gpu_prefix_cache_hit_rate": 0.4321, "cpu_prefix_cache_hit_rate": 0.0}


def test_v0_three_field_form_and_negative_throughput():
    e = one("INFO 02-01 01:02:03 metrics.py:334] Avg prompt throughput: 0.0 tokens/s, Avg generation throughput: "
            "-1.1 tokens/s, Running: 0 reqs, Swapped: 0 reqs, Pending: 0 reqs, GPU KV cache usage: 0.0%, "
            "CPU KV cache usage: 0.0%")
    assert e.fields["generation_tokens_per_second"] == -1.1


def test_unknown_segment_of_a_custom_build_is_kept():
    e = one("INFO 03-01 10:00:00 [loggers.py:314] Engine 000: Avg prompt throughput: 1.0 tokens/s, Avg generation "
            "throughput: 2.0 tokens/s, Running: 1 reqs, Waiting: 0 reqs, GPU KV cache usage: 5.0%, Spark boost: 12.5%, "
            "Mode: turbo")
    assert e.fields["spark_boost"] == 0.125 and e.fields["mode"] == "turbo"


def test_cache_config_info_is_not_a_stats_line():
    results, events = run_lines(["INFO 03-01 10:00:00 [core.py:1] Engine 000: vllm cache_config_info with "
                                 "initialization after num_gpu_blocks is: 17638"])
    assert events == [] and results == ["ignored"]


# ---- spec_decode ---------------------------------------------------------------------------

def test_spec_decode_v1_current():
    e = one("INFO 09-01 00:00:00 [metrics.py:120] SpecDecoding metrics: Mean acceptance length: 2.71, Accepted "
            "throughput: 4.37 tokens/s, Drafted throughput: 4.92 tokens/s, Accepted: 262 tokens, Drafted: 295 "
            "tokens, Per-position acceptance rate: 0.880, 0.620, 0.210, Avg Draft acceptance rate: 88.8%")
    f = e.fields
    assert f["mean_acceptance_length"] == 2.71
    assert f["accepted_tokens_per_second"] == 4.37 and f["drafted_tokens_per_second"] == 4.92
    assert (f["accepted_tokens"], f["drafted_tokens"]) == (262, 295)
    assert f["per_position_acceptance_rate"] == [0.88, 0.62, 0.21]
    assert f["draft_acceptance_rate"] == 0.888
    assert "speculative_depth" not in f


def test_spec_decode_0_8_orders():
    e = one("INFO 04-01 00:00:00 [metrics.py:53] SpecDecoding metrics: Draft acceptance rate: 63.2%, Accepted: "
            "120 tokens, Drafted: 190 tokens")
    assert e.fields == {"draft_acceptance_rate": 0.632, "accepted_tokens": 120, "drafted_tokens": 190, "engine": 0}
    e = one("INFO 05-01 00:00:00 [metrics.py:82] SpecDecoding metrics: Draft acceptance rate: 50.0%, Mean "
            "acceptance length: 2.00, Accepted: 10 tokens, Drafted: 20 tokens, Per-position acceptance rate: 0.700, 0.300")
    assert e.fields["mean_acceptance_length"] == 2.0 and e.fields["per_position_acceptance_rate"] == [0.7, 0.3]


def test_spec_decode_nan_rate_when_nothing_drafted():
    e = one("INFO 09-01 00:00:00 [metrics.py:120] SpecDecoding metrics: Mean acceptance length: 1.00, Accepted "
            "throughput: 0.00 tokens/s, Drafted throughput: 0.00 tokens/s, Accepted: 0 tokens, Drafted: 0 tokens, "
            "Per-position acceptance rate: 0.000, Avg Draft acceptance rate: nan%")
    assert e.fields["draft_acceptance_rate"] is None and e.fields["drafted_tokens"] == 0


def test_spec_decode_v0_fractions():
    e = one("INFO 08-01 00:00:00 metrics.py:389] Speculative metrics: Draft acceptance rate: 0.642, System "
            "efficiency: 0.512, Number of speculative tokens: 3, Number of accepted tokens: 642, Number of draft "
            "tokens: 1000, Number of emitted tokens: 980.")
    f = e.fields
    assert f["draft_acceptance_rate"] == 0.642 and f["system_efficiency"] == 0.512
    assert (f["speculative_depth"], f["accepted_tokens"], f["drafted_tokens"], f["emitted_tokens"]) == (3, 642, 1000, 980)


def test_spec_and_kv_lines_belong_to_the_preceding_engine_of_the_same_process():
    stats = ("(APIServer pid=1) INFO 01-01 00:00:00 [loggers.py:335] Engine {n:03d}: Avg prompt throughput: 0.0 "
             "tokens/s, Avg generation throughput: 1.0 tokens/s, Running: 1 reqs, Waiting: 0 reqs, GPU KV cache usage: 1.0%")
    spec = ("(APIServer pid=1) INFO 01-01 00:00:00 [metrics.py:120] SpecDecoding metrics: Mean acceptance length: "
            "2.00, Accepted: 1 tokens, Drafted: 2 tokens")
    _, events = run_lines([stats.format(n=0), spec, stats.format(n=1), spec,
                           "(Other pid=2) INFO 01-01 00:00:00 [metrics.py:120] SpecDecoding metrics: Accepted: 1 tokens"])
    assert [e.fields["engine"] for e in events if e.kind == "spec_decode"] == [0, 1, 0]


# ---- kv_transfer ---------------------------------------------------------------------------

def test_kv_transfer_offload_0_24_names():
    e = one("INFO 08-04 02:49:59 [metrics.py:103] KV Transfer metrics: vllm:kv_offload_cpu_cache_usage_perc=0.0386, "
            "vllm:kv_offload_lookup_sync_delay_seconds_sum=9.603999751561787e-05, vllm:kv_offload_load_bytes=185264640, "
            "vllm:kv_offload_load_time=0.0033739200830459597, vllm:kv_offload_store_bytes=299439360, "
            "vllm:kv_offload_store_time=0.005468831906095147, vllm:kv_offload_tiering_read_bytes:('1:cpu',)=42")
    f = e.fields
    assert f["load_bytes"] == 185264640 and f["load_seconds"] == pytest.approx(0.0033739200830459597)
    assert f["store_bytes"] == 299439360 and f["store_seconds"] == pytest.approx(0.005468831906095147)
    assert f["cpu_cache_usage"] == 0.0386
    assert f["metrics"]["vllm:kv_offload_lookup_sync_delay_seconds_sum"] == pytest.approx(9.603999751561787e-05)
    assert f["metrics"]["vllm:kv_offload_tiering_read_bytes:('1:cpu',)"] == 42


def test_kv_transfer_offload_0_16_names():
    e = one("INFO 03-01 00:00:00 [metrics.py:103] KV Transfer metrics: GPU_to_CPU_total_bytes=1363673088, "
            "GPU_to_CPU_total_time=0.2069, CPU_to_GPU_total_bytes=100, CPU_to_GPU_total_time=0.001")
    assert (e.fields["store_bytes"], e.fields["store_seconds"]) == (1363673088, 0.2069)
    assert (e.fields["load_bytes"], e.fields["load_seconds"]) == (100, 0.001)


def test_kv_transfer_nixl_multiconnector_and_tpu():
    e = one("INFO 03-01 00:00:00 [metrics.py:106] KV Transfer metrics: Num successful transfers=12, Avg xfer time "
            "(ms)=3.5, P90 xfer time (ms)=5.0, Avg post time (ms)=0.1, P90 post time (ms)=0.2, Avg MB per transfer=2.0, "
            "Throughput (MB/s)=512.0, Avg number of descriptors=8, Num failed transfers=1")
    f = e.fields
    assert f["transfers"] == 12 and f["failed_transfers"] == 1
    assert f["xfer_seconds_avg"] == pytest.approx(0.0035)
    assert f["throughput_bytes_per_second"] == 512 * MIB and f["bytes_per_transfer_avg"] == 2 * MIB
    e = one("INFO 03-01 00:00:00 [metrics.py:106] KV Transfer metrics: NixlConnector={'Num successful transfers': 3, "
            "'Avg xfer time (ms)': 1.5}, LMCacheConnectorV1={}")
    assert e.fields["transfers"] == 3 and e.fields["metrics"]["NixlConnector.Avg xfer time (ms)"] == 1.5
    e = one("INFO 03-01 00:00:00 [x.py:1] KV Transfer metrics: Num finished save chunks =51, Num finished load chunks=23")
    assert e.fields["metrics"] == {"Num finished save chunks": 51, "Num finished load chunks": 23}


# ---- start-up facts ------------------------------------------------------------------------

def test_kv_cache_size_forms():
    assert one("INFO 01-01 00:00:00 [kv_cache_utils.py:1] GPU KV cache size: 2,042,016 tokens").fields == {
        "tokens": 2042016, "device": "GPU"}
    _, events = run_lines(["INFO 01-01 00:00:00 [kv_cache_utils.py:1] GPU + host KV cache size: 1,000 tokens, "
                           "Maximum concurrency for 32,768 tokens per request: 3.05x"])
    assert [(e.kind, e.fields) for e in events] == [
        ("kv_cache_size", {"tokens": 1000, "device": "GPU + host"}),
        ("max_concurrency", {"tokens_per_request": 32768, "concurrency": 3.05}),
    ]
    e = one("INFO 01-01 00:00:00 gpu_executor.py:80] Maximum concurrency for 2048 tokens per request: 5.59x")
    assert e.fields == {"tokens_per_request": 2048, "concurrency": 5.59}


def test_gpu_blocks_v0_and_early_v1():
    assert one("INFO 12-22 10:55:35 gpu_executor.py:76] # GPU blocks: 715, # CPU blocks: 1310").fields == {
        "device": "GPU", "gpu_blocks": 715, "cpu_blocks": 1310}
    assert one("INFO 02-13 15:56:21 executor_base.py:110] # CUDA blocks: 1353, # CPU blocks: 1024").fields["gpu_blocks"] == 1353
    assert one("INFO 02-13 15:56:21 [executor_base.py:112] # cuda blocks: 1394, # CPU blocks: 1820").fields["device"] == "cuda"
    assert one("INFO 01-01 00:00:00 [kv_cache_utils.py:1] # GPU blocks: 9000").fields == {"device": "GPU", "gpu_blocks": 9000}


def test_kv_cache_memory_forms():
    assert one("INFO 01-01 00:00:00 [gpu_worker.py:1] Available KV cache memory: 8.59 GiB").fields["bytes"] == round(8.59 * GIB)
    assert one("INFO 01-01 00:00:00 [gpu_worker.py:1] Available KV cache memory: 81.0 GiB").fields["bytes"] == 81 * GIB
    assert one("INFO 01-01 00:00:00 [gpu_worker.py:1] Available KV cache memory: -3.44 GiB").fields["bytes"] == round(-3.44 * GIB)


def test_model_load_every_wording():
    cases = [
        ("Loading model weights took 8.5107 GB", 8.5107, None),
        ("Model loading took 13.5958 GB and 20.100000 seconds", 13.5958, 20.1),
        ("Model loading took 7.5552 GiB and 30.643008 seconds", 7.5552, 30.643008),
        ("Model loading took 15.2341 GiB memory and 12.000001 seconds", 15.2341, 12.000001),
        ("Model loading took 81.01 GiB memory and 72.345678 seconds", 81.01, 72.345678),
        ("Model loading took 0.2 GiB and 1.500000 seconds", 0.2, 1.5),
    ]
    for text, gib, secs in cases:
        f = one(f"INFO 01-01 00:00:00 [gpu_model_runner.py:1] {text}").fields
        assert f["weights_bytes"] == round(gib * GIB), text
        assert f.get("seconds") == secs, text
    assert one("INFO 01-01 00:00:00 [default_loader.py:1] Loading weights took 12.31 seconds").fields == {
        "weights_load_seconds": 12.31}


def test_memory_profile_v0_lines():
    f = one("INFO 05-21 18:17:06 [worker.py:267] model weights take 7.56GiB; non_torch_memory takes 0.04GiB; PyTorch "
            "activation peak memory takes 0.74GiB; the rest of the memory reserved for KV Cache is 3.06GiB.").fields
    assert f == {"weights_bytes": round(7.56 * GIB), "non_torch_bytes": round(0.04 * GIB),
                 "peak_activation_bytes": round(0.74 * GIB), "kv_cache_bytes": round(3.06 * GIB)}
    f = one("INFO 05-21 18:17:06 [worker.py:267] the current vLLM instance can use total_gpu_memory (12.00GiB) x "
            "gpu_memory_utilization (0.95) = 11.40GiB").fields
    assert f == {"total_bytes": 12 * GIB, "gpu_memory_utilization": 0.95, "requested_bytes": round(11.4 * GIB)}
    assert one("INFO 05-21 18:17:06 [worker.py:267] Memory profiling takes 5.29 seconds").fields == {"profiling_seconds": 5.29}


def test_cuda_graph_and_init_engine_forms():
    assert one("INFO 01-01 00:00:00 [gpu_model_runner.py:1] Graph capturing finished in 6 secs, took 0.14 GiB").fields == {
        "seconds": 6.0, "bytes": round(0.14 * GIB)}
    assert one("INFO 01-01 00:00:00 model_runner.py:1] Graph capturing finished in 12 secs.").fields == {"seconds": 12.0}
    assert one("INFO 01-01 00:00:00 [core.py:1] init engine (profile, create kv cache, warmup model) took 18.31 seconds"
               ).fields == {"seconds": 18.31}
    assert one("INFO 01-01 00:00:00 [core.py:1] init engine (profile, create kv cache, warmup model) took 9.00 s").fields == {
        "seconds": 9.0}
    f = one("INFO 01-01 00:00:00 [core.py:1] init engine (profile, create kv cache, warmup model) took 60.10 s "
            "(compilation: 20.00 s — language_model: 15.00 s, encoder: 5.00 s)").fields
    assert f == {"seconds": 60.1, "compilation_seconds": 20.0, "language_model_compilation_seconds": 15.0,
                 "encoder_compilation_seconds": 5.0}


def test_version_lines():
    assert one("INFO 01-01 00:00:00 api_server.py:528] vLLM API server version 0.6.3.post1").fields == {"version": "0.6.3.post1"}
    assert one("INFO 01-01 00:00:00 [utils.py:1] vLLM server version 0.20.2, serving model Qwen/Qwen3-8B").fields == {
        "version": "0.20.2", "model": "Qwen/Qwen3-8B"}
    e = one("(APIServer pid=1) INFO 01-01 00:00:00 [api_utils.py:345]  ▄▄ ▄█ █     █     █ ▀▄▀ █  version 0.23.0")
    assert e.kind == "version" and e.fields == {"version": "0.23.0"}
    e = one("(APIServer pid=1) INFO 01-01 00:00:00 [api_utils.py:345]   █▄█▀ █     █     █     █  model   Qwen/Qwen3-8B")
    assert e.kind == "model" and e.fields == {"model": "Qwen/Qwen3-8B"}


def test_engine_config_lines():
    f = one("INFO 01-01 00:00:00 [core.py:93] Initializing a V1 LLM engine (v0.9.1) with config: model='m/x', "
            "speculative_config=None, tokenizer='m/x', dtype=torch.bfloat16, max_seq_len=32768, tensor_parallel_size=2, "
            "quantization=fp8, kv_cache_dtype=auto, served_model_name=m/x, enable_prefix_caching=True").fields
    assert f == {"version": "0.9.1", "model": "m/x", "dtype": "torch.bfloat16", "max_seq_len": 32768, "tensor_parallel_size": 2,
                 "quantization": "fp8", "kv_cache_dtype": "auto", "served_model_name": "m/x",
                 "enable_prefix_caching": True}
    f = one("INFO 01-01 00:00:00 [utils.py:253] non-default args: {'model': 'm/x', 'max_num_seqs': 2, "
            "'served_model_name': ['a'], 'gpu_memory_utilization': 0.9}").fields
    assert f == {"model": "m/x", "max_num_seqs": 2, "gpu_memory_utilization": 0.9}


def test_offload_pool():
    f = one("INFO 08-04 02:44:22 [shared_offload_region.py:85] Created mmap file /dev/shm/x.mmap (8.59 GB)").fields
    assert f == {"path": "/dev/shm/x.mmap", "bytes": 8.59e9}


# ---- access log ----------------------------------------------------------------------------

@pytest.mark.parametrize(
    "line, method, path, status, version",
    [
        ('INFO:     10.10.10.2:52922 - "POST /v1/chat/completions HTTP/1.1" 200 OK', "POST", "/v1/chat/completions", 200, "1.1"),
        ('(APIServer pid=1) INFO:     ::1:51556 - "GET /metrics?x=1 HTTP/1.1" 200 OK', "GET", "/metrics", 200, "1.1"),
        ('INFO:     - - "GET /health HTTP/2" 503 Service Unavailable', "GET", "/health", 503, "2"),
        ('INFO:     1.2.3.4:1 - "POST /v1/completions HTTP/1.1" 422 Unprocessable Content', "POST", "/v1/completions", 422, "1.1"),
        ('INFO:     1.2.3.4:1 - "GET /a b HTTP/1.0" 599 ', "GET", "/a b", 599, "1.0"),
        ('WARNING:  1.2.3.4:1 - "POST /v1/chat/completions HTTP/1.1" 429 Too Many Requests', "POST", "/v1/chat/completions", 429, "1.1"),
    ],
)
def test_access_log(line, method, path, status, version):
    e = one(line)
    assert e.fields == {"method": method, "path": path, "status": status, "http_version": version}
    assert "1.2.3.4" not in str(e.fields) and "10.10.10.2" not in str(e.fields)


def test_other_uvicorn_lines_are_ignored_not_unparsed():
    results, events = run_lines(["INFO:     Started server process [20]", "INFO:     Waiting for application startup."])
    assert results == ["ignored", "ignored"] and events == []


# ---- errors --------------------------------------------------------------------------------

def test_oom_forms():
    f = one("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 1 has a total capacity of "
            "79.15 GiB of which 1.23 GiB is free.", "oom").fields
    assert f["tried_to_allocate_bytes"] == 2 * GIB and f["gpu"] == 1
    assert f["total_capacity_bytes"] == round(79.15 * GIB) and f["free_bytes"] == round(1.23 * GIB)
    assert f["exception"] == "torch.OutOfMemoryError"
    f = one("torch.cuda.OutOfMemoryError: CUDA out of memory. Tried to allocate 20.00 MiB (GPU 0; 15.78 GiB total "
            "capacity; 14.56 GiB already allocated; 3.44 MiB free; 14.68 GiB reserved in total by PyTorch)", "oom").fields
    assert f["tried_to_allocate_bytes"] == 20 * MIB and f["gpu"] == 0
    assert f["allocated_bytes"] == round(14.56 * GIB) and f["free_bytes"] == round(3.44 * MIB)
    assert one("ERROR 01-01 00:00:00 [gpu_model_runner.py:1] RuntimeError: CUDA out of memory occurred when warming "
               "up sampler with 256 dummy requests. Please try lowering `max_num_seqs`", "oom")
    assert one("RuntimeError: XPU out of memory. Tried to allocate 1.00 GiB", "oom").fields["device"] == "xpu"


def test_cuda_error_is_not_an_oom_and_oom_is_not_a_cuda_error():
    # (a bare exception line is also the traceback it ends, whose start was not seen: test_offsets.py)
    e = one("RuntimeError: CUDA error: an illegal memory access was encountered", "cuda_error")
    assert e.fields["error"] == "an illegal memory access was encountered"
    assert one("RuntimeError: CUDA error: out of memory", "traceback").fields["kinds"] == ["oom"]
    assert one("ERROR 01-01 00:00:00 [x.py:1] RuntimeError: cuMemcpyBatchAsync failed at index 3 with error 1").kind == "cuda_error"


def test_nccl_errors_and_non_errors():
    assert one("RuntimeError: NCCL error: unhandled cuda error (run with NCCL_DEBUG=INFO for details)", "traceback").fields[
        "kinds"] == ["nccl_error"]
    results, events = run_lines([
        "(Worker_TP0 pid=1) h:1:1 [0] NCCL INFO Channel 00/02 : 0 1",
        "(Worker_TP0 pid=1) INFO 01-01 00:00:00 [pynccl.py:1] vLLM is using nccl==2.25.1",
    ])
    assert events == [] and results == ["ignored", "ignored"]


@pytest.mark.parametrize(
    "line",
    [
        "(EngineCore_DP0 pid=1) ERROR 01-01 00:00:00 [core.py:1] EngineCore encountered a fatal error.",
        "ERROR 01-01 00:00:00 [async_llm.py:1] AsyncLLM output_handler failed.",
        "vllm.v1.engine.exceptions.EngineDeadError: EngineCore encountered an issue. See stack trace (above) for the root cause.",
        "ERROR 01-01 00:00:00 [core_client.py:1] Engine core proc EngineCore_DP0 died unexpectedly, shutting down client.",
        "CRITICAL 01-01 00:00:00 launcher.py:88] AsyncLLMEngine is already dead, terminating server process",
        "vllm.engine.async_llm_engine.AsyncEngineDeadError: Background loop has errored already.",
        "CRITICAL 01-01 00:00:00 [multiproc_executor.py:48] MulitprocExecutor got fatal signal from worker processes, shutting down.",
        "!!!!!!! Segfault encountered !!!!!!!",
    ],
)
def test_engine_dead_signatures(line):
    assert one(line, "engine_dead")


def test_other_warnings_and_errors_become_log_events():
    e = one("(EngineCore pid=179) WARNING 08-04 02:44:37 [vllm.py:1758] max_num_scheduled_tokens is set to 8184")
    assert e.kind == "log" and e.fields == {"level": "warning", "logger": "vllm.py:1758",
                                            "message": "max_num_scheduled_tokens is set to 8184"}
    assert one("ERROR 01-01 00:00:00 [serving.py:1] Error in chat completion stream generator.").fields["level"] == "error"
    # the server is ready: what an engine error means after it (exporter.stream.lifecycle)
    e = one("INFO 01-01 00:00:00 [api_server.py:1] Starting vLLM API server on http://0.0.0.0:8000")
    assert e.kind == "ready"


# The access-log matcher finds the separator first; it must agree with the plain regex search that
# describes the format (`(?:^|\s)\S+ - "METHOD path HTTP/v" NNN`).
import re as _re

from hypothesis import given, settings, strategies as _st

from exporter.parsers import access_log as _access_log

_REFERENCE = _re.compile(r'(?:^|\s)\S+ - "([A-Za-z]+) (.*) HTTP/(\d(?:\.\d)?)" (\d{3})\b')


def _reference(text):
    m = _REFERENCE.search(text)
    if not m:
        return None
    path = m.group(2).split("?", 1)[0]
    return m.group(1), path, int(m.group(4)), m.group(3)


_pieces = _st.sampled_from([' - "', "GET ", "POST ", " HTTP/1.1", '" ', "200", "404 ", " ", "x", "?q=1", "-", "\t",
                            '"', "1.2.3.4:5", "HTTP/2", " OK"])


@settings(max_examples=2000, deadline=None)
@given(_st.lists(_pieces, max_size=14).map("".join))
def test_access_matcher_agrees_with_the_reference_regex(text):
    assert _access_log.match(text) == _reference(text)


def test_access_matcher_agrees_on_real_lines():
    from tests.conftest import SAMPLE

    for line in SAMPLE.read_text(encoding="utf-8").splitlines():
        assert _access_log.match(line) == _reference(line), line


from exporter.parsers import _values as _vals

_NUM_REFERENCE = _re.compile(r"[-+]?(?:\d[\d,]*)?\.?\d+(?:[eE][-+]?\d+)?|[-+]?(?:nan|inf)", _re.I)


def _number_reference(text):
    import math

    m = _NUM_REFERENCE.search(text)
    if not m:
        return None
    try:
        v = float(m.group(0).replace(",", ""))
    except ValueError:
        return None
    return v if math.isfinite(v) else None


@settings(max_examples=3000, deadline=None)
@given(_st.lists(_st.sampled_from(list("0123456789.,-+eE%x _") + ["nan", "inf", " tokens/s", "GiB", "a"]),
                 max_size=10).map("".join))
def test_number_fast_path_agrees_with_the_regex(text):
    assert _vals.number(text) == _number_reference(text)


_KEY_START_REFERENCE = _re.compile(r"(?:^|, )([A-Za-z][A-Za-z0-9 ()/#_.+-]*?): ")


def _segments_reference(text):
    out = []
    matches = list(_KEY_START_REFERENCE.finditer(text))
    for i, m in enumerate(matches):
        end = matches[i + 1].start() if i + 1 < len(matches) else len(text)
        out.append((m.group(1), text[m.end():end].strip().rstrip(".,").strip()))
    return out


@settings(max_examples=3000, deadline=None)
@given(_st.lists(_st.sampled_from([", ", ": ", "Key", "Other key", "1.000", "0.5", "x", " ", ".", ",", "%",
                                   "Per-position acceptance rate", "(ms)", "-", "9", "a:b", "é"]),
                 max_size=16).map("".join))
def test_segments_agree_with_the_regex_scan(text):
    assert _vals.segments(text) == _segments_reference(text)


from exporter.parsers import spec_decode as _spec

_SPEC_REAL = [l.split("SpecDecoding metrics: ", 1)[1] for l in
              __import__("tests.conftest", fromlist=["SAMPLE"]).SAMPLE.read_text(encoding="utf-8").splitlines()
              if "SpecDecoding metrics: " in l]


def test_spec_fast_path_matches_every_sample_line_and_agrees():
    for body in _SPEC_REAL:
        fast = _spec._parse_current(body)
        assert fast is not None, body
        assert fast == _spec.parse_generic(body) and list(fast) == list(_spec.parse_generic(body))




@settings(max_examples=1500, deadline=None)
@given(_st.sampled_from(_SPEC_REAL), _st.lists(_st.tuples(_st.integers(0, 400), _st.sampled_from(
    ["", "0", "9", ".", ", ", "nan", "%", " ", "1.5", "x", "Current speculative depth: 3, "])), max_size=3))
def test_spec_fast_path_agrees_with_the_generic_splitter(body, edits):
    for pos, text in edits:
        body = body[:pos] + text + body[pos + 1:]
    fast = _spec._parse_current(body)
    if fast is not None:
        assert fast == _spec.parse_generic(body)


from exporter.parsers import engine_stats as _stats

_STATS_REAL = [l.split("] ", 2)[-1] for l in
               __import__("tests.conftest", fromlist=["SAMPLE"]).SAMPLE.read_text(encoding="utf-8").splitlines()
               if "Avg prompt throughput" in l]


def test_stats_fast_path_agrees_on_the_sample_lines():
    hits = 0
    for msg in _STATS_REAL:
        fast = _stats._parse_current(msg)
        if fast is not None:
            hits += 1
            assert fast == _stats.parse_generic(msg) and list(fast) == list(_stats.parse_generic(msg))
    assert hits == len(_STATS_REAL)
    # Preemptions (0.11.1+, only in an interval that had some) too
    msg = _STATS_REAL[0].replace(" reqs, GPU KV", " reqs, Preemptions: 2, GPU KV")
    assert "Preemptions: 2" in msg and _stats._parse_current(msg) == _stats.parse_generic(msg)
    assert _stats._parse_current(msg)["preemptions"] == 2


@settings(max_examples=1500, deadline=None)
@given(_st.sampled_from(_STATS_REAL), _st.lists(_st.tuples(_st.integers(0, 300), _st.sampled_from(
    ["", "0", "9", ".", ", ", "-", "%", " ", "1.5", "x", "Preemptions: 3, ", "Preemptions: "])), max_size=3))
def test_stats_fast_path_agrees_with_the_generic_splitter(msg, edits):
    for pos, text in edits:
        msg = msg[:pos] + text + msg[pos + 1:]
    fast = _stats._parse_current(msg)
    if fast is not None:
        assert fast == _stats.parse_generic(msg) and list(fast) == list(_stats.parse_generic(msg))


# KV bodies read in bulk give what the general pair splitter gives, or step aside.
from hypothesis import given, settings, strategies as st  # noqa: E402

from exporter.parsers import kv_transfer  # noqa: E402

_KV_TOKENS = st.sampled_from(["vllm:kv_offload_load_bytes", "a", "b_c", "=", ", ", ",", " ", "1", "0.5", "1e5", "1.e5",
                              "-1", "+2", ".5", "1_000", "nan", "inf", "1e999", "1.2.3", "٣", "²", "\t", "x y", "(", "'",
                              "{'k': 1}", "=1", ""])


_KV_KEYS = st.sampled_from(["vllm:kv_offload_load_bytes", "a", "b_c", "", " a", "a ", "x y", "a,b", "(k)", "٣"])
_KV_VALUES = st.sampled_from(["1", "0.5", "1e5", "1.e5", "-1", "+2", ".5", "1_000", "nan", "inf", "1e999", "1.2.3", "٣",
                              "²", " 1", "1 ", "", "1=2", "{'k': 1}", "0x10"])
_KV_PAIRS = st.lists(st.tuples(_KV_KEYS, st.sampled_from(["=", "=", "", "=="]), _KV_VALUES), min_size=1, max_size=6)


@settings(max_examples=2000, deadline=None)
@given(st.one_of(st.lists(_KV_TOKENS, max_size=12).map("".join),
                 _KV_PAIRS.map(lambda ps: ", ".join(k + eq + v for k, eq, v in ps))))
def test_plain_kv_bodies_agree_with_the_general_splitter(body):
    fast = kv_transfer.plain_metrics(body)
    if fast is not None:
        assert fast == kv_transfer.general_metrics(body), body


def test_the_usual_offload_body_is_plain():
    body = ("vllm:kv_offload_cpu_cache_usage_perc=0.0082, vllm:kv_offload_load_bytes=152043520, "
            "vllm:kv_offload_load_time=0.003019350341933038")
    assert kv_transfer.plain_metrics(body) == {"vllm:kv_offload_cpu_cache_usage_perc": 0.0082,
                                               "vllm:kv_offload_load_bytes": 152043520.0,
                                               "vllm:kv_offload_load_time": 0.003019350341933038}


def test_oom_keeps_the_numbers_in_every_pytorch_wording():
    # PyTorch 2.1 (sic: "capacty")
    f = one("torch.cuda.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacty of "
            "23.69 GiB of which 3.09 GiB is free. Including non-PyTorch memory, this process has 20.59 GiB memory in "
            "use. Of the allocated memory 19.82 GiB is allocated by PyTorch, and 400.36 MiB is reserved by PyTorch but "
            "unallocated. If reserved but unallocated memory is large try setting max_split_size_mb", "oom").fields
    assert (f["gpu"], f["tried_to_allocate_bytes"]) == (0, 2 * GIB)
    assert f["total_capacity_bytes"] == round(23.69 * GIB) and f["free_bytes"] == round(3.09 * GIB)
    assert f["in_use_bytes"] == round(20.59 * GIB) and f["allocated_bytes"] == round(19.82 * GIB)
    assert f["reserved_bytes"] == round(19.82 * GIB) + round(400.36 * MIB)
    # 2.2 and later: other processes named too
    f = one("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 512.00 MiB. GPU 3 has a total capacity of "
            "79.14 GiB of which 210.75 MiB is free. Process 4242 has 78.93 GiB memory in use. Including non-PyTorch "
            "memory, this process has 78.93 GiB memory in use. Of the allocated memory 77.10 GiB is allocated by "
            "PyTorch, and 1.20 GiB is reserved by PyTorch but unallocated.", "oom").fields
    assert (f["gpu"], f["free_bytes"], f["in_use_bytes"]) == (3, round(210.75 * MIB), round(78.93 * GIB))
    # 2.0 and earlier: every number in the parenthesis, reserved included
    f = one("RuntimeError: CUDA out of memory. Tried to allocate 36.00 MiB (GPU 1; 7.93 GiB total capacity; 130.35 MiB "
            "already allocated; 47.06 MiB free; 188.00 MiB reserved in total by PyTorch) If reserved memory is >> "
            "allocated memory try setting max_split_size_mb", "oom").fields
    assert (f["gpu"], f["total_capacity_bytes"], f["free_bytes"]) == (1, round(7.93 * GIB), round(47.06 * MIB))
    assert f["allocated_bytes"] == round(130.35 * MIB) and f["reserved_bytes"] == 188 * MIB


@pytest.mark.parametrize("line, reason, numbers", [
    ("(EngineCore_DP0 pid=18799) ERROR 10-08 20:33:48 [core.py:708] ValueError: To serve at least one request with the "
     "models's max seq len (40960), (5.62 GiB KV cache is needed, which is larger than the available KV cache memory "
     "(4.50 GiB). Based on the available memory, the estimated maximum model length is 32768. Try increasing "
     "`gpu_memory_utilization` or decreasing `max_model_len` when initializing the engine.",
     "kv_cache_too_small", {"max_model_len": 40960, "needed_bytes": round(5.62 * GIB), "available_bytes": round(4.5 * GIB),
                            "estimated_max_model_len": 32768}),
    ("ValueError: The model's max seq len (32768) is larger than the maximum number of tokens that can be stored in KV "
     "cache (22512). Try increasing `gpu_memory_utilization` or decreasing `max_model_len` when initializing the engine.",
     "kv_cache_too_small", {"max_model_len": 32768, "kv_cache_tokens": 22512}),
    ("ValueError: No available memory for the cache blocks. Try increasing `gpu_memory_utilization` when initializing "
     "the engine.", "no_kv_memory", {}),
    ("ValueError: Model architectures ['FooForCausalLM'] are not supported for now. Supported architectures: "
     "dict_keys(['LlamaForCausalLM'])", "bad_argument", {"architecture": "FooForCausalLM"}),
    ("vllm serve: error: unrecognized arguments: --max-modle-len 4096", "bad_argument",
     {"argument": "unrecognized arguments: --max-modle-len 4096"}),
    ("api_server.py: error: argument --dtype: invalid choice: 'fp7' (choose from 'auto', 'half')", "bad_argument", {}),
    ("RuntimeError: Engine core initialization failed. See root cause above. Failed core proc(s): {}", "other", {}),
])
def test_startup_failures_keep_their_reason_and_numbers(line, reason, numbers):
    f = one(line, "startup_failure").fields
    assert f["reason"] == reason
    for k, v in numbers.items():
        assert f[k] == v, k


def test_an_oom_while_loading_the_weights_is_a_failed_start_up_as_well():
    from tests.conftest import run_lines

    tb = [
        "(Worker_TP0 pid=7) ERROR 08-04 02:43:20 [multiproc_executor.py:1] WorkerProc failed to start.",
        "(Worker_TP0 pid=7) Traceback (most recent call last):",
        '(Worker_TP0 pid=7)   File "/v/gpu_model_runner.py", line 1800, in load_model',
        "(Worker_TP0 pid=7)     self.model = model_loader.load_model(",
        '(Worker_TP0 pid=7)   File "/v/default_loader.py", line 300, in load_weights',
        "(Worker_TP0 pid=7)     param.data.copy_(w)",
        "(Worker_TP0 pid=7) torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 1.50 GiB. GPU 0 has a total "
        "capacity of 23.55 GiB of which 512.00 MiB is free.",
        "(APIServer pid=1) INFO 08-04 02:43:30 [api_server.py:1] after",
    ]
    _, events = run_lines(tb, derived=True)
    kinds = [e.kind for e in events]
    # two lines say the start failed ("failed to start", the OOM inside load_weights) ...
    assert "oom" in kinds and [e.fields["reason"] for e in events if e.kind == "startup_failure"] == ["other", "weights_oom"]
    tb_fields = next(e.fields for e in events if e.kind == "traceback")
    assert "startup_failure" in tb_fields["kinds"]
    # ... and they are one failed start, for the reason the log gives
    from exporter.metrics import Metrics
    from tests.helpers import samples, value

    m = Metrics(process_metrics=False)
    m.add_server("s")
    m.observe_many("s", events)
    s = samples(m.render().decode())
    assert value(s, "vllm_log_errors_total", server="s", kind="startup_failure") == 1
    assert value(s, "vllm_log_startup_failures_total", server="s", reason="weights_oom") == 1
    assert value(s, "vllm_log_startup_failures_total", server="s", reason="other") == 0


@pytest.mark.parametrize("line, fields", [
    ("(Worker_TP0 pid=78890) [2026-01-29 04:52:51,168] LMCache INFO: Stored 1792 out of total 1792 tokens. size: "
     "0.0904 gb, cost 3.6901 ms, throughput: 24.4881 GB/s; offload_time: 3.5892 ms, put_time: 0.1009 ms "
     "(cache_engine.py:446:lmcache.v1.cache_engine)",
     {"op": "store", "tokens": 1792, "of_tokens": 1792, "bytes": round(0.0904 * GIB), "seconds": 0.0036901}),
    ("LMCache INFO: Stored 1792 out of total 1792 tokens. size: 0.2461 GB, cost 17.8199 ms, throughput: 13.8101 GB/s",
     {"op": "store", "bytes": round(0.2461 * GIB), "seconds": 0.0178199}),
    ("(Worker_TP0 pid=1) [2026-01-29 04:53:01,168] LMCache INFO: [req_id=cmpl-1] Retrieved 1792 out of 1792 required "
     "tokens (from 2005 total tokens). size: 0.0904 gb, cost 2.1000 ms, throughput: 43.0476 GB/s;",
     {"op": "retrieve", "tokens": 1792, "total_tokens": 2005, "seconds": 0.0021}),
    ("LMCache INFO: Retrieved 1792 out of 1792 required tokens. size: 0.2461 gb, cost 14.3229 ms, throughput: 17.1818 GB/s",
     {"op": "retrieve", "tokens": 1792, "bytes": round(0.2461 * GIB)}),
    ("(EngineCore_DP0 pid=7) [2026-01-29 04:52:51,044] LMCache INFO: Reqid: cmpl-854d703d593e0f6c-0-96b17ffd, Total "
     "tokens 2005, LMCache hit tokens: 1792, need to load: 1792 (vllm_v1_adapter.py:1602:x)",
     {"op": "lookup", "total_tokens": 2005, "hit_tokens": 1792, "need_to_load": 1792}),
])
def test_lmcache_lines(line, fields):
    f = one(line, "lmcache").fields
    for k, v in fields.items():
        assert f[k] == pytest.approx(v), k
    assert "throughput" not in f  # never the logged rate: bytes and seconds make it


def test_v0_memory_profiling_results_line():
    f = one("INFO 03-10 09:00:20 worker.py:232] Memory profiling results: total_gpu_memory=79.15GiB "
            "initial_memory_usage=15.74GiB peak_torch_memory=16.40GiB memory_usage_post_profile=15.86GiB "
            "non_torch_memory=0.86GiB kv_cache_size=54.75GiB gpu_memory_utilization=0.90", "memory_profile").fields
    assert f["total_bytes"] == round(79.15 * GIB) and f["peak_torch_bytes"] == round(16.40 * GIB)
    assert f["non_torch_bytes"] == round(0.86 * GIB) and f["kv_cache_bytes"] == round(54.75 * GIB)
    assert f["initial_bytes"] == round(15.74 * GIB) and f["gpu_memory_utilization"] == 0.90


def test_kv_cache_sized_by_kv_cache_memory_bytes():
    f = one("(Worker_TP0 pid=1) INFO 11-02 10:00:00 [gpu_worker.py:298] Initial free memory 76.61 GiB, reserved 8.00 GiB "
            "memory for KV Cache as specified by kv_cache_memory_bytes config and skipped memory profiling. This does "
            "not respect the gpu_memory_utilization config.", "memory_profile").fields
    assert f["free_bytes"] == round(76.61 * GIB) and f["kv_cache_bytes"] == 8 * GIB and f["kv_cache_memory_bytes_set"]


@pytest.mark.parametrize("word", ["takes", "took"])
def test_torch_compile_total_time(word):
    f = one(f"(EngineCore pid=1) INFO 08-04 02:44:50 [monitor.py:34] torch.compile {word} 10.51 s in total",
            "init_engine").fields
    assert f == {"compilation_seconds": 10.51}


@pytest.mark.parametrize("line, level, logger", [
    ("[rank1]:[W1203 10:02:11.402918 ProcessGroupNCCL.cpp:1476] Warning: WARNING: destroy_process_group() was not "
     "called before program exit", "warning", "ProcessGroupNCCL.cpp:1476"),
    ("(Worker_TP0 pid=264) [rank0]:[E1203 10:02:11.402918 4242 TCPStore.cpp:128] [c10d] recvValue failed", "error",
     "TCPStore.cpp:128"),
    ("[F1203 10:02:11.402918 CUDACachingAllocator.cpp:1200] something fatal", "critical", "CUDACachingAllocator.cpp:1200"),
])
def test_pytorch_glog_lines_are_log_events_by_level(line, level, logger):
    f = one(line, "log").fields
    assert (f["level"], f["logger"]) == (level, logger)


def test_a_glog_nccl_watchdog_line_stays_an_nccl_error_and_an_info_glog_line_is_no_event():
    assert one("[E1202 14:07:47.123456 ProcessGroupNCCL.cpp:632] [Rank 0] Watchdog caught collective operation timeout: "
               "WorkNCCL(SeqNum=1203, OpType=ALLREDUCE) ran for 600000 milliseconds", "nccl_error")
    from exporter.framing.clock import Clock
    from exporter.framing.frame import frame_line
    from exporter.parsers import parse_frame

    assert parse_frame(frame_line("[I1203 10:02:11.402918 ProcessGroupNCCL.cpp:9] ProcessGroupNCCL initialized", Clock())) is None


def test_the_multimodal_cache_hit_rate_is_a_gauge():
    from exporter.metrics import Metrics
    from tests.helpers import samples, value

    e = one("(APIServer pid=53) INFO 08-04 02:45:02 [loggers.py:314] Engine 000: Avg prompt throughput: 1.0 tokens/s, "
            "Avg generation throughput: 2.0 tokens/s, Running: 1 reqs, Waiting: 0 reqs, GPU KV cache usage: 1.0%, "
            "Prefix cache hit rate: 0.0%, MM cache hit rate: 42.5%", "engine_stats")
    m = Metrics(process_metrics=False)
    m.add_server("s")
    m.observe("s", e)
    assert value(samples(m.render().decode()), "vllm_log_mm_cache_hit_ratio", server="s", engine="0") == 0.425


def test_every_needle_holds_one_of_the_no_needle_filters():
    """fastpath.ignorable's shortcut (for INFO and DEBUG lines) is exact only so: every needle of a family that
    reads such lines holds a filter; a family that reads only WARNING and worse adds no filter (the lines
    nobody parses, most of them INFO, do not pay for the failure families); nor do LMCache's lines under its own
    header, which its parser reads only so (the fast path takes none of them for one of vLLM's quiet lines)."""
    from exporter.framing.clock import Clock
    from exporter.framing.frame import frame_line
    from exporter.parsers import NEEDLES, NO_NEEDLE_FILTERS, PARSERS, lmcache

    quiet = [n for p in PARSERS if (p.where.levels is None or p.where.levels & {"INFO", "DEBUG"})
             and p is not lmcache.OWN_HEADER for n in p.needles]
    # (under vLLM's header, its words are no event: what the fast path ignores, the usual way ignores too)
    own = "Prefetch request completed (L1+L2): 12/16 retained keys (8 L1, 4 L2) in 3.5 ms"
    assert lmcache.OWN_HEADER.parse(frame_line("INFO 12-04 10:00:00 [storage_manager.py:9] " + own, Clock())) is None
    assert lmcache.OWN_HEADER.parse(frame_line("[2026-03-06 10:00:00,000] LMCache INFO: " + own
                                               + " (storage_manager.py:9:lmcache.v1.distributed.storage_manager)", Clock()))
    assert quiet and all(any(f in n for f in NO_NEEDLE_FILTERS) for n in quiet)
    assert len(NO_NEEDLE_FILTERS) < len(quiet) < len(NEEDLES)
    loud = [p for p in PARSERS if p.where.levels is not None and not p.where.levels & {"INFO", "DEBUG"}]
    assert loud and not any(f in n for p in loud for n in p.needles for f in NO_NEEDLE_FILTERS
                            if not any(f in m for m in quiet))


_REAL_KV_BODY = ("vllm:kv_offload_cpu_cache_usage_perc=0.030767965917730157, vllm:kv_offload_load_bytes=49283072, "
                 "vllm:kv_offload_load_time=0.0009208132703945252, vllm:kv_offload_store_bytes=1275068416, "
                 "vllm:kv_offload_store_time=0.023150356654380186")


@settings(max_examples=2000, deadline=None)
@given(st.lists(st.tuples(st.integers(0, len(_REAL_KV_BODY)), st.sampled_from(
    ["", "0", "9", ".", "e", "E", "+", "-", ", ", "=", " ", "_", "٣", "x", "nan", "inf", "e999", "1.2", "(", "'"])),
    max_size=3))
def test_a_body_read_by_a_known_key_pattern_is_read_as_the_splitting_way_reads_it(edits):
    kv_transfer._TEMPLATES.clear()
    assert kv_transfer.plain_metrics(_REAL_KV_BODY) == kv_transfer.split_plain_metrics(_REAL_KV_BODY)
    assert kv_transfer._TEMPLATES  # the next bodies with these keys take the pattern
    body = _REAL_KV_BODY
    for pos, text in edits:
        body = body[:pos] + text + body[pos + 1:]
    assert kv_transfer.plain_metrics(body) == kv_transfer.split_plain_metrics(body), body


# vLLM 0.32.0 CPU build, captured here by tools/capture_vllm_run.py (scenario traffic)
CPU_STATS = ("(APIServer pid=10233) INFO 12-04 15:33:37 [loggers.py:335] Engine 000: Avg prompt throughput: 1210.0 "
             "tokens/s, Avg generation throughput: 637.0 tokens/s, Running: 1 reqs, Waiting: 0 reqs, CPU KV cache "
             "usage: 0.1%, Prefix cache hit rate: 73.7%")
NGRAM = ("(APIServer pid=10233) INFO 12-04 15:33:37 [metrics.py:120] SpecDecoding metrics: Mean acceptance length: "
         "4.71, Accepted throughput: 483.62 tokens/s, Drafted throughput: 483.62 tokens/s, Accepted: 1224 tokens, "
         "Drafted: 1224 tokens, Per-position acceptance rate: 1.000, 1.000, 0.855, 0.855, Avg Draft acceptance rate: 100.0%")


def test_the_cpu_backends_kv_cache_is_its_main_one_and_v0s_cpu_cache_is_swap():
    f = one(CPU_STATS).fields
    assert f["device"] == "CPU" and f["kv_cache_usage"] == 0.001 and "swap_kv_cache_usage" not in f
    v0 = one("INFO 02-01 01:02:03 metrics.py:334] Avg prompt throughput: 0.0 tokens/s, Avg generation throughput: 1.0 "
             "tokens/s, Running: 1 reqs, Swapped: 0 reqs, Pending: 0 reqs, GPU KV cache usage: 12.4%, CPU KV cache "
             "usage: 0.5%.").fields
    assert v0["device"] == "GPU" and v0["kv_cache_usage"] == 0.124 and v0["swap_kv_cache_usage"] == 0.005


def test_drafts_are_derived_from_the_per_position_rates_and_the_mean_length():
    from exporter.parsers.spec_decode import drafts_of

    f = one(NGRAM).fields
    assert drafts_of(f) == round(1224 / 3.71) == 330
    # the mean length alone (2 decimals) gives the same within its rounding
    assert abs(drafts_of({"accepted_tokens": 1224, "mean_acceptance_length": 4.71}) - 330) <= 1
    # nothing accepted: drafted tokens over the configured depth; nothing drafted: no drafts
    assert drafts_of({"accepted_tokens": 0, "drafted_tokens": 40, "per_position_acceptance_rate": [0.0] * 4,
                      "mean_acceptance_length": 1.0}) == 10
    assert drafts_of({"accepted_tokens": 0, "drafted_tokens": 0}) == 0
    assert drafts_of({"mean_acceptance_length": 2.0}) is None


# ---- vLLM 0.32.0 CPU build, captured here by tools/capture_vllm_run.py -------------------------
# Each pattern on its real line, on a variant (other numbers, another wrapper) and on a near miss.

JOURNALD = "Dec 04 15:33:31 cpu-host vllm[4242]: "  # journald's short output
PODMAN = "2026-12-04T15:33:31.123456789Z "  # `podman logs -t`


def _kinds(line):
    return [e.kind for e in run_lines([line])[1]]


def test_the_cpu_workers_kv_memory_is_a_kv_cache_memory_event():
    # vLLM 0.32.0 CPU build, captured here by tools/capture_vllm_run.py (scenario traffic)
    real = "(Worker pid=10614) INFO 12-04 15:33:31 [cpu_worker.py:260] Explicitly set (1.0/23.54) GiB for KV cache on node 0."
    e = one(real)
    assert e.kind == "kv_cache_memory" and e.process == "Worker"
    assert e.fields == {"bytes": 1.0 * GIB, "total_bytes": round(23.54 * GIB), "node": 0, "sized": "explicit"}
    # the automatic sizing (cpu_worker.py:251), on another node, under journald
    f = one(JOURNALD + "(Worker_TP1 pid=77) INFO 12-04 15:33:31 [cpu_worker.py:260] Auto set (12.25/503.7) GiB for "
            "KV cache on node 1, with 20.0 GiB requested memory for the worker. 7.75 GiB memory was consumed by "
            "non-kv usages.").fields
    assert f == {"bytes": 12.25 * GIB, "total_bytes": round(503.7 * GIB), "node": 1, "sized": "auto",
                 "requested_bytes": 20.0 * GIB, "non_kv_bytes": 7.75 * GIB}
    # near miss: the error raised when the node has too little memory is no cache size
    assert "kv_cache_memory" not in _kinds(
        "ERROR 12-04 15:33:31 [core.py:1] ValueError: Available memory on node 0 (0.5/23.54 GiB) on kv cache "
        "allocation is less than requested memory for kv (1.0 GiB).")


def test_the_cpu_kv_cache_size_line_gives_size_and_concurrency_with_the_device_word():
    # vLLM 0.32.0 CPU build, captured here by tools/capture_vllm_run.py (scenario traffic)
    real = ("(EngineCore pid=10551) INFO 12-04 15:33:31 [kv_cache_utils.py:2327] CPU KV cache size: 1,048,576 tokens, "
            "Maximum concurrency for 2,048 tokens per request: 512.00x")
    _, events = run_lines([real])
    assert [(e.kind, e.fields) for e in events] == [
        ("kv_cache_size", {"tokens": 1048576, "device": "CPU"}),
        ("max_concurrency", {"tokens_per_request": 2048, "concurrency": 512.0})]
    # an XPU build's, under podman
    _, events = run_lines([PODMAN + real.replace("CPU KV", "XPU KV").replace("1,048,576", "2,000")])
    assert events[0].fields == {"tokens": 2000, "device": "XPU"}
    # near miss: the stats line's "CPU KV cache usage" is no size
    assert "kv_cache_size" not in _kinds(CPU_STATS)


def test_initializing_the_model_is_a_part_of_loading_it_not_its_time():
    # vLLM 0.32.0 CPU build, captured here by tools/capture_vllm_run.py (scenario traffic)
    real = "(Worker pid=10614) INFO 12-04 15:33:15 [base_loader.py:82] Initializing model took 0.071071 seconds"
    assert one(real).fields == {"init_seconds": 0.071071}  # not "seconds": that is the whole load
    assert one(JOURNALD + real.replace("0.071071", "12.500000")).fields == {"init_seconds": 12.5}
    # near miss: the engine config's "Initializing a V1 LLM engine" and another "took" line
    assert "model_load" not in _kinds("INFO 12-04 15:33:15 [x.py:1] Initializing model cache took 3 seconds")


def test_the_warmup_run():
    # vLLM 0.32.0 CPU build, captured here by tools/capture_vllm_run.py (scenario traffic)
    real = "(Worker pid=10614) INFO 12-04 15:33:31 [monitor.py:91] [backbone] Initial profiling/warmup run took 0.01 s"
    e = one(real)
    assert e.kind == "warmup" and e.fields == {"seconds": 0.01, "stage": "backbone"}
    # without the tag (monitor.py logs an empty prefix then), under podman
    e = one(PODMAN + "(Worker_TP0 pid=5) INFO 12-04 15:33:31 [monitor.py:91] Initial profiling/warmup run took 3.27 s")
    assert e.kind == "warmup" and e.fields == {"seconds": 3.27}
    # near miss: the engine's init line is init_engine, not a warm-up
    assert _kinds("INFO 12-04 15:33:34 [core.py:402] init engine (profile, create kv cache, warmup model) took "
                  "18.11 s") == ["init_engine"]
    assert "warmup" not in _kinds("INFO 12-04 15:33:31 [x.py:1] Initial profiling/warmup run took long")


def test_using_max_model_len_is_engine_config():
    # vLLM 0.32.0 CPU build, captured here by tools/capture_vllm_run.py (scenario traffic)
    real = "(APIServer pid=10233) INFO 12-04 15:33:04 [model.py:2152] Using max model len 2048"
    e = one(real)
    assert e.kind == "engine_config" and e.fields == {"max_model_len": 2048}
    assert one(JOURNALD + real.replace("2048", "262144")).fields == {"max_model_len": 262144}
    # near miss: vLLM's warning about a too-long length is not the length settled on
    assert "engine_config" not in _kinds(
        "WARNING 12-04 15:33:04 [model.py:1] Using max model len 4096 may exceed the model's limit")


def test_the_config_dumps_own_model_is_not_replaced_by_a_nested_one():
    # vLLM 0.32.0 CPU build, captured here by tools/capture_vllm_run.py (scenario traffic), shortened
    f = one("(EngineCore pid=10551) INFO 12-04 15:33:09 [core.py:133] Initializing a V1 LLM engine (v0.32.0) with "
            "config: model='/tmp/vllm-capture-bt0vlnnn/model', speculative_config=SpeculativeConfig(method='ngram', "
            "model=None, num_spec_tokens=4), tokenizer='/tmp/vllm-capture-bt0vlnnn/model', max_seq_len=2048, "
            "seed=0, served_model_name=tiny-llama").fields
    assert f["model"] == "/tmp/vllm-capture-bt0vlnnn/model" and f["served_model_name"] == "tiny-llama"


SHM_032 = ("No available shared memory broadcast block found in 60 seconds. This typically happens when some "
           "processes are hanging or doing some time-consuming work (e.g. compilation, weight/kv cache quantization).")


@pytest.mark.parametrize("line, seconds", [
    # 0.32's wording (shm_broadcast.py:108), as the engine core logs it
    (f"(EngineCore pid=10551) INFO 12-04 15:40:31 [shm_broadcast.py:750] {SHM_032}", 60.0),
    # 0.6-0.10, another interval, under journald
    (JOURNALD + "(VllmWorker rank=1 pid=219) INFO 12-04 15:40:31 [shm_broadcast.py:499] No available shared memory "
     "broadcast block found in 120 seconds. This typically happens when some processes are hanging or doing some "
     "time-consuming work (e.g. compilation)", 120.0),
    # 0.5-0.6 at WARNING
    ("(VllmWorkerProcess pid=161) WARNING 08-22 06:24:42 shm_broadcast.py:386] No available block found in 60 second. ",
     60.0),
])
def test_the_shared_memory_broadcast_hang_warning(line, seconds):
    e = one(line)
    assert e.kind == "shm_broadcast_wait" and e.fields == {"seconds": seconds}


def test_a_line_about_shared_memory_blocks_that_is_no_wait_is_not_one():
    assert "shm_broadcast_wait" not in _kinds("INFO 12-04 15:40:31 [x.py:1] No available shared memory broadcast "
                                              "block size configured; using the default")


STATS_OFF = ("AsyncLLM created with api_server_count more than 1; disabling stats logging to avoid incomplete stats.")


def test_stats_logging_disabled_by_several_api_servers():
    # the exact text of v1/metrics/loggers.py:1387 in 0.32, at WARNING, from each API server
    e = one(f"(ApiServer_1 pid=15701) WARNING 12-04 15:38:10 [loggers.py:1386] {STATS_OFF}")
    assert e.kind == "stats_disabled" and e.fields == {"reason": "api_server_count"} and e.process == "ApiServer_1"
    assert one(PODMAN + f"(APIServer pid=1) WARNING 12-04 15:38:10 [loggers.py:1357] {STATS_OFF}").kind == "stats_disabled"
    # near miss: a user's --disable-log-stats note is a plain warning
    assert _kinds("WARNING 12-04 15:38:10 [x.py:1] disabling stats logging because --disable-log-stats") == ["log"]


def test_a_request_for_an_unknown_model_is_a_client_error_not_an_error_message():
    # 0.32's text: logger.error("Error with model %s", ...) with the ErrorResponse that
    # serve/engine/serving.py:_check_model builds, printed as 0.32's own pydantic classes print it
    real = ("(APIServer pid=10233) ERROR 12-04 15:33:52 [serving.py:274] Error with model error=ErrorInfo(message="
            "'The model `no-such-model` does not exist. Valid aliases: tiny-llama.', type='NotFoundError', "
            "param='model', code=404)")
    e = one(real)
    assert e.kind == "request_error" and e.process == "APIServer"
    assert e.fields == {"status": 404, "error_type": "NotFoundError", "param": "model", "model": "no-such-model",
                        "message": "The model `no-such-model` does not exist. Valid aliases: tiny-llama."}
    # before ErrorInfo (a flat ErrorResponse), under journald; a quote in the text makes repr use "..."
    f = one(JOURNALD + "ERROR 12-04 15:33:52 [serving_chat.py:144] Error with model object='error' message=\"The "
            "model `bob's` does not exist.\" type='NotFoundError' param=None code=404").fields
    assert f == {"status": 404, "error_type": "NotFoundError", "model": "bob's",
                 "message": "The model `bob's` does not exist."}
    # the model name is the client's: one that reads like a CUDA error is still the client's
    assert _kinds(real.replace("no-such-model", "CUDA error: out of memory")) == ["request_error"]
    # near miss: the server's own "Error in ..." lines stay error messages
    assert _kinds("(APIServer pid=12) ERROR 12-04 15:34:49 [serving.py:929] Error in chat completion stream "
                  "generator.") == ["log"]
    assert _kinds("ERROR 12-04 15:33:52 [x.py:1] Error with model loading: weights missing") == ["log"]


def test_the_ulimit_warning_of_every_start_here_is_a_warning_not_a_failed_start():
    # vLLM 0.32.0 CPU build, captured here by tools/capture_vllm_run.py (scenario traffic)
    real = ("(APIServer pid=10233) WARNING 12-04 15:32:58 [system_utils.py:255] Found ulimit of 20000 and failed to "
            "automatically increase with error current limit exceeds maximum limit. This can cause fd limit errors "
            "like `OSError: [Errno 24] Too many open files`. Consider increasing with ulimit -n")
    for line in (real, JOURNALD + real.replace("20000", "1024")):
        _, events = run_lines([line], derived=True)
        assert [(e.kind, e.fields["level"]) for e in events] == [("log", "warning")]
    # nor at the start of a start-up (lifecycle sees it between the version banner and the engine)
    banner = "(APIServer pid=10233) INFO 12-04 15:32:58 [api_utils.py:347] vLLM API server version 0.32.0"
    _, events = run_lines([banner, real], derived=True)
    assert not {"startup_failure", "start_failed", "start_failure_reason"} & {e.kind for e in events}
