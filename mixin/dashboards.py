"""Grafana dashboards for vllm-log-exporter, as plain JSON models built in Python.

Three boards: an overview, speculative decoding, and memory / KV. Each has template variables for
the datasource, ``instance`` (one exporter per GPU host), ``server`` and ``engine`` (multi-select
with "All"), stable uids, and a unit on every panel. The datasource is the ``${datasource}``
variable, never an import-time ``${DS_...}`` input (provisioning does not resolve those).
"""

from __future__ import annotations

from mixin import config as C

DS = {"type": "prometheus", "uid": "${datasource}"}
S = 'instance=~"$instance", server=~"$server"'
SE = S + ', engine=~"$engine"'
TOKS = "suffix: tok/s"


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
              fmt: str | None = None, custom: dict | None = None) -> dict:
        refs = "ABCDEFGH"
        tgts = []
        for i, (expr, legend) in enumerate(targets):
            t = {"refId": refs[i], "datasource": DS, "expr": expr, "legendFormat": legend, "range": not instant,
                 "instant": instant}
            if fmt:
                t["format"] = fmt
            tgts.append(t)
        defaults: dict = {"unit": unit}
        if min_ is not None:
            defaults["min"] = min_
        if max_ is not None:
            defaults["max"] = max_
        if custom:
            defaults["custom"] = custom
        p = {"id": self._id(), "type": kind, "title": title, "description": description, "datasource": DS,
             "gridPos": self._place(w, h), "targets": tgts,
             "fieldConfig": {"defaults": defaults, "overrides": []}, "options": options or {}}
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
            }]},
            "links": [{"title": "vLLM boards", "type": "dashboards", "tags": ["vllm-log-exporter"], "asDropdown": True,
                       "includeVars": True, "keepTime": True, "icon": "external link", "targetBlank": False,
                       "tooltip": "", "url": ""}],
            "templating": {"list": [
                {"name": "datasource", "label": "Data source", "type": "datasource", "query": "prometheus",
                 "current": {"text": "Prometheus", "value": C.DATASOURCE_UID}, "hide": 0, "refresh": 1, "regex": "", "options": [], "includeAll": False, "multi": False},
                var("instance", "Exporter", "label_values(vllm_log_exporter_build_info, instance)"),
                var("server", "Server", 'label_values(vllm_log_exporter_lines_total{instance=~"$instance"}, server)'),
                var("engine", "Engine", 'label_values(vllm_log_stats_windows_total{instance=~"$instance", server=~"$server"}, engine)'),
            ]},
            "panels": self.panels,
        }


