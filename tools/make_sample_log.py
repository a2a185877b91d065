#!/usr/bin/env python3
"""Write the packaged sample logs (``exporter/data/sample.log``, ``sample-v0.log``, ``sample-lmcache.log``),
which the demo replays as its servers ``demo``, ``demo-v0`` and ``demo-lmcache``.

The V1 sample is a journald capture of a custom vLLM build serving a speculative-decoding model on
two GPUs with CPU KV offload, in the formats the seed article quotes: a healthy run that ends in a
CUDA OOM and a dead engine, systemd restarting it, a restart that dies of an illegal memory access (its
CPU offload's copy failing first) and an NCCL timeout (a request turned away while the engine is dead),
and a third start that stays healthy and drafts dynamically (with vLLM 0.34's MFU line and DSpark's
calibration bins), logging its requests and responses, with a LoRA adapter loaded at run time and one
tool call its parser could not read. The V0 sample is a short 0.6-era server, for the V0-only
families, that the host's OOM killer ends and systemd gives up restarting. The LMCache sample offloads
with LMCache: lookups, stores (one skipping the prefix LMCache holds, one cut short by memory
pressure), retrieves (one two blocks short, which vLLM recovers by recomputing), then a routine stop
(aborting the request in flight).

The deaths are the story's and deliberate (the OOM, the CUDA/NCCL crash, the V0 OOM kill). Families
the demo leaves empty, and why, are in docs/demo.md ("What the demo does not show"); tests/test_golden.py
checks that no other family is empty. Seeded, so the output is reproducible (tests/test_golden.py
checks the committed files are exactly what this writes):

    .venv/bin/python tools/make_sample_log.py          # rewrites exporter/data/
    .venv/bin/python tools/make_sample_log.py DIR      # writes them into DIR instead
    make golden                                        # then: their golden /metrics
"""

from __future__ import annotations

import json
import random
import sys
from datetime import datetime, timedelta
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
HOST, UNIT, UNIT_PID = "gpu-host", "vllm", 4242
API, CORE, TP0, TP1 = ("APIServer", 53), ("EngineCore", 179), ("Worker_TP0", 264), ("Worker_TP1", 265)
VERSION = "0.11.2.dev280+gilded.gnosis.v20.vllmf5981f1.cu132.r24"
MODEL = "/models/snapshots/7872f01b1d1fe23eabc4c98b48bffcef5a386062"
MONTHS = "Jan Feb Mar Apr May Jun Jul Aug Sep Oct Nov Dec".split()


class Log:
    def __init__(self, start: datetime, seed: int):
        self.t = start
        self.rng = random.Random(seed)
        self.lines: list[str] = []

    def at(self, seconds: float) -> None:
        self.t += timedelta(seconds=seconds)

    def _journald(self) -> str:
        t = self.t
        return f"{MONTHS[t.month - 1]} {t.day:02d} {t:%H:%M:%S} {HOST} {UNIT}[{UNIT_PID}]: "

    def systemd(self, text: str) -> None:
        """What systemd (PID 1) logs about the unit: journald's own tag, no vLLM header."""
        t = self.t
        self.lines.append(f"{MONTHS[t.month - 1]} {t.day:02d} {t:%H:%M:%S} {HOST} systemd[1]: {text}")

    def raw(self, proc, text: str) -> None:
        tag = f"({proc[0]} pid={proc[1]}) " if proc else ""
        self.lines.append(f"{self._journald()}{tag}{text}")

    def log(self, proc, level: str, where: str, msg: str) -> None:
        # vLLM's NewLineFormatter repeats the header on every line of a multi-line message.
        header = f"{level} {self.t:%m-%d %H:%M:%S} [{where}] "
        for part in msg.split("\n"):
            self.raw(proc, header + part)

    def access(self, method: str, path: str, status: int) -> None:
        phrase = {200: "OK", 400: "Bad Request", 404: "Not Found", 429: "Too Many Requests",
                  500: "Internal Server Error", 503: "Service Unavailable"}[status]
        port = self.rng.randint(40000, 60000)
        self.raw(API, f'INFO:     10.10.10.2:{port} - "{method} {path} HTTP/1.1" {status} {phrase}')


# The third start's extra arguments: the operator, after two deaths, logs requests and responses (with the
# adapters and finish reasons they name), lets clients load LoRA adapters at run time, and serves tool calls
# with a parser of another model family (Qwen3-Coder's: the one tool call it could not read is a warning).
DEBUG_ARGS = (", 'enable_log_requests': True, 'enable_log_outputs': True, 'enable_lora': True, 'max_loras': 2, "
              "'enable_auto_tool_choice': True, 'tool_call_parser': 'qwen3_coder'")
LORA = "sql-lora"


