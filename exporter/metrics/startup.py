"""What a server said about itself at start-up: capacity, memory split, times, version and model.
Reset when the server starts again (its version banner), so nothing of the previous run survives.

Emitted:
    vllm_log_kv_cache_tokens{engine,device}, vllm_log_kv_cache_blocks, vllm_log_max_concurrency{engine},
    vllm_log_max_model_len_tokens{engine}, vllm_log_kv_cache_memory_bytes{worker},
    vllm_log_model_weights_bytes{worker}, vllm_log_model_load_seconds{worker},
    vllm_log_startup_memory_bytes{worker,component=peak_activation|non_torch|cuda_graph|cuda_graph_estimate|
    transient_reserve|torch_reserve_growth|encoder_cuda_graph} (two from 0.34's extensible KV cache, after warm-up;
    encoder_cuda_graph: 0.31+'s multimodal encoder's CUDA graphs), vllm_log_weights_download_seconds{worker} (time
    fetching the weights from the hub, when they were not cached),
    vllm_log_engine_init_seconds{engine}, vllm_log_engine_compile_seconds{engine}, vllm_log_max_num_seqs,
    vllm_log_model_init_seconds{worker} (building the model's modules, before its weights: "Initializing
    model took"), vllm_log_warmup_seconds{worker} (the profiling/warm-up run),
    vllm_log_server_starts_total, vllm_log_last_start_timestamp_seconds,
    vllm_log_build_info{version}, vllm_log_model_info{model,path},
    vllm_log_stats_logging_disabled{reason} (1 when the server said at start-up that it logs no stats
    lines: with data parallel and more than one API server, reason api_server_count)

``engine`` is the data-parallel rank of the engine core that logged the fact (its process name,
``EngineCore_DP1``), 0 without data parallelism: each DP engine logs its own KV size and init time.
"""

from __future__ import annotations

import re
import time

from exporter.parsers.events import Event
from exporter.metrics.labels import DEVICES, MAX_WORKERS, engine_label

STATS_DISABLED_REASONS = ("api_server_count",)
_DP_RANK = re.compile(r"_DP(\d+)$")

# The rest of the start-up profile: weights and KV cache have gauges of their own
# (vllm_log_model_weights_bytes, vllm_log_kv_cache_memory_bytes), not a second copy here.
_MEMORY_COMPONENTS = {
    "peak_activation_bytes": "peak_activation",
    "non_torch_bytes": "non_torch",
    "cuda_graph_bytes": "cuda_graph",
    # 0.34's extensible KV cache, after warm-up: what it kept free for transients, and torch's reservation growth
    "cuda_graph_estimate_bytes": "cuda_graph_estimate",  # 0.18-0.33: the estimate the KV cache was sized with
    "transient_bytes": "transient_reserve",
    "torch_reserve_growth_bytes": "torch_reserve_growth",
}


