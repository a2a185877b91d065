"""Grafana dashboards for vllm-log-exporter, as plain JSON models built in Python.

Three boards: an overview, speculative decoding, and memory / KV. Each has template variables for
the datasource, ``job`` (the exporters' scrape job), ``host`` (the external label of each host's
Prometheus agent), ``instance`` (the exporter),
``server`` and ``engine`` (multi-select with "All"), stable uids, and on every panel a unit, a
description, thresholds that mean something (never Grafana's default green/red at 80) and, where an
alert watches the figure, the alert's threshold drawn as a line. Server starts, stops and each error
kind are annotations on every board, so a drop in throughput lines up with its cause. The datasource is
the ``${datasource}`` variable, never an import-time ``${DS_...}`` input (provisioning does not
resolve those). tests/test_mixin.py holds grafana/dashboard-linter's rules as a test.
"""

from __future__ import annotations

from mixin import config as C

DS = {"type": "prometheus", "uid": "${datasource}"}
# `cluster`: the external label a central Prometheus, Thanos or Mimir gives each cluster's series
# (absent on a single host: All, `.*`, matches an absent label too)
J = 'cluster=~"$cluster", job=~"$job", host=~"$host", instance=~"$instance"'
S = J + ', server=~"$server"'
SE = S + ', engine=~"$engine"'
TOKS = "suffix: tok/s"
NEUTRAL = "blue"  # a figure that is neither good nor bad (capacity, version): not Grafana's default red
GOOD, WARN, BAD = "green", "orange", "red"
GREY = "#8e8e8e"  # over, on purpose: a stopped server
UP_DOWN = [{"type": "value", "options": {"0": {"text": "Down", "color": BAD, "index": 0},
                                         "1": {"text": "Up", "color": GOOD, "index": 1}}}]
# vllm_log_server_state{state}: the state that reads 1, as a number the value mappings name and colour
SERVER_STATES = (("starting", NEUTRAL), ("serving", GOOD), ("stopped", GREY), ("dead", BAD), ("failed", BAD))
STATE_MAPPINGS = [{"type": "value", "options": {
    str(i): {"text": state, "color": colour, "index": i - 1} for i, (state, colour) in enumerate(SERVER_STATES, 1)}}]
# HTTP status colours by the legend (the status code): 5xx red, 4xx orange, 2xx green
HTTP_COLOURS = [
    {"matcher": {"id": "byRegexp", "options": pattern},
     "properties": [{"id": "color", "value": {"mode": "fixed", "fixedColor": colour}}]}
    for pattern, colour in (("/^5\\d\\d/", BAD), ("/^4\\d\\d/", WARN), ("/^2\\d\\d/", GOOD), ("/^other/", "purple"))
]


