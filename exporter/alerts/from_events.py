"""Alerts made from the log's own events, in the log's own words, for Alertmanager.

Which events: an OOM, a dead engine, a CUDA or NCCL error, a failed start-up. The supervisor's
word on the exit (systemd's exit status and result, compose's exit code) is added to the dead
engine's or failed start's alert as ``exit_status`` and ``unit_result``, which is posted again with it. Each becomes an
alert with the labels the rule-based alerts carry for the same thing (``alertname``, ``server``,
``kind``, ``severity``, ``job``/``instance`` as Prometheus labels the exporter, and whatever else the
scrape and Prometheus add, given as ``labels``: ``host``, and on Kubernetes the exporter pod's own
target labels), so Alertmanager merges the pushed one and the rule's into one alert, one notification. Annotations hold the
exception line and the numbers the message gives (GPU, bytes asked for, free), bounded to 1 KiB.

Deaths and failed starts are exporter.stream.lifecycle's ``engine_death`` and ``start_failed``: a routine
stop's EngineDeadError pages nobody. A failed start's alert is made at its first signal and held
back until the log gives its reason (``start_failure_reason``: the reason and its words, or the
root cause's exception line when no known reason fits), for at most REASON_WAIT_SECONDS:
Alertmanager notifies once per alert, so the words of the first post are the ones a receiver sees.

How long they last: an OOM or GPU error as long as the rules' ``increase(...[10m])`` would say
(10 minutes from when the line was read); a dead engine or a failed start-up until the server starts again
(its next version banner), which resolves it. Pure state: what to send is ``pending()``; the
sending is exporter.alerts.push.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from exporter.framing.text import chat_safe
from exporter.parsers.events import Event
from exporter.stream.lifecycle import FAILED_START_QUIET_SECONDS
from exporter.parsers.supervisor import exit_words

RECENT_SECONDS = 600.0  # the rules' 10-minute window
# A stamp further ahead of the exporter's clock than this is no time to start an alert at (a zone read
# wrong, a clock set wrong): the alert starts when the line was read (and the stamp is counted,
# vllm_log_exporter_future_timestamps_total).
FUTURE_SKEW_SECONDS = 300.0
# docs/runbook.md, one section per alert (the anchor is the alert's name in lower case); the rules
# take the same base from mixin/config.py
RUNBOOK_URL = "https://github.com/vllm-log-exporter/vllm-log-exporter/blob/main/docs/runbook.md"
DESCRIPTION_BYTES = 1024
# a failed start's reason follows its first line within the traceback's idle flush; with no known
# reason, "other" and the root cause come when the failed start is over (FAILED_START_QUIET_SECONDS)
REASON_WAIT_SECONDS = FAILED_START_QUIET_SECONDS + 2.0


@dataclass
class Alert:
    labels: dict[str, str]
    annotations: dict[str, str]
    starts_at: float
    ends_at: float | None = None  # None: until resolved by a start
    sent_at: float | None = None
    changed: bool = True
    hold_until: float | None = None  # not sent before then unless released (a failed start's reason)

    def to_api(self) -> dict:
        """Alertmanager API v2's postable alert."""
        out = {"labels": self.labels, "annotations": self.annotations, "startsAt": _rfc3339(self.starts_at)}
        if self.ends_at is not None:
            out["endsAt"] = _rfc3339(self.ends_at)
        return out


def _rfc3339(t: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(t)) + f".{int(t % 1 * 1000):03d}Z"


def _gib(v) -> str:
    return f"{v / 2**30:.2f} GiB"


_RULES = {
    "oom": ("VllmCudaOutOfMemory", "CUDA out of memory on vLLM server {server}"),
    "engine_death": ("VllmEngineDead", "vLLM engine died on {server}"),
    "cuda_error": ("VllmGpuError", "cuda_error on vLLM server {server}"),
    "nccl_error": ("VllmGpuError", "nccl_error on vLLM server {server}"),
    "start_failed": ("VllmStartupFailed", "vLLM server {server} failed to start"),
}
# the ``kind`` label the rules' alerts carry (vllm_log_errors_total's), so Alertmanager merges the two
_KIND_LABEL = {"engine_death": "engine_dead", "start_failed": "startup_failure"}


def _description(ev: Event) -> tuple[str, dict[str, str]]:
    f = ev.fields
    extra: dict[str, str] = {}
    words = f.get("message") or f.get("error") or f.get("signature") or ""
    if ev.kind == "oom" and "gpu" in f:
        extra["gpu"] = str(f["gpu"])
        parts = [f"GPU {f['gpu']}"]
        if "tried_to_allocate_bytes" in f:
            extra["requested_bytes"] = str(int(f["tried_to_allocate_bytes"]))
            parts.append(f"asked for {_gib(f['tried_to_allocate_bytes'])}")
        if "free_bytes" in f:
            extra["free_bytes"] = str(int(f["free_bytes"]))
            parts.append(f"{_gib(f['free_bytes'])} free")
        if "total_capacity_bytes" in f:
            parts.append(f"of {_gib(f['total_capacity_bytes'])}")
        words = f"{words}\n{', '.join(parts)}."
    if ev.kind in ("start_failed", "start_failure_reason"):
        extra["reason"] = str(f.get("reason", "other"))
    where = f"{ev.process or 'vLLM'}" + (f" pid {ev.pid}" if ev.pid else "")
    text = chat_safe(f"{where}: {words}".strip())  # no chat markup (<!channel>) or mass mention from log text
    raw = text.encode("utf-8")[:DESCRIPTION_BYTES]
    return raw.decode("utf-8", "ignore"), extra


