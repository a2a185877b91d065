"""What went wrong, and what the access log answered.

Emitted:
    vllm_log_http_requests_total{method,endpoint,status} (the alerted routes born at 0, unless the access log is
    off),
    vllm_log_errors_total{kind}, vllm_log_last_error_timestamp_seconds{kind},
    vllm_log_oom_requested_bytes{gpu}, vllm_log_oom_free_bytes{gpu} (the last OOM's, gpu 0-63 else other),
    vllm_log_startup_failures_total{reason}, vllm_log_messages_total{level},
    vllm_log_collective_timeouts_total{op} (PyTorch's process-group watchdog caught a collective that timed out,
    NCCL's or another platform's backend; also a nccl_error),
    vllm_log_request_errors_total{status} (a client's request refused with an ERROR line, e.g. an unknown
    model's 404: not a server error, so not in vllm_log_messages_total{level="error"}),
    vllm_log_shm_broadcast_waits_total (vLLM's own hang warning, "No available shared memory broadcast
    block found in N seconds"; while serving it marks the server's engines stalled),
    vllm_log_server_stops_total, vllm_log_last_stop_timestamp_seconds,
    vllm_log_server_state{state="starting|serving|stopped|dead|failed"} (1 for the state the log last put
    the server in; none before the log says anything of it)

Deaths, stops and failed starts are counted from what exporter.stream.lifecycle decided (its
``engine_death``, ``server_stop``, ``start_failed`` and ``start_failure_reason`` events), not from
the raw signal lines: a routine stop's EngineDeadError is no death.
"""

from __future__ import annotations

import time

from exporter.parsers.events import ERROR_KINDS, STARTUP_FAILURE_REASONS
from exporter.stream.incidents import counts_as_traceback
from exporter.stream.lifecycle import STATES
from exporter.metrics.labels import endpoint_label, engine_label, method_label, status_label

LOG_LEVELS = ("warning", "error", "critical")
ALERTED_ENDPOINTS = ("/v1/chat/completions", "/v1/completions", "/v1/responses", "/v1/embeddings")
ALERTED_STATUSES = ("429", "500", "503")
# the collectives PyTorch's watchdog names (OpType); anything else is `other`
COLLECTIVE_OPS = frozenset({"ALLREDUCE", "ALLGATHER", "_ALLGATHER_BASE", "REDUCE_SCATTER", "_REDUCE_SCATTER_BASE",
                            "BROADCAST", "REDUCE", "ALLTOALL", "ALLTOALL_BASE", "SEND", "RECV", "RECVANYSOURCE",
                            "BARRIER", "GATHER", "SCATTER", "COALESCED", "_ALLREDUCE_SPARSE", "UNKNOWN"})