class Board:
    def __init__(self, uid: str, title: str, description: str, tags: list[str]):
        self.uid, self.title, self.description, self.tags = uid, title, description, tags
        self.panels: list[dict] = []
        self.x = 0
        self.y = 0
        self.row_h = 0
        self.next_id = 1

    def _place(self, w: int, h: int) -> dict:
        if self.x + w > 24:
            self.x = 0
            self.y += self.row_h
            self.row_h = 0
        pos = {"h": h, "w": w, "x": self.x, "y": self.y}
        self.x += w
        self.row_h = max(self.row_h, h)
        return pos

    def row(self, title: str) -> None:
        if self.x:
            self.x, self.y, self.row_h = 0, self.y + self.row_h, 0
        self.panels.append({"id": self._id(), "type": "row", "title": title, "collapsed": False, "panels": [],
                            "gridPos": {"h": 1, "w": 24, "x": 0, "y": self.y}})
        self.y += 1

    def _id(self) -> int:
        i = self.next_id
        self.next_id += 1
        return i

    def panel(self, kind: str, title: str, targets: list[tuple[str, str]], unit: str, *, w: int = 12, h: int = 8,
              description: str = "", min_=None, max_=None, options: dict | None = None, instant: bool = False,
              fmt: str | None = None, custom: dict | None = None, steps: list | None = None,
              mappings: list | None = None, decimals: int | None = None, overrides: list | None = None,
              line: bool = False) -> dict:
        """``steps``: [(value or None, colour), ...] thresholds (default: one neutral colour);
        ``line``: draw them on a time series (an alert's threshold)."""
        if not description:
            raise ValueError(f"panel {title!r} needs a description")
        refs = "ABCDEFGH"
        tgts = []
        for i, (expr, legend) in enumerate(targets):
            t = {"refId": refs[i], "datasource": DS, "expr": expr, "legendFormat": legend, "range": not instant,
                 "instant": instant}
            if fmt:
                t["format"] = fmt
            tgts.append(t)
        defaults: dict = {"unit": unit, "thresholds": {"mode": "absolute", "steps": [
            {"value": v, "color": c} for v, c in (steps or [(None, NEUTRAL)])]}}
        if kind in ("stat", "bargauge", "gauge"):
            defaults["color"] = {"mode": "thresholds"}
        if min_ is not None:
            defaults["min"] = min_
        if max_ is not None:
            defaults["max"] = max_
        if decimals is not None:
            defaults["decimals"] = decimals
        if mappings:
            defaults["mappings"] = mappings
        custom = dict(custom or {})
        if line:
            custom["thresholdsStyle"] = {"mode": "dashed"}
        if custom:
            defaults["custom"] = custom
        p = {"id": self._id(), "type": kind, "title": title, "description": description, "datasource": DS,
             "gridPos": self._place(w, h), "targets": tgts,
             "fieldConfig": {"defaults": defaults, "overrides": overrides or []}, "options": options or {}}
        self.panels.append(p)
        return p

    def timeseries(self, title, targets, unit, **kw):
        kw.setdefault("options", {"legend": {"displayMode": "list", "placement": "bottom", "showLegend": True},
                                  "tooltip": {"mode": "multi", "sort": "desc"}})
        return self.panel("timeseries", title, targets, unit, **kw)

    def stat(self, title, targets, unit, **kw):
        kw.setdefault("options", {"reduceOptions": {"calcs": ["lastNotNull"], "fields": "", "values": False},
                                  "colorMode": "value", "graphMode": "none", "textMode": "auto"})
        kw.setdefault("w", 4)
        kw.setdefault("h", 4)
        return self.panel("stat", title, targets, unit, **kw)

    def bargauge(self, title, targets, unit, **kw):
        kw.setdefault("options", {"reduceOptions": {"calcs": ["lastNotNull"], "fields": "", "values": False},
                                  "orientation": "horizontal", "displayMode": "gradient", "showUnfilled": True})
        return self.panel("bargauge", title, targets, unit, instant=True, **kw)

    def heatmap(self, title, expr, unit, **kw):
        kw.setdefault("options", {"calculate": False, "yAxis": {"unit": unit},
                                  "cellGap": 1, "color": {"mode": "scheme", "scheme": "Oranges"},
                                  "rowsFrame": {"layout": "auto"}, "tooltip": {"show": True, "yHistogram": True}})
        return self.panel("heatmap", title, [(expr, "{{le}}")], unit, fmt="heatmap", **kw)

    def model(self) -> dict:
        def server_var():
            # every server, less the Kubernetes pods of namespaces not chosen
            v = var("server", "Server", f"query_result(max by (server) (vllm_log_exporter_lines_total{{{J}}}) unless on "
                                        f'(server) vllm_log_kubernetes_pod_info{{{J}, namespace!~"$namespace"}})')
            v["regex"] = '/server="([^"]+)"/'
            return v

        def var(name, label, query):
            return {"name": name, "label": label, "type": "query", "datasource": DS,
                    "query": {"query": query, "refId": f"{name}-var"}, "refresh": 2,
                    "multi": True, "includeAll": True, "allValue": ".*",
                    "current": {"text": ["All"], "value": ["$__all"]}, "hide": 0,
                    "regex": "", "sort": 1, "options": []}

        return {
            "uid": self.uid,
            "title": self.title,
            "description": self.description,
            "tags": self.tags,
            "editable": True,
            "graphTooltip": 1,
            "schemaVersion": 39,
            "version": 1,
            "refresh": "30s",
            "time": {"from": "now-3h", "to": "now"},
            "timepicker": {},
            "timezone": "browser",
            "fiscalYearStartMonth": 0,
            "liveNow": False,
            "weekStart": "",
            "annotations": {"list": [{
                "builtIn": 1, "datasource": {"type": "grafana", "uid": "-- Grafana --"}, "enable": True,
                "hide": True, "iconColor": "rgba(0, 211, 255, 1)", "name": "Annotations & Alerts", "type": "dashboard",
            }] + ANNOTATIONS},
            "links": [{"title": "vLLM boards", "type": "dashboards", "tags": ["vllm-log-exporter"], "asDropdown": True,
                       "includeVars": True, "keepTime": True, "icon": "external link", "targetBlank": False,
                       "tooltip": "", "url": ""}],
            "templating": {"list": [
                {"name": "datasource", "label": "Data source", "type": "datasource", "query": "prometheus",
                 "current": {"text": "Prometheus", "value": C.DATASOURCE_UID}, "hide": 0, "refresh": 1, "regex": "", "options": [], "includeAll": False, "multi": False},
                var("cluster", "Cluster", "label_values(vllm_log_exporter_build_info, cluster)"),
                var("job", "Job", 'label_values(vllm_log_exporter_build_info{cluster=~"$cluster"}, job)'),
                # `host`: the external label of each host's Prometheus agent (deploy/prometheus/agent.yml)
                var("host", "Host", 'label_values(vllm_log_exporter_build_info{cluster=~"$cluster", job=~"$job"}, host)'),
                var("instance", "Exporter", 'label_values(vllm_log_exporter_build_info{cluster=~"$cluster", '
                                            'job=~"$job", host=~"$host"}, instance)'),
                # Kubernetes: the namespace of the vLLM pods (vllm_log_kubernetes_pod_info), not of the
                # exporter; servers outside Kubernetes have none and are always listed
                var("namespace", "Namespace", f'label_values(vllm_log_kubernetes_pod_info{{{J}}}, namespace)'),
                server_var(),
                var("engine", "Engine", f'label_values(vllm_log_stats_windows_total{{{S}}}, engine)'),
                # the job that scrapes vLLM's own /metrics (deploy/prometheus/prometheus.yml calls it
                # vllm; a PodMonitor names it after itself)
                var("vllm_job", "vLLM job", 'label_values(vllm:num_requests_running{cluster=~"$cluster"}, job)'),
            ]},
            "panels": self.panels,
        }