def startup(log: Log, *, compile_s: float, extra_args: str = "") -> None:
    log.log(API, "INFO", "api_utils.py:345",
            "\n       █     █     █▄   ▄█\n"
            f" ▄▄ ▄█ █     █     █ ▀▄▀ █  version {VERSION}\n"
            f"  █▄█▀ █     █     █     █  model   {MODEL}\n"
            "   ▀▀  ▀▀▀▀▀ ▀▀▀▀▀ ▀     ▀")
    log.log(API, "INFO", "utils.py:253",
            f"non-default args: {{'model_tag': '{MODEL}', 'port': 8000, 'model': '{MODEL}', "
            "'max_model_len': 262144, 'tensor_parallel_size': 2, 'gpu_memory_utilization': 0.975, "
            "'max_num_batched_tokens': 8192, 'max_num_seqs': 2, 'served_model_name': ['grandpa'], "
            "'speculative_config': {'method': 'dspark', 'num_speculative_tokens': 5}" + extra_args + "}")
    log.log(API, "INFO", "model.py:1745", "Using max model len 262144")
    log.at(3)
    log.log(CORE, "INFO", "core.py:93",
            f"Initializing a V1 LLM engine (v{VERSION}) with config: model='{MODEL}', "
            "speculative_config=SpeculativeConfig(method='dspark', model=None, num_spec_tokens=5), "
            f"tokenizer='{MODEL}', skip_tokenizer_init=False, dtype=torch.bfloat16, max_seq_len=262144, "
            "download_dir=None, load_format=instanttensor, tensor_parallel_size=2, pipeline_parallel_size=1, "
            "data_parallel_size=1, disable_custom_all_reduce=False, quantization=fp8, enforce_eager=False, "
            "kv_cache_dtype=fp8_ds_mla, device_config=cuda, seed=0, served_model_name=grandpa, "
            "enable_prefix_caching=True")
    log.at(2)
    for w in (TP0, TP1):
        log.raw(w, f"{HOST}:{w[1]}:{w[1]} [{w[0][-1]}] NCCL INFO cudaDriverVersion 13020")
    log.log(TP0, "INFO", "pynccl.py:111", "vLLM is using nccl==2.27.7")
    log.log(TP0, "INFO", "parallel_state.py:1208",
            "rank 0 in world size 2 is assigned as DP rank 0, PP rank 0, TP rank 0, EP rank 0")
    log.at(4)
    log.log(TP0, "INFO", "quant_config.py:75", "DeepSeek V4 expert_dtype resolved to 'fp4'")
    log.log(TP0, "INFO", "attention.py:98", "Using DeepSeek's fp8_ds_mla KV cache format.")
    log.log(TP0, "WARNING", "b12x_moe.py:810",
            "B12X MoE force-A8 enabled: using quant_mode=w4a8_mx for E8M0 FP4 weights.")
    for w in (TP0, TP1):
        log.log(w, "INFO", "base_loader.py:55", f"Initializing model took {2.351203 + (w[1] - 264) * 0.1:.6f} seconds")
    log.raw(TP0, "Loading safetensors checkpoint shards:   0% Completed | 0/46 [00:00<?, ?it/s]")
    log.at(70)
    # the engine core waits on its workers' replies the whole load: vLLM's hang warning every 60 s
    log.log(CORE, "INFO", "shm_broadcast.py:542",
            "No available shared memory broadcast block found in 60 seconds. This typically happens when some "
            "processes are hanging or doing some time-consuming work (e.g. compilation, weight/kv cache quantization).")
    log.raw(TP0, "Loading safetensors checkpoint shards: 100% Completed | 46/46 [01:10<00:00,  1.53s/it]")
    for w in (TP0, TP1):
        log.log(w, "INFO", "default_loader.py:267", f"Loading weights took {70.12 + (w[1] - 264) * 0.4:.2f} seconds")
        log.log(w, "INFO", "gpu_model_runner.py:2602",
                f"Model loading took 81.01 GiB memory and {72.345678 + (w[1] - 264) * 0.4:.6f} seconds")
    log.at(9)
    for w in (TP0, TP1):
        log.log(w, "INFO", "gpu_worker.py:617", "Available KV cache memory: 8.59 GiB")
    log.log(CORE, "INFO", "kv_cache_utils.py:2428", "GPU KV cache size: 285,336 tokens")
    log.log(CORE, "INFO", "kv_cache_utils.py:2429", "Maximum concurrency for 262,144 tokens per request: 1.09x")
    log.log(TP0, "WARNING", "base.py:493",
            "Initializing OffloadingSpec. This API is experimental and subject to change in the future as we iterate the design.")
    log.at(1)
    shm = "/dev/shm/vllm_offload_f5388900-1119-46b2-b2eb-178e4b7e21c5.mmap"
    log.log(TP0, "INFO", "shared_offload_region.py:85", f"Created mmap file {shm} (8.59 GB)")
    log.log(TP1, "INFO", "shared_offload_region.py:93", f"Opened existing mmap file {shm}")
    log.log(TP0, "INFO", "shared_offload_region.py:176", f"Unlinked mmap file {shm} after 2 workers mapped it")
    log.raw(TP0, "Capturing CUDA graphs (mixed prefill-decode, PIECEWISE): 100%|██████████| 35/35 [00:04<00:00,  7.91it/s]")
    log.raw(TP0, "Capturing CUDA graphs (decode, FULL): 100%|██████████| 19/19 [00:01<00:00, 12.40it/s]")
    log.at(5)
    for w in (TP0, TP1):
        log.log(w, "INFO", "monitor.py:56", f"[backbone] Initial profiling/warmup run took {1.37 + (w[1] - 264) * 0.02:.2f} s")
    log.log(TP0, "INFO", "gpu_model_runner.py:3480", "Graph capturing finished in 6 secs, took 0.14 GiB")
    for w in (TP0, TP1):
        log.log(w, "INFO", "gpu_worker.py:918",
                "Free memory on device (93.73/94.97 GiB) on startup. Desired GPU memory utilization is (0.975, 92.59 GiB). "
                "Actual usage is 81.01 GiB for weight, 2.45 GiB for peak activation, 0.2 GiB for non-torch memory, "
                "and 0.14 GiB for CUDAGraph memory. Replace gpu_memory_utilization config with "
                "`--kv-cache-memory-bytes=9288604570` (8.65 GiB) to fit into requested memory, or "
                "`--kv-cache-memory-bytes=10511114752` (9.79 GiB) to fully utilize gpu memory. "
                "Current kv cache memory in use is 8.59 GiB.")
    log.at(9)
    log.log(CORE, "INFO", "core.py:345",
            f"init engine (profile, create kv cache, warmup model) took 47.53 s (compilation: {compile_s:.2f} s)")
    log.log(CORE, "WARNING", "vllm.py:1758",
            "max_num_scheduled_tokens is set to 8184 based on the speculative decoding settings. This may lead to "
            "suboptimal performance. Consider increasing max_num_batched_tokens to accommodate the additional draft "
            "token slots, or decrease num_speculative_tokens or max_num_seqs.")
    log.at(1)
    log.log(API, "INFO", "api_server.py:1912", "Starting vLLM API server 0 on http://0.0.0.0:8000")
    for route, methods in (("/health", "GET"), ("/metrics", "GET"), ("/v1/models", "GET"),
                           ("/v1/chat/completions", "POST"), ("/v1/completions", "POST")):
        log.log(API, "INFO", "launcher.py:37", f"Route: {route}, Methods: {methods}")
    log.raw(API, "INFO:     Started server process [53]")
    log.raw(API, "INFO:     Waiting for application startup.")
    log.raw(API, "INFO:     Application startup complete.")


