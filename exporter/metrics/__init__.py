"""Prometheus metrics kept from events. Knows nothing of where lines come from.

Every series carries ``server`` (the source's name). One module per family, each listing what it
emits (PromQL names):

- exporter.metrics.engine: stats windows (label ``engine``)
- exporter.metrics.spec_decode: speculative decoding (label ``engine``)
- exporter.metrics.offload: KV offload and connectors, LMCache
- exporter.metrics.startup: start-up facts (reset when the server starts again), version, model
- exporter.metrics.errors: errors and incidents, HTTP responses
- exporter.metrics.supervisor: exits and restarts systemd or compose logged
- exporter.metrics.warning_signs: hang and death warnings, recoveries, latency causes
- exporter.metrics.rules: the user's own rules' series (exporter.config.rules), and
  vllm_log_rule_lines_total{rule}, vllm_log_rule_invalid_values_total{rule,field},
  vllm_log_rule_label_overflow_total{metric,label} while rules are loaded
- exporter.metrics.serving: data-parallel ranks lost, requests turned away, the context length cut
- exporter.metrics.requests: the request log's counts (bounded labels), LoRA adapters, per-step latency
- exporter.metrics.engine_ops: sleep mode, expert load balancing, elastic DP scaling, engine hangs
- exporter.metrics.cost: what running each server costs, from the config (not the log)
- this module: the exporter itself:
    vllm_log_exporter_label_overflow_total{label} (log content that would have made a new label
    value beyond the bounds of exporter.metrics.labels, counted instead),
    vllm_log_last_line_timestamp_seconds, vllm_log_exporter_lines_total{result},
    vllm_log_exporter_lines_truncated_total (lines longer than --max-line-bytes, read as their first
    and last parts), vllm_log_exporter_future_timestamps_total (events stamped more than 5 minutes
    after the exporter's clock),
    vllm_log_exporter_events_total{kind}, vllm_log_exporter_source_up,
    vllm_log_exporter_source_restarts_total, vllm_log_exporter_source_events_total{event},
    vllm_log_kubernetes_pod_info{namespace,pod,container} (servers read from kubelet's pod log layout),
    vllm_log_exporter_build_info{version,needle_search},
    vllm_log_exporter_http_connections, vllm_log_exporter_http_connections_closed_total{reason},
    vllm_log_exporter_state_write_errors_total, vllm_log_exporter_alerts_sent_total{result},
    vllm_log_exporter_task_failures_total{task} (the daemon's long-lived tasks that raised and were
    started again: exporter.daemon.supervise),
    vllm_log_exporter_tls_certificate_expiry_timestamp_seconds (only with TLS)
"""

from __future__ import annotations

import time

from prometheus_client import CollectorRegistry, Counter, Gauge, generate_latest
from prometheus_client import PlatformCollector, ProcessCollector, disable_created_metrics

from exporter import __version__
from exporter.parsers.events import KINDS, Event
from exporter.parsers.needles import ENGINE as NEEDLE_SEARCH
from exporter.metrics.cost import CostMetrics
from exporter.metrics.engine import EngineMetrics
from exporter.metrics.engine_ops import EngineOpsMetrics
from exporter.metrics.errors import ErrorMetrics
from exporter.metrics.offload import OffloadMetrics
from exporter.metrics.rules import RuleMetrics
from exporter.metrics.requests import RequestMetrics
from exporter.metrics.serving import ServingMetrics
from exporter.metrics.spec_decode import SpecDecodeMetrics
from exporter.metrics.startup import StartupMetrics
from exporter.metrics.supervisor import SupervisorMetrics
from exporter.metrics.warning_signs import WarningSignMetrics
from exporter.stream.pipeline import RESULTS
from exporter.metrics.tables import CounterFamily, GaugeFamily, Table

SOURCE_EVENTS = ("truncated", "tail_lost", "rotated_late", "file_skipped")
HTTP_CLOSE_REASONS = ("header_timeout", "idle_timeout", "request_timeout", "evicted", "refused")
# the daemon's supervised tasks (exporter.daemon.supervise), each counted when it raised
TASKS = ("alerts", "source", "scan", "flush", "state", "http", "loop")
OVERFLOW_LABELS = ("engine", "worker", "method", "endpoint", "status", "gpu", "position", "confidence", "lora")


