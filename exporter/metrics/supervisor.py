"""What the supervisor (systemd, docker compose) said of the vLLM process: exits and restarts.

Emitted:
    vllm_log_process_exits_total{supervisor,how,status} (how: exited | killed | dumped; status: the
    exit code, or the signal as SIGKILL, SIGSEGV...; clean exits too, status "0"),
    vllm_log_last_exit_timestamp_seconds,
    vllm_log_restarts_total (restarts the supervisor made on its own: systemd's Restart=, compose's
    restart policy; a `systemctl restart` or a deploy is none),
    vllm_log_unit_failures_total{result} (systemd's "Failed with result '...'": exit-code, signal,
    core-dump, oom-kill, timeout, watchdog, start-limit-hit, ...),
    vllm_log_start_limit_hits_total (systemd gave up restarting: "Start request repeated too quickly"),
    vllm_log_host_oom_kills_total (the kernel's OOM killer killed a process of the unit: host memory)

Whether an exit was a death, a failed start or the end of a stop is exporter.stream.lifecycle's to say;
these count what the supervisor said.
"""

from __future__ import annotations

import signal

from exporter.parsers.supervisor import RESULTS

_SIGNALS = frozenset(s.name for s in signal.Signals if s.name.startswith("SIG") and not s.name.startswith("SIG_"))
_EXIT_CODES = frozenset(str(i) for i in range(256))
SUPERVISORS = ("systemd", "compose", "podman-compose")


def exit_status_label(status) -> str | None:
    s = str(status)
    return s if s in _EXIT_CODES or s in _SIGNALS else None


class SupervisorMetrics:
    """Part of exporter.metrics.Metrics: what systemd and compose said."""

    def _declare_supervisor(self, S: list[str]) -> None:
        c, lg = self._counter, self._lasting_gauge
        self.exits = c("vllm_log_process_exits", "Exits of the vLLM process that its supervisor (systemd, docker "
                       "compose) logged, by how (exited, killed, dumped) and status (exit code, or signal as SIGKILL). "
                       "systemd logs only failed exits; a stop asked for is in vllm_log_server_stops_total.",
                       S + ["supervisor", "how", "status"])
        self.last_exit = lg("vllm_log_last_exit_timestamp_seconds", "Time of the last exit the supervisor logged.")
        self.restarts = c("vllm_log_restarts", "Restarts the supervisor made on its own after an exit (systemd "
                          "Restart=, compose's restart policy); a restart asked for (systemctl restart, a deploy) is none.")
        self.unit_failures = c("vllm_log_unit_failures", "systemd's verdict on a failed run of the unit "
                               "(\"Failed with result '...'\"), by result: exit-code, signal, core-dump, oom-kill, "
                               "timeout, watchdog, start-limit-hit...", S + ["result"])
        self.start_limit_hits = c("vllm_log_start_limit_hits", "systemd stopped restarting the unit: \"Start request "
                                  "repeated too quickly\" (StartLimitBurst reached). It stays down until started by hand.")
        self.host_oom_kills = c("vllm_log_host_oom_kills", "Processes of the unit the kernel's OOM killer killed "
                                "(host memory, not GPU memory: a KV offload pool or too many workers for the host's RAM).")

    def _touch_supervisor(self, server: str) -> None:
        self.restarts.touch((server,))
        self.start_limit_hits.touch((server,))
        self.host_oom_kills.touch((server,))

    def _on_process_exit(self, server, ev, f):
        sup = f.get("supervisor") if f.get("supervisor") in SUPERVISORS else "other"
        how = f.get("how") if f.get("how") in ("exited", "killed", "dumped") else "other"
        status = exit_status_label(f.get("status")) or self._overflow(server, "status")
        self.exits.inc((server, sup, how, status))
        if ev.ts is not None:
            self._set(self.last_exit, (server,), ev.ts)

    def _on_restart(self, server, ev, f):
        self.restarts.inc((server,))

    def _on_unit_result(self, server, ev, f):
        result = f.get("result")
        self.unit_failures.inc((server, result if result in RESULTS else "other"))

    def _on_start_limit(self, server, ev, f):
        self.start_limit_hits.inc((server,))

    def _on_host_oom_kill(self, server, ev, f):
        self.host_oom_kills.inc((server,))
