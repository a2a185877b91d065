"""Knobs of the rendered rules and dashboards. Change them here, then `python -m mixin.build`."""

# The exporter's scrape job in Prometheus (compose.yaml's prometheus.yml uses this name), and the
# selector the rules use for the exporter's own `up` series (kubernetes-mixin style: set it to
# what your scrape configs give, e.g. 'job=~"vllm-log-exporter|gpu-hosts"'). The dashboards take
# the job from their `job` variable instead.
EXPORTER_JOB = "vllm-log-exporter"
EXPORTER_SELECTOR = f'job="{EXPORTER_JOB}"'

# The first drafted token accepted less often than this for 10 minutes means speculative decoding no
# longer pays. Position 0 of the drafts that proposed anything: unlike the acceptance over all drafted
# tokens, it does not fall by arithmetic when (dynamic) drafts grow longer. For depth 1 both are the
# same number. Logs without per-position rates (V0) are held to the same bound on all drafted tokens.
DRAFT_ACCEPTANCE_MIN = 0.5

# The supervisor (systemd Restart=, compose's restart policy) restarted the server this many times
# within the window: it dies again after each start. One crash and its restart is VllmEngineDead's.
RESTART_LOOP_COUNT = 3
RESTART_LOOP_WINDOW = "15m"

# KV offload slower than this (bytes/s) for 10 minutes. PCIe 5.0 x16 moves ~64 GB/s one way and the
# seed article measured 50-55 GB/s; PCIe 4.0 x16 is half that. 20 GB/s flags a link that fell back.
KV_OFFLOAD_MIN_BYTES_PER_SECOND = 20e9
# KV transfers (a disaggregation connector's, or the offload tiers') that failed within 10 minutes before
# VllmKvTransferFailing: one now and then is recomputed and costs a prefill; this many is a link or peer down
KV_TRANSFER_FAILURES_10M = 3
# Tool calls a tool-call parser could not read within 15 minutes before VllmToolCallParserFailing: a model
# fumbles one now and then; a steady stream is the wrong --tool-call-parser or chat template
TOOL_PARSER_FAILURES_15M = 10

# The main KV cache (GPU memory, or host memory on vLLM's CPU backend) this full while requests wait.
KV_CACHE_FULL_RATIO = 0.95

# Share of 5xx responses, and of 429s, over 5 minutes.
HTTP_5XX_RATIO = 0.05
HTTP_429_RATIO = 0.10

# No log line for this long while the exporter is up. vLLM logs nothing when idle and unscraped
# (stats go to DEBUG), so keep this longer than your quietest normal stretch.
LOG_STALE_MINUTES = 15

# Grafana datasource uid the provisioned datasource gets.
DATASOURCE_UID = "vllm-log-prometheus"

# Labels every alert keeps besides server (and engine, direction where it has them), so two hosts
# that both run a server called "vllm" stay two alerts: `host` (set as an external label by each
# host's Prometheus agent, deploy/prometheus/agent.yml) and `instance` (the exporter). Labels a
# series does not have are simply absent from the alert.
# On Kubernetes, `cluster` (the external label a central Prometheus, Thanos or Mimir gives each
# cluster) and `namespace` (the exporter's, from a ServiceMonitor or PodMonitor) are kept too.
KEEP_LABELS = ["cluster", "namespace", "host", "instance"]

# Per-alert changes, kubernetes-mixin style: {"VllmEngineStalled": {"for": "2m", "severity": "warning"}}.
# Any key of a rule can be set ("for", "severity"); the promtool tests run on the defaults.
ALERT_OVERRIDES: dict[str, dict[str, str]] = {}

# Grafana, for every rule's dashboard_url annotation (the board for the alert, filtered to its server).
# The Alertmanager template (deploy/alertmanager/templates/vllm.tmpl) has its own copy of this URL.
GRAFANA_URL = "http://127.0.0.1:3000"

# Where every alert's runbook_url points: docs/runbook.md, a section per alert (anchor: the alert's
# name in lower case). Point it at your own copy (a wiki, your fork) if you change the runbook.
from exporter.alerts.from_events import RUNBOOK_URL  # noqa: E402 - the exporter's pushed alerts use the same

RUNBOOK_BASE_URL = RUNBOOK_URL

# vLLM's own /metrics, scraped next to the exporter (deploy/prometheus/prometheus.yml): its job,
# whose targets carry a `server` label naming the exporter's server for that vLLM.
VLLM_JOB = "vllm"
VLLM_SELECTOR = f'job="{VLLM_JOB}"'

