"""The typed event every parser produces, and the fixed set of kinds."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

# Kind names are a public interface: `parse` prints them and users script against them.
KINDS = (
    "engine_stats",
    "mfu",
    "iteration",
    "prefix_cache",
    "spec_decode",
    "spec_calibration",
    "diffusion_decoding",
    "kv_transfer",
    "lmcache",
    "kv_cache_size",
    "max_concurrency",
    "kv_cache_memory",
    "memory_profile",
    "model_load",
    "cuda_graph",
    "kv_cache_extended",
    "init_engine",
    "supported_tasks",
    "version",
    "model",
    "engine_config",
    "gpu_blocks",
    "offload_pool",
    "access_log",
    "oom",
    "cuda_error",
    "nccl_error",
    "engine_dead",
    "startup_failure",
    "traceback",
    "log",
    # the warm-up run at start-up, vLLM's own hang warning, stats lines it will not log, a client's
    # request refused (a client error vLLM logs at ERROR)
    "warmup",
    "shm_broadcast_wait",
    "stats_disabled",
    "request_error",
    # a server ready to serve, a stop asked for (exporter.parsers.lifecycle)
    "ready",
    "shutdown",
    # vLLM's warning signs before a hang or death (exporter.parsers.warning_signs)
    "rpc_timeout",
    "worker_died",
    "ray_actor_died",
    "gpu_memory_fault",
    # recoveries and latency causes (exporter.parsers.recovery)
    "kv_load_recovered",
    "kv_load_failed",
    "lmcache_retrieve_failed",
    "lmcache_memory_unavailable",
    "jit_during_inference",
    # KV that did not arrive: the connectors' and the offload tiers' failures (exporter.parsers.kv_failures)
    "kv_connector_failure",
    "kv_offload_failure",
    "ec_connector_failure",
    # where Mooncake's store found the KV it loaded (exporter.parsers.kv_transfer)
    "mooncake_load_tiers",
    # what a running server gave up to keep serving (exporter.parsers.serving_capacity)
    "dp_fault_tolerance",
    "request_rejected",
    "max_model_len_reduced",
    "weight_cache_daemon_exit",
    "stop_requests",
    # what was done to a running engine, and its loop hanging (exporter.parsers.engine_ops)
    "sleep_mode",
    "eplb",
    "dp_scale",
    "preemption",
    "engine_hang",
    # a call to the engine core that raised and that the engine answered (exporter.parsers.engine_ops)
    "engine_call_failed",
    # the request log's bounded facts (exporter.parsers.echo: never its text) and run-time LoRA adapters
    "request_log",
    "lora_adapter",
    # vLLM's own records that begin with a request's id: a refusal, an offload store turned away (same module)
    "validation_failure",
    "kv_offload_store_refused",
    # a tool-call parser could not read the model's tool call (exporter.parsers.tool_parser)
    "tool_call_parser_failure",
    # what the supervisor (systemd, docker compose) said of the process (exporter.parsers.supervisor)
    "process_exit",
    "unit_result",
    "restart",
    "start_limit",
    "host_oom_kill",
    # a line one of the user's rules matched (exporter.parsers.rules): fields {rule, <its fields>}
    "rule",
    # what exporter.stream.lifecycle makes of the signals above: what metrics, report and alerts count
    "engine_death",
    "server_stop",
    "start_failed",
    "start_failure_reason",
    "server_state",
)

# The kinds exporter.stream.lifecycle adds (the rest come from lines)
DERIVED_KINDS = frozenset({"engine_death", "server_stop", "start_failed", "start_failure_reason", "server_state"})
# Error kinds, in the order an alert cares about them.
ERROR_KINDS = ("oom", "cuda_error", "nccl_error", "engine_dead", "startup_failure", "traceback")
# Why a start-up failed (exporter.parsers.startup_failure), a bounded label.
STARTUP_FAILURE_REASONS = ("kv_cache_too_small", "no_kv_memory", "weights_oom", "bad_argument", "model_not_found",
                           "model_access", "address_in_use", "other")


@dataclass(slots=True)
class Event:
    kind: str
    fields: dict[str, Any] = field(default_factory=dict)
    ts: float | None = None
    process: str | None = None
    pid: int | None = None
    line: int | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "ts": self.ts,
            "process": self.process,
            "pid": self.pid,
            "line": self.line,
            "fields": self.fields,
        }