def _annotation(name: str, expr: str, colour: str, title: str) -> dict:
    return {"name": name, "datasource": DS, "enable": True, "hide": False, "iconColor": colour, "expr": expr,
            "step": "1m", "titleFormat": title, "textFormat": "{{server}}", "tagKeys": "server",
            "useValueForTime": False}


ANNOTATIONS = [
    _annotation("Server starts", f"sum by (server) (increase(vllm_log_server_starts_total{{{S}}}[$__interval])) > 0",
                "blue", "server start"),
    _annotation("Restarts", f"sum by (server) (increase(vllm_log_restarts_total{{{S}}}[$__interval])) > 0",
                WARN, "restarted by its supervisor"),
    _annotation("JIT while serving",
                f"sum by (server) (increase(vllm_log_jit_compilations_during_inference_total{{{S}}}[$__interval])) > 0",
                "yellow", "kernel compiled while serving (latency spike)"),
    _annotation("Stops", f"sum by (server) (increase(vllm_log_server_stops_total{{{S}}}[$__interval])) > 0",
                GREY, "server stopped (asked for)"),
] + [
    _annotation(label, f'sum by (server) (increase(vllm_log_errors_total{{{S}, kind="{kind}"}}[$__interval])) > 0',
                colour, label)
    for kind, label, colour in (("oom", "CUDA out of memory", "red"), ("engine_dead", "Engine dead", "dark-red"),
                                ("startup_failure", "Start-up failed", "dark-orange"),
                                ("cuda_error", "CUDA error", "purple"), ("nccl_error", "NCCL error", "orange"))
]


def _http_ratio(status_match: str) -> str:
    total = f"sum by (server) (rate(vllm_log_http_requests_total{{{S}}}[$__rate_interval]))"
    part = f'sum by (server) (rate(vllm_log_http_requests_total{{{S}, status=~"{status_match}"}}[$__rate_interval]))'
    # `or ... * 0`: a server without such responses reads 0, not "No data"
    return f"({part} or {total} * 0) / {total}"


def _server_state() -> str:
    """Per server, the number of its state (SERVER_STATES order) that reads 1."""
    terms = "\n  or ".join(f'{i} * vllm_log_server_state{{{S}, state="{state}"}}'
                           for i, (state, _) in enumerate(SERVER_STATES, 1))
    return f"max by (host, instance, server) (\n  {terms}\n)"