@dataclass
class Alerts:
    """The alerts the log calls for, per server."""

    instance: str = ""
    job: str = "vllm-log-exporter"
    # labels the rule's copy gets from the scrape and Prometheus' external labels (on Kubernetes:
    # host, namespace, pod, container, endpoint, service; prometheus, cluster), so the two still merge
    labels: dict[str, str] = field(default_factory=dict)
    runbook_url: str = RUNBOOK_URL
    active: dict[tuple, Alert] = field(default_factory=dict)

    def observe(self, server: str, events: list[Event], now: float | None = None) -> None:
        now = time.time() if now is None else now
        for ev in events:
            if ev.kind == "version":
                self._started(server, now)
                continue
            if ev.kind == "start_failure_reason":
                self._reason(server, ev)
                continue
            if ev.kind in ("process_exit", "unit_result"):
                self._exit(server, ev)
                continue
            rule = _RULES.get(ev.kind)
            if rule is None:
                continue
            alertname, summary = rule
            labels = {"job": self.job, **self.labels, "alertname": alertname, "severity": "critical",
                      "server": server, "kind": _KIND_LABEL.get(ev.kind, ev.kind)}
            if self.instance:
                labels["instance"] = self.instance
            description, extra = _description(ev)
            annotations = {"summary": summary.format(server=server), "description": description, **extra}
            if self.runbook_url:
                annotations["runbook_url"] = f"{self.runbook_url}#{alertname.lower()}"
            starts = ev.ts if ev.ts is not None and ev.ts <= now + FUTURE_SKEW_SECONDS else now
            # 10 minutes from when it was read, as the rule sees the counter step at the next scrape (a
            # line read late, from a backlog, must not arrive already over)
            ends = None if ev.kind in ("engine_death", "start_failed") else max(starts, now) + RECENT_SECONDS
            key = tuple(sorted(labels.items()))
            hold = now + REASON_WAIT_SECONDS if ev.kind == "start_failed" else None
            self.active[key] = Alert(labels, annotations, starts, ends, hold_until=hold)

    def _reason(self, server: str, ev: Event) -> None:
        """The failed start's reason, and its words (or its root cause's), into its open alert."""
        for a in self.active.values():
            if a.labels["server"] == server and a.labels["alertname"] == "VllmStartupFailed" and a.ends_at is None:
                description, extra = _description(ev)
                a.annotations.update(description=description, **extra)
                a.changed, a.hold_until = True, None

    def _exit(self, server: str, ev: Event) -> None:
        """The supervisor's exit status and result into the server's open dead-engine or failed-start
        alert, posted again with them. A dead engine's alert is not held for them: the rule's copy
        would reach Alertmanager first and its notification would lack the log's words (a death
        known only from the exit, a SIGKILL, carries them from its first post)."""
        f = ev.fields
        if ev.kind == "process_exit" and f.get("clean"):
            return
        for a in self.active.values():
            if a.labels["server"] != server or a.ends_at is not None or \
                    a.labels["alertname"] not in ("VllmEngineDead", "VllmStartupFailed"):
                continue
            if ev.kind == "process_exit":
                a.annotations["exit_status"] = str(f.get("status_text") or f.get("status"))
                line = exit_words(f)
            else:
                a.annotations["unit_result"] = str(f.get("result"))
                line = f"systemd: failed with result '{f.get('result')}'"
            line = chat_safe(line)
            if line not in a.annotations["description"]:
                text = f"{a.annotations['description']}\n{line}"
                a.annotations["description"] = text.encode("utf-8")[:DESCRIPTION_BYTES].decode("utf-8", "ignore")
            a.changed = True

    def forget(self, server: str, now: float | None = None) -> None:
        """The server is gone for good (a replaced pod): its open alerts end now rather than be posted
        for ever."""
        now = time.time() if now is None else now
        for a in self.active.values():
            if a.labels["server"] == server and (a.ends_at is None or a.ends_at > now):
                a.ends_at, a.changed, a.hold_until = now, True, None

    def _started(self, server: str, now: float) -> None:
        """A server start resolves its dead engine and its failed start."""
        for a in self.active.values():
            if a.labels["server"] == server and a.ends_at is None:
                a.ends_at, a.changed = now, True

    def pending(self, now: float | None = None, repeat_seconds: float = 60.0) -> list[Alert]:
        """What to send now: changed alerts, and active ones not sent for ``repeat_seconds``
        (Alertmanager resolves an alert it has not heard of for its resolve_timeout)."""
        now = time.time() if now is None else now
        out = []
        for key, a in list(self.active.items()):
            if a.hold_until is not None and now < a.hold_until:
                continue
            over = a.ends_at is not None and a.ends_at <= now
            if a.changed or (not over and (a.sent_at is None or now - a.sent_at >= repeat_seconds)):
                out.append(a)
            elif over and not a.changed:
                del self.active[key]  # its end was delivered
        return out

    def sent(self, alerts: list[Alert], now: float | None = None) -> None:
        now = time.time() if now is None else now
        for a in alerts:
            a.sent_at, a.changed = now, False
