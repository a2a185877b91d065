"""End to end on loopback: the real exporter, a real Prometheus running the stack's own config and
rules, a real Alertmanager running the stack's own config, and a webhook receiver of ours.

Only addresses, paths and timings are rewritten (and said so below); the rules, routes and
dashboard queries are the shipped ones.
"""

from __future__ import annotations

import json

import subprocess
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
import yaml

from mixin import config as C
from tests.conftest import SAMPLE, SAMPLE_LMCACHE, SAMPLE_V0
from tests.helpers import (ROOT, Exporter, Prometheus, dashboard_queries, demo_leaves_empty, free_port, grafana_substitute, have, http_get,
                           wait_until)

pytestmark = pytest.mark.skipif(not (have("prometheus") and have("prometheus-alertmanager")),
                                reason="prometheus and prometheus-alertmanager (Debian packages) not installed")

OOM_TRACEBACK = [
    "(EngineCore pid=9) ERROR 12-02 10:00:00 [core.py:842] EngineCore encountered a fatal error.",
    "(EngineCore pid=9) ERROR 12-02 10:00:00 [core.py:842] Traceback (most recent call last):",
    '(EngineCore pid=9) ERROR 12-02 10:00:00 [core.py:842]   File "/x/vllm/v1/engine/core.py", line 833, in run_engine_core',
    "(EngineCore pid=9) ERROR 12-02 10:00:00 [core.py:842]     engine_core.run_busy_loop()",
    "(EngineCore pid=9) ERROR 12-02 10:00:00 [core.py:842] torch.OutOfMemoryError: CUDA out of memory. "
    "Tried to allocate 2.00 GiB. GPU 0 has a total capacity of 94.97 GiB of which 1.07 GiB is free.",
    "(EngineCore pid=9) INFO 12-02 10:00:01 [core.py:1] shutting down",
]