def serving(log: Log, windows: int, *, kv_peak_at: int | None = None, rate: float = 0.35,
            dynamic: bool = False, request_log: bool = False) -> None:
    """``windows`` stats intervals of 10 s: requests (``rate`` a second while busy), stats, spec
    decode and offload lines. ``dynamic``: a build that drafts dynamically (fewer tokens when unsure)
    and logs vLLM 0.34's MFU line, the draft length histogram and DSpark's calibration bins; their
    figures come from an rng of their own, so every other line is the same either way.
    ``request_log``: a server with ``--enable-log-requests --enable-log-outputs`` (``DEBUG_ARGS``): each
    completed chat request is logged as received and its response as generated (no draw from rng)."""
    rng = log.rng
    served = 0
    kv = 0.01
    for w in range(windows):
        busy = rng.random() < 0.85
        for step in range(10):
            log.at(1)
            if step % 5 == 0:
                log.access("GET", "/metrics", 200)
            if step == 7:
                log.access("GET", "/health", 200)
            if not busy:
                continue
            if rate <= 1:
                n = 1 if rng.random() < rate else 0
            else:
                n = int(rate) + (1 if rng.random() < rate - int(rate) else 0)
            for _ in range(n):
                roll = rng.random()
                status = 200 if roll < 0.93 else 400 if roll < 0.96 else 429 if roll < 0.985 else 404
                path = "/v1/chat/completions" if status != 404 else "/v1/chat/complete"
                if request_log and status == 200:
                    served += 1
                    logged_request(log, served)
                log.access("POST", path, status)
        if rng.random() < 0.05:
            log.access("GET", "/v1/models?limit=5", 200)
        if not busy:
            continue  # idle windows are logged at DEBUG by vLLM: nothing appears
        accept = min(0.99, max(0.35, rng.gauss(0.8, 0.12)))
        depth = 5
        per_pos = [max(0.0, min(1.0, accept ** (0.3 + 0.35 * i))) for i in range(depth)]
        mean_len = 1 + sum(per_pos)
        drafted = rng.randint(2400, 3200)
        accepted = int(drafted * accept)
        gen = accepted / 10 + rng.uniform(40, 70)
        prompt = rng.choice([0.0, 0.0, 0.0, rng.uniform(200, 900), rng.uniform(1500, 5800)])
        if kv_peak_at is not None and w == kv_peak_at:
            kv = 0.794
        else:
            kv = min(0.6, max(0.0, kv + rng.uniform(-0.01, 0.015)))
        running = 1 if rng.random() < 0.8 else 2
        parts = [
            f"Avg prompt throughput: {prompt:.1f} tokens/s",
            f"Avg generation throughput: {gen:.1f} tokens/s",
            f"Running: {running} reqs",
            f"Waiting: {0 if rng.random() < 0.9 else 1} reqs",
            f"GPU KV cache usage: {kv * 100:.1f}%",
            f"Prefix cache hit rate: {rng.uniform(85, 97.5):.1f}%",
            f"External prefix cache hit rate: {rng.uniform(0.5, 11.4):.1f}%",
        ]
        if rng.random() < 0.04:
            parts.insert(4, "Preemptions: 1")
        log.log(API, "INFO", "loggers.py:314", "Engine 000: " + ", ".join(parts))
        if dynamic:
            dynamic_window(log, accepted, [float(f"{p:.3f}") for p in per_pos], mean_len)
        else:
            log.log(API, "INFO", "metrics.py:125",
                    f"SpecDecoding metrics: Mean acceptance length: {mean_len:.2f}, Current speculative depth: {depth}, "
                    f"Accepted throughput: {accepted / 10:.2f} tokens/s, Drafted throughput: {drafted / 10:.2f} tokens/s, "
                    f"Accepted: {accepted} tokens, Drafted: {drafted} tokens, "
                    f"Per-position acceptance rate: {', '.join(f'{p:.3f}' for p in per_pos)}, "
                    f"Avg Draft acceptance rate: {accept * 100:.1f}%")
        if rng.random() < 0.4:
            store = rng.randint(20, 1400) * 1048576
            load = rng.randint(1, 200) * 1048576
            store_t = store / rng.uniform(52.09e9, 55.56e9)
            load_t = load / rng.uniform(48.02e9, 54.91e9)
            log.log(API, "INFO", "metrics.py:103",
                    f"KV Transfer metrics: vllm:kv_offload_cpu_cache_usage_perc={rng.uniform(0, 0.0386)!r}, "
                    f"vllm:kv_offload_load_bytes={load}, vllm:kv_offload_load_time={load_t!r}, "
                    f"vllm:kv_offload_load_size_count={rng.randint(1, 4)}, vllm:kv_offload_load_size_sum={load}, "
                    f"vllm:kv_offload_store_bytes={store}, vllm:kv_offload_store_time={store_t!r}, "
                    f"vllm:kv_offload_store_size_count={rng.randint(5, 20)}, vllm:kv_offload_store_size_sum={store}, "
                    f"vllm:kv_offload_lookup_sync_delay_seconds_count=5, "
                    f"vllm:kv_offload_lookup_sync_delay_seconds_sum={rng.uniform(5e-5, 2e-4)!r}")
        if rng.random() < 0.03:
            log.log(API, "WARNING", "protocol.py:101",
                    "The following fields were present in the request but ignored: {'reasoning_effort'}")