def overview() -> dict:
    b = Board("vllm-log-overview", "vLLM / Overview",
              "Throughput, queue, KV cache, HTTP status and errors of vLLM servers, from their logs.",
              ["vllm-log-exporter", "vllm"])
    b.row("Health")
    b.stat("Exporter up", [(f"up{{{J}}}", "{{instance}}")], "none", mappings=UP_DOWN,
           steps=[(None, BAD), (1, GOOD)], description="Prometheus can scrape the exporter (the `up` series of its job).")
    b.stat("Log source up", [(f"vllm_log_exporter_source_up{{{S}}}", "{{server}}")], "none", mappings=UP_DOWN,
           steps=[(None, BAD), (1, GOOD)],
           description="The exporter has the server's log open (file, container, journal).")
    b.stat("Server state", [(_server_state(), "{{server}}")], "none", mappings=STATE_MAPPINGS,
           steps=[(None, NEUTRAL)], decimals=0,
           description="What the log last said of the server: starting (version banner), serving (ready or a stats "
                       "window), stopped (a stop that was asked for: SIGTERM, Ctrl-C, a deploy), dead (its engine "
                       "died) or failed (its start failed). Empty until the log says any of these.")
    b.stat("Last log line", [(f"time() - vllm_log_last_line_timestamp_seconds{{{S}}}", "{{server}}")], "s",
           steps=[(None, GOOD), (300, WARN), (C.LOG_STALE_MINUTES * 60, BAD)], decimals=0,
           description="Seconds since the exporter last read a line; red from the VllmLogStale alert's "
                       f"{C.LOG_STALE_MINUTES} minutes. An idle vLLM that nobody scrapes is quiet.")
    b.stat("Engines stalled", [(f"sum by (server) (vllm_log_engine_stalled{{{SE}}})", "{{server}}")], "none",
           steps=[(None, GOOD), (1, BAD)], decimals=0,
           description="Engines whose last stats window was busy and that logged none for 3 intervals since: hung "
                       "or died without a word (VllmEngineStalled).")
    b.stat("vLLM version", [(f"vllm_log_build_info{{{S}}}", "{{version}}")], "none",
           options={"reduceOptions": {"calcs": ["lastNotNull"], "fields": "", "values": False},
                    "textMode": "name", "colorMode": "none", "graphMode": "none"},
           description="The version in the last start-up banner of each server.")
    b.stat("Server starts", [(f"sum by (server) (round(increase(vllm_log_server_starts_total{{{S}}}[$__range])))",
                              "{{server}}")],
           "none", steps=[(None, GOOD), (2, WARN)], decimals=0, w=8,
           description="Start-up banners in the time range: more than one means restarts.")
    b.stat("Stops (asked for)", [(f"sum by (server) (round(increase(vllm_log_server_stops_total{{{S}}}[$__range])))",
                                  "{{server}}")],
           "none", decimals=0, w=8,
           description="Stops that were asked for in the time range (SIGTERM or SIGINT: a deploy, a restart, Ctrl-C), "
                       "from vLLM's shutdown lines. Not deaths: those are in Errors. A start with no stop before it "
                       "followed a death or a kill.")
    b.stat("Errors in range", [(f"sum(round(increase(vllm_log_errors_total{{{S}}}[$__range])))", "errors")], "none",
           steps=[(None, GOOD), (1, BAD)], decimals=0, w=8,
           description="OOMs, CUDA/NCCL errors, dead engines and other tracebacks in the time range.")
    b.row("Throughput and queue")
    b.timeseries("Generation throughput", [(f"vllm_log_generation_throughput_tokens_per_second{{{SE}}}", "{{server}} e{{engine}}")],
                 TOKS, min_=0, description="Average generation throughput of each stats window; 0 two intervals "
                                           "after the last window (vLLM logs nothing while idle).")
    b.timeseries("Prompt throughput", [(f"vllm_log_prompt_throughput_tokens_per_second{{{SE}}}", "{{server}} e{{engine}}")],
                 TOKS, min_=0, description="Average prompt (prefill) throughput of each stats window: the prompt tokens "
                                           "the engine computed, as the log counts them since vLLM 0.16 (prefix-cache "
                                           "hits and KV transferred in are not in it).")
    b.timeseries("Requests running and waiting", [
        (f"vllm_log_requests_running{{{SE}}}", "running {{server}} e{{engine}}"),
        (f"vllm_log_requests_waiting{{{SE}}}", "waiting {{server}} e{{engine}}"),
    ], "short", min_=0, decimals=0,
        description="Requests in the batch and in the queue at each stats window. Waiting with a full KV cache: "
                    "the server is at capacity.")
    b.timeseries("KV cache usage", [(f"vllm_log_kv_cache_usage_ratio{{{SE}}}", "{{server}} e{{engine}} {{device}}")],
                 "percentunit", min_=0, max_=1, steps=[(None, GOOD), (C.KV_CACHE_FULL_RATIO, BAD)], line=True,
                 description=f"Share of the main KV cache in use: GPU memory, or host memory on vLLM's CPU backend "
                             f"(the device in the legend; V0's CPU swap space is not this). The dashed line is "
                             f"VllmKvCacheFull's {C.KV_CACHE_FULL_RATIO:.0%}.")
    b.timeseries("Prefix cache hit rate", [
        (f"vllm_log_prefix_cache_hit_ratio{{{SE}}}", "{{server}} e{{engine}}"),
        (f"vllm_log_external_prefix_cache_hit_ratio{{{SE}}}", "external {{server}} e{{engine}}"),
        (f"vllm_log_mm_cache_hit_ratio{{{SE}}}", "multimodal {{server}} e{{engine}}"),
    ], "percentunit", min_=0, max_=1, description="As vLLM logs them: over the most recent requests, not per window; "
                                                  "multimodal is its encoder cache, for vision models.")
    b.timeseries("Tokens per second (from window counters)", [
        (f"sum by (server) (rate(vllm_log_generation_tokens_total{{{SE}}}[$__rate_interval]))", "generated {{server}}"),
        (f"sum by (server) (rate(vllm_log_computed_prompt_tokens_total{{{SE}}}[$__rate_interval]))",
         "computed prompt {{server}}"),
    ], TOKS, min_=0, description="Window average x window length, summed over engines: what the windows add up to. "
                                 "Prompt tokens are those the engine computed: prefix-cache hits and KV transferred in "
                                 "are not counted (compare with vLLM's "
                                 "vllm:prompt_tokens_by_source_total{source=\"local_compute\"}).")
    b.timeseries("Preemptions", [
        (f"sum by (server) (increase(vllm_log_preemptions_total{{{SE}}}[$__rate_interval]))", "{{server}}")],
        "short", min_=0, decimals=0, custom={"drawStyle": "bars", "fillOpacity": 80},
        description="Requests preempted (their KV cache freed, to be recomputed): the KV cache ran out. Empty for "
                    "vLLM 0.11-0.32 (V1): its stats line never prints 'Preemptions:' (the logger resets the count "
                    "before it checks it), so the log cannot tell; vLLM's vllm:num_preemptions_total can. Requests "
                    "waiting beside a full KV cache are the sign the log gives.")
    b.timeseries("Estimated compute and memory traffic per device (MFU)", [
        (f"vllm_log_estimated_flops_per_second_per_device{{{SE}}}", "FLOP/s {{server}} e{{engine}}"),
        (f"vllm_log_estimated_memory_bytes_per_second_per_device{{{SE}}}", "bytes/s {{server}} e{{engine}}"),
    ], "flops", min_=0,
        overrides=[{"matcher": {"id": "byRegexp", "options": "/bytes/"},
                    "properties": [{"id": "unit", "value": "Bps"}, {"id": "custom.axisPlacement", "value": "right"}]}],
        description="vLLM's own analytic estimate per device for each window (its 'MFU: x TF/s/device y GB/s/device' "
                    "line, vLLM 0.34+ with --enable-mfu-metrics): the FLOPs and the bytes read and written that the "
                    "model's shapes imply, not a hardware counter. Divide by the GPU's peak for utilisation. Empty "
                    "without that flag.")
    b.row("HTTP and errors")
    b.timeseries("HTTP responses by status", [
        (f"sum by (status) (rate(vllm_log_http_requests_total{{{S}}}[$__rate_interval]))", "{{status}}")], "reqps",
        min_=0, overrides=HTTP_COLOURS, description="Every response in vLLM's access log: 5xx red, 4xx orange.")
    b.timeseries("HTTP responses by endpoint", [
        (f"sum by (method, endpoint) (rate(vllm_log_http_requests_total{{{S}}}[$__rate_interval]))", "{{method}} {{endpoint}}")],
        "reqps", min_=0, description="vLLM's known routes by name; any other path is `other`.")
    b.timeseries("5xx share", [(_http_ratio("5.."), "{{server}}")], "percentunit", min_=0,
                 steps=[(None, GOOD), (C.HTTP_5XX_RATIO, BAD)], line=True,
                 description=f"Share of responses that are 5xx; the dashed line is VllmHigh5xxRatio's {C.HTTP_5XX_RATIO:.0%}.")
    b.timeseries("429 share", [(_http_ratio("429"), "{{server}}")], "percentunit", min_=0,
                 steps=[(None, GOOD), (C.HTTP_429_RATIO, WARN)], line=True,
                 description=f"Share of responses that are 429 (rate limited); the dashed line is VllmRateLimited's "
                             f"{C.HTTP_429_RATIO:.0%}.")
    b.timeseries("Errors", [(f"sum by (server, kind) (increase(vllm_log_errors_total{{{S}}}[$__rate_interval]))", "{{server}} {{kind}}")],
                 "short", min_=0, decimals=0, custom={"drawStyle": "bars", "fillOpacity": 80},
                 steps=[(None, BAD)],
                 description="OOMs, CUDA/NCCL errors, engine deaths (one per death) and tracebacks that are none of those.")
    b.timeseries("Exits and restarts (supervisor)", [
        (f"sum by (server, how, status) (increase(vllm_log_process_exits_total{{{S}}}[$__rate_interval]))",
         "{{server}} {{how}} {{status}}"),
        (f"sum by (server) (increase(vllm_log_restarts_total{{{S}}}[$__rate_interval]))", "{{server}} restarted")],
        "short", min_=0, decimals=0, custom={"drawStyle": "bars", "fillOpacity": 80},
        overrides=[{"matcher": {"id": "byRegexp", "options": "/restarted/"},
                    "properties": [{"id": "color", "value": {"mode": "fixed", "fixedColor": WARN}}]}],
        description="What systemd or docker compose logged of the vLLM process: its exits by how (exited, killed by a "
                    "signal, dumped core) and status (exit code, or signal), and the restarts it made on its own "
                    f"(Restart=, a restart policy). {C.RESTART_LOOP_COUNT} restarts within {C.RESTART_LOOP_WINDOW} "
                    "fire VllmRestartLoop. Empty when the log holds no supervisor lines (journald:NAME sources "
                    "read them for the unit; a file needs `journalctl -u UNIT` output).")
    b.timeseries("Warning signs and recoveries", [
        (f"sum by (server, method) (increase(vllm_log_rpc_timeouts_total{{{S}}}[$__rate_interval]))",
         "{{server}} RPC timeout {{method}}"),
        (f"sum by (server) (increase(vllm_log_shm_broadcast_waits_total{{{S}}}[$__rate_interval]))",
         "{{server}} shm broadcast wait"),
        (f"sum by (server, executor) (increase(vllm_log_worker_deaths_total{{{S}}}[$__rate_interval]))",
         "{{server}} worker died ({{executor}})"),
        (f"sum by (server, outcome) (increase(vllm_log_kv_load_failures_total{{{S}}}[$__rate_interval]))",
         "{{server}} KV load failure {{outcome}}"),
        (f"sum by (server, backend) (increase(vllm_log_jit_compilations_during_inference_total{{{S}}}[$__rate_interval]))",
         "{{server}} {{backend}} JIT while serving"),
    ], "short", min_=0, decimals=0, custom={"drawStyle": "bars", "fillOpacity": 70},
        description="What vLLM says before a hang or a death, and what it recovered from: RPCs to the workers that "
                    "timed out and shared-memory broadcast waits (both mark a serving engine stalled), worker "
                    "processes that died, KV loads a connector failed (recovered: prefill computed again; failed: "
                    "the requests ended in error), kernels compiled while serving (a latency spike's cause).")
    b.timeseries("Warning and error log lines", [
        (f"sum by (server, level) (increase(vllm_log_messages_total{{{S}}}[$__rate_interval]))", "{{server}} {{level}}")],
        "short", min_=0, decimals=0, custom={"drawStyle": "bars", "fillOpacity": 60},
        overrides=[{"matcher": {"id": "byRegexp", "options": pattern},
                    "properties": [{"id": "color", "value": {"mode": "fixed", "fixedColor": colour}}]}
                   for pattern, colour in (("/warning/", WARN), ("/error|critical/", BAD))],
        description="vLLM WARNING, ERROR and CRITICAL lines that are not one of the errors above.")
    V = 'cluster=~"$cluster", job=~"$vllm_job", host=~"$host", server=~"$server"'
    native = "no data: vLLM's own metrics are not scraped (the vLLM job variable finds none)"
    b.timeseries("vLLM's own: requests finished", [
        (f"sum by (server, finished_reason) (rate(vllm:request_success_total{{{V}}}[$__rate_interval]))",
         "{{server}} {{finished_reason}}")], "reqps", min_=0,
        options={"legend": {"displayMode": "list", "placement": "bottom", "showLegend": True},
                 "tooltip": {"mode": "multi", "sort": "desc"}},
        description="From vLLM's own /metrics (the vLLM job variable; " + C.VLLM_JOB + " in the shipped Prometheus "
                    "config), beside the log's view above: requests finished "
                    "by reason. Empty when that job is not scraped.")
    b.panels[-1]["fieldConfig"]["defaults"]["noValue"] = native
    b.timeseries("vLLM's own: time to first token (p95)", [
        (f"histogram_quantile(0.95, sum by (server, le) (rate(vllm:time_to_first_token_seconds_bucket{{{V}}}"
         f"[$__rate_interval])))", "{{server}}")], "s", min_=0,
        description="From vLLM's own /metrics: the 95th percentile of the time to first token.")
    b.panels[-1]["fieldConfig"]["defaults"]["noValue"] = native
    b.timeseries("Log lines by result", [
        (f"sum by (result) (rate(vllm_log_exporter_lines_total{{{S}}}[$__rate_interval]))", "{{result}}")], "short",
        min_=0, description="unparsed lines are vLLM output the exporter does not understand: see `parse --stats`.")
    return b.model()


