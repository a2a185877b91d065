"""Prometheus metrics kept from events. Knows nothing of where lines come from.

Every series carries ``server`` (the source's name). Metrics exposed (PromQL names):

Engine stats, from each ``Engine NNN`` stats window (label ``engine``):
    vllm_log_prompt_throughput_tokens_per_second, vllm_log_generation_throughput_tokens_per_second,
    vllm_log_requests_running, vllm_log_requests_waiting, vllm_log_requests_swapped (V0),
    vllm_log_gpu_kv_cache_usage_ratio, vllm_log_cpu_kv_cache_usage_ratio (V0),
    vllm_log_prefix_cache_hit_ratio, vllm_log_external_prefix_cache_hit_ratio, vllm_log_mm_cache_hit_ratio,
    vllm_log_prompt_tokens_total, vllm_log_generation_tokens_total (estimated: window average
    x window length), vllm_log_preemptions_total, vllm_log_stats_windows_total,
    vllm_log_engine_stalled (1: the last window was busy and no window came for 3 intervals)
Speculative decoding (label ``engine``):
    vllm_log_spec_decode_accepted_tokens_total, vllm_log_spec_decode_drafted_tokens_total,
    vllm_log_spec_decode_mean_acceptance_length, vllm_log_spec_decode_draft_acceptance_ratio,
    vllm_log_spec_decode_position_acceptance_ratio{position}, vllm_log_spec_decode_depth,
    vllm_log_spec_decode_window_mean_acceptance_length (histogram),
    vllm_log_spec_decode_window_draft_acceptance_ratio (histogram)
KV offload / connectors:
    vllm_log_kv_offload_bytes_total{direction="store|load"}, vllm_log_kv_offload_seconds_total{direction},
    vllm_log_kv_offload_throughput_bytes_per_second{direction} (histogram of per-interval rates),
    vllm_log_kv_offload_cpu_cache_usage_ratio, vllm_log_kv_offload_pool_bytes,
    vllm_log_kv_connector_transfers_total{result="ok|failed"},
    vllm_log_lmcache_bytes_total{direction="store|retrieve"}, vllm_log_lmcache_seconds_total{direction},
    vllm_log_lmcache_tokens_total{direction}, vllm_log_lmcache_requested_tokens_total,
    vllm_log_lmcache_hit_tokens_total (LMCache's own lines; made at the first one)
Start-up facts (reset when the server starts again):
    vllm_log_gpu_kv_cache_tokens, vllm_log_gpu_kv_cache_blocks, vllm_log_max_concurrency,
    vllm_log_max_model_len_tokens, vllm_log_kv_cache_memory_bytes{worker},
    vllm_log_model_weights_bytes{worker}, vllm_log_model_load_seconds{worker},
    vllm_log_startup_memory_bytes{worker,component=peak_activation|non_torch|cuda_graph},
    vllm_log_engine_init_seconds,
    vllm_log_engine_compile_seconds, vllm_log_max_num_seqs, vllm_log_server_starts_total,
    vllm_log_build_info{version}, vllm_log_model_info{model,path}
HTTP and errors:
    vllm_log_http_requests_total{method,endpoint,status},
    vllm_log_errors_total{kind}, vllm_log_last_error_timestamp_seconds{kind}, vllm_log_last_start_timestamp_seconds,
    vllm_log_oom_requested_bytes{gpu}, vllm_log_oom_free_bytes{gpu} (the last OOM's, gpu 0-63 else other),
    vllm_log_startup_failures_total{reason},
    vllm_log_messages_total{level}
The exporter itself:
    vllm_log_exporter_label_overflow_total{label} (log content that would have made a new label
    value beyond the bounds below, counted instead),
    vllm_log_last_line_timestamp_seconds, vllm_log_exporter_lines_total{result},
    vllm_log_exporter_events_total{kind}, vllm_log_exporter_source_up,
    vllm_log_exporter_source_restarts_total, vllm_log_exporter_source_events_total{event},
    vllm_log_exporter_build_info{version},
    vllm_log_exporter_http_connections, vllm_log_exporter_http_connections_closed_total{reason},
    vllm_log_exporter_state_write_errors_total, vllm_log_exporter_alerts_sent_total{result},
    vllm_log_exporter_tls_certificate_expiry_timestamp_seconds (only with TLS)

Labels taken from log content are bounded, so no log (or attacker writing to it) can make series
without end: ``engine`` is 0-63 or ``aggregated``, ``worker`` the first 32 process names of a run,
``status`` a registered HTTP status code, ``method`` and ``endpoint`` fixed sets; anything else is
``other``. ``model_info`` and ``build_info`` keep one series per server, the latest.
"""