def logged_request(log: Log, n: int) -> None:
    """The request logger's two records of a completed chat request (vLLM 0.32's form): every third asks
    for the LoRA adapter, every eighth stops at max_tokens, the 12th is the tool call the parser could
    not read. Ids, prompts and outputs are the client's and the model's: the exporter keeps none."""
    rid = f"chatcmpl-{n:04x}d3a9"
    lora = (f"LoRARequest(lora_name='{LORA}', lora_int_id=1, lora_path='/adapters/{LORA}', base_model_name=None, "
            "tensorizer_config_dict=None, load_inplace=False)") if n % 3 == 0 else "None"
    log.log(API, "INFO", "request_logger.py:65",
            f"Received request {rid}: params: SamplingParams(n=1, presence_penalty=0.0, temperature=0.6, top_p=0.95, "
            f"seed=None, stop=[], max_tokens=2048), lora_request: {lora}.")
    if n == 12:
        log.log(API, "WARNING", "qwen3coder_tool_parser.py:140",
                "Parsed value 'ten' of parameter 'count' is not an integer in tool 'make_dirs', degenerating to string.")
    log.log(API, "INFO", "request_logger.py:108",
            f"Generated response {rid}: output: 'Here is the plan.', finish_reason: {'length' if n % 8 == 0 else 'stop'}")


CONFIDENCE_BINS = (5, 6, 7, 8, 9)  # DSpark's bins 0.5-0.6 .. 0.9-1.0 (below 0.5 it does not draft)
BIN_SHARES = (0.05, 0.10, 0.15, 0.25, 0.45)  # of the drafted tokens, most of them confident
BIN_CONFIDENCE = (0.54, 0.64, 0.74, 0.84, 0.94)  # their mean confidence


def dynamic_window(log: Log, accepted: int, per_pos: list[float], mean_len: float) -> None:
    """One window of a dynamic-drafting DSpark build, consistent with itself: drafts = accepted /
    sum(per-position rates) (vLLM's rates are per draft), the histogram's tokens are the drafted
    tokens, each position's bins hold the drafts that reached it, accepted tokens fill the most
    confident bins first."""
    rng = random.Random(int(log.t.timestamp()))
    depth = len(per_pos)
    drafts = max(1, round(accepted / sum(per_pos)))
    took = [round(p * drafts) for p in per_pos]  # accepted tokens per position
    # drafts that reached each position: a drafter unsure of its next token stops (0.87-0.94 of the
    # drafted tokens are accepted), never fewer than were accepted there, never more than before
    quality = rng.uniform(0.87, 0.94)
    reached: list[int] = []
    for i in range(depth):
        n = max(took[i], min(drafts if i == 0 else reached[-1], round(took[i] / quality)))
        reached.append(n)
    histogram = {0: drafts - reached[0], **{k: reached[k - 1] - reached[k] for k in range(1, depth)},
                 depth: reached[-1]}
    drafted = sum(reached)
    log.log(API, "INFO", "perf.py:1725", f"Engine 000: MFU: {rng.uniform(95, 280):.1f} TF/s/device "
                                         f"{rng.uniform(460, 810):.1f} GB/s/device")
    log.log(API, "INFO", "metrics.py:125",
            f"SpecDecoding metrics: Mean acceptance length: {mean_len:.2f}, Current speculative depth: {depth}, "
            f"Accepted throughput: {accepted / 10:.2f} tokens/s, Drafted throughput: {drafted / 10:.2f} tokens/s, "
            f"Accepted: {accepted} tokens, Drafted: {drafted} tokens, "
            f"Per-position acceptance rate: {', '.join(f'{p:.3f}' for p in per_pos)}, "
            f"Draft length histogram: {', '.join(f'{k}:{v}' for k, v in histogram.items() if v)}, "
            f"Avg Draft acceptance rate: {accepted / drafted * 100:.1f}%")
    counts, acc, sums = [], [], []
    for i in range(depth):
        c = [int(reached[i] * share) for share in BIN_SHARES]
        c[-1] += reached[i] - sum(c)
        a, left = [0] * len(c), took[i]
        for b in reversed(range(len(c))):  # the confident bins are accepted first
            a[b] = min(c[b], left) if b else left
            left -= a[b]
        pad = [0] * CONFIDENCE_BINS[0]
        counts.append(pad + c)
        acc.append(pad + a)
        sums.append([0.0] * CONFIDENCE_BINS[0] + [round(n * conf, 2) for n, conf in zip(c, BIN_CONFIDENCE)])
    bins = {"bins": 10, "counts": counts, "accepted": acc, "confidence_sums": sums}
    log.log(API, "INFO", "metrics.py:125", "DSpark STS calibration bins: " + json.dumps(bins, separators=(",", ":")))