def _run_level_acceptance_length(sel: str, window: str, fn: str) -> str:
    """1 + accepted / drafts from the counters: vLLM's mean acceptance length over every draft in the window."""
    return (f"1 + sum by (server) ({fn}(vllm_log_spec_decode_accepted_tokens_total{{{sel}}}[{window}]))"
            f" / sum by (server) ({fn}(vllm_log_spec_decode_drafts_total{{{sel}}}[{window}]))")


def _first_token_acceptance(sel: str, window: str) -> str:
    """Position 0's accepted tokens over the drafts that proposed at least one token (all drafts, less
    those of length 0 when the log gives draft lengths): VllmDraftAcceptanceCollapsed's measure."""
    drafts = f"sum by (server) (rate(vllm_log_spec_decode_drafts_total{{{sel}}}[{window}]))"
    return (f'sum by (server) (rate(vllm_log_spec_decode_position_accepted_tokens_total{{{sel}, position="0"}}[{window}]))'
            f' / ({drafts} - (sum by (server) (rate(vllm_log_spec_decode_drafts_by_length_total{{{sel}, '
            f'draft_length="0"}}[{window}])) or 0 * {drafts}))')


def spec_decode() -> dict:
    b = Board("vllm-log-spec-decode", "vLLM / Speculative decoding",
              "Acceptance of drafted tokens: per window, per position, and weighted by tokens.",
              ["vllm-log-exporter", "vllm"])
    b.row("Acceptance")
    b.stat("Mean acceptance length over the range (1 + accepted / drafts)",
           [(_run_level_acceptance_length(SE, "$__range", "increase"), "{{server}}")], "none", w=4, h=8, decimals=2,
           description="The run-level mean acceptance length: tokens emitted per draft, bonus token included, "
                       "from the counters over the whole time range (1 + accepted tokens / drafts), so every "
                       "draft weighs the same. Not the mean of the windows' logged means.")
    b.timeseries("Mean acceptance length", [
        (f"vllm_log_spec_decode_mean_acceptance_length{{{SE}}}", "window {{server}} e{{engine}}"),
        (_run_level_acceptance_length(SE, "$__rate_interval", "rate"), "1 + accepted / drafts {{server}}"),
    ], "short", min_=1, w=10,
        description="Tokens emitted per draft, including the bonus token. window: the gauge, the mean vLLM logged "
                    "for each engine's last stats window. 1 + accepted / drafts: the ratio of the counters over the "
                    "rate interval, summed over engines, so busy and quiet windows weigh by their drafts.")
    b.timeseries("Draft acceptance", [
        (f"vllm_log_spec_decode_draft_acceptance_ratio{{{SE}}}", "window {{server}} e{{engine}}"),
        (f"sum by (server) (rate(vllm_log_spec_decode_accepted_tokens_total{{{SE}}}[$__rate_interval]))"
         f" / sum by (server) (rate(vllm_log_spec_decode_drafted_tokens_total{{{SE}}}[$__rate_interval]))",
         "token-weighted {{server}}"),
        (_first_token_acceptance(SE, "$__rate_interval"), "first token {{server}}"),
    ], "percentunit", min_=0, max_=1, steps=[(None, BAD), (C.DRAFT_ACCEPTANCE_MIN, GOOD)], line=True, w=10,
        description=f"Drafted tokens accepted, per window and weighted by tokens, and how often the first drafted "
                    f"token is accepted (position 0, among drafts that proposed a token). With dynamic draft lengths "
                    f"the token-weighted share falls as drafts grow longer on a healthy server; the first token's does "
                    f"not. First token below the dashed line ({C.DRAFT_ACCEPTANCE_MIN:.0%}, "
                    f"VllmDraftAcceptanceCollapsed): drafting costs more than it gives.")
    b.heatmap("Mean acceptance length per window",
              f"sum by (le) (increase(vllm_log_spec_decode_window_mean_acceptance_length_bucket{{{SE}}}[$__rate_interval]))",
              "short", description="How the windows' mean acceptance lengths spread over time.")
    b.heatmap("Draft acceptance per window",
              f"sum by (le) (increase(vllm_log_spec_decode_window_draft_acceptance_ratio_bucket{{{SE}}}[$__rate_interval]))",
              "percentunit", description="How the windows' draft acceptance spreads over time.")
    b.row("Positions and tokens")
    b.bargauge("Acceptance by draft position (last window)",
               [(f"vllm_log_spec_decode_position_acceptance_ratio{{{SE}}}", "{{server}} position {{position}}")],
               "percentunit", min_=0, max_=1, w=8, steps=[(None, BAD), (C.DRAFT_ACCEPTANCE_MIN, WARN), (0.8, GOOD)],
               description="Acceptance at each draft position: later positions are accepted less often.")
    b.stat("Speculative depth", [(f"vllm_log_spec_decode_depth{{{SE}}}", "{{server}} e{{engine}}")], "none", w=4, h=8,
           decimals=0, description="The configured number of draft tokens per step (num_speculative_tokens).")
    b.stat("Drafted tokens per draft", [
        (f"sum by (server) (increase(vllm_log_spec_decode_drafted_tokens_total{{{SE}}}[$__range]))"
         f" / sum by (server) (increase(vllm_log_spec_decode_drafts_total{{{SE}}}[$__range]))", "{{server}}")],
        "none", w=4, h=8, decimals=2,
        description="Draft tokens proposed per draft over the time range (drafted / drafts), beside the configured "
                    "depth: the depth when every draft is full length, less when the proposer drafts fewer. Drafts "
                    "are derived from each window's line (accepted / sum of the per-position rates): within 2 % of vLLM's "
                    "own vllm:spec_decode_num_drafts_total (equal in the runs against a real vLLM).")
    b.timeseries("Accepted vs drafted tokens", [
        (f"sum by (server) (rate(vllm_log_spec_decode_accepted_tokens_total{{{SE}}}[$__rate_interval]))", "accepted {{server}}"),
        (f"sum by (server) (rate(vllm_log_spec_decode_drafted_tokens_total{{{SE}}}[$__rate_interval]))", "drafted {{server}}"),
    ], TOKS, min_=0, w=8, description="Draft tokens proposed and accepted per second, summed over engines.")
    b.row("Draft lengths and the drafter's confidence")
    b.bargauge("Drafts by draft length (range)", [
        (f"sum by (draft_length) (round(increase(vllm_log_spec_decode_drafts_by_length_total{{{SE}}}[$__range])))",
         "{{draft_length}} tokens")], "none", min_=0, w=8, decimals=0,
        description="How many drafts proposed each number of tokens over the time range, from vLLM's draft length "
                    "histogram (dynamic draft lengths; 0: the drafter proposed nothing that step). Empty at a fixed "
                    "depth, whose drafts all have the depth's length.")
    b.bargauge("Acceptance by the drafter's confidence (range)", [
        (f"sum by (confidence) (increase(vllm_log_spec_decode_confidence_accepted_tokens_total{{{SE}}}[$__range]))"
         f" / sum by (confidence) (increase(vllm_log_spec_decode_confidence_drafted_tokens_total{{{SE}}}[$__range]))",
         "{{confidence}}")], "percentunit", min_=0, max_=1, w=8,
        description="DSpark's STS calibration bins: of the tokens drafted with a confidence in each bin, the share "
                    "accepted. A calibrated drafter is accepted about as often as it is confident (see the mean "
                    "confidence beside it).")
    b.bargauge("Mean confidence per bin (range)", [
        (f"sum by (confidence) (increase(vllm_log_spec_decode_confidence_sum_total{{{SE}}}[$__range]))"
         f" / sum by (confidence) (increase(vllm_log_spec_decode_confidence_drafted_tokens_total{{{SE}}}[$__range]))",
         "{{confidence}}")], "percentunit", min_=0, max_=1, w=8,
        description="DSpark: the drafter's mean confidence in each bin. Acceptance well below it: the drafter is "
                    "over-confident, and its confidence-based stopping drafts too long.")
    return b.model()