class _Collectors:
    """A registry's metrics as one collector, so that another registry can hold them too."""

    def __init__(self, registry: CollectorRegistry):
        self.registry = registry

    def collect(self):
        return self.registry.collect()


class Metrics(CostMetrics, EngineMetrics, SpecDecodeMetrics, OffloadMetrics, StartupMetrics, ErrorMetrics, SupervisorMetrics,
              WarningSignMetrics, RuleMetrics, ServingMetrics, RequestMetrics, EngineOpsMetrics):
    """``registry`` holds every metric (backfill and prometheus-client's writers read it);
    ``render()`` writes the same in the text format, faster (what /metrics serves)."""

    def __init__(self, registry: CollectorRegistry | None = None, stats_interval: float = 10.0,
                 process_metrics: bool = True):
        # `_created` series double every counter's output and no dashboard or rule here reads them.
        disable_created_metrics()
        self.registry = registry if registry is not None else CollectorRegistry()
        self.stats_interval = stats_interval
        # prometheus-client's own metric objects (process, platform, a few rarely-set gauges) ...
        self._native = CollectorRegistry()
        if process_metrics:
            ProcessCollector(registry=self._native)
            PlatformCollector(registry=self._native)
        r = self._native
        # ... and what changes with the lines, kept as plain dicts and rendered at scrape time
        # (exporter.metrics.tables): prometheus-client's per-update locking cost more than the parsing.
        self._table = Table()
        self.registry.register(_Collectors(self._native))
        self.registry.register(self._table)
        S, SE = ["server"], ["server", "engine"]

        self._declare_engine(SE)
        self._declare_spec_decode(SE)
        self._declare_offload(S)
        self._declare_startup(S)
        self._declare_errors(S)
        self._declare_supervisor(S)
        self._declare_warning_signs(S)
        self._declare_rules()  # none until set_rules (the daemon, report and test give the user's)
        self._declare_serving(S)
        self._declare_requests(S)
        self._declare_engine_ops(S)
        self._declare_cost(S)

        c, lg = self._counter, self._lasting_gauge
        self.last_line = lg("vllm_log_last_line_timestamp_seconds", "When the exporter last read a line from this server's log.")
        self.lines = c("vllm_log_exporter_lines", "Lines read, by result.", S + ["result"])
        self.lines_truncated = c("vllm_log_exporter_lines_truncated",
                                 "Lines longer than --max-line-bytes (a physical line, one joined from Kubernetes' "
                                 "CRI parts, a journal message) or JSON records of more than 2,000 lines, read as "
                                 "their first and last parts; the middle was never read.")
        self.events = c("vllm_log_exporter_events", "Events produced, by kind.", S + ["kind"])
        self.source_up = lg("vllm_log_exporter_source_up", "1 while the log source is connected/open.")
        self.source_restarts = c("vllm_log_exporter_source_restarts", "Times the log source reconnected or reopened.")
        self.source_events = c("vllm_log_exporter_source_events",
                               "What a source met: truncated (copytruncate seen), tail_lost (no copy held the "
                               "unread tail), rotated_late (a rotated file "
                               "read after the fact), file_skipped (a rotated file that could not be read).",
                               S + ["event"])
        self.pod_info = lg("vllm_log_kubernetes_pod_info", "1 for a server read from Kubernetes node logs "
                           "(/var/log/pods/<namespace>_<pod>_<uid>/<container>/N.log): its namespace, pod and "
                           "container, to join with `* on (server) group_left(namespace, container)`.",
                           S + ["namespace", "pod", "container"])
        self.future_stamps = c("vllm_log_exporter_future_timestamps",
                               "Events whose log stamp lay more than 5 minutes after the exporter's clock (the "
                               "log's time zone or year read wrong, --timezone and --year, or a clock set wrong): "
                               "their pushed alerts start when the line was read, not at the stamp.")
        self.label_overflow = c("vllm_log_exporter_label_overflow",
                                "Label values from log content beyond their bound, counted as `other`.", S + ["label"])
        Gauge("vllm_log_exporter_build_info", "Exporter version, and what searches each line for the families' and "
              "rules' words (needle_search: re2, one RE2 set for all of them; python, word by word, where google-re2 "
              "has no wheel: the same events, slower).", ["version", "needle_search"],
              registry=r).labels(__version__, NEEDLE_SEARCH).set(1)
        # The exporter's own HTTP side and state file (exporter.web.guard, exporter.daemon.daemon).
        self.http_connections = Gauge("vllm_log_exporter_http_connections", "Open HTTP connections.", registry=r)
        self.http_closed = Counter("vllm_log_exporter_http_connections_closed",
                                   "HTTP connections closed by the exporter, by reason (header_timeout, "
                                   "idle_timeout, request_timeout, evicted, refused).", ["reason"], registry=r)
        for reason in HTTP_CLOSE_REASONS:
            self.http_closed.labels(reason)
        self.alerts_sent = Counter("vllm_log_exporter_alerts_sent", "Posts of the log's own alerts to "
                                   "Alertmanager, by result (ok, error).", ["result"], registry=r)
        for result in ("ok", "error"):
            self.alerts_sent.labels(result)
        self.state_write_errors = Counter("vllm_log_exporter_state_write_errors",
                                          "Failed writes of the state file.", registry=r)
        self.task_failures = Counter("vllm_log_exporter_task_failures",
                                     "Times one of the exporter's own long-lived tasks raised and was started again, "
                                     "by task: alerts (the Alertmanager pusher), source (a log source's reader), scan "
                                     "(a glob's look for files), flush, state (the state file's saving), http (a "
                                     "scrape that could not be answered), loop (a callback of the event loop: a "
                                     "connection the HTTP server could not take, an accept with no descriptor left). "
                                     "Each is a bug or an input nobody foresaw, said in the exporter's own log.",
                                     ["task"], registry=r)
        for task in TASKS:
            self.task_failures.labels(task)

        self._servers: set[str] = set()
        self._handlers = {k: getattr(self, "_on_" + k) for k in KINDS if hasattr(self, "_on_" + k)}

    # -- the families' constructors -------------------------------------------------------------

    def _counter(self, name: str, doc: str, labels=("server",)) -> CounterFamily:
        return self._table.counter(name, doc, list(labels))

    def _gauge(self, name: str, doc: str, labels=("server",)) -> GaugeFamily:
        """A gauge dropped for a server when it starts again."""
        return self._table.gauge(name, doc, list(labels))

    def _lasting_gauge(self, name: str, doc: str, labels=("server",)) -> GaugeFamily:
        """A gauge kept across a server's restarts."""
        return self._table.gauge(name, doc, list(labels), lasting=True)

    # -- exposition -----------------------------------------------------------------------------

    def render_openmetrics(self) -> bytes:
        """The same in OpenMetrics 1.0 (for a scraper that takes nothing else)."""
        from prometheus_client.openmetrics.exposition import generate_latest as openmetrics

        self.go_idle(time.monotonic())
        return openmetrics(self.registry)

    def tls_certificate(self, not_after: float) -> None:
        """Made only when TLS is on: a 0 would read as a certificate that expired in 1970."""
        if not hasattr(self, "_tls_expiry"):
            self._tls_expiry = Gauge("vllm_log_exporter_tls_certificate_expiry_timestamp_seconds",
                                     "When the served TLS certificate expires (its notAfter).", registry=self._native)
        self._tls_expiry.set(not_after)

    def render(self) -> bytes:
        """Every metric in the text format (0.0.4), as prometheus-client's generate_latest writes
        ``registry``, the table's families by its own writer (tests compare the two)."""
        self.go_idle(time.monotonic())
        # (labels hold no surrogate, exporter.framing.text.label: "replace" only keeps a scrape from failing)
        return generate_latest(self._native) + self._table.text().encode("utf-8", "replace")

    # -- bookkeeping ----------------------------------------------------------------------------

    def add_server(self, server: str) -> None:
        """Create the known-label counters at 0, so `increase()` sees the very first increment."""
        if server in self._servers:
            return
        self._servers.add(server)
        self._touch_errors(server)
        self._touch_offload(server)
        self._touch_supervisor(server)
        self._touch_warning_signs(server)
        self._touch_rules(server)
        self._touch_cost(server)
        for label in OVERFLOW_LABELS:
            self.label_overflow.touch((server, label))
        for result in RESULTS:
            self.lines.touch((server, result))
        self.lines_truncated.touch((server,))
        self.future_stamps.touch((server,))
        self.starts.touch((server,))
        self.stops.touch((server,))  # increase() sees the first stop too
        self.source_restarts.touch((server,))
        for event in SOURCE_EVENTS:
            self.source_events.touch((server, event))
        self._set(self.source_up, (server,), 0)

    def _set(self, fam: GaugeFamily, labels: tuple[str, ...], value: float) -> None:
        fam.values[labels] = float(value)

    def reset_server(self, server: str) -> None:
        self._table.drop_gauges(server)
        self._stats_off.discard(server)
        self._workers.pop(server, None)
        self._forget_windows(server)
        self._forget_serving(server)

    def forget_server(self, server: str) -> int:
        """Every series of a server whose source is gone for good (a pod replaced by a rollout, its files
        removed by kubelet), counters included: a new pod is a new server whose counters start at 0, and
        a gone one must not stay in /metrics for ever. Returns how many series went."""
        self._clock.drop(server)  # (first: a first window still pending is not counted into series that go)
        n = self._table.forget(server)
        self.reset_server(server)
        self._models.pop(server, None)
        self._adapters.pop(server, None)
        self._tool_parsers.pop(server, None)
        self._collectives.pop(server, None)
        self._forget_engine_ops(server)
        for key in [k for k in self._position_keys if k[0] == server]:
            del self._position_keys[key]
        self._forget_rule_labels(server)
        self._servers.discard(server)
        return n

    def count_line(self, server: str, result: str, now: float | None = None) -> None:
        self.lines.inc((server, result))
        self._set(self.last_line, (server,), time.time() if now is None else now)

    def count_lines(self, server: str, counts: dict[str, int], now: float | None = None) -> None:
        for result, n in counts.items():
            if n:
                self.lines.inc((server, result), n)
        self._set(self.last_line, (server,), time.time() if now is None else now)

    def line_truncated(self, server: str) -> None:
        self.lines_truncated.inc((server,))

    def set_pod(self, server: str, namespace: str, pod: str, container: str) -> None:
        self._set(self.pod_info, (server, namespace, pod, container), 1)

    def set_source_up(self, server: str, up: bool) -> None:
        self._set(self.source_up, (server,), 1 if up else 0)

    def drop_source_up(self, server: str) -> None:
        """A source that was reported down and is no longer there to be up or down."""
        self.source_up.values.pop((server,), None)

    def source_restarted(self, server: str) -> None:
        self.source_restarts.inc((server,))

    def source_event(self, server: str, event: str) -> None:
        if event in SOURCE_EVENTS:
            self.source_events.inc((server, event))

    def _overflow(self, server: str, label: str, n: int = 1) -> str:
        self.label_overflow.inc((server, label), n)
        return "other"

    # -- events ---------------------------------------------------------------------------------

    # An event whose fields a handler cannot use (a number parse_frame left out because it was
    # absurd, a field of the wrong type from a garbled line) changes no series: it costs itself,
    # never the source that read it.
    _UNUSABLE = (KeyError, TypeError, ValueError, ArithmeticError)

    def observe(self, server: str, ev: Event) -> None:
        self.events.inc((server, ev.kind))
        handler = self._handlers.get(ev.kind)
        if handler is not None:
            try:
                handler(server, ev, ev.fields)
            except self._UNUSABLE:
                pass

    def observe_many(self, server: str, events: list[Event]) -> None:
        """``observe`` for a batch: the same result, with the events counter bumped once per kind."""
        kinds: dict[str, int] = {}
        handlers = self._handlers
        unusable = self._UNUSABLE
        for ev in events:
            kind = ev.kind
            kinds[kind] = kinds.get(kind, 0) + 1
            handler = handlers.get(kind)
            if handler is not None:
                try:
                    handler(server, ev, ev.fields)
                except unusable:
                    pass
        for kind, n in kinds.items():
            self.events.inc((server, kind), n)