def oom_crash(log: Log) -> None:
    hdr = (CORE, "ERROR", "core.py:842")
    log.log(*hdr, "EngineCore encountered a fatal error.\nTraceback (most recent call last):\n"
            '  File "/usr/local/lib/python3.12/dist-packages/vllm/v1/engine/core.py", line 833, in run_engine_core\n'
            "    engine_core.run_busy_loop()\n"
            '  File "/usr/local/lib/python3.12/dist-packages/vllm/v1/engine/core.py", line 860, in run_busy_loop\n'
            "    self._process_engine_step()\n"
            '  File "/usr/local/lib/python3.12/dist-packages/vllm/v1/worker/gpu_model_runner.py", line 2311, in execute_model\n'
            "    hidden_states = self.model(input_ids, positions)\n"
            "                    ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^\n"
            "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of "
            "94.97 GiB of which 1.07 GiB is free. Including non-PyTorch memory, this process has 93.89 GiB memory in use. "
            "Of the allocated memory 90.12 GiB is allocated by PyTorch, and 1.31 GiB is reserved by PyTorch but "
            "unallocated. If reserved but unallocated memory is large try setting "
            "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True to avoid fragmentation.")
    log.log(API, "ERROR", "async_llm.py:480", "AsyncLLM output_handler failed.")
    log.raw(API, "Traceback (most recent call last):")
    log.raw(API, '  File "/usr/local/lib/python3.12/dist-packages/vllm/v1/engine/async_llm.py", line 439, in output_handler')
    log.raw(API, "    outputs = await engine_core.get_output_async()")
    log.raw(API, "              ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^")
    log.raw(API, "vllm.v1.engine.exceptions.EngineDeadError: EngineCore encountered an issue. "
                 "See stack trace (above) for the root cause.")
    log.at(1)
    log.access("POST", "/v1/chat/completions", 500)
    log.access("POST", "/v1/chat/completions", 500)
    log.raw(API, "INFO:     Shutting down")
    log.raw(API, "INFO:     Finished server process [53]")
    restarted(log, "Main process exited, code=exited, status=1/FAILURE", "exit-code", 1)


def restarted(log: Log, exited: str, result: str, counter: int) -> None:
    """systemd's lines after the process ended: its exit, the unit's result, the automatic restart
    (Restart=on-failure, RestartSec=10), then 15 s until the new process logs its banner."""
    log.at(5)
    log.systemd(f"vllm.service: {exited}")
    log.systemd(f"vllm.service: Failed with result '{result}'.")
    log.at(10)
    log.systemd(f"vllm.service: Scheduled restart job, restart counter is at {counter}.")
    log.systemd("Stopped vLLM OpenAI server.")
    log.systemd("Started vLLM OpenAI server.")
    log.at(15)


def cuda_crash(log: Log) -> None:
    # the illegal access surfaces first in the CPU offload's copy of a finished request's blocks
    log.log(TP1, "ERROR", "gpu_worker.py:288", "KV offload GPU->CPU transfer failed for job 1187")
    log.log(TP1, "ERROR", "multiproc_executor.py:671", "WorkerProc hit an exception.")
    log.raw(TP1, "Traceback (most recent call last):")
    log.raw(TP1, '  File "/usr/local/lib/python3.12/dist-packages/vllm/v1/executor/multiproc_executor.py", line 666, in worker_busy_loop')
    log.raw(TP1, "    output = func(*args, **kwargs)")
    log.raw(TP1, "RuntimeError: CUDA error: an illegal memory access was encountered")
    log.raw(TP1, "CUDA kernel errors might be asynchronously reported at some other API call, so the stacktrace below might be incorrect.")
    log.raw(TP1, "For debugging consider passing CUDA_LAUNCH_BLOCKING=1")
    log.raw(TP1, "Compile with `TORCH_USE_CUDA_DSA` to enable device-side assertions.")
    log.at(20)
    log.raw(TP0, "[rank0]:[E1202 14:07:47.123456 ProcessGroupNCCL.cpp:632] [Rank 0] Watchdog caught collective "
                 "operation timeout: WorkNCCL(SeqNum=1203, OpType=ALLREDUCE, NumelIn=1048576, NumelOut=1048576, "
                 "Timeout(ms)=600000) ran for 600012 milliseconds before timing out.")
    log.log(CORE, "ERROR", "core_client.py:564", "Engine core proc EngineCore died unexpectedly, shutting down client.")
    # a request that came in while the engine was dead: vLLM 0.34 turns it away (no draw from rng)
    log.log(API, "INFO", "async_llm.py:352", "Engine UNHEALTHY - rejecting request chatcmpl-5e0f2a.")
    log.log(CORE, "CRITICAL", "multiproc_executor.py:48",
            "MulitprocExecutor got fatal signal from worker processes, shutting down.")
    restarted(log, "Main process exited, code=killed, status=6/ABRT", "signal", 2)


