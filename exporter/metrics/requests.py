"""What the request log and the per-step details say, counted with bounded labels (exporter.parsers.echo,
exporter.parsers.iteration). No prompt, output, request id or client-given name is kept.

Emitted:
    vllm_log_requests_logged_total{lora} (requests the request logger logged, --enable-log-requests: by LoRA
    adapter, "" for the base model; the first 32 adapter names of a server, then `other`),
    vllm_log_responses_logged_total{finish_reason="stop|length|abort|tool_calls|error|other"} (finished
    responses, --enable-log-outputs),
    vllm_log_request_aborts_total (abort calls logged: one may name several requests; absent until the log
    shows requests are logged: the start-up arguments say --enable-log-requests, or a request-log record came),
    vllm_log_lora_adapter_events_total{event="loaded|removed|reloaded|load_failed"} (adapters loaded at run
    time, unloaded, reloaded in place, or failing to load: the engine's failed add_lora, exporter.metrics.engine_ops,
    or a resolver's "Failed to load LoRA" that no failed add_lora counted already),
    vllm_log_request_validation_failures_total (requests the engine core refused as invalid, 'Request ... failed
    validation', vLLM 0.33+: each is one vllm:request_success_total{finished_reason="error"} on vLLM's /metrics),
    vllm_log_tool_call_parser_failures_total{parser} (a tool-call parser could not read the model's tool call:
    its WARNING or ERROR records, the traceback of one included once; parser: the file's name without
    _tool_parser, 32 per server, then `other`),
    vllm_log_iteration_seconds{engine,batch="prefill|decode|mixed|idle"} (histogram: each engine step's
    elapsed time, --enable-logging-iteration-details, by what the batch held: context (prefill) requests
    only, generation (decode) only, both, neither; a data-parallel rank's padding step is left out)
"""

from __future__ import annotations

import re

from exporter.metrics.labels import engine_label
from exporter.parsers.events import Event

FINISH_REASONS = ("stop", "length", "abort", "tool_calls", "error")
LORA_EVENTS = ("loaded", "removed", "reloaded", "load_failed")
MAX_ADAPTERS = 32
# an adapter name kept as a label: a plain name (vLLM's served LoRA names are); anything else is `other`
_ADAPTER = re.compile(r"[\w.:@+/-]{1,64}")
# a step of a few ms (decode on a small batch) to seconds (a long prefill)
ITERATION_BUCKETS = (0.005, 0.01, 0.02, 0.03, 0.05, 0.075, 0.1, 0.15, 0.25, 0.5, 1.0, 2.5, 5.0)


class RequestMetrics:
    """Part of exporter.metrics.Metrics: the request log's counts and the per-step latency."""

    def _declare_requests(self, S: list[str]) -> None:
        c = self._counter
        self.requests_logged = c("vllm_log_requests_logged", "Requests vLLM's request logger logged "
                                 "(--enable-log-requests), by LoRA adapter (\"\" for the base model; beyond 32 "
                                 "adapters a server names, `other`).", S + ["lora"])
        self.responses_logged = c("vllm_log_responses_logged", "Finished responses vLLM's request logger logged "
                                  "(--enable-log-outputs), by finish reason.", S + ["finish_reason"])
        self.request_aborts = c("vllm_log_request_aborts", "Abort calls vLLM logged with --enable-log-requests "
                                "('Aborted request(s)'): a client gone, a stop string met server-side, a shutdown; "
                                "one call may name several requests. Absent unless the log shows requests are "
                                "logged (the start-up arguments, or a request-log record): without it vLLM logs no "
                                "abort.")
        self.lora_events = c("vllm_log_lora_adapter_events", "LoRA adapters loaded at run time, unloaded, reloaded "
                             "or failing to load, by event (the names are not kept).", S + ["event"])
        self.validation_failures = c("vllm_log_request_validation_failures", "Requests vLLM's engine core refused "
                                     "as invalid ('Request ... failed validation', vLLM 0.33+; the ids are not kept): "
                                     "each finished with reason error, counted by vLLM's own "
                                     "vllm:request_success_total{finished_reason=\"error\"}.")
        self.iteration_seconds = self._table.histogram(
            "vllm_log_iteration_seconds", "Each engine step's elapsed time (--enable-logging-iteration-details), by "
            "what the batch held: prefill (context requests only), decode (generation only), mixed, idle.",
            S + ["engine", "batch"], ITERATION_BUCKETS)
        self.tool_parser_failures = c("vllm_log_tool_call_parser_failures", "WARNING and ERROR records of vLLM's "
                                      "tool-call parsers (a tool call in the model's output they could not read: the "
                                      "client got text instead), by parser.", S + ["parser"])
        self._adapters: dict[str, set[str]] = {}
        self._tool_parsers: dict[str, set[str]] = {}

    def _request_log_on(self, server: str) -> None:
        """The log shows requests are logged: an abort count of 0 is then a count (nothing of the request log
        is born at 0 before: without --enable-log-requests vLLM logs no abort, and 0 would be a claim)."""
        self.request_aborts.touch((server,))

    def _adapter_label(self, server: str, name) -> str:
        if name is None:
            return ""
        if not isinstance(name, str) or not _ADAPTER.fullmatch(name):
            return self._overflow(server, "lora")
        seen = self._adapters.setdefault(server, set())
        if name not in seen:
            if len(seen) >= MAX_ADAPTERS:
                return self._overflow(server, "lora")
            seen.add(name)
        return name

    def _on_request_log(self, server: str, ev: Event, f: dict) -> None:
        self._request_log_on(server)
        record = f.get("record")
        if record == "received" and "lora" in f:
            self.requests_logged.inc((server, self._adapter_label(server, f["lora"])))
        elif record == "generated" and "finish_reason" in f:
            reason = f["finish_reason"]
            self.responses_logged.inc((server, reason if reason in FINISH_REASONS else "other"))
        elif record == "aborted":
            self.request_aborts.inc((server,))

    def _on_lora_adapter(self, server: str, ev: Event, f: dict) -> None:
        event = f.get("event")
        if event in LORA_EVENTS and not f.get("during"):  # (during a failed call: counted by that call)
            self.lora_events.inc((server, event))

    def _on_validation_failure(self, server: str, ev: Event, f: dict) -> None:
        self.validation_failures.inc((server,))

    def _on_tool_call_parser_failure(self, server: str, ev: Event, f: dict) -> None:
        name = f.get("parser")
        seen = self._tool_parsers.setdefault(server, set())
        if not isinstance(name, str) or (name not in seen and len(seen) >= MAX_ADAPTERS):
            name = "other"
        else:
            seen.add(name)
        self.tool_parser_failures.inc((server, name))

    def _on_iteration(self, server: str, ev: Event, f: dict) -> None:
        if f.get("dummy"):
            return
        engine = engine_label(f.get("engine", 0))
        if engine is None:
            engine = self._overflow(server, "engine")
        ctx, gen = f.get("ctx_requests", 0), f.get("gen_requests", 0)
        batch = "mixed" if ctx and gen else "prefill" if ctx else "decode" if gen else "idle"
        self.iteration_seconds.observe((server, engine, batch), f["seconds"])