from __future__ import annotations

import time
from http import HTTPStatus

from prometheus_client import CollectorRegistry, Counter, Gauge, generate_latest
from prometheus_client import PlatformCollector, ProcessCollector, disable_created_metrics

from exporter import __version__
from exporter.events import ERROR_KINDS, KINDS, STARTUP_FAILURE_REASONS, Event
from exporter.incidents import Deaths, StartFailures, busy_window, unclassified
from exporter.pipeline import RESULTS
from exporter.tables import CounterFamily, GaugeFamily, Table

# The routes vLLM's OpenAI server (and its health/metrics endpoints) answer; anything else is
# "other", so a scanner requesting random paths cannot create series.
KNOWN_ENDPOINTS = frozenset(
    """
    /v1/chat/completions /v1/completions /v1/embeddings /v1/models /v1/responses /v1/messages
    /v1/audio/transcriptions /v1/audio/translations /v1/rerank /v2/rerank /rerank /v1/score /score
    /pooling /classify /tokenize /detokenize /health /ping /metrics /version /load /invocations
    /server_info /is_sleeping /sleep /wake_up /reset_prefix_cache /reset_mm_cache
    /v1/load_lora_adapter /v1/unload_lora_adapter /collective_rpc /scale_elastic_ep
    /is_scaling_elastic_ep /generate /docs /openapi.json /redoc /pause /resume /is_paused
    """.split()
)
_POSITIONS = tuple(str(i) for i in range(32))
_ENGINES = tuple(str(i) for i in range(64))
MAX_WORKERS = 32
IDLE_AFTER_WINDOWS = 2  # stats intervals without a stats line before an engine's window gauges read 0
STALLED_AFTER_WINDOWS = 3  # ... and, when its last window was busy, before it reads stalled
ALERTED_ENDPOINTS = ("/v1/chat/completions", "/v1/completions", "/v1/responses", "/v1/embeddings")
ALERTED_STATUSES = ("429", "500", "503")
SOURCE_EVENTS = ("truncated", "tail_lost", "rotated_late", "file_skipped")
HTTP_CLOSE_REASONS = ("header_timeout", "idle_timeout", "request_timeout", "evicted", "refused")
_STATUSES = frozenset(int(s) for s in HTTPStatus)


def _engine_label(engine) -> str | None:
    """The label of engine number ``engine`` (made once each), None beyond the bound."""
    return _ENGINES[engine] if type(engine) is int and 0 <= engine < 64 else None
KNOWN_METHODS = frozenset("GET POST PUT DELETE PATCH HEAD OPTIONS".split())
LOG_LEVELS = ("warning", "error", "critical")

ACCEPTANCE_LENGTH_BUCKETS = (1.0, 1.5, 2.0, 2.5, 3.0, 3.5, 4.0, 4.5, 5.0, 5.5, 6.0, 7.0, 8.0, 10.0, 16.0)
RATIO_BUCKETS = (0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.85, 0.9, 0.95, 0.98, 1.0)
# Per-interval offload rates: PCIe 3 x16 (~16 GB/s) to PCIe 5 x16 (~64 GB/s) and NVLink-C2C beyond.
THROUGHPUT_BUCKETS = (1e8, 5e8, 1e9, 2.5e9, 5e9, 1e10, 1.5e10, 2e10, 3e10, 4e10, 5e10, 5.5e10, 6e10, 8e10, 1.2e11, 2e11)

_DIRECTIONS = (("store", "store_bytes", "store_seconds"), ("load", "load_bytes", "load_seconds"))

# The rest of the start-up profile: weights and KV cache have gauges of their own
# (vllm_log_model_weights_bytes, vllm_log_kv_cache_memory_bytes), not a second copy here.
_MEMORY_COMPONENTS = {
    "peak_activation_bytes": "peak_activation",
    "non_torch_bytes": "non_torch",
    "cuda_graph_bytes": "cuda_graph",
}


def endpoint_label(path: str) -> str:
    return path if path in KNOWN_ENDPOINTS else "other"


def method_label(method: str) -> str:
    m = method.upper()
    return m if m in KNOWN_METHODS else "other"