def unknown_model(log: Log) -> None:
    """A client asking for a model the server does not serve: vLLM logs it at ERROR, a client error.
    (No random draw: the seeded lines after it stay as they were.)"""
    log.log(API, "ERROR", "serving_chat.py:233",
            "Error with model error=ErrorInfo(message='The model `grandpa-v2` does not exist. Valid aliases: grandpa.', "
            "type='NotFoundError', param='model', code=404)")
    log.raw(API, 'INFO:     10.10.10.7:51234 - "POST /v1/chat/completions HTTP/1.1" 404 Not Found')


def v1_sample() -> list[str]:
    log = Log(datetime(2026, 8, 4, 2, 43, 0), seed=20260804)
    startup(log, compile_s=12.64)
    unknown_model(log)
    log.at(8)
    serving(log, 48, kv_peak_at=30)
    oom_crash(log)
    startup(log, compile_s=0.91)
    serving(log, 9)
    cuda_crash(log)
    startup(log, compile_s=0.88, extra_args=DEBUG_ARGS)
    # a client loads the LoRA adapter at run time (VLLM_ALLOW_RUNTIME_LORA_UPDATING)
    log.log(API, "INFO", "serving.py:226", f"Loaded new LoRA adapter: name '{LORA}', path '/adapters/{LORA}'")
    serving(log, 18, dynamic=True, request_log=True)
    return log.lines


def v0_sample() -> list[str]:
    """A vLLM 0.6-era server: no brackets around file:line, V0 stats and spec-decode lines."""
    log = Log(datetime(2026, 3, 10, 9, 0, 0), seed=6)
    out = []

    def v0(level, where, msg):
        out.append(f"{level} {log.t:%m-%d %H:%M:%S} {where}] {msg}")

    v0("INFO", "api_server.py:528", "vLLM API server version 0.6.3.post1")
    v0("INFO", "llm_engine.py:237", "Initializing an LLM engine (v0.6.3.post1) with config: model='meta-llama/Llama-3.1-8B-Instruct', "
       "speculative_config=SpeculativeConfig(draft_model='ibm-fms/llama3-8b-accelerator', num_spec_tokens=3), "
       "tokenizer='meta-llama/Llama-3.1-8B-Instruct', dtype=torch.bfloat16, max_seq_len=8192, tensor_parallel_size=1, "
       "pipeline_parallel_size=1, quantization=None, enforce_eager=False, kv_cache_dtype=auto, seed=0, "
       "served_model_name=llama, enable_prefix_caching=True")
    log.at(20)
    v0("INFO", "model_runner.py:1060", "Loading model weights took 14.9888 GB")
    v0("INFO", "worker.py:232", "Memory profiling results: total_gpu_memory=79.15GiB initial_memory_usage=15.54GiB "
       "peak_torch_memory=16.19GiB memory_usage_post_profile=15.65GiB non_torch_memory=0.11GiB kv_cache_size=54.93GiB "
       "gpu_memory_utilization=0.90")
    v0("INFO", "worker.py:241", "Memory profiling takes 4.32 seconds")
    v0("INFO", "worker.py:241", "the current vLLM instance can use total_gpu_memory (79.15GiB) x gpu_memory_utilization (0.90) = 71.23GiB")
    v0("INFO", "worker.py:241", "model weights take 14.99GiB; non_torch_memory takes 0.11GiB; PyTorch activation peak memory takes 1.20GiB; the rest of the memory reserved for KV Cache is 54.93GiB.")
    v0("INFO", "gpu_executor.py:122", "# GPU blocks: 28123, # CPU blocks: 2048")
    v0("INFO", "gpu_executor.py:126", "Maximum concurrency for 8192 tokens per request: 54.93x")
    log.at(12)
    v0("INFO", "model_runner.py:1523", "Graph capturing finished in 12 secs.")
    v0("INFO", "llm_engine.py:447", "init engine (profile, create kv cache, warmup model) took 18.31 seconds")
    out.append("INFO:     Started server process [7]")
    out.append("INFO:     Application startup complete.")
    rng = log.rng
    for i in range(12):
        log.at(5)
        for _ in range(rng.randint(0, 3)):
            out.append(f'INFO:     127.0.0.1:{rng.randint(40000, 60000)} - "POST /v1/completions HTTP/1.1" 200 OK')
        v0("INFO", "metrics.py:351",
           f"Avg prompt throughput: {rng.uniform(0, 900):.1f} tokens/s, Avg generation throughput: {rng.uniform(30, 90):.1f} tokens/s, "
           f"Running: {rng.randint(1, 4)} reqs, Swapped: 0 reqs, Pending: {rng.randint(0, 2)} reqs, "
           f"GPU KV cache usage: {rng.uniform(1, 30):.1f}%, CPU KV cache usage: 0.0%.")
        v0("INFO", "metrics.py:367", f"Prefix cache hit rate: GPU: {rng.uniform(20, 60):.2f}%, CPU: 0.00%")
        acc = rng.uniform(0.4, 0.9)
        drafted = rng.randint(300, 900)
        v0("INFO", "metrics.py:389",
           f"Speculative metrics: Draft acceptance rate: {acc:.3f}, System efficiency: {acc * 0.8:.3f}, "
           f"Number of speculative tokens: 3, Number of accepted tokens: {int(drafted * acc)}, "
           f"Number of draft tokens: {drafted}, Number of emitted tokens: {int(drafted * acc) + drafted // 3}.")
    v0("WARNING", "scheduler.py:1089", "Sequence group 12 is preempted by PreemptionMode.RECOMPUTE mode because there is not enough KV cache space.")
    out.append("[rank0]:[W0310 09:01:33.402918 ProcessGroupNCCL.cpp:1476] Warning: WARNING: destroy_process_group() "
               "was not called before program exit, which can leak resources.")
    # a restart with a longer context that no longer fits (V0's wording of the start-up failure)
    v0("ERROR", "engine.py:366", "ValueError: The model's max seq len (65536) is larger than the maximum number of "
       "tokens that can be stored in KV cache (28123). Try increasing `gpu_memory_utilization` or decreasing "
       "`max_model_len` when initializing the engine.")
    # systemd's view: the host's OOM killer ends the process, restarts until the start limit
    log.lines = out
    log.at(2)
    log.systemd("vllm.service: A process of this unit has been killed by the OOM killer.")
    log.systemd("vllm.service: Main process exited, code=killed, status=9/KILL")
    log.systemd("vllm.service: Failed with result 'oom-kill'.")
    log.at(10)
    log.systemd("vllm.service: Scheduled restart job, restart counter is at 5.")
    log.systemd("vllm.service: Start request repeated too quickly.")
    log.systemd("vllm.service: Failed with result 'start-limit-hit'.")
    log.systemd("Failed to start vLLM OpenAI server.")
    return out


