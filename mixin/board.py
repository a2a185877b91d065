"""The boards' building blocks: the Board (panels placed on Grafana's 24-column grid, the template
variables every board has), the selectors, colours and annotations they share. The boards themselves are
in mixin/dashboards.py and mixin/memory_board.py."""


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