class ErrorMetrics:
    """Part of exporter.metrics.Metrics: errors, incidents and HTTP responses."""

    def _declare_errors(self, S: list[str]) -> None:
        c, lg = self._counter, self._lasting_gauge
        self.http = c("vllm_log_http_requests", "HTTP responses in vLLM's access log (absent when the start-up "
                      "arguments switch it off: vllm_log_access_log_disabled).", S + ["method", "endpoint", "status"])
        self.errors = c("vllm_log_errors", "Errors seen: oom, cuda_error, nccl_error, engine_dead (one per death, "
                        "however many lines log it), startup_failure, traceback (one that is none of the others).", S + ["kind"])
        self.collective_timeouts = c("vllm_log_collective_timeouts", "Collectives PyTorch's process-group watchdog "
                                     "caught timing out (NCCL's or another platform's backend), by OpType: a hung or "
                                     "slow peer (also counted in vllm_log_errors_total{kind=\"nccl_error\"}).",
                                     S + ["op"])
        self._collectives: dict[str, list[tuple]] = {}  # server -> the last timed-out collectives counted
        self.last_error = lg("vllm_log_last_error_timestamp_seconds", "Time of the last error of each kind.", S + ["kind"])
        # the last OOM's numbers, kept across the restart it usually causes (not window gauges)
        self.oom_requested = lg("vllm_log_oom_requested_bytes", "What the last CUDA OOM tried to allocate, by GPU.",
                                S + ["gpu"])
        self.oom_free = lg("vllm_log_oom_free_bytes", "Free memory on the GPU at the last CUDA OOM, as PyTorch reported it.",
                           S + ["gpu"])
        self.startup_failures = c("vllm_log_startup_failures", "Start-ups that failed, by reason (kv_cache_too_small, "
                                  "no_kv_memory, weights_oom, bad_argument, model_not_found, model_access, address_in_use, other).", S + ["reason"])
        self.log_messages = c("vllm_log_messages", "vLLM WARNING/ERROR/CRITICAL lines not otherwise recognised.", S + ["level"])
        self.request_errors = c("vllm_log_request_errors", "Client requests vLLM refused with an ERROR line (an "
                                "unknown model's 404...), by status: the client's error, not the server's.",
                                S + ["status"])
        self.shm_waits = c("vllm_log_shm_broadcast_waits", "vLLM's own hang warning: a process found no shared "
                           "memory broadcast block for its interval (60 s). Normal once or twice while weights load; "
                           "while serving, a hang.")
        self.stops = c("vllm_log_server_stops", "Stops that were asked for (SIGTERM or SIGINT to vLLM: a deploy, a "
                       "restart, Ctrl-C), which vLLM logs with shutdown lines. Not deaths: the EngineDeadError a "
                       "routine stop logs is not counted in vllm_log_errors_total.")
        self.last_stop = lg("vllm_log_last_stop_timestamp_seconds", "Time of the server's last stop that was asked for.")
        self.state = lg("vllm_log_server_state", "1 for the state the log last put the server in: starting (version "
                        "banner), serving (ready or a stats window), stopped (a stop asked for), dead (its engine "
                        "died), failed (its start failed).", S + ["state"])

    def _touch_errors(self, server: str) -> None:
        for kind in ERROR_KINDS:
            self.errors.touch((server, kind))
        for reason in STARTUP_FAILURE_REASONS:
            self.startup_failures.touch((server, reason))
        for level in LOG_LEVELS:
            self.log_messages.touch((server, level))
        self.shm_waits.touch((server,))
        # the responses the 5xx and 429 alerts watch, born at 0 on the inference routes: a series made
        # at its first value would hide the first burst from rate()
        for endpoint in ALERTED_ENDPOINTS:
            for status in ALERTED_STATUSES:
                self.http.touch((server, "POST", endpoint, status))

    def _access_log_off(self, server: str) -> None:
        """The start-up arguments switch the access log off: the responses born at 0 for the alerts' rate()
        are a count the log cannot hold, so they go (a response that is logged after all comes back)."""
        values = self.http.values
        for key in [k for k, v in values.items() if k[0] == server and not v]:
            del values[key]

    def observe_access(self, server: str, counts: dict[tuple, int]) -> None:
        """Access-log responses counted by (method, path, status, version), as the pipeline's batch path gives them."""
        if not counts:
            return
        total = 0
        for (method, path, status, _version), n in counts.items():
            self.http.inc(self._http_labels(server, method, path, status, n), n)
            total += n
        self.events.inc((server, "access_log"), total)

    def _on_access_log(self, server, ev, f):
        self.http.inc(self._http_labels(server, f["method"], f["path"], f["status"], 1))

    def _http_labels(self, server: str, method: str, path: str, status: int, n: int) -> tuple[str, str, str, str]:
        labels = (server, method_label(method), endpoint_label(path), status_label(status))
        if "other" in labels:
            for name, v in zip(("method", "endpoint", "status"), labels[1:]):
                if v == "other":
                    self._overflow(server, name, n)
        return labels

    def _error(self, server, ev, kind):
        self.errors.inc((server, kind))
        self._set(self.last_error, (server, kind), ev.ts if ev.ts is not None else time.time())

    def _on_oom(self, server, ev, f):
        self._error(server, ev, "oom")
        if "gpu" in f:
            gpu = engine_label(f["gpu"]) or self._overflow(server, "gpu")
            if "tried_to_allocate_bytes" in f:
                self._set(self.oom_requested, (server, gpu), f["tried_to_allocate_bytes"])
            if "free_bytes" in f:
                self._set(self.oom_free, (server, gpu), f["free_bytes"])

    def _on_cuda_error(self, server, ev, f):
        self._error(server, ev, "cuda_error")

    def _on_nccl_error(self, server, ev, f):
        self._error(server, ev, "nccl_error")
        if "op" in f:
            # every rank logs the same timed-out collective (its SeqNum), and again as the watchdog thread's
            # exception: one timeout
            key = (f.get("backend"), f.get("seq_num"), f["op"])
            seen = self._collectives.setdefault(server, [])
            if key not in seen:
                seen.append(key)
                del seen[:-64]
                op = f["op"]
                self.collective_timeouts.inc((server, op if op in COLLECTIVE_OPS else "other"))

    def _on_engine_death(self, server, ev, f):
        self._error(server, ev, "engine_dead")
        self._engine_down(server)

    def _on_server_stop(self, server, ev, f):
        self.stops.inc((server,))
        self._set(self.last_stop, (server,), ev.ts if ev.ts is not None else time.time())
        self._engine_down(server)

    def _gone(self, server: str) -> bool:
        """The log last said the server was stopped or its engine died (until its next start)."""
        values = self.state.values
        return bool(values.get((server, "stopped")) or values.get((server, "dead")))

    def _on_server_state(self, server, ev, f):
        values = self.state.values
        for state in STATES:
            values[(server, state)] = 1.0 if state == f["state"] else 0.0

    def _on_start_failed(self, server, ev, f):
        self._error(server, ev, "startup_failure")

    def _on_start_failure_reason(self, server, ev, f):
        reason = f.get("reason")
        self.startup_failures.inc((server, reason if reason in STARTUP_FAILURE_REASONS else "other"))

    def _on_request_error(self, server, ev, f):
        status = f.get("status")
        self.request_errors.inc((server, status_label(status) if isinstance(status, int) else "other"))

    def _on_shm_broadcast_wait(self, server, ev, f):
        self.shm_waits.inc((server,))
        if self.state.values.get((server, "serving")):
            self._hung(server)

    def _on_traceback(self, server, ev, f):
        if counts_as_traceback(f):
            self._error(server, ev, "traceback")

    def _on_log(self, server, ev, f):
        level = f.get("level")
        if level in LOG_LEVELS:
            self.log_messages.inc((server, level))