def status_label(status: int) -> str:
    return str(status) if status in _STATUSES else "other"


class _Collectors:
    """A registry's metrics as one collector, so that another registry can hold them too."""

    def __init__(self, registry: CollectorRegistry):
        self.registry = registry

    def collect(self):
        return self.registry.collect()


class Metrics:
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
        S, SE = ["server"], ["server", "engine"]

        def g(name, doc, labels=S):
            return Gauge(name, doc, labels, registry=r)

        # ... and what changes with the lines, kept as plain dicts and rendered at scrape time
        # (exporter.tables): prometheus-client's per-update locking cost more than the parsing.
        self._table = Table()
        self.registry.register(_Collectors(self._native))
        self.registry.register(self._table)

        def c(name, doc, labels=S) -> CounterFamily:
            return self._table.counter(name, doc, labels)

        def w(name, doc, labels=S) -> GaugeFamily:
            return self._table.gauge(name, doc, labels)

        def lg(name, doc, labels=S) -> GaugeFamily:  # kept across a server's restarts
            return self._table.gauge(name, doc, labels, lasting=True)

        # Window gauges: dropped for a server when it starts again, so nothing stale survives a restart.
        self.prompt_tps = w("vllm_log_prompt_throughput_tokens_per_second", "Average prompt throughput of the last stats window.", SE)
        self.gen_tps = w("vllm_log_generation_throughput_tokens_per_second", "Average generation throughput of the last stats window.", SE)
        self.running = w("vllm_log_requests_running", "Requests running at the last stats window.", SE)
        self.waiting = w("vllm_log_requests_waiting", "Requests waiting at the last stats window.", SE)
        self.swapped = w("vllm_log_requests_swapped", "Requests swapped to CPU at the last stats window (V0).", SE)
        self.gpu_kv = w("vllm_log_gpu_kv_cache_usage_ratio", "GPU KV cache usage at the last stats window (0-1).", SE)
        self.cpu_kv = w("vllm_log_cpu_kv_cache_usage_ratio", "CPU KV cache usage at the last stats window (V0, 0-1).", SE)
        self.prefix_hit = w("vllm_log_prefix_cache_hit_ratio", "Prefix cache hit rate as logged (over recent requests, 0-1).", SE)
        self.ext_prefix_hit = w("vllm_log_external_prefix_cache_hit_ratio", "External (KV connector) prefix cache hit rate (0-1).", SE)
        self.mm_cache_hit = w("vllm_log_mm_cache_hit_ratio", "Multimodal cache hit rate as logged (0-1).", SE)
        self.prompt_tokens = c("vllm_log_prompt_tokens", "Prompt tokens, estimated as window average x window length.", SE)
        self.gen_tokens = c("vllm_log_generation_tokens", "Generated tokens, estimated as window average x window length.", SE)
        self.preemptions = c("vllm_log_preemptions", "Preemptions reported by stats windows.", SE)
        self.windows = c("vllm_log_stats_windows", "Engine stats lines seen.", SE)
        self.stalled = w("vllm_log_engine_stalled", "1 when the engine's last stats window was busy (requests running "
                         "or tokens produced) and no stats line came for 3 intervals since: vLLM logs one every "
                         "interval while it works.", SE)

        self.spec_accepted = c("vllm_log_spec_decode_accepted_tokens", "Draft tokens accepted.", SE)
        self.spec_drafted = c("vllm_log_spec_decode_drafted_tokens", "Draft tokens proposed.", SE)
        self.spec_mean_len = w("vllm_log_spec_decode_mean_acceptance_length", "Mean acceptance length of the last window (includes the bonus token).", SE)
        self.spec_ratio = w("vllm_log_spec_decode_draft_acceptance_ratio", "Draft acceptance rate of the last window (0-1).", SE)
        self.spec_depth = w("vllm_log_spec_decode_depth", "Speculative depth: draft tokens per step.", SE)
        self.spec_pos = w("vllm_log_spec_decode_position_acceptance_ratio", "Acceptance rate per draft position in the last window (0-1).", SE + ["position"])
        h = self._table.histogram
        self.spec_len_hist = h("vllm_log_spec_decode_window_mean_acceptance_length", "Per-window mean acceptance length.", SE,
                               ACCEPTANCE_LENGTH_BUCKETS)
        self.spec_ratio_hist = h("vllm_log_spec_decode_window_draft_acceptance_ratio", "Per-window draft acceptance rate (0-1).", SE,
                                 RATIO_BUCKETS)

        D = S + ["direction"]
        self.kv_bytes = c("vllm_log_kv_offload_bytes", "KV offload bytes moved (store: GPU to CPU, load: CPU to GPU).", D)
        self.kv_seconds = c("vllm_log_kv_offload_seconds", "KV offload transfer time as recorded by vLLM.", D)
        self.kv_tput = h("vllm_log_kv_offload_throughput_bytes_per_second", "Per-interval KV offload rate (bytes / recorded time).", D,
                         THROUGHPUT_BUCKETS)
        self.kv_cpu_usage = w("vllm_log_kv_offload_cpu_cache_usage_ratio", "CPU offload cache usage (0-1).")
        self.kv_pool = w("vllm_log_kv_offload_pool_bytes", "Size of the CPU KV offload pool created at start-up.")
        self.kv_connector = c("vllm_log_kv_connector_transfers", "KV connector (NIXL, Mooncake) transfers.", S + ["result"])
        L = S + ["direction"]
        self.lmcache_bytes = c("vllm_log_lmcache_bytes", "KV bytes LMCache moved (store: to its cache, retrieve: back "
                               "to the GPU).", L)
        self.lmcache_seconds = c("vllm_log_lmcache_seconds", "Time LMCache reported for those moves.", L)
        self.lmcache_tokens = c("vllm_log_lmcache_tokens", "Tokens LMCache stored or retrieved.", L)
        self.lmcache_requested = c("vllm_log_lmcache_requested_tokens", "Prompt tokens LMCache looked up.")
        self.lmcache_hit = c("vllm_log_lmcache_hit_tokens", "Of those, tokens LMCache had (its hit tokens).")

        W = S + ["worker"]
        self.kv_tokens = w("vllm_log_gpu_kv_cache_tokens", "GPU KV cache capacity in tokens, from start-up.")
        self.kv_blocks = w("vllm_log_gpu_kv_cache_blocks", "GPU KV cache blocks, from start-up (V0 and early V1).")
        self.max_conc = w("vllm_log_max_concurrency", "Maximum concurrency for max-length requests, from start-up.")
        self.max_len = w("vllm_log_max_model_len_tokens", "Tokens per request the max-concurrency figure assumes.")
        self.kv_mem = w("vllm_log_kv_cache_memory_bytes", "KV cache memory available per worker, from start-up.", W)
        self.weights = w("vllm_log_model_weights_bytes", "Model weight memory per worker, from start-up.", W)
        self.load_secs = w("vllm_log_model_load_seconds", "Model loading time per worker.", W)
        self.startup_mem = w("vllm_log_startup_memory_bytes", "GPU memory found by the start-up profile besides weights and KV cache.", W + ["component"])
        self.init_secs = w("vllm_log_engine_init_seconds", "Engine init time (profile, KV cache, warm-up).")
        self.compile_secs = w("vllm_log_engine_compile_seconds", "Compilation part of the engine init time.")
        self.max_seqs = w("vllm_log_max_num_seqs", "max_num_seqs the server was started with, where logged.")
        self.starts = c("vllm_log_server_starts", "Server starts seen (version banner lines).")
        self.build_info = w("vllm_log_build_info", "vLLM version of the running server.", S + ["version"])
        self.model_info = w("vllm_log_model_info", "Model the server loaded: model is the name it serves "
                            "(--served-model-name) where the log gives one, else its path; path is where it "
                            "was loaded from.", S + ["model", "path"])

        self.http = c("vllm_log_http_requests", "HTTP responses in vLLM's access log.", S + ["method", "endpoint", "status"])
        self.errors = c("vllm_log_errors", "Errors seen: oom, cuda_error, nccl_error, engine_dead (one per death, "
                        "however many lines log it), startup_failure, traceback (one that is none of the others).", S + ["kind"])
        self.last_error = lg("vllm_log_last_error_timestamp_seconds", "Time of the last error of each kind.", S + ["kind"])
        self.last_start = lg("vllm_log_last_start_timestamp_seconds", "Time of the server's last start (version banner), "
                            "so a death before it is known to be over.")
        # the last OOM's numbers, kept across the restart it usually causes (not window gauges)
        self.oom_requested = lg("vllm_log_oom_requested_bytes", "What the last CUDA OOM tried to allocate, by GPU.",
                               S + ["gpu"])
        self.oom_free = lg("vllm_log_oom_free_bytes", "Free memory on the GPU at the last CUDA OOM, as PyTorch reported it.",
                          S + ["gpu"])
        self.startup_failures = c("vllm_log_startup_failures", "Start-ups that failed, by reason (kv_cache_too_small, "
                                  "no_kv_memory, weights_oom, bad_argument, other).", S + ["reason"])
        self.log_messages = c("vllm_log_messages", "vLLM WARNING/ERROR/CRITICAL lines not otherwise recognised.", S + ["level"])

        self.last_line = lg("vllm_log_last_line_timestamp_seconds", "When the exporter last read a line from this server's log.")
        self.lines = c("vllm_log_exporter_lines", "Lines read, by result.", S + ["result"])
        self.events = c("vllm_log_exporter_events", "Events produced, by kind.", S + ["kind"])
        self.source_up = lg("vllm_log_exporter_source_up", "1 while the log source is connected/open.")
        self.source_restarts = c("vllm_log_exporter_source_restarts", "Times the log source reconnected or reopened.")
        self.source_events = c("vllm_log_exporter_source_events",
                               "What a source met: truncated (copytruncate seen), tail_lost (no copy held the "
                               "unread tail), rotated_late (a rotated file "
                               "read after the fact), file_skipped (a rotated file that could not be read).",
                               S + ["event"])
        self.label_overflow = c("vllm_log_exporter_label_overflow",
                                "Label values from log content beyond their bound, counted as `other`.", S + ["label"])
        Gauge("vllm_log_exporter_build_info", "Exporter version.", ["version"], registry=r).labels(__version__).set(1)
        # The exporter's own HTTP side and state file (exporter.http_guard, exporter.daemon).
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

        self._kids: dict[tuple, object] = {}
        self._last_window: dict[tuple[str, str], float] = {}  # log time of each engine's last window
        self._window_seen: dict[tuple[str, str], float] = {}  # when it was read (monotonic)
        self._busy: dict[tuple[str, str], bool] = {}  # whether that last window was busy
        self._position_keys: dict[tuple[str, str], list[tuple[str, str, str]]] = {}
        self._servers: set[str] = set()
        self._workers: dict[str, set[str]] = {}
        self._models: dict[str, list] = {}  # server -> [served name, path] of the current run
        self._deaths: dict[str, Deaths] = {}
        self._start_failures: dict[str, StartFailures] = {}
        self._handlers = {k: getattr(self, "_on_" + k) for k in KINDS if hasattr(self, "_on_" + k)}
        self._idle_values = tuple(fam.values for fam in (self.prompt_tps, self.gen_tps, self.running,
                                                          self.waiting, self.swapped))
        self._window_gauges = tuple((fam.values, name) for fam, name in (
            (self.prompt_tps, "prompt_tokens_per_second"), (self.gen_tps, "generation_tokens_per_second"),
            (self.running, "running"), (self.waiting, "waiting"), (self.swapped, "swapped"),
            (self.gpu_kv, "gpu_kv_cache_usage"), (self.cpu_kv, "cpu_kv_cache_usage"),
            (self.prefix_hit, "prefix_cache_hit_rate"), (self.ext_prefix_hit, "external_prefix_cache_hit_rate"),
            (self.mm_cache_hit, "mm_cache_hit_rate"),
        ))

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

    def go_idle(self, now: float, log_time: bool = False) -> None:
        """vLLM logs no stats line while an engine is idle, so a window gauge would keep the last
        busy value for ever: after IDLE_AFTER_WINDOWS stats intervals without a line, an engine's
        throughput and request gauges read 0. ``now`` is monotonic time (the daemon), or log time
        with ``log_time`` (backfill)."""
        seen = self._last_window if log_time else self._window_seen
        limit = IDLE_AFTER_WINDOWS * self.stats_interval
        stall = STALLED_AFTER_WINDOWS * self.stats_interval
        stalled = self.stalled.values
        for key, t in seen.items():
            quiet = now - t
            if quiet > limit:
                for values in self._idle_values:
                    if values.get(key):
                        values[key] = 0.0
                if quiet > stall and self._busy.get(key) and key in stalled:
                    stalled[key] = 1.0

    def render(self) -> bytes:
        """Every metric in the text format (0.0.4), as prometheus-client's generate_latest writes
        ``registry``, the table's families by its own writer (tests compare the two)."""
        self.go_idle(time.monotonic())
        return generate_latest(self._native) + self._table.text().encode("utf-8")

    # -- bookkeeping ----------------------------------------------------------------------------

    def add_server(self, server: str) -> None:
        """Create the known-label counters at 0, so `increase()` sees the very first increment."""
        if server in self._servers:
            return
        self._servers.add(server)
        for kind in ERROR_KINDS:
            self.errors.touch((server, kind))
        for reason in STARTUP_FAILURE_REASONS:
            self.startup_failures.touch((server, reason))
        for label in ("engine", "worker", "method", "endpoint", "status", "gpu"):
            self.label_overflow.touch((server, label))
        for result in RESULTS:
            self.lines.touch((server, result))
        for level in LOG_LEVELS:
            self.log_messages.touch((server, level))
        for direction in ("store", "load"):
            self.kv_bytes.touch((server, direction))
            self.kv_seconds.touch((server, direction))
        # the responses the 5xx and 429 alerts watch, born at 0 on the inference routes: a series made
        # at its first value would hide the first burst from rate()
        for endpoint in ALERTED_ENDPOINTS:
            for status in ALERTED_STATUSES:
                self.http.touch((server, "POST", endpoint, status))
        self.starts.touch((server,))
        self.source_restarts.touch((server,))
        for event in SOURCE_EVENTS:
            self.source_events.touch((server, event))
        self._set(self.source_up, (server,), 0)

    def _child(self, metric, labels: tuple[str, ...]):
        # prometheus-client's labels() costs more than the parsing of a line; keep the children.
        try:
            return self._kids[(metric, labels)]
        except KeyError:
            child = self._kids[(metric, labels)] = metric.labels(*labels)
            return child

    def _set(self, fam: "GaugeFamily", labels: tuple[str, ...], value: float) -> None:
        fam.values[labels] = float(value)

    def reset_server(self, server: str) -> None:
        self._table.drop_gauges(server)
        self._workers.pop(server, None)
        for key in [k for k in self._last_window if k[0] == server]:
            del self._last_window[key]
        for key in [k for k in self._window_seen if k[0] == server]:
            del self._window_seen[key]
        for key in [k for k in self._busy if k[0] == server]:
            del self._busy[key]

    def count_line(self, server: str, result: str, now: float | None = None) -> None:
        self.lines.inc((server, result))
        self._set(self.last_line, (server,), time.time() if now is None else now)

    def count_lines(self, server: str, counts: dict[str, int], now: float | None = None) -> None:
        for result, n in counts.items():
            if n:
                self.lines.inc((server, result), n)
        self._set(self.last_line, (server,), time.time() if now is None else now)

    def set_source_up(self, server: str, up: bool) -> None:
        self._set(self.source_up, (server,), 1 if up else 0)

    def source_restarted(self, server: str) -> None:
        self.source_restarts.inc((server,))

    def source_event(self, server: str, event: str) -> None:
        if event in SOURCE_EVENTS:
            self.source_events.inc((server, event))

    # -- events ---------------------------------------------------------------------------------

    def observe(self, server: str, ev: Event) -> None:
        self.events.inc((server, ev.kind))
        handler = self._handlers.get(ev.kind)
        if handler is not None:
            handler(server, ev, ev.fields)

    def observe_many(self, server: str, events: list[Event]) -> None:
        """``observe`` for a batch: the same result, with the events counter bumped once per kind."""
        kinds: dict[str, int] = {}
        handlers = self._handlers
        for ev in events:
            kind = ev.kind
            kinds[kind] = kinds.get(kind, 0) + 1
            handler = handlers.get(kind)
            if handler is not None:
                handler(server, ev, ev.fields)
        for kind, n in kinds.items():
            self.events.inc((server, kind), n)

    def _engine(self, server: str, f: dict) -> str:
        if "aggregated_engines" in f:
            return "aggregated"
        return _engine_label(f.get("engine", 0)) or self._overflow(server, "engine")

    def _overflow(self, server: str, label: str, n: int = 1) -> str:
        self.label_overflow.inc((server, label), n)
        return "other"

    # The handlers below run for every stats window of every engine: counters are bumped as dict
    # entries directly (CounterFamily.inc's checks are for callers that might pass anything).

    def _on_engine_stats(self, server: str, ev: Event, f: dict) -> None:
        eng = self._engine(server, f)
        key = (server, eng)
        for values, name in self._window_gauges:
            v = f.get(name)
            if v is not None:
                values[key] = float(v)
        # A window's length is the logging interval; a longer gap means vLLM hid idle windows at
        # DEBUG, and the window that ends now is still one interval long.
        self._window_seen[key] = time.monotonic()
        self._busy[key] = busy_window(f)
        self.stalled.values[key] = 0.0
        last = self._last_window.get(key)
        dt = self.stats_interval
        if ev.ts is not None:
            if last is not None and 0 < ev.ts - last < dt:
                dt = ev.ts - last
            self._last_window[key] = ev.ts
        c = self.prompt_tokens.values
        c[key] = c.get(key, 0.0) + max(0.0, f.get("prompt_tokens_per_second", 0.0)) * dt
        c = self.gen_tokens.values
        c[key] = c.get(key, 0.0) + max(0.0, f.get("generation_tokens_per_second", 0.0)) * dt
        c = self.windows.values
        c[key] = c.get(key, 0.0) + 1.0
        c = self.preemptions.values
        c[key] = c.get(key, 0.0) + max(0, f.get("preemptions") or 0)

    def _on_prefix_cache(self, server: str, ev: Event, f: dict) -> None:
        v = f.get("gpu_prefix_cache_hit_rate")
        if v is not None:
            self._set(self.prefix_hit, (server, "0"), v)

    def _on_spec_decode(self, server: str, ev: Event, f: dict) -> None:
        eng = _engine_label(f.get("engine", 0)) or self._overflow(server, "engine")
        key = (server, eng)
        acc, dra = f.get("accepted_tokens"), f.get("drafted_tokens")
        c = self.spec_accepted.values
        c[key] = c.get(key, 0.0) + max(0, acc or 0)
        c = self.spec_drafted.values
        c[key] = c.get(key, 0.0) + max(0, dra or 0)
        mean_len = f.get("mean_acceptance_length")
        if mean_len is not None:
            self.spec_mean_len.values[key] = float(mean_len)
            self.spec_len_hist.observe(key, mean_len)
        ratio = f.get("draft_acceptance_rate")
        if ratio is None and acc is not None and dra:
            ratio = acc / dra
        if ratio is not None:
            self.spec_ratio.values[key] = float(ratio)
            self.spec_ratio_hist.observe(key, ratio)
        per_pos = f.get("per_position_acceptance_rate") or []
        depth = f.get("speculative_depth") or (len(per_pos) or None)
        if depth is not None:
            self.spec_depth.values[key] = float(depth)
        # Positions are bounded by the depth vLLM was configured with (a handful, at most ~16).
        values = self.spec_pos.values
        keys = self._position_keys.get(key)
        if keys is None:
            keys = self._position_keys[key] = [(server, eng, p) for p in _POSITIONS]
        for k, v in zip(keys, per_pos):
            values[k] = float(v)

    def _on_kv_transfer(self, server: str, ev: Event, f: dict) -> None:
        kv_bytes, kv_seconds = self.kv_bytes.values, self.kv_seconds.values
        for direction, bytes_key, seconds_key in _DIRECTIONS:
            b, s = f.get(bytes_key), f.get(seconds_key)
            if b is None and s is None:
                continue
            key = (server, direction)
            if b is not None and b > 0:
                kv_bytes[key] = kv_bytes.get(key, 0.0) + b
            if s is not None and s > 0:
                kv_seconds[key] = kv_seconds.get(key, 0.0) + s
            if b and s and b > 0 and s > 0:
                self.kv_tput.observe(key, b / s)
        usage = f.get("cpu_cache_usage")
        if usage is not None:
            self._set(self.kv_cpu_usage, (server,), usage)
        if f.get("transfers"):
            self.kv_connector.inc((server, "ok"), f["transfers"])
        if f.get("failed_transfers"):
            self.kv_connector.inc((server, "failed"), f["failed_transfers"])

    def _on_lmcache(self, server: str, ev: Event, f: dict) -> None:
        op = f.get("op")
        if op in ("store", "retrieve"):
            key = (server, op)
            self.lmcache_bytes.inc(key, f.get("bytes", 0))
            self.lmcache_seconds.inc(key, f.get("seconds", 0.0))
            self.lmcache_tokens.inc(key, f.get("tokens", 0))
        elif op == "lookup":
            self.lmcache_requested.inc((server,), f.get("total_tokens", 0))
            self.lmcache_hit.inc((server,), f.get("hit_tokens", 0))

    def _worker(self, server: str, ev: Event) -> str:
        name = ev.process or "main"
        seen = self._workers.setdefault(server, set())
        if name in seen:
            return name
        if len(seen) < MAX_WORKERS:
            seen.add(name)
            return name
        return self._overflow(server, "worker")

    def _on_kv_cache_size(self, server, ev, f):
        self._set(self.kv_tokens, (server,), f["tokens"])

    def _on_gpu_blocks(self, server, ev, f):
        self._set(self.kv_blocks, (server,), f["gpu_blocks"])

    def _on_max_concurrency(self, server, ev, f):
        self._set(self.max_conc, (server,), f["concurrency"])
        self._set(self.max_len, (server,), f["tokens_per_request"])

    def _on_kv_cache_memory(self, server, ev, f):
        self._set(self.kv_mem, (server, self._worker(server, ev)), f["bytes"])

    def _on_model_load(self, server, ev, f):
        w = self._worker(server, ev)
        if "weights_bytes" in f:
            self._set(self.weights, (server, w), f["weights_bytes"])
        if "seconds" in f:
            self._set(self.load_secs, (server, w), f["seconds"])

    def _on_memory_profile(self, server, ev, f):
        w = self._worker(server, ev)
        for name, component in _MEMORY_COMPONENTS.items():
            if name in f:
                self._set(self.startup_mem, (server, w, component), f[name])
        if "weights_bytes" in f:
            self._set(self.weights, (server, w), f["weights_bytes"])
        if "kv_cache_bytes" in f and (server, w) not in self.kv_mem.values:
            self._set(self.kv_mem, (server, w), f["kv_cache_bytes"])

    def _on_init_engine(self, server, ev, f):
        if "seconds" in f:
            self._set(self.init_secs, (server,), f["seconds"])
        if "compilation_seconds" in f:
            self._set(self.compile_secs, (server,), f["compilation_seconds"])

    def _on_engine_config(self, server, ev, f):
        if isinstance(f.get("max_num_seqs"), int):
            self._set(self.max_seqs, (server,), f["max_num_seqs"])
        served = f.get("served_model_name")
        if isinstance(served, list):  # the non-default args dump gives a list
            served = served[0] if served else None
        if (served and isinstance(served, str)) or isinstance(f.get("model"), str):
            self._set_model(server, served=served if isinstance(served, str) else None,
                            path=f.get("model") if isinstance(f.get("model"), str) else None)

    def _on_offload_pool(self, server, ev, f):
        self._set(self.kv_pool, (server,), f["bytes"])

    def _on_version(self, server, ev, f):
        # A version line opens a new start-up: everything learnt about the previous run goes.
        self.reset_server(server)
        self._set(self.last_start, (server,), ev.ts if ev.ts is not None else time.time())
        self._deaths.pop(server, None)
        tracker = self._start_failures.get(server)
        if tracker is not None:
            for r in tracker.started():
                self.startup_failures.inc((server, r))
        self.starts.inc((server,))
        self._only(self.build_info, server, str(f["version"])[:200])
        self._models[server] = [None, None]
        if f.get("model"):
            self._set_model(server, path=f["model"])

    def _on_model(self, server, ev, f):
        self._set_model(server, path=f["model"])

    def _set_model(self, server: str, served=None, path=None) -> None:
        known = self._models.setdefault(server, [None, None])
        if served:
            known[0] = str(served)[:300]
        if path:
            known[1] = str(path)[:300]
        self._only(self.model_info, server, known[0] or known[1] or "", known[1] or "")

    def _only(self, fam: "GaugeFamily", server: str, *values: str) -> None:
        """An info gauge's one series for the server: the latest value replaces any other."""
        key = (server, *values)
        for k in [k for k in fam.values if k[0] == server and k != key]:
            del fam.values[k]
        fam.values[key] = 1.0

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
            gpu = _engine_label(f["gpu"]) or self._overflow(server, "gpu")
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
        for key in [k for k in self._busy if k[0] == server]:  # dead, not stalled
            self._busy[key] = False
            if key in self.stalled.values:
                self.stalled.values[key] = 0.0

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
