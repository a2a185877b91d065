"""What was done to a running engine (exporter.parsers.engine_ops): sleep mode, expert load balancing,
elastic data-parallel scaling, V0's preemptions, and its loop hanging.

Emitted:
    vllm_log_sleep_mode_transitions_total{action="sleep|wake_up|discard"} and
    vllm_log_sleep_mode_seconds_total{action} (sleep mode: an RL trainer freeing the engine's GPU memory
    between rollouts and taking it back; seconds over transitions is the mean time of each),
    vllm_log_eplb_balancedness (the last EPLB step's avg_tokens / max_tokens over the experts: 1 is even,
    lower means the busiest expert holds the batch back), vllm_log_eplb_rearrangements_total{mode="sync|async"}
    and vllm_log_eplb_rearrangement_seconds_total{mode} (experts moved while serving; the start-up profile's
    rearrangement is not one), vllm_log_eplb_rearrangements_skipped_total (a rearrangement EPLB judged not
    worth it),
    vllm_log_data_parallel_size (the data-parallel size after the last elastic scaling; absent until one),
    vllm_log_dp_scalings_total{direction="up|down"},
    vllm_log_preemptions_total{engine} (V0's preemption warning adds what its cumulative count grew by; the
    family is declared in exporter.metrics.engine),
    vllm_log_engine_hangs_total{source="iteration_timeout|watchdog"} (V0's "Engine iteration timed out", 0.33+'s
    watchdog dumping the stacks of a loop not fed within its timeout),
    vllm_log_engine_call_failures_total{method} (calls to the engine core that raised and that the engine answered
    with the failure, serving on: a LoRA adapter that would not load, a failed collective_rpc, profiling...; the
    method is the engine core's, one of exporter.parsers.engine_ops.ENGINE_CALLS, else `other`. A failed add_lora
    is also vllm_log_lora_adapter_events_total{event="load_failed"})
"""

from __future__ import annotations

from exporter.parsers.engine_ops import ENGINE_CALLS
from exporter.parsers.events import Event

SLEEP_ACTIONS = ("sleep", "wake_up", "discard")
EPLB_MODES = ("sync", "async")
HANG_SOURCES = ("iteration_timeout", "watchdog")


class EngineOpsMetrics:
    """Part of exporter.metrics.Metrics: sleep mode, EPLB, elastic DP, V0 preemptions, engine hangs."""

    def _declare_engine_ops(self, S: list[str]) -> None:
        c, w = self._counter, self._gauge
        self.sleeps = c("vllm_log_sleep_mode_transitions", "Sleep-mode transitions vLLM logged, by action: sleep (GPU "
                        "memory freed), wake_up, discard (0.31+: tags dropped without waking). RL trainers cycle them "
                        "between rollouts.", S + ["action"])
        self.sleep_secs = c("vllm_log_sleep_mode_seconds", "Seconds the sleep-mode transitions took, by action (over "
                            "vllm_log_sleep_mode_transitions_total: the mean).", S + ["action"])
        self.eplb_balance = w("vllm_log_eplb_balancedness", "Expert-parallel load balance of the last EPLB step "
                              "(avg_tokens / max_tokens over the experts, 0-1; 1 is even): the busiest expert's rank "
                              "holds every step back by 1/balancedness.")
        self.eplb_rearranged = c("vllm_log_eplb_rearrangements", "Times EPLB moved experts while serving (the start-up "
                                 "profile run's rearrangement left out), by mode (sync; async: 0.34's background "
                                 "worker).", S + ["mode"])
        self.eplb_secs = c("vllm_log_eplb_rearrangement_seconds", "Seconds EPLB's rearrangements took, by mode.",
                           S + ["mode"])
        self.eplb_skipped = c("vllm_log_eplb_rearrangements_skipped", "Rearrangements EPLB skipped as no material gain "
                              "(0.27+).")
        self.dp_size = w("vllm_log_data_parallel_size", "Data-parallel size after the last elastic scaling vLLM "
                         "completed ('[Elastic EP] Scale up|down completed'); absent until one.")
        self.dp_scalings = c("vllm_log_dp_scalings", "Elastic data-parallel scalings vLLM completed, by direction.",
                             S + ["direction"])
        self.engine_hangs = c("vllm_log_engine_hangs", "Times the engine's loop was found hung, by source: "
                              "iteration_timeout (V0: a step took longer than VLLM_ENGINE_ITERATION_TIMEOUT_S, the "
                              "engine is marked dead), watchdog (0.33+: the loop was not fed within the watchdog's "
                              "timeout; the stacks are in its dump file; its dumps at a stop are not counted).",
                              S + ["source"])
        self.call_failures = c("vllm_log_engine_call_failures", "Calls to vLLM's engine core that raised and that the "
                               "engine answered with the failure and served on ('Invocation of <method> method "
                               "failed'), by the engine core's method: add_lora (a LoRA adapter that would not load, "
                               "also counted as a LoRA load_failed), collective_rpc, profile, sleep, wake_up, "
                               "reset_prefix_cache... A worker's exception inside such a call is not a death.",
                               S + ["method"])
        self._preempted: dict[str, int] = {}

    def _on_sleep_mode(self, server: str, ev: Event, f: dict) -> None:
        action = f.get("action")
        if action in SLEEP_ACTIONS:
            self.sleeps.inc((server, action))
            self.sleep_secs.inc((server, action), max(0.0, f["seconds"]))

    def _on_eplb(self, server: str, ev: Event, f: dict) -> None:
        op = f.get("op")
        if op == "step":
            self._set(self.eplb_balance, (server,), f["balancedness"])
        elif op == "rearranged" and not f.get("profile") and f.get("mode") in EPLB_MODES:
            self.eplb_rearranged.inc((server, f["mode"]))
            self.eplb_secs.inc((server, f["mode"]), max(0.0, f["seconds"]))
        elif op == "skipped":
            self.eplb_skipped.inc((server,))

    def _on_dp_scale(self, server: str, ev: Event, f: dict) -> None:
        if f.get("direction") in ("up", "down"):
            self.dp_scalings.inc((server, f["direction"]))
            self._set(self.dp_size, (server,), f["size"])

    def _on_preemption(self, server: str, ev: Event, f: dict) -> None:
        # V0 logs the 1st, 51st, 101st... preemption with the engine's count so far: add what it grew by (from 0
        # when it went back, a restarted engine)
        n = f["cumulative"]
        last = self._preempted.get(server, 0)
        self._preempted[server] = n
        c = self.preemptions.values
        key = (server, "0")
        c[key] = c.get(key, 0.0) + (n - last if n >= last else n)

    def _on_engine_hang(self, server: str, ev: Event, f: dict) -> None:
        source = f.get("source")
        if source in HANG_SOURCES:
            self.engine_hangs.inc((server, source))
        # the loop not fed for the watchdog's timeout (300 s by default; vLLM suspends it while the engine waits
        # for work, v1/engine/core.py 0.34) is a step that hung, as V0's iteration timeout is
        if source in HANG_SOURCES and self.state.values.get((server, "serving")):
            self._hung(server)

    def _on_engine_call_failed(self, server: str, ev: Event, f: dict) -> None:
        method = f.get("method")
        method = method if method in ENGINE_CALLS else "other"
        self.call_failures.inc((server, method))
        if method == "add_lora":
            self.lora_events.inc((server, "load_failed"))

    def _forget_engine_ops(self, server: str) -> None:
        self._preempted.pop(server, None)