# --- Service levels (SLOs) on vLLM's own /metrics (mixin/slo.py renders them; docs/slo.md).
# Each objective is the share of events that must be good over SLO_WINDOW: requests for the time to
# first token, the queue time, the whole request's latency and errors; inter-token gaps (every gap
# between two streamed tokens) for the inter-token latency. A latency's threshold (seconds) must be
# an upper bound of vLLM's histogram buckets, as vLLM 0.29 to 0.34 ship them by default
# (mixin/slo_buckets.py; `python -m mixin.build` refuses any other); a server started with
# `--custom-histogram-buckets` (vLLM 0.32+) that drops it has no such bucket, and
# VllmSloThresholdNotABucket says so instead of the SLI falling silent. Remove an entry to drop that
# SLO. The defaults are a start: set them from what your users need and what the Service levels board
# shows your servers doing today.
SLO_WINDOW = "30d"
SLOS: dict[str, dict[str, float]] = {
    "time_to_first_token": {"objective": 0.99, "threshold_seconds": 2.5},
    "inter_token_latency": {"objective": 0.99, "threshold_seconds": 0.2},
    "queue_time": {"objective": 0.99, "threshold_seconds": 1.0},
    "request_latency": {"objective": 0.99, "threshold_seconds": 60.0},
    # requests that failed: answered with a 5xx in the access log, or ended by vLLM with an error or
    # refused by its admission control (503, vLLM 0.32+), whichever counts more (mixin/slo.py says
    # why), among the requests to the inference endpoints below (or, without the access log, those
    # vLLM finished that the client did not abort)
    "errors": {"objective": 0.999},
}
# The access log's inference endpoints (the `endpoint` label): probes and /metrics are not traffic.
SLO_HTTP_ENDPOINTS = ("/v1/(chat/completions|completions|responses|messages|embeddings|audio/transcriptions|"
                      "audio/translations|rerank|score)|/v2/rerank|/rerank|/score|/pooling|/classify|/invocations|"
                      "/generate")
# The SLIs are summed over these labels: every engine (data parallel) and API server of a server in
# one. vLLM's scrape must carry the exporter's `server` name for it (deploy/prometheus/prometheus.yml),
# and `host` where the exporter's series have one, so that the access log's errors and vLLM's own
# count as the same server.
SLO_BY = ["cluster", "host", "server"]
# Multi-window, multi-burn-rate alerts (Google's SRE workbook, "Alerting on SLOs"): (long window,
# short window, share of the SLO_WINDOW's error budget spent in the long window). Each fires when
# both windows burn faster than that share allows; the short one makes it stop soon after the burn
# does. Fast burns page (severity critical), slow burns are a ticket (warning).
SLO_FAST_BURN = [("1h", "5m", 0.02), ("6h", "30m", 0.05)]
SLO_SLOW_BURN = [("1d", "2h", 0.10), ("3d", "6h", 0.10)]
# No alert on fewer requests than this in the alert's long window: one slow request out of three
# is no outage. A server without traffic never alerts (its SLIs have no value then).
SLO_MIN_REQUESTS = 10

# --- Capacity headroom (mixin/capacity.py). VllmKvCacheFillingUp: the KV cache's usage, at its trend over
# CAPACITY_TREND_WINDOW, reaches 100 % within CAPACITY_HORIZON, while it is already at least
# CAPACITY_MIN_USAGE full (a cache filling from empty after a start or a quiet night is no warning).
CAPACITY_TREND_WINDOW = "30m"
CAPACITY_HORIZON = "1h"
CAPACITY_MIN_USAGE = 0.5
# ... and its trend over the last CAPACITY_RECENT_WINDOW says so too: a cache that filled after a start (traffic
# coming back after a deploy) and has levelled off still has the climb in its CAPACITY_TREND_WINDOW, and is no warning.
CAPACITY_RECENT_WINDOW = "10m"

# --- The engine's heartbeat (mixin/capacity.py). VllmEngineNoSteps: the log shows requests admitted (the
# access log's 2xx answers to the inference endpoints, or the request logger's) and vLLM's own
# vllm:iteration_tokens_total histogram, whose count moves on every engine step, did not move in
# HEARTBEAT_WINDOW.
HEARTBEAT_WINDOW = "5m"

# --- Cost per token (mixin/cost.py). The prices are the exporter's config (cost: per_hour, or gpu_hour and
# gpus; per_kwh with DCGM), exported as vllm_log_cost_per_hour and vllm_log_energy_price_per_kwh. The
# tokens are counted over COST_WINDOW. DCGM's power (DCGM_FI_DEV_POWER_USAGE, watts per GPU) is matched to
# the servers of its host by the `host` label: give DCGM's scrape the same `host` as the exporter's.
COST_WINDOW = "1h"
DCGM_POWER = "DCGM_FI_DEV_POWER_USAGE"