KV_LOAD_FAILS_AT = 22  # the request whose retrieve comes back two blocks short (it had a hit)
MEMORY_PRESSURE_AT = 30  # the request whose store finds LMCache's CPU memory full (a new one: it stores)
PARTIAL_HIT_AT = 20  # the request LMCache holds all but two chunks of: its store skips the rest


def lmcache_sample() -> list[str]:
    """A server offloading its KV cache with LMCache (a second sample: the seed's uses vLLM's own
    offload). LMCache's lines carry their own header inside vLLM's process tag."""
    log = Log(datetime(2026, 9, 1, 10, 0, 0), seed=11)
    rng = log.rng
    log.log(API, "INFO", "api_server.py:1", f"vLLM API server version {VERSION}, serving model {MODEL}")
    # a line of a server with --api-server-count 2 (vLLM then logs no stats lines; this sample keeps
    # its few to show the multimodal cache rate)
    log.log(("ApiServer_1", 54), "WARNING", "loggers.py:1386",
            "AsyncLLM created with api_server_count more than 1; disabling stats logging to avoid incomplete stats.")
    log.at(20)
    log.log(TP0, "INFO", "gpu_worker.py:298", "Initial free memory 76.61 GiB, reserved 8.00 GiB memory for KV Cache as "
            "specified by kv_cache_memory_bytes config and skipped memory profiling. This does not respect the "
            "gpu_memory_utilization config. Only use kv_cache_memory_bytes config when you want manual control of KV "
            "cache memory size.")
    log.log(CORE, "INFO", "monitor.py:34", "torch.compile takes 10.51 s in total")

    def lm(proc, msg: str, where: str) -> None:
        stamp = f"{log.t:%Y-%m-%d %H:%M:%S},{rng.randint(0, 999):03d}"
        log.raw(proc, f"[{stamp}] LMCache INFO: {msg} ({where})")

    def lm_said(proc, level: str, msg: str, where: str, ms: int) -> None:
        # (no draw from rng: the lines of the original sample stay as they were)
        log.raw(proc, f"[{log.t:%Y-%m-%d %H:%M:%S},{ms:03d}] LMCache {level}: {msg} ({where})")

    adapter = "vllm_v1_adapter.py:{}:lmcache.integration.vllm.vllm_v1_adapter"

    for i in range(40):
        log.at(rng.uniform(0.5, 2.0))
        total = rng.randint(800, 6000)
        hit = (total // 256) * 256 if i % 3 else 0  # every third request is new: nothing cached
        if i == PARTIAL_HIT_AT:
            hit -= 512  # a follow-up whose last two chunks are new: LMCache holds the rest
        lm(CORE, f"Reqid: cmpl-{i:04x}-0, Total tokens {total}, LMCache hit tokens: {hit}, need to load: {hit}",
           "vllm_v1_adapter.py:1602:lmcache.integration.vllm.vllm_v1_adapter")
        log.access("POST", "/v1/completions", 200)
        if i % 10 == 9:  # a vision model: the multimodal cache in the stats line
            log.log(API, "INFO", "loggers.py:314", f"Engine 000: Avg prompt throughput: {rng.uniform(500, 3000):.1f} "
                    f"tokens/s, Avg generation throughput: {rng.uniform(50, 300):.1f} tokens/s, Running: 1 reqs, "
                    f"Waiting: 0 reqs, GPU KV cache usage: {rng.uniform(1, 20):.1f}%, Prefix cache hit rate: "
                    f"{rng.uniform(20, 80):.1f}%, MM cache hit rate: {rng.uniform(10, 60):.1f}%")
        got = hit
        if hit and i == KV_LOAD_FAILS_AT:
            # two blocks LMCache could not load: it says so, and vLLM recomputes them (no request lost)
            got = hit - 512
            lm_said(TP0, "WARNING", f"Request cmpl-{i:04x}-0 failed to load 512 tokens across 2 blocks",
                    adapter.format(1143), 417)
            log.log(CORE, "WARNING", "scheduler.py:1903",
                    "Recovered from KV load failure: 1 request(s) rescheduled (512 tokens affected).")
        if hit:
            gib = got * 0.0000512
            ms = gib / rng.uniform(14, 22) * 1000
            lm(TP0, f"[req_id=cmpl-{i:04x}-0] Retrieved {got} out of {hit} required tokens (from {total} total tokens). "
                    f"size: {gib:.4f} gb, cost {ms:.4f} ms, throughput: {gib / ms * 1000:.4f} GB/s;",
               "cache_engine.py:610:lmcache.v1.cache_engine")
        stored = (total // 256) * 256 - hit
        if stored > 0:
            # the adapter announces each store; the prefix LMCache already holds is skipped
            lm_said(CORE, "INFO", f"Storing KV cache for {stored} out of {stored + hit} tokens "
                                  f"(skip_leading_tokens={hit}) for request cmpl-{i:04x}-0", adapter.format(1322), 88)
            if i == MEMORY_PRESSURE_AT:
                # its local CPU memory full: LMCache keeps three chunks of this store and drops the rest
                lm_said(TP0, "WARNING", "Local cpu memory under pressure so choosing to store only 3 total chunks of "
                                        "KV cache.", "cache_engine.py:318:lmcache.v1.cache_engine", 902)
                stored = min(stored, 3 * 256)
            gib = stored * 0.0000512
            # (the partial store's rate and stamp are fixed, not drawn: the lines after it stay as they were)
            ms = gib / (16.0 if i == PARTIAL_HIT_AT else rng.uniform(10, 25)) * 1000
            text = (f"Stored {stored} out of total {stored} tokens. size: {gib:.4f} gb, cost {ms:.4f} ms, "
                    f"throughput: {gib / ms * 1000:.4f} GB/s; offload_time: {ms * 0.97:.4f} ms, put_time: {ms * 0.03:.4f} ms")
            if i == PARTIAL_HIT_AT:
                lm_said(TP0, "INFO", text, "cache_engine.py:446:lmcache.v1.cache_engine", 187)
            else:
                lm(TP0, text, "cache_engine.py:446:lmcache.v1.cache_engine")
    routine_stop(log)
    return log.lines


def routine_stop(log: Log) -> None:
    """A stop somebody asked for (SIGTERM, a deploy) while a request was still running, as vLLM 0.32
    logs it: the shutdown lines, then the output handler's EngineDeadError at ERROR. Not a death."""
    log.at(2)
    for where, msg in (("launcher.py:254", "[shutdown] API server: shutdown triggered"),
                       ("launcher.py:270", "[shutdown] API server: stopping engine client mode=abort timeout=0s"),
                       ("utils.py:628", "[shutdown] Process manager: send sigterm to process EngineCore")):
        log.log(API, "INFO", where, msg)
    log.log(API, "WARNING", "utils.py:653", "[shutdown] Process manager: force killing remaining process EngineCore pid 179")
    log.log(CORE, "INFO", "core.py:1454", "[shutdown] EngineCore: trigger received signal=SIGTERM")
    log.log(CORE, "INFO", "core.py:1012", "[shutdown] EngineCore: aborting in-flight requests count=1")
    log.log(API, "ERROR", "async_llm.py:906", "AsyncLLM output_handler failed.\nTraceback (most recent call last):\n"
            '  File "/usr/local/lib/python3.12/dist-packages/vllm/v1/engine/async_llm.py", line 849, in output_handler\n'
            "    outputs = await engine_core.get_output_async()\n"
            "vllm.v1.engine.exceptions.EngineDeadError: EngineCore encountered an issue. See stack trace (above) for "
            "the root cause.")
    log.log(API, "INFO", "launcher.py:304", "[shutdown] API server: shutting down FastAPI HTTP server")
    log.raw(None, "INFO:     Shutting down")
    log.raw(None, "INFO:     Waiting for application shutdown.")
    log.raw(None, "INFO:     Application shutdown complete.")


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    data = Path(argv[0]) if argv else ROOT / "exporter" / "data"
    data.mkdir(parents=True, exist_ok=True)
    for name, lines in (("sample.log", v1_sample()), ("sample-v0.log", v0_sample()),
                        ("sample-lmcache.log", lmcache_sample())):
        (data / name).write_text("\n".join(lines) + "\n", encoding="utf-8")
        print(f"wrote {data / name} ({len(lines)} lines)", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