class _LoopbackServer:
    """An HTTP server of the test's own on a free loopback port, in a thread; ``handler`` answers."""

    def __init__(self, handler):
        self.port = free_port()
        self.server = ThreadingHTTPServer(("127.0.0.1", self.port), handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.server.shutdown()
        self.server.server_close()


class _Quiet(BaseHTTPRequestHandler):
    def log_message(self, *a):
        pass


class Receiver(_LoopbackServer):
    """Collects Alertmanager webhook POSTs."""

    def __init__(self):
        self.posts: list[tuple[str, dict]] = []
        outer = self

        class H(_Quiet):
            def do_POST(self):
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                outer.posts.append((self.path, json.loads(body)))
                self.send_response(200)
                self.end_headers()

        super().__init__(H)


class Relay(_LoopbackServer):
    """Passes the exporter's posts on to the real Alertmanager, answering what it answered, and keeps the alerts: what
    the exporter pushed, apart from what Prometheus' rules sent (Alertmanager holds one alert of the two, the later)."""

    def __init__(self, target: str):
        self.alerts: list[dict] = []
        outer = self

        class H(_Quiet):
            def do_POST(self):
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                if self.path == "/api/v2/alerts":
                    outer.alerts.extend(json.loads(body))
                request = urllib.request.Request(target + self.path, data=body, method="POST", headers={
                    "Content-Type": self.headers.get("Content-Type", "application/json")})
                try:
                    with urllib.request.urlopen(request, timeout=10) as r:
                        status, answer = r.status, r.read()
                except urllib.error.HTTPError as e:
                    status, answer = e.code, e.read()
                self.send_response(status)
                self.send_header("Content-Length", str(len(answer)))
                self.end_headers()
                self.wfile.write(answer)

        super().__init__(H)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"


class StandInVllm(_LoopbackServer):
    """A stand-in for vLLM's own /metrics (no vLLM runs here): a few `vllm:` families in vLLM's
    names, counting up on every scrape, so the dashboards' native panels and the rules that join
    the `vllm` job have a target. The latency histograms have vLLM 0.32's bucket bounds
    (mixin/slo_buckets.py) and one observation in ten above every SLO's threshold, so the Service
    levels board's SLIs have values."""

    def __init__(self):
        from mixin.slo_buckets import BUCKETS, LATENCY_SLIS

        self.scrapes = 0
        outer = self
        thresholds = {histogram: C.SLOS[name]["threshold_seconds"]
                      for name, (histogram, _, _) in LATENCY_SLIS.items() if name in C.SLOS}

        def histogram(name: str, n: int) -> str:
            # per scrape: 9 observations at the threshold's bucket (or the first), 1 at the last bound
            bounds, t = BUCKETS["0.32"][name], thresholds.get(name)
            at = bounds.index(t) if t in bounds else 0
            lines = [f"# TYPE {name} histogram\n"]
            for i, le in enumerate(bounds):
                lines.append(f'{name}_bucket{{model_name="m",engine="0",le="{le!r}"}} {(9 if i >= at else 0) * n + (n if i == len(bounds) - 1 else 0)}\n')
            lines.append(f'{name}_bucket{{model_name="m",engine="0",le="+Inf"}} {10 * n}\n')
            lines.append(f'{name}_count{{model_name="m",engine="0"}} {10 * n}\n')
            lines.append(f'{name}_sum{{model_name="m",engine="0"}} {3.2 * n}\n')
            return "".join(lines)

        class H(_Quiet):
            def do_GET(self):
                outer.scrapes += 1
                n = outer.scrapes
                body = (
                    "# TYPE vllm:request_success_total counter\n"
                    f'vllm:request_success_total{{model_name="m",engine="0",finished_reason="stop"}} {10 * n}\n'
                    f'vllm:request_success_total{{model_name="m",engine="0",finished_reason="error"}} {n}\n'
                    + "".join(histogram(h, n) for h in sorted(BUCKETS["0.32"]))
                    # what the boards' vLLM job variable looks for (vLLM 0.32 exports it per engine)
                    + "# TYPE vllm:num_requests_running gauge\n"
                    + 'vllm:num_requests_running{model_name="m",engine="0"} 1\n'
                    # the engine's steps (the heartbeat), and the tokens the cost rules read
                    + "# TYPE vllm:iteration_tokens_total histogram\n"
                    + f'vllm:iteration_tokens_total_bucket{{model_name="m",engine="0",le="+Inf"}} {40 * n}\n'
                    + f'vllm:iteration_tokens_total_count{{model_name="m",engine="0"}} {40 * n}\n'
                    + f'vllm:iteration_tokens_total_sum{{model_name="m",engine="0"}} {900 * n}\n'
                    + "# TYPE vllm:generation_tokens_total counter\n"
                    + f'vllm:generation_tokens_total{{model_name="m",engine="0"}} {800 * n}\n'
                    # the offloading connector's allocation failures (vLLM 0.26+ with KV offload): none
                    + "# TYPE vllm:kv_offload_allocation_failure_total counter\n"
                    + 'vllm:kv_offload_allocation_failure_total{model_name="m",engine="0"} 0\n'
                    + "# TYPE vllm:prompt_tokens_total counter\n"
                    + f'vllm:prompt_tokens_total{{model_name="m",engine="0"}} {2000 * n}\n'
                ).encode()
                self.send_response(200)
                self.send_header("Content-Type", "text/plain; version=0.0.4")
                self.end_headers()
                self.wfile.write(body)

        super().__init__(H)


class Alertmanager:
    def __init__(self, tmp, config_text: str):
        self.tmp = tmp
        self.port = free_port()
        (tmp / "alertmanager.yml").write_text(config_text)

    @property
    def url(self):
        return f"http://127.0.0.1:{self.port}"

    def __enter__(self):
        self.log = open(self.tmp / "alertmanager.log", "w")
        self.proc = subprocess.Popen(
            ["prometheus-alertmanager", f"--config.file={self.tmp / 'alertmanager.yml'}",
             f"--storage.path={self.tmp / 'am'}", f"--web.listen-address=127.0.0.1:{self.port}",
             "--cluster.listen-address="], stdout=self.log, stderr=subprocess.STDOUT)
        wait_until(lambda: self.proc.poll() is None and http_get(self.url + "/-/ready")[0] == 200, 20, what="alertmanager ready")
        return self

    def __exit__(self, *exc):
        self.proc.terminate()
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
        self.log.close()


def stack_prometheus_config(exporter_port: int, am_port: int, vllm_port: int | None = None) -> str:
    cfg = yaml.safe_load((ROOT / "deploy" / "prometheus" / "prometheus.yml").read_text())
    # rewritten for the test: 1 s intervals, loopback ports chosen here, the repo's rules directory
    cfg["global"] = {"scrape_interval": "1s", "evaluation_interval": "1s"}
    cfg["rule_files"] = [str(ROOT / "deploy" / "prometheus" / "rules" / "*.rules.yml")]
    cfg["alerting"]["alertmanagers"][0]["static_configs"][0]["targets"] = [f"127.0.0.1:{am_port}"]
    (job,) = [j for j in cfg["scrape_configs"] if j["job_name"] == "vllm-log-exporter"]
    job["static_configs"][0]["targets"] = [f"127.0.0.1:{exporter_port}"]
    (native,) = [j for j in cfg["scrape_configs"] if j["job_name"] == "vllm"]
    if vllm_port is None:
        cfg["scrape_configs"].remove(native)
    else:  # the stand-in vLLM is the live server's
        native["static_configs"] = [{"targets": [f"127.0.0.1:{vllm_port}"], "labels": {"server": "live"}}]
    return yaml.safe_dump(cfg)


def stack_alertmanager_config(receiver_port: int) -> str:
    text = (ROOT / "deploy" / "alertmanager" / "alertmanager.yml").read_text()
    # rewritten for the test: the placeholder webhook goes to our receiver, and waits are shortened
    text = text.replace("http://127.0.0.1:9099", f"http://127.0.0.1:{receiver_port}")
    cfg = yaml.safe_load(text)
    cfg["templates"] = [str(ROOT / "deploy" / "alertmanager" / "templates" / "*.tmpl")]
    for route in [cfg["route"], *cfg["route"]["routes"]]:
        route["group_wait"] = "0s"
        route["group_interval"] = "1s"
    return yaml.safe_dump(cfg)


@pytest.fixture(scope="module")
def stack(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("stack")
    live = tmp / "live.log"
    live.write_text("")
    with Receiver() as receiver, Alertmanager(tmp, stack_alertmanager_config(receiver.port)) as am, \
            Relay(am.url) as relay, StandInVllm() as vllm:
        # the two samples are read from their start, the live file is followed from its end; the exporter pushes
        # its alerts to Alertmanager through the relay, which keeps a copy
        ex = Exporter("--config", str(_config(tmp, live, relay.url)))
        with ex:
            with Prometheus(tmp, stack_prometheus_config(ex.port, am.port, vllm.port)) as prom:
                def q(expr):
                    return prom.query(expr)

                wait_until(lambda: q('up{job="vllm-log-exporter"}') and q('up{job="vllm-log-exporter"}')[0]["value"][1] == "1",
                           30, 0.5, what="exporter target up")
                yield {"prom": prom, "am": am, "receiver": receiver, "exporter": ex, "live": live, "relay": relay}


def _pod(tmp) -> Path:
    """A vLLM pod's log as kubelet lays it out (CRI lines); returns the glob over such pods."""
    f = tmp / "pods" / "llm_vllm-pod-0_uid-1" / "vllm" / "0.log"
    f.parent.mkdir(parents=True, exist_ok=True)
    f.write_text("".join(f"2026-08-04T02:45:03.123456789Z stdout F {ln}\n"
                         for ln in SAMPLE.read_text(encoding="utf-8").splitlines()[:100]))
    return tmp / "pods" / "*_*" / "*" / "*.log"


def _config(tmp, live, am_url):
    path = tmp / "exporter.yml"
    path.write_text(yaml.safe_dump({
        "timestamps": {"year": 2026},
        # the exporter pushes the log's alerts itself too: the same labels as the rules', one alert
        "alertmanager": {"urls": [am_url]},
        # prices for the Cost row: the live server's tokens come from the stand-in vLLM's counters
        "cost": {"per_hour": 2.0, "servers": {"live": {"gpu_hour": 1.5, "gpus": 2}}},
        "sources": [
            {"name": "grandpa", "type": "file", "path": str(SAMPLE), "from_start": True},
            {"name": "legacy", "type": "file", "path": str(SAMPLE_V0), "from_start": True},
            {"name": "lmc", "type": "file", "path": str(SAMPLE_LMCACHE), "from_start": True},
            {"name": "live", "type": "file", "path": str(live)},
            # a vLLM pod in kubelet's layout (the boards' namespace variable reads its pod info)
            {"name": "pods", "type": "file", "path": str(_pod(tmp)), "server_label": "file", "from_start": True},
        ],
    }))
    return path


def _substitute(expr: str) -> str:
    return grafana_substitute(expr)


def test_rules_are_loaded(stack):
    groups = stack["prom"].api("/api/v1/rules")["groups"]
    names = {r["name"] for g in groups for r in g["rules"]}
    assert {"VllmCudaOutOfMemory", "VllmEngineDead", "VllmKvOffloadSlow", "VllmLogExporterDown"} <= names
    assert all(r["health"] == "ok" for g in groups for r in g["rules"])


def test_every_dashboard_query_returns_data(stack):
    prom = stack["prom"]
    # rate() and increase() need two samples in the window
    time.sleep(3)
    missing = []
    for path in sorted((ROOT / "dashboards").glob("*.json")):
        d = json.loads(path.read_text())
        queries = [(where, expr) for where, expr in dashboard_queries() if where.startswith(path.name + ":")]
        for where, expr in queries:
            status, body = http_get(prom.url + "/api/v1/query?" + urllib.parse.urlencode({"query": _substitute(expr)}))
            assert status == 200, f"{where}: {body}"
            if not json.loads(body)["data"]["result"] and not demo_leaves_empty(expr):
                missing.append(where)
    assert missing == [], "panels that would show No data on the demo"
    # annotations mark events, so an empty answer is normal: each must still be a query Prometheus runs
    for path in sorted((ROOT / "dashboards").glob("*.json")):
        for a in json.loads(path.read_text())["annotations"]["list"]:
            if "expr" in a:
                status, body = http_get(prom.url + "/api/v1/query?" + urllib.parse.urlencode(
                    {"query": _substitute(a["expr"]).replace("[15s]", "[1h]")}))
                assert status == 200, f"{path.name}: annotation {a['name']}: {body}"


def test_an_oom_in_the_log_reaches_the_webhook(stack):
    receiver, live = stack["receiver"], stack["live"]
    prom = stack["prom"]
    # the live server's OOM counter exists at 0 before the OOM: increase() will see the step
    wait_until(lambda: prom.query('vllm_log_errors_total{server="live",kind="oom"} == 0'), 15, 0.5, what="zero-born counter")
    t0 = time.monotonic()
    with open(live, "a") as f:
        f.write("\n".join(OOM_TRACEBACK) + "\n")

    def oom_posts():
        return [(path, body) for path, body in receiver.posts
                if any(a["labels"].get("alertname") == "VllmCudaOutOfMemory" and a["labels"].get("server") == "live"
                       for a in body["alerts"])]

    (path, body), *_ = wait_until(oom_posts, 60, 0.5, what="VllmCudaOutOfMemory notification")
    elapsed = time.monotonic() - t0
    assert path == "/alerts/critical" and body["receiver"] == "critical" and body["status"] == "firing"
    alert = next(a for a in body["alerts"] if a["labels"]["alertname"] == "VllmCudaOutOfMemory")
    assert alert["labels"]["severity"] == "critical" and alert["labels"]["kind"] == "oom"
    assert alert["labels"]["job"] == "vllm-log-exporter"
    assert alert["annotations"]["summary"] == "CUDA out of memory on vLLM server live"
    # grouped per host and exporter too, so same-named servers on two hosts are two notifications
    assert body["groupLabels"] == {"alertname": "VllmCudaOutOfMemory", "server": "live",
                                   "instance": alert["labels"]["instance"]}
    # pushed by the exporter and fired by the rule, it is one alert in one notification
    for _, b in oom_posts():
        assert len([a for a in b["alerts"] if a["labels"]["alertname"] == "VllmCudaOutOfMemory"]) == 1
    # the exporter pushed it with the log's words, the rule with its own; the notification holds whichever reached
    # Alertmanager first: normally the push (within ~0.5 s of the line; the rule waits for a scrape and an evaluation,
    # up to 1 s each here), on a loaded machine sometimes the rule (a race of the test's own, not the product's)
    words = "torch.OutOfMemoryError: CUDA out of memory"

    def pushed():
        return [a for a in stack["relay"].alerts if a["labels"].get("alertname") == "VllmCudaOutOfMemory"
                and a["labels"].get("server") == "live"]

    ours = wait_until(pushed, 30, 0.5, what="the exporter's push")[0]
    assert ours["labels"] == alert["labels"], (ours, alert)  # (one alert: the same labels)
    assert words in ours["annotations"]["description"]
    held = alert["annotations"]["description"]
    assert words in held or held.startswith("vLLM on live logged 1 CUDA OOM(s)"), held
    print(f"OOM appended -> notification: {elapsed:.1f} s, its description the "
          f"{'exporter' if words in held else 'rule'}'s")  # measured, not asserted (a loaded machine is slower)
    # the dead engine arrives too, on the same route
    wait_until(lambda: any(a["labels"].get("alertname") == "VllmEngineDead" and a["labels"].get("server") == "live"
                           for _, b in receiver.posts for a in b["alerts"]), 30, 0.5, what="VllmEngineDead notification")
    # and the dashboards' OOM annotation marks it (the query as Grafana sends it, over a 1 m interval)
    board = json.loads((ROOT / "dashboards" / "overview.json").read_text())
    expr = next(a["expr"] for a in board["annotations"]["list"] if a.get("name") == "CUDA out of memory")
    marks = wait_until(lambda: prom.query(_substitute(expr).replace("[15s]", "[1m]")), 15, 0.5,
                       what="the OOM annotation (the pushed alert comes before Prometheus' next scrape)")
    assert [m["metric"]["server"] for m in marks] == ["live"]