def memory_kv() -> dict:
    b = Board("vllm-log-memory-kv", "vLLM / Memory and KV",
              "Start-up capacity facts (KV tokens, concurrency, memory split) and KV offload over PCIe.",
              ["vllm-log-exporter", "vllm"])
    b.row("Capacity found at start-up")
    b.stat("KV cache capacity", [(f"vllm_log_kv_cache_tokens{{{SE}}}", "{{server}} e{{engine}} {{device}}")],
           "suffix: tokens", decimals=0,
           description="Tokens the main KV cache of each engine holds, as found by the start-up profile: GPU memory, "
                       "or host memory on vLLM's CPU backend (the device in the name).")
    b.stat("Max concurrency", [(f"vllm_log_max_concurrency{{{SE}}}", "{{server}} e{{engine}}")], "suffix:x", decimals=2,
           steps=[(None, BAD), (1, GOOD)],
           description="Requests of the full configured length that fit in each engine's KV cache at once; below 1 a "
                       "full-length request cannot be served.")
    b.stat("Context length", [(f"vllm_log_max_model_len_tokens{{{SE}}}", "{{server}} e{{engine}}")], "suffix: tokens",
           decimals=0,
           description="Tokens per request the concurrency figure assumes (max_model_len).")
    b.stat("KV cache memory (all workers)", [(f"sum by (server) (vllm_log_kv_cache_memory_bytes{{{S}}})", "{{server}}")],
           "bytes", description="GPU memory the workers gave to the KV cache, summed.")
    b.stat("Engine init", [(f"vllm_log_engine_init_seconds{{{SE}}}", "init {{server}} e{{engine}}"),
                           (f"vllm_log_engine_compile_seconds{{{SE}}}", "compile {{server}} e{{engine}}")], "s",
           description="Profile, KV cache creation and warm-up at start, and the compilation part of it, per engine "
                       "(data-parallel rank).")
    b.stat("CPU offload pool", [(f"vllm_log_kv_offload_pool_bytes{{{S}}}", "{{server}}")], "bytes",
           description="Host memory set aside for KV offload at start-up.")
    b.bargauge("GPU memory split per worker",
               [(f"vllm_log_model_weights_bytes{{{S}}}", "{{server}} {{worker}} weights"),
                (f"vllm_log_kv_cache_memory_bytes{{{S}}}", "{{server}} {{worker}} kv_cache"),
                (f"vllm_log_startup_memory_bytes{{{S}}}", "{{server}} {{worker}} {{component}}")], "bytes", w=12, h=9,
               description="Weights, KV cache, peak activation, non-torch memory and CUDA graphs per worker.")
    b.bargauge("Model weights per worker", [(f"vllm_log_model_weights_bytes{{{S}}}", "{{server}} {{worker}}")], "bytes",
               w=12, h=9, description="GPU memory the model's weights take on each worker.")
    b.bargauge("Last CUDA OOM per GPU", [
        (f"vllm_log_oom_requested_bytes{{{S}}}", "{{server}} GPU {{gpu}} asked for"),
        (f"vllm_log_oom_free_bytes{{{S}}}", "{{server}} GPU {{gpu}} free"),
    ], "bytes", w=12, h=6, steps=[(None, BAD)],
        description="What the last OOM on each GPU tried to allocate, and what PyTorch said was free then.")
    b.row("KV offload")
    b.timeseries("Offload rate (bytes / recorded copy time)", [
        (f"sum by (server, direction) (rate(vllm_log_kv_offload_bytes_total{{{S}}}[$__rate_interval]))"
         f" / sum by (server, direction) (rate(vllm_log_kv_offload_seconds_total{{{S}}}[$__rate_interval]))",
         "{{server}} {{direction}}"),
    ], "Bps", min_=0, steps=[(None, BAD), (C.KV_OFFLOAD_MIN_BYTES_PER_SECOND, GOOD)], line=True,
        description="Store is GPU to host RAM, load is host RAM to GPU; PCIe 5.0 x16 is ~64 GB/s one way. The dashed "
                    f"line is VllmKvOffloadSlow's {C.KV_OFFLOAD_MIN_BYTES_PER_SECOND / 1e9:.0f} GB/s.")
    b.timeseries("Offload bytes moved", [
        (f"sum by (server, direction) (rate(vllm_log_kv_offload_bytes_total{{{S}}}[$__rate_interval]))", "{{server}} {{direction}}"),
    ], "Bps", min_=0, description="Bytes moved per second of wall time, per direction.")
    b.heatmap("Per-interval offload rate",
              f"sum by (le) (increase(vllm_log_kv_offload_throughput_bytes_per_second_bucket{{{S}}}[$__rate_interval]))", "Bps",
              description="How each logged interval's rate (bytes / its recorded time) spreads over time.")
    b.timeseries("CPU offload cache usage", [(f"vllm_log_kv_offload_cpu_cache_usage_ratio{{{S}}}", "{{server}}")],
                 "percentunit", min_=0, max_=1, description="Share of the host offload pool in use.")
    b.row("LMCache")
    b.timeseries("LMCache rate (bytes / recorded time)", [
        (f"sum by (server, direction) (rate(vllm_log_lmcache_bytes_total{{{S}}}[$__rate_interval]))"
         f" / sum by (server, direction) (rate(vllm_log_lmcache_seconds_total{{{S}}}[$__rate_interval]))",
         "{{server}} {{direction}}"),
    ], "Bps", min_=0, description="LMCache's stores (GPU to its cache) and retrievals (back to the GPU): bytes over "
                                  "the time LMCache recorded, not its own logged throughput.")
    b.timeseries("LMCache hit ratio", [
        (f"sum by (server) (rate(vllm_log_lmcache_hit_tokens_total{{{S}}}[$__rate_interval]))"
         f" / sum by (server) (rate(vllm_log_lmcache_requested_tokens_total{{{S}}}[$__rate_interval]))", "{{server}}"),
    ], "percentunit", min_=0, max_=1, description="Of the prompt tokens LMCache looked up, the share it had cached.")
    b.timeseries("LMCache tokens moved", [
        (f"sum by (server, direction) (rate(vllm_log_lmcache_tokens_total{{{S}}}[$__rate_interval]))",
         "{{server}} {{direction}}"),
    ], TOKS, min_=0, description="Tokens of KV cache LMCache stored and retrieved per second.")
    return b.model()


DASHBOARDS = {"overview.json": overview, "spec-decode.json": spec_decode, "memory-kv.json": memory_kv}
