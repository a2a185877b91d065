"""What went wrong, and what the access log answered.

Emitted:
    vllm_log_http_requests_total{method,endpoint,status},
    vllm_log_errors_total{kind}, vllm_log_last_error_timestamp_seconds{kind},
    vllm_log_oom_requested_bytes{gpu}, vllm_log_oom_free_bytes{gpu} (the last OOM's, gpu 0-63 else other),
    vllm_log_startup_failures_total{reason}, vllm_log_messages_total{level}
"""

from __future__ import annotations

import time

from exporter.events import ERROR_KINDS, STARTUP_FAILURE_REASONS
from exporter.incidents import Deaths, StartFailures, unclassified
from exporter.metrics.labels import endpoint_label, engine_label, method_label, status_label

LOG_LEVELS = ("warning", "error", "critical")
ALERTED_ENDPOINTS = ("/v1/chat/completions", "/v1/completions", "/v1/responses", "/v1/embeddings")
ALERTED_STATUSES = ("429", "500", "503")


class ErrorMetrics:
    """Part of exporter.metrics.Metrics: errors, incidents and HTTP responses."""

    def _declare_errors(self, S: list[str]) -> None:
        c, lg = self._counter, self._lasting_gauge
        self.http = c("vllm_log_http_requests", "HTTP responses in vLLM's access log.", S + ["method", "endpoint", "status"])
        self.errors = c("vllm_log_errors", "Errors seen: oom, cuda_error, nccl_error, engine_dead (one per death, "
                        "however many lines log it), startup_failure, traceback (one that is none of the others).", S + ["kind"])
        self.last_error = lg("vllm_log_last_error_timestamp_seconds", "Time of the last error of each kind.", S + ["kind"])
        # the last OOM's numbers, kept across the restart it usually causes (not window gauges)
        self.oom_requested = lg("vllm_log_oom_requested_bytes", "What the last CUDA OOM tried to allocate, by GPU.",
                                S + ["gpu"])
        self.oom_free = lg("vllm_log_oom_free_bytes", "Free memory on the GPU at the last CUDA OOM, as PyTorch reported it.",
                           S + ["gpu"])
        self.startup_failures = c("vllm_log_startup_failures", "Start-ups that failed, by reason (kv_cache_too_small, "
                                  "no_kv_memory, weights_oom, bad_argument, other).", S + ["reason"])
        self.log_messages = c("vllm_log_messages", "vLLM WARNING/ERROR/CRITICAL lines not otherwise recognised.", S + ["level"])
        self._deaths: dict[str, Deaths] = {}
        self._start_failures: dict[str, StartFailures] = {}

    def _touch_errors(self, server: str) -> None:
        for kind in ERROR_KINDS:
            self.errors.touch((server, kind))
        for reason in STARTUP_FAILURE_REASONS:
            self.startup_failures.touch((server, reason))
        for level in LOG_LEVELS:
            self.log_messages.touch((server, level))
        # the responses the 5xx and 429 alerts watch, born at 0 on the inference routes: a series made
        # at its first value would hide the first burst from rate()
        for endpoint in ALERTED_ENDPOINTS:
            for status in ALERTED_STATUSES:
                self.http.touch((server, "POST", endpoint, status))

    def _started(self, server: str) -> None:
        """A server start: a death before it is over, a failed start before it is closed."""
        self._deaths.pop(server, None)
        tracker = self._start_failures.get(server)
        if tracker is not None:
            for r in tracker.started():
                self.startup_failures.inc((server, r))

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

    def _on_engine_dead(self, server, ev, f):
        deaths = self._deaths.get(server)
        if deaths is None:
            deaths = self._deaths[server] = Deaths()
        if deaths.is_new(ev.ts):  # one death, however many processes log it
            self._error(server, ev, "engine_dead")
        self._not_stalled(server)

    def _on_startup_failure(self, server, ev, f):
        tracker = self._start_failures.setdefault(server, StartFailures())
        reason = f.get("reason") if f.get("reason") in STARTUP_FAILURE_REASONS else "other"
        new, reasons = tracker.signal(ev.ts, reason)  # one failed start, however many lines say so
        if new:
            self._error(server, ev, "startup_failure")
        for r in reasons:
            self.startup_failures.inc((server, r))

    def _on_traceback(self, server, ev, f):
        if unclassified(f):  # an OOM's traceback is counted as the OOM
            self._error(server, ev, "traceback")

    def _on_log(self, server, ev, f):
        level = f.get("level")
        if level in LOG_LEVELS:
            self.log_messages.inc((server, level))