def overview() -> dict:
    b = Board("vllm-log-overview", "vLLM / Overview",
              "Throughput, queue, KV cache, HTTP status and errors of vLLM servers, from their logs.",
              ["vllm-log-exporter", "vllm"])
    b.row("Health")
    b.stat("Exporter up", [(f'up{{job="{C.EXPORTER_JOB}", instance=~"$instance"}}', "{{instance}}")], "bool_yes_no",
           description="Prometheus can scrape the exporter.")
    b.stat("Log source up", [(f"vllm_log_exporter_source_up{{{S}}}", "{{server}}")], "bool_yes_no",
           description="The exporter has the server's log open (file, container, journal).")
    b.stat("Last log line", [(f"time() - vllm_log_last_line_timestamp_seconds{{{S}}}", "{{server}}")], "s",
           description="Seconds since the exporter last read a line. An idle vLLM that nobody scrapes is quiet.")
    b.stat("Server starts", [(f"sum by (server) (increase(vllm_log_server_starts_total{{{S}}}[$__range]))", "{{server}}")],
           "short", description="Start-up banners in the time range: more than one means restarts.")
    b.stat("Errors in range", [(f"sum(increase(vllm_log_errors_total{{{S}}}[$__range]))", "errors")], "short",
           description="OOMs, CUDA/NCCL errors, dead engines and tracebacks in the time range.")
    b.stat("vLLM version", [(f"vllm_log_build_info{{{S}}}", "{{version}}")], "short",
           options={"reduceOptions": {"calcs": ["lastNotNull"], "fields": "", "values": False},
                    "textMode": "name", "colorMode": "none", "graphMode": "none"})
    b.row("Throughput and queue")
    b.timeseries("Generation throughput", [(f"vllm_log_generation_throughput_tokens_per_second{{{SE}}}", "{{server}} e{{engine}}")],
                 TOKS, description="Average generation throughput of each stats window.")
    b.timeseries("Prompt throughput", [(f"vllm_log_prompt_throughput_tokens_per_second{{{SE}}}", "{{server}} e{{engine}}")],
                 TOKS, description="Average prompt (prefill) throughput of each stats window.")
    b.timeseries("Requests running and waiting", [
        (f"vllm_log_requests_running{{{SE}}}", "running {{server}} e{{engine}}"),
        (f"vllm_log_requests_waiting{{{SE}}}", "waiting {{server}} e{{engine}}"),
    ], "short", min_=0)
    b.timeseries("GPU KV cache usage", [(f"vllm_log_gpu_kv_cache_usage_ratio{{{SE}}}", "{{server}} e{{engine}}")],
                 "percentunit", min_=0, max_=1)
    b.timeseries("Prefix cache hit rate", [
        (f"vllm_log_prefix_cache_hit_ratio{{{SE}}}", "{{server}} e{{engine}}"),
        (f"vllm_log_external_prefix_cache_hit_ratio{{{SE}}}", "external {{server}} e{{engine}}"),
    ], "percentunit", min_=0, max_=1, description="As vLLM logs it: over the most recent requests, not per window.")
    b.timeseries("Tokens per second (from window counters)", [
        (f"sum by (server) (rate(vllm_log_generation_tokens_total{{{SE}}}[$__rate_interval]))", "generated {{server}}"),
        (f"sum by (server) (rate(vllm_log_prompt_tokens_total{{{SE}}}[$__rate_interval]))", "prompt {{server}}"),
    ], TOKS)
    b.row("HTTP and errors")
    b.timeseries("HTTP responses by status", [
        (f"sum by (status) (rate(vllm_log_http_requests_total{{{S}}}[$__rate_interval]))", "{{status}}")], "reqps")
    b.timeseries("HTTP responses by endpoint", [
        (f"sum by (method, endpoint) (rate(vllm_log_http_requests_total{{{S}}}[$__rate_interval]))", "{{method}} {{endpoint}}")],
        "reqps")
    b.timeseries("Errors", [(f"sum by (server, kind) (increase(vllm_log_errors_total{{{S}}}[$__rate_interval]))", "{{server}} {{kind}}")],
                 "short", min_=0, custom={"drawStyle": "bars", "fillOpacity": 80})
    b.timeseries("Log lines by result", [
        (f"sum by (result) (rate(vllm_log_exporter_lines_total{{{S}}}[$__rate_interval]))", "{{result}}")], "short",
        description="unparsed lines are vLLM output the exporter does not understand: see `parse --stats`.")
    return b.model()


def spec_decode() -> dict:
    b = Board("vllm-log-spec-decode", "vLLM / Speculative decoding",
              "Acceptance of drafted tokens: per window, per position, and weighted by tokens.",
              ["vllm-log-exporter", "vllm"])
    b.row("Acceptance")
    b.timeseries("Mean acceptance length", [(f"vllm_log_spec_decode_mean_acceptance_length{{{SE}}}", "{{server}} e{{engine}}")],
                 "short", min_=1, description="Tokens emitted per verification step, including the bonus token.")
    b.timeseries("Draft acceptance", [
        (f"vllm_log_spec_decode_draft_acceptance_ratio{{{SE}}}", "window {{server}} e{{engine}}"),
        (f"sum by (server) (rate(vllm_log_spec_decode_accepted_tokens_total{{{SE}}}[$__rate_interval]))"
         f" / sum by (server) (rate(vllm_log_spec_decode_drafted_tokens_total{{{SE}}}[$__rate_interval]))",
         "token-weighted {{server}}"),
    ], "percentunit", min_=0, max_=1)
    b.heatmap("Mean acceptance length per window",
              f"sum by (le) (increase(vllm_log_spec_decode_window_mean_acceptance_length_bucket{{{SE}}}[$__rate_interval]))",
              "short")
    b.heatmap("Draft acceptance per window",
              f"sum by (le) (increase(vllm_log_spec_decode_window_draft_acceptance_ratio_bucket{{{SE}}}[$__rate_interval]))",
              "percentunit")
    b.row("Positions and tokens")
    b.bargauge("Acceptance by draft position (last window)",
               [(f"vllm_log_spec_decode_position_acceptance_ratio{{{SE}}}", "{{server}} position {{position}}")],
               "percentunit", min_=0, max_=1, w=8)
    b.stat("Speculative depth", [(f"vllm_log_spec_decode_depth{{{SE}}}", "{{server}} e{{engine}}")], "short", w=4, h=8,
           description="Draft tokens proposed per step.")
    b.timeseries("Accepted vs drafted tokens", [
        (f"sum by (server) (rate(vllm_log_spec_decode_accepted_tokens_total{{{SE}}}[$__rate_interval]))", "accepted {{server}}"),
        (f"sum by (server) (rate(vllm_log_spec_decode_drafted_tokens_total{{{SE}}}[$__rate_interval]))", "drafted {{server}}"),
    ], TOKS)
    return b.model()


