"""What a running server gave up to keep serving: data-parallel ranks fault tolerance dropped, requests
turned away at the door, a context length vLLM cut to fit its KV cache (exporter.parsers.serving_capacity).

Emitted:
    vllm_log_dp_fault_tolerance_events_total{event="engine_fault|scale_down|recovery_timeout|recovery_failed|
    instruction_failed"} (what vLLM's fault tolerance logged: an engine's loop failed and waits, ranks were
    dropped (once per scale-down, though every surviving engine logs it), a recovery timed out or failed),
    vllm_log_dp_ranks_lost_total (data-parallel ranks fault tolerance dropped, each once however many
    surviving engines say so), vllm_log_dp_dead_ranks (ranks dropped since the server started: it serves with
    that many engines fewer; dropped at the next start),
    vllm_log_requests_rejected_total{reason="engine_status|queue_full|queued_tokens|shutting_down|
    prompt_too_long|no_kv_blocks"} (requests vLLM refused before serving them, by why),
    vllm_log_max_model_len_requested_tokens{engine} (the context length asked for, present only when vLLM cut
    it to fit its KV cache: the length it serves is vllm_log_max_model_len_tokens; longer requests get HTTP 400),
    vllm_log_weight_cache_daemon_exits_total{during="startup|serving"} (the weight-cache daemon, vllm preload,
    lost ranks and shut down: servers start without its cached weights),
    vllm_log_stop_requests_total{action="aborted|drained"} (requests in flight when a stop came: aborted, or
    drained within --shutdown-timeout)
"""

from __future__ import annotations

from exporter.parsers.events import Event

FT_EVENTS = ("engine_fault", "scale_down", "recovery_timeout", "recovery_failed", "instruction_failed")
REJECT_REASONS = ("engine_status", "queue_full", "queued_tokens", "shutting_down", "prompt_too_long", "no_kv_blocks")
MAX_RANKS = 4096


class ServingMetrics:
    """Part of exporter.metrics.Metrics: fault tolerance, admission, the context length cut."""

    def _declare_serving(self, S: list[str]) -> None:
        c, w = self._counter, self._gauge
        self.ft_events = c("vllm_log_dp_fault_tolerance_events", "What vLLM's data-parallel fault tolerance logged, "
                           "by event: engine_fault (an engine core's loop failed and waits for recovery), scale_down "
                           "(dead ranks dropped), recovery_timeout, recovery_failed, instruction_failed.", S + ["event"])
        self.dp_ranks_lost = c("vllm_log_dp_ranks_lost", "Data-parallel ranks vLLM's fault tolerance dropped (each "
                               "once, however many surviving engines report it): the server serves on, with less "
                               "capacity.")
        self.dp_dead_ranks = w("vllm_log_dp_dead_ranks", "Data-parallel ranks dropped since the server started (its "
                               "cumulative dead_dp_ranks): engines it serves without until it is restarted.")
        self.rejected = c("vllm_log_requests_rejected", "Requests vLLM turned away before serving them, by reason: "
                          "engine_status (fault tolerance: the engine is not healthy), queue_full, queued_tokens "
                          "(admission limits), shutting_down, prompt_too_long, no_kv_blocks (V0).", S + ["reason"])
        self.max_len_requested = w("vllm_log_max_model_len_requested_tokens", "The context length asked for, when vLLM "
                                   "cut it to fit its KV cache (--max-model-len auto); the length served is "
                                   "vllm_log_max_model_len_tokens, and longer requests get HTTP 400.", S + ["engine"])
        self.weight_cache_exits = c("vllm_log_weight_cache_daemon_exits", "Times the weight-cache daemon (vllm "
                                    "preload) had ranks exit and shut down, by when (startup, serving): servers "
                                    "then load their weights without it.", S + ["during"])
        self.stop_requests = c("vllm_log_stop_requests", "Requests in flight when the engine was stopped, by what the "
                               "stop did with them: aborted (the clients got errors), drained (waited for, "
                               "--shutdown-timeout).", S + ["action"])
        self._dead_ranks: dict[str, set[int]] = {}

    def _on_dp_fault_tolerance(self, server: str, ev: Event, f: dict) -> None:
        event = f.get("event")
        if event != "scale_down":
            if event in FT_EVENTS:
                self.ft_events.inc((server, event))
            return
        # every surviving engine logs the same scale-down: it counts once, by the ranks it adds
        dead = self._dead_ranks.setdefault(server, set())
        new = {r for r in list(f.get("dead_ranks") or ()) + list(f.get("removed") or ()) if isinstance(r, int)} - dead
        if new and len(dead) < MAX_RANKS:
            dead.update(new)
            self.dp_ranks_lost.inc((server,), len(new))
            self.ft_events.inc((server, event))
        self._set(self.dp_dead_ranks, (server,), len(dead))

    def _on_request_rejected(self, server: str, ev: Event, f: dict) -> None:
        reason = f.get("reason")
        self.rejected.inc((server, reason if reason in REJECT_REASONS else "other"))

    def _on_max_model_len_reduced(self, server: str, ev: Event, f: dict) -> None:
        engine = self._dp_engine(server, ev)
        self._set(self.max_len_requested, (server, engine), f["from_tokens"])
        self._set(self.max_len, (server, engine), f["to_tokens"])

    def _on_weight_cache_daemon_exit(self, server: str, ev: Event, f: dict) -> None:
        during = f.get("during")
        self.weight_cache_exits.inc((server, during if during in ("startup", "serving") else "other"))

    def _on_stop_requests(self, server: str, ev: Event, f: dict) -> None:
        if f.get("action") in ("aborted", "drained"):
            self.stop_requests.inc((server, f["action"]), f["requests"])

    def _forget_serving(self, server: str) -> None:
        self._dead_ranks.pop(server, None)