class StartupMetrics:
    """Part of exporter.metrics.Metrics: the start-up families and their handlers."""

    def _declare_startup(self, S: list[str]) -> None:
        c, w, lg = self._counter, self._gauge, self._lasting_gauge
        W, SE = S + ["worker"], S + ["engine"]
        self.kv_tokens = w("vllm_log_kv_cache_tokens", "Capacity of the main KV cache in tokens, from start-up: GPU "
                           "memory, or host memory on vLLM's CPU backend (device says which).", SE + ["device"])
        self.kv_blocks = w("vllm_log_kv_cache_blocks", "KV cache blocks on the GPU, from start-up (V0 and early V1; "
                           "--num-gpu-blocks-override's; 0.34's extensible KV cache once extended after warm-up).")
        self.max_conc = w("vllm_log_max_concurrency", "Maximum concurrency for max-length requests, from start-up.", SE)
        self.max_len = w("vllm_log_max_model_len_tokens", "Tokens per request the max-concurrency figure assumes.", SE)
        self.kv_mem = w("vllm_log_kv_cache_memory_bytes", "KV cache memory available per worker, from start-up.", W)
        self.weights = w("vllm_log_model_weights_bytes", "Model weight memory per worker, from start-up.", W)
        self.load_secs = w("vllm_log_model_load_seconds", "Model loading time per worker.", W)
        self.startup_mem = w("vllm_log_startup_memory_bytes", "GPU memory found by the start-up profile besides weights and KV cache.", W + ["component"])
        self.model_init_secs = w("vllm_log_model_init_seconds", "Time building the model's modules before any weight "
                                 "is read ('Initializing model took'), per worker.", W)
        self.download_secs = w("vllm_log_weights_download_seconds", "Time spent downloading the model's weights at "
                                "start-up, per worker (logged only when they were fetched, not found cached).", W)
        self.warmup_secs = w("vllm_log_warmup_seconds", "Time of the initial profiling/warm-up run, per worker.", W)
        self.init_secs = w("vllm_log_engine_init_seconds", "Engine init time (profile, KV cache, warm-up).", SE)
        self.compile_secs = w("vllm_log_engine_compile_seconds", "Compilation part of the engine init time.", SE)
        self.max_seqs = w("vllm_log_max_num_seqs", "max_num_seqs the server was started with, where logged.")
        self.starts = c("vllm_log_server_starts", "Server starts seen (version banner lines).")
        self.build_info = w("vllm_log_build_info", "vLLM version of the running server.", S + ["version"])
        self.model_info = w("vllm_log_model_info", "Model the server loaded: model is the name it serves "
                            "(--served-model-name) where the log gives one, else its path; path is where it "
                            "was loaded from.", S + ["model", "path"])
        self.stats_disabled = w("vllm_log_stats_logging_disabled", "1 when vLLM said at start-up that it logs no "
                                "stats lines and none came since, so the engine series stay empty: reason api_server_count (data "
                                "parallel with more than one API server; start it with --api-server-count 1).",
                                S + ["reason"])
        self.access_log_off = w("vllm_log_access_log_disabled", "1 when the server's start-up arguments switch "
                                "uvicorn's access log off (reason flag: --disable-uvicorn-access-log; log_level: "
                                "--uvicorn-log-level above info), so vllm_log_http_requests_total reads nothing: "
                                "filter endpoints with --disable-access-log-for-endpoints instead.", S + ["reason"])
        self.last_start = lg("vllm_log_last_start_timestamp_seconds", "Time of the server's last start (version banner), "
                             "so a death before it is known to be over.")
        self._workers: dict[str, set[str]] = {}
        self._stats_off: set[str] = set()  # servers that said they log no stats lines, none seen since
        self._models: dict[str, list] = {}  # server -> [served name, path] of the current run

    def _worker(self, server: str, ev: Event) -> str:
        name = ev.process or "main"
        seen = self._workers.setdefault(server, set())
        if name in seen:
            return name
        if len(seen) < MAX_WORKERS:
            seen.add(name)
            return name
        return self._overflow(server, "worker")

    def _dp_engine(self, server: str, ev: Event) -> str:
        """The engine that logged a start-up fact: its DP rank from the process name, else 0."""
        m = _DP_RANK.search(ev.process or "")
        return "0" if m is None else (engine_label(int(m.group(1))) or self._overflow(server, "engine"))

    def _on_kv_cache_size(self, server, ev, f):
        device = str(f.get("device") or "gpu").lower()
        self._set(self.kv_tokens, (server, self._dp_engine(server, ev), device if device in DEVICES else "other"),
                  f["tokens"])

    def _on_gpu_blocks(self, server, ev, f):
        self._set(self.kv_blocks, (server,), f["gpu_blocks"])

    def _on_max_concurrency(self, server, ev, f):
        engine = self._dp_engine(server, ev)
        self._set(self.max_conc, (server, engine), f["concurrency"])
        self._set(self.max_len, (server, engine), f["tokens_per_request"])

    def _on_kv_cache_memory(self, server, ev, f):
        self._set(self.kv_mem, (server, self._worker(server, ev)), f["bytes"])

    def _on_model_load(self, server, ev, f):
        w = self._worker(server, ev)
        if "weights_bytes" in f:
            self._set(self.weights, (server, w), f["weights_bytes"])
        if "seconds" in f:
            self._set(self.load_secs, (server, w), f["seconds"])
        if "init_seconds" in f:
            self._set(self.model_init_secs, (server, w), f["init_seconds"])
        if "download_seconds" in f:
            self._set(self.download_secs, (server, w), f["download_seconds"])

    def _on_cuda_graph(self, server, ev, f):
        # the main graphs' memory comes from the profile line (component cuda_graph); the encoder's has only this one
        if f.get("graph") == "encoder" and "bytes" in f:
            self._set(self.startup_mem, (server, self._worker(server, ev), "encoder_cuda_graph"), f["bytes"])

    def _on_warmup(self, server, ev, f):
        self._set(self.warmup_secs, (server, self._worker(server, ev)), f["seconds"])

    def _on_memory_profile(self, server, ev, f):
        w = self._worker(server, ev)
        for name, component in _MEMORY_COMPONENTS.items():
            if name in f:
                self._set(self.startup_mem, (server, w, component), f[name])
        if "weights_bytes" in f:
            self._set(self.weights, (server, w), f["weights_bytes"])
        if "kv_cache_bytes" in f and (server, w) not in self.kv_mem.values:
            self._set(self.kv_mem, (server, w), f["kv_cache_bytes"])

    def _on_supported_tasks(self, server, ev, f):
        self._engine_ready(server, ev)  # the API server has its engine client: vLLM's stats logger exists

    def _on_kv_cache_extended(self, server, ev, f):
        # 0.34's extensible KV cache committed its final size after warm-up: the cache the server runs with
        # (the start-up profile's figures before it were the reservation's)
        self._set(self.kv_blocks, (server,), f["blocks"])
        if "bytes" in f:
            self._set(self.kv_mem, (server, self._worker(server, ev)), f["bytes"])

    def _on_init_engine(self, server, ev, f):
        self._engine_ready(server, ev)
        engine = self._dp_engine(server, ev)
        if "seconds" in f:
            self._set(self.init_secs, (server, engine), f["seconds"])
        if "compilation_seconds" in f:
            self._set(self.compile_secs, (server, engine), f["compilation_seconds"])

    def _on_engine_config(self, server, ev, f):
        if f.get("access_log") in ("flag", "log_level"):
            self._set(self.access_log_off, (server, f["access_log"]), 1)
            self._access_log_off(server)
        if f.get("request_log") == "on":
            self._request_log_on(server)
        if isinstance(f.get("max_num_seqs"), int):
            self._set(self.max_seqs, (server,), f["max_num_seqs"])
        served = f.get("served_model_name")
        if isinstance(served, list):  # the non-default args dump gives a list
            served = served[0] if served else None
        if (served and isinstance(served, str)) or isinstance(f.get("model"), str):
            self._set_model(server, served=served if isinstance(served, str) else None,
                            path=f.get("model") if isinstance(f.get("model"), str) else None)

    def _on_stats_disabled(self, server, ev, f):
        reason = f.get("reason")
        self._set(self.stats_disabled, (server, reason if reason in STATS_DISABLED_REASONS else "other"), 1)
        self._stats_off.add(server)

    def _stats_came(self, server: str) -> None:
        """A stats window after all (a build that logs them anyway): nothing is missing."""
        self._stats_off.discard(server)
        for key in [k for k in self.stats_disabled.values if k[0] == server]:
            del self.stats_disabled.values[key]

    def notes(self) -> dict[str, str]:
        """What /healthz says of servers whose engine or HTTP metrics are missing for a reason vLLM gave."""
        out = {key[0]: f"vLLM logs no stats lines ({key[1]}): engine metrics stay empty; with data parallel, "
                       "start it with --api-server-count 1"
               for key, v in self.stats_disabled.values.items() if v}
        for key, v in self.access_log_off.values.items():
            if v:
                said = ("its access log is off (" + ("--disable-uvicorn-access-log" if key[1] == "flag" else
                        "--uvicorn-log-level above info") + "): HTTP metrics stay empty; to quiet /metrics and /health "
                        "polling, use --disable-access-log-for-endpoints instead")
                out[key[0]] = out[key[0]] + "; " + said if key[0] in out else said
        return out

    def _on_offload_pool(self, server, ev, f):
        self._set(self.kv_pool, (server,), f["bytes"])

    def _on_version(self, server, ev, f):
        # A version line opens a new start-up: everything learnt about the previous run goes.
        self.reset_server(server)
        self._set(self.last_start, (server,), ev.ts if ev.ts is not None else time.time())
        self.starts.inc((server,))
        self._only(self.build_info, server, str(f["version"])[:200])
        self._models[server] = [None, None]
        if f.get("model"):
            self._set_model(server, path=f["model"])

    def _on_model(self, server, ev, f):
        self._set_model(server, path=f["model"])

    def _set_model(self, server: str, served=None, path=None) -> None:
        known = self._models.setdefault(server, [None, None])
        if served:
            known[0] = str(served)[:300]
        if path:
            known[1] = str(path)[:300]
        self._only(self.model_info, server, known[0] or known[1] or "", known[1] or "")

    def _only(self, fam, server: str, *values: str) -> None:
        """An info gauge's one series for the server: the latest value replaces any other."""
        key = (server, *values)
        for k in [k for k in fam.values if k[0] == server and k != key]:
            del fam.values[k]
        fam.values[key] = 1.0