def memory_kv() -> dict:
    b = Board("vllm-log-memory-kv", "vLLM / Memory and KV",
              "Start-up capacity facts (KV tokens, concurrency, memory split) and KV offload over PCIe.",
              ["vllm-log-exporter", "vllm"])
    b.row("Capacity found at start-up")
    b.stat("GPU KV cache", [(f"vllm_log_gpu_kv_cache_tokens{{{S}}}", "{{server}}")], "suffix: tokens")
    b.stat("Max concurrency", [(f"vllm_log_max_concurrency{{{S}}}", "{{server}}")], "suffix:x",
           description="Requests of the full configured length that fit in the KV cache at once.")
    b.stat("Context length", [(f"vllm_log_max_model_len_tokens{{{S}}}", "{{server}}")], "suffix: tokens")
    b.stat("KV cache memory (all workers)", [(f"sum by (server) (vllm_log_kv_cache_memory_bytes{{{S}}})", "{{server}}")], "bytes")
    b.stat("Engine init", [(f"vllm_log_engine_init_seconds{{{S}}}", "init {{server}}"),
                           (f"vllm_log_engine_compile_seconds{{{S}}}", "compile {{server}}")], "s")
    b.stat("CPU offload pool", [(f"vllm_log_kv_offload_pool_bytes{{{S}}}", "{{server}}")], "bytes")
    b.bargauge("GPU memory split per worker",
               [(f"vllm_log_model_weights_bytes{{{S}}}", "{{server}} {{worker}} weights"),
                (f"vllm_log_kv_cache_memory_bytes{{{S}}}", "{{server}} {{worker}} kv_cache"),
                (f"vllm_log_startup_memory_bytes{{{S}}}", "{{server}} {{worker}} {{component}}")], "bytes", w=12, h=9)
    b.bargauge("Model weights per worker", [(f"vllm_log_model_weights_bytes{{{S}}}", "{{server}} {{worker}}")], "bytes",
               w=12, h=9)
    b.row("KV offload")
    b.timeseries("Offload rate (bytes / recorded copy time)", [
        (f"sum by (server, direction) (rate(vllm_log_kv_offload_bytes_total{{{S}}}[$__rate_interval]))"
         f" / sum by (server, direction) (rate(vllm_log_kv_offload_seconds_total{{{S}}}[$__rate_interval]))",
         "{{server}} {{direction}}"),
    ], "Bps", description="Store is GPU to host RAM, load is host RAM to GPU; PCIe 5.0 x16 is ~64 GB/s one way.")
    b.timeseries("Offload bytes moved", [
        (f"sum by (server, direction) (rate(vllm_log_kv_offload_bytes_total{{{S}}}[$__rate_interval]))", "{{server}} {{direction}}"),
    ], "Bps")
    b.heatmap("Per-interval offload rate",
              f"sum by (le) (increase(vllm_log_kv_offload_throughput_bytes_per_second_bucket{{{S}}}[$__rate_interval]))", "Bps")
    b.timeseries("CPU offload cache usage", [(f"vllm_log_kv_offload_cpu_cache_usage_ratio{{{S}}}", "{{server}}")],
                 "percentunit", min_=0, max_=1)
    return b.model()


DASHBOARDS = {"overview.json": overview, "spec-decode.json": spec_decode, "memory-kv.json": memory_kv}
