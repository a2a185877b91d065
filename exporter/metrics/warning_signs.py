"""vLLM's warning signs before a hang or a death, its recoveries, and the latency causes it names.

Emitted:
    vllm_log_rpc_timeouts_total{method} (the engine core's RPC to its workers timed out: the workers
    hang; while serving it marks the server's engines stalled, like a shm-broadcast wait),
    vllm_log_worker_deaths_total{executor} (a worker or engine process vLLM saw die; the death itself
    is counted once in vllm_log_errors_total{kind="engine_dead"}),
    vllm_log_ray_actor_deaths_total{possible_oom} (Ray's "The actor is dead": possible_oom says that
    Ray lists the OOM killer among the possible causes, not that it was one),
    vllm_log_gpu_memory_faults_total{fault} (ROCm's "Memory access fault by GPU node-N" or HW exception;
    the process aborts),
    vllm_log_kv_load_failures_total{outcome}, vllm_log_kv_load_failure_requests_total{outcome},
    vllm_log_kv_load_failure_tokens_total{outcome} (a KV connector failed to load blocks: outcome
    recovered = rescheduled and recomputed, failed = the requests ended in error),
    vllm_log_lmcache_retrieve_failures_total{reason}, vllm_log_lmcache_memory_unavailable_total{where},
    vllm_log_jit_compilations_during_inference_total{backend} (a kernel compiled after warm-up: a
    latency spike's cause; vLLM warns once per kernel unless verbose)
"""

from __future__ import annotations

# what vLLM's executors call; anything else (a custom RPC, a pickled callable) is "other"
RPC_METHODS = ("execute_model", "sample_tokens", "execute_dummy_batch", "take_draft_token_ids", "check_health",
               "RPCServer", "MQLLMEngine")
EXECUTORS = ("multiproc", "ray", "multiproc_v0", "process_monitor")
FAULTS = ("memory_access", "hw_exception")
KV_OUTCOMES = ("recovered", "failed")
RETRIEVE_REASONS = ("fewer_tokens", "blocks_failed", "unhealthy")
MEMORY_WHERE = ("allocator", "remote_receive", "transfer_receive", "disk_load", "store", "store_pressure")
JIT_BACKENDS = ("Triton", "CuTeDSL", "TileLang", "FlyDSL")


def _bounded(value, allowed) -> str:
    return value if value in allowed else "other"


class WarningSignMetrics:
    """Part of exporter.metrics.Metrics: warning signs, recoveries, latency causes."""

    def _declare_warning_signs(self, S: list[str]) -> None:
        c = self._counter
        self.rpc_timeouts = c("vllm_log_rpc_timeouts", "RPCs from the engine core to its workers that timed out "
                              "(TimeoutError: RPC call to execute_model timed out): the workers hang.", S + ["method"])
        self.worker_deaths = c("vllm_log_worker_deaths", "Worker or engine processes vLLM saw die unexpectedly, by "
                               "executor; the engine's death is counted once in vllm_log_errors_total{kind=\"engine_dead\"}.",
                               S + ["executor"])
        self.ray_actor_deaths = c("vllm_log_ray_actor_deaths", "Ray actors dead because their worker process died. "
                                  "possible_oom=true: Ray's text lists the OOM killer among possible causes.",
                                  S + ["possible_oom"])
        self.gpu_faults = c("vllm_log_gpu_memory_faults", "ROCm GPU faults (\"Memory access fault by GPU node-N\", "
                            "HW exception): the process aborts.", S + ["fault"])
        self.kv_load_failures = c("vllm_log_kv_load_failures", "KV connector load failures vLLM reported, by outcome: "
                                  "recovered (rescheduled, prefill recomputed) or failed (the requests ended in error).",
                                  S + ["outcome"])
        self.kv_load_requests = c("vllm_log_kv_load_failure_requests", "Requests hit by KV load failures, by outcome.",
                                  S + ["outcome"])
        self.kv_load_tokens = c("vllm_log_kv_load_failure_tokens", "Tokens whose KV failed to load, by outcome "
                                "(recovered: computed again).", S + ["outcome"])
        self.lmcache_retrieve_failures = c("vllm_log_lmcache_retrieve_failures", "LMCache retrieves that came back "
                                           "short (fewer_tokens, blocks_failed) or were skipped (unhealthy).",
                                           S + ["reason"])
        self.lmcache_memory_unavailable = c("vllm_log_lmcache_memory_unavailable", "LMCache found no free memory "
                                            "(stores dropped or cut, loads recomputed), by where.", S + ["where"])
        self.jit_during_inference = c("vllm_log_jit_compilations_during_inference", "Kernels compiled while serving, "
                                      "after warm-up (vLLM's JIT monitor; once per kernel unless verbose): a latency "
                                      "spike's cause.", S + ["backend"])

    def _touch_warning_signs(self, server: str) -> None:
        # at 0 from the start, so increase() sees the first one (and the Overview's panel has a line)
        for outcome in KV_OUTCOMES:
            self.kv_load_failures.touch((server, outcome))
        self.rpc_timeouts.touch((server, "execute_model"))
        self.worker_deaths.touch((server, "multiproc"))
        self.jit_during_inference.touch((server, "Triton"))

    def _on_rpc_timeout(self, server, ev, f):
        self.rpc_timeouts.inc((server, _bounded(f.get("method"), RPC_METHODS)))
        if self.state.values.get((server, "serving")):
            self._hung(server)

    def _on_worker_died(self, server, ev, f):
        self.worker_deaths.inc((server, _bounded(f.get("executor"), EXECUTORS)))

    def _on_ray_actor_died(self, server, ev, f):
        self.ray_actor_deaths.inc((server, "true" if f.get("possible_oom") else "false"))

    def _on_gpu_memory_fault(self, server, ev, f):
        self.gpu_faults.inc((server, _bounded(f.get("fault"), FAULTS)))

    def _kv_load(self, server, f, outcome):
        self.kv_load_failures.inc((server, outcome))
        self.kv_load_requests.inc((server, outcome), max(0, int(f.get("requests") or 0)))
        self.kv_load_tokens.inc((server, outcome), max(0, int(f.get("tokens") or 0)))

    def _on_kv_load_recovered(self, server, ev, f):
        self._kv_load(server, f, "recovered")

    def _on_kv_load_failed(self, server, ev, f):
        self._kv_load(server, f, "failed")

    def _on_lmcache_retrieve_failed(self, server, ev, f):
        if f.get("part") == "counts":
            return  # the numbers of a failure whose summary line was counted
        self.lmcache_retrieve_failures.inc((server, _bounded(f.get("reason"), RETRIEVE_REASONS)))

    def _on_lmcache_memory_unavailable(self, server, ev, f):
        self.lmcache_memory_unavailable.inc((server, _bounded(f.get("where"), MEMORY_WHERE)))

    def _on_jit_during_inference(self, server, ev, f):
        self.jit_during_inference.inc((server, _bounded(f.get("backend"), JIT_BACKENDS)))
