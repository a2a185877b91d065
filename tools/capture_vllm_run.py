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

Writes OUTDIR/vllm.log (the server's stdout+stderr, nothing else), OUTDIR/metrics.jsonl (vLLM's
/metrics every 10 s and one just before the stop or kill), OUTDIR/client.jsonl (one line per
request) and OUTDIR/run.json (arguments, version, timings, exit code, signal). Stdlib only.
"""

from __future__ import annotations

import argparse
import json
import shutil
import signal
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from tools import vllm_cpu, vllm_traffic  # noqa: E402

SCENARIOS = ("traffic", "kill_engine", "failed_start", "dp2")
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


def scenario_traffic(run: Run, model: Path, home: Path) -> None:
    srv = run.server(model, home, ["--speculative-config", SPEC_NGRAM])
    _serve_then_stop(run, srv, lambda client: _traffic(run, client, run.args.traffic_seconds))


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
    srv = run.server(model, home, ["--speculative-config", SPEC_NGRAM])
    client = vllm_traffic.Client(srv.url, run.out / "client.jsonl", timeout=60.0)
    scraper = None
    try:
        with srv:
            run.event("healthy", after_s=_delta(srv.started, srv.healthy_at))
            scraper = vllm_cpu.Scraper(srv.url, run.out / "metrics.jsonl", 10.0).start()
            client.run_for(run.args.traffic_seconds / 4, 2, seed=1)
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
    ap.add_argument("--stats-interval", type=float, default=2.0, help="VLLM_LOG_STATS_INTERVAL, s")
    ap.add_argument("--venv", type=Path, default=None, help="the vLLM venv (default: $VLLM_CPU_VENV or the cache)")
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
    ap.add_argument("--keep-tmp", action="store_true", help="keep the model and caches (printed)")
    args = ap.parse_args(argv)
    # SIGTERM (a test's timeout, Ctrl-C's cousin) unwinds through the `finally`s, which kill the
    # server's process group: no vLLM outlives its capture
    signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(128 + signum))
    if args.health_timeout is None:
        args.health_timeout = 600.0 if args.scenario == "dp2" else 300.0

    out = args.outdir
    out.mkdir(parents=True, exist_ok=True)
    for name in ("vllm.log", "metrics.jsonl", "client.jsonl", "run.json"):
        (out / name).unlink(missing_ok=True)  # appended to below: start each capture clean
    args.venv = vllm_cpu.ensure_venv(args.venv, log=_log)
    run = Run(out, args)
    run.info["vllm_version"] = vllm_cpu.vllm_version(args.venv)
    tmp = Path(tempfile.mkdtemp(prefix="vllm-capture-"))
    try:
        positions = FAILED_START_POSITIONS if args.scenario == "failed_start" else 4096
        model = vllm_cpu.make_model(tmp / "model", args.venv, max_positions=positions)
        run.info["model_dir"] = str(model)
        run.event("model ready", dir=str(model))
        globals()[f"scenario_{args.scenario}"](run, model, tmp)
    finally:
        if args.keep_tmp:
            _log(f"kept {tmp}")
        else:
            shutil.rmtree(tmp, ignore_errors=True)
    _log(f"done in {run.info.get('total_s')} s: exit {run.info.get('exit_code')} -> {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
