#!/usr/bin/env python3
"""vllm-log-exporter against mtail, side by side: every row of issue 16's table in one run.

    python bench/compare.py [N_LINES=1000000] [ROUNDS=3] [--python PY ...] [--report-lines 6000000]

Runs, alternating, ROUNDS times each:
  mtail    `mtail --one_shot` with bench/mtail/vllm.mtail over the file (its fastest mode)
  offline  `vllm-log-exporter report FILE --format json`
  live     `vllm-log-exporter serve --from-start` until vllm_log_exporter_lines_total reaches N
and prints lines/s, CPU seconds per million lines and peak RSS (medians), the ratio ours/mtail from
the same run, and whether all of them found the same totals (HTTP responses by status, accepted and
drafted spec-decode tokens, KV offload store/load bytes), so the race is fair.

``--python`` (repeatable) runs our side with each given interpreter (each needs the project
installed, e.g. `/usr/bin/python3.11 -m venv V && V/bin/pip install -e .`), in the same rounds;
the default is the interpreter running this script. Live time runs from process start, start-up
included; the live rows are also shown split at the daemon's first /metrics answer (start-up, and
the rate after it).

Both mixes of bench/gen_log.py are run: ``access94`` (a busy server, 94 % access-log lines) and
``periodic20`` (20 % stats, spec-decode, KV and other INFO lines). Then, each with every --python:
microseconds per line per family (bench/families.py), line appended -> counter moved
(bench/latency.py), start-up to the first /metrics answer and idle RSS (both against mtail),
/metrics at 8 servers x 8 engines with gzip (bench/scrape.py) and `report`'s peak RSS on a
periodic-20 % log of --report-lines lines (bench/report_memory.py; 6 M lines is ~1 GB). Last, the
summary table of issue 16 with the targets.
"""

from __future__ import annotations

import argparse
import json
import shutil
import socket
import statistics
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "bench"))
from own_peak import OwnPeak  # noqa: E402


def wait4(proc) -> tuple[float, float]:
    """(CPU seconds, peak RSS bytes) of a finished child started as own_peak.OwnPeak: its own peak, not
    the high-water mark a plain subprocess inherits from this process (334 MB read for a `report`
    whose own peak was 24 MB)."""
    return proc.wait()


def run_mtail(path: Path) -> dict:
    t0 = time.perf_counter()
    proc = OwnPeak(["mtail", "--progs", str(ROOT / "bench" / "mtail"), "--logs", str(path), "--one_shot",
                    "--one_shot_format=prometheus", "--logtostderr"],
                   stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    out = proc.proc.stdout.read()
    cpu, rss = wait4(proc)
    wall = time.perf_counter() - t0
    totals = {"http": {}, "accepted": 0, "drafted": 0, "store": 0, "load": 0}
    for line in out.splitlines():
        if line.startswith("#") or not line.strip():
            continue
        name, value = line.rsplit(" ", 1)
        v = float(value)
        if name.startswith("vllm_http_requests_total"):
            status = name.split('status="')[1].split('"')[0]
            totals["http"][status] = int(v)
        elif name.startswith("vllm_spec_accepted_tokens_total"):
            totals["accepted"] = int(v)
        elif name.startswith("vllm_spec_drafted_tokens_total"):
            totals["drafted"] = int(v)
        elif name.startswith("vllm_kv_offload_store_bytes_total"):
            totals["store"] = int(v)
        elif name.startswith("vllm_kv_offload_load_bytes_total"):
            totals["load"] = int(v)
    return {"wall": wall, "cpu": cpu, "rss": rss, "totals": totals}


def run_offline(python: str, path: Path) -> dict:
    t0 = time.perf_counter()
    proc = OwnPeak([python, "-m", "exporter", "report", str(path), "--format", "json", "--year", "2026"], cwd=ROOT,
                   stdout=subprocess.PIPE, text=True)
    out = proc.proc.stdout.read()
    cpu, rss = wait4(proc)
    wall = time.perf_counter() - t0
    r = json.loads(out)
    kv = r["kv_offload"]
    totals = {"http": {str(k): v for k, v in r["http"]["by_status"].items()},
              "accepted": r["spec_decode"]["accepted_tokens"], "drafted": r["spec_decode"]["drafted_tokens"],
              "store": int(kv["store"]["bytes"]) if kv["store"] else 0, "load": int(kv["load"]["bytes"]) if kv["load"] else 0}
    return {"wall": wall, "cpu": cpu, "rss": rss, "totals": totals}


def _metrics(port: int) -> str:
    return urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10).read().decode()


def run_live(python: str, path: Path, n: int) -> dict:
    from prometheus_client.parser import text_string_to_metric_families

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    t0 = time.perf_counter()
    proc = OwnPeak([python, "-m", "exporter", "--source", f"bench={path}", "--from-start", "--year", "2026", "--log.level", "error",
                    "--web.listen-address", f"127.0.0.1:{port}"], cwd=ROOT)
    deadline = time.monotonic() + 3600
    body = ""
    seen = 0.0
    first = None  # (seconds since start, lines counted) at the first answer: start-up is over
    pause = 0.01
    while time.monotonic() < deadline:
        # Each scrape costs the daemon a render (Prometheus would ask every 15 s): poll every 10 ms
        # until it answers, then sleep most of the time the rate so far says is left, at least 20 ms,
        # so the finish is seen within ~20 ms with a handful of scrapes.
        time.sleep(pause)
        try:
            body = _metrics(port)
        except OSError:
            continue
        now = time.perf_counter() - t0
        seen = sum(float(l.rsplit(" ", 1)[1]) for l in body.splitlines() if l.startswith("vllm_log_exporter_lines_total{"))
        if seen >= n:
            break
        if first is None:
            first = (now, seen)
        rate = (seen - first[1]) / (now - first[0]) if now > first[0] and seen > first[1] else 0.0
        pause = min(0.5, max(0.02, 0.7 * (n - seen) / rate)) if rate else 0.1
    wall = time.perf_counter() - t0
    if first is None:  # done by the first answer
        first = (wall, 0.0)
    time.sleep(0.5)
    body = _metrics(port)
    proc.terminate()
    cpu, rss = wait4(proc)
    totals = {"http": {}, "accepted": 0, "drafted": 0, "store": 0, "load": 0}
    for fam in text_string_to_metric_families(body):
        for s in fam.samples:
            if s.name == "vllm_log_http_requests_total" and s.value:  # (the alerted statuses are born at 0)
                totals["http"][s.labels["status"]] = totals["http"].get(s.labels["status"], 0) + int(s.value)
            elif s.name == "vllm_log_spec_decode_accepted_tokens_total":
                totals["accepted"] += int(s.value)
            elif s.name == "vllm_log_spec_decode_drafted_tokens_total":
                totals["drafted"] += int(s.value)
            elif s.name == "vllm_log_kv_offload_bytes_total":
                totals[s.labels["direction"]] += int(s.value)
    return {"wall": wall, "cpu": cpu, "rss": rss, "totals": totals, "startup": first[0],
            "after_startup": (n - first[1]) / (wall - first[0]) if wall > first[0] else float("nan")}


def python_label(python: str) -> str:
    out = subprocess.run([python, "-c", "import sys, sysconfig; print(sys.version.split()[0]); "
                          "print(sysconfig.get_config_var('CONFIG_ARGS'))"],
                         capture_output=True, text=True, check=True).stdout.splitlines()
    return f"{out[0]} at {python}, configured with: {out[1]}"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_for_metrics(port: int) -> bool:
    """Whether /metrics on ``port`` answered within about 10 s (polled every 2 ms: bounded in count)."""
    for _ in range(5000):
        try:
            urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=1).read()
            return True
        except OSError:
            time.sleep(0.002)
    return False


def first_answer(cmd: list[str], port: int) -> tuple[float, float]:
    """(seconds from process start to its first /metrics answer, RSS in bytes 3 s later, idle)."""
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        if not wait_for_metrics(port):
            raise SystemExit(f"{cmd[0]} did not answer within 10 s")
        up = time.perf_counter() - t0
        time.sleep(3)
        with open(f"/proc/{proc.pid}/status") as f:
            rss = next(int(l.split()[1]) * 1024 for l in f if l.startswith("VmRSS:"))
        return up, rss
    finally:
        proc.terminate()
        proc.wait(10)


def startup_and_idle(pythons: list[str], rounds: int) -> dict[str, list[tuple[float, float]]]:
    empty = ROOT / "bench" / "out" / "empty.log"
    empty.write_text("")
    out: dict[str, list[tuple[float, float]]] = {}
    for _ in range(rounds):
        port = free_port()
        out.setdefault("mtail", []).append(first_answer(
            ["mtail", "--progs", str(ROOT / "bench" / "mtail"), "--logs", str(empty), "--address", "127.0.0.1",
             "--port", str(port), "--logtostderr"], port))
        for i, py in enumerate(pythons):
            port = free_port()
            out.setdefault(f"py{i + 1}", []).append(first_answer(
                [py, "-m", "exporter", "--source", f"e={empty}", "--log.level", "error",
                 "--web.listen-address", f"127.0.0.1:{port}"], port))
    return out


def throughput(n: int, rounds: int, pythons: list[str], mix: str, wrapper: str = "journald") -> dict:
    """The side-by-side run on one mix; prints its tables and returns the medians for the summary. ``wrapper``:
    the log's lines in that wrapper (bench/families.py WRAPPERS)."""
    import families

    path = ROOT / "bench" / "out" / (f"mixed-{n}.log" if mix == "access94" else f"{mix}-{n}.log")
    if not path.exists():
        subprocess.run([sys.executable, str(ROOT / "bench" / "gen_log.py"), str(n), str(path), "--mix", mix], check=True)
    path = families.wrapped_files({mix: path}, wrapper)[mix]
    runs = [("mtail", lambda: run_mtail(path))]
    for i, py in enumerate(pythons):
        tag = f" py{i + 1}"
        runs.append((f"offline{tag}", lambda py=py: run_offline(py, path)))
        runs.append((f"live{tag}", lambda py=py: run_live(py, path, n)))
    results: dict[str, list[dict]] = {name: [] for name, _ in runs}
    for r in range(rounds):
        for name, fn in runs:
            res = fn()
            results[name].append(res)
            print(f"[{mix}] round {r + 1} {name:12s} {n / res['wall']:>10,.0f} lines/s  cpu {res['cpu']:6.2f} s  "
                  f"rss {res['rss'] / 1e6:6.0f} MB", file=sys.stderr)
    ref = results["mtail"][0]["totals"]
    fair = all(res["totals"] == ref for runs_ in results.values() for res in runs_)
    print(f"\n### Mix {mix}: {path.name}, {n:,} lines, {rounds} rounds each, alternating; medians\n")
    print("| tool | lines/s | CPU s per 1M lines | peak RSS | lines/s vs mtail | per round vs mtail (median, range) |")
    print("|---|---|---|---|---|---|")
    m_rates = [n / r["wall"] for r in results["mtail"]]
    m_rate = statistics.median(m_rates)
    ratios = {}
    for name, runs_ in results.items():
        rates = [n / r["wall"] for r in runs_]
        rate = statistics.median(rates)
        cpu = statistics.median(r["cpu"] for r in runs_) / n * 1e6
        rss = statistics.median(r["rss"] for r in runs_)
        paired = [a / b for a, b in zip(rates, m_rates)]
        ratios[name] = statistics.median(paired)
        print(f"| {name} | {rate:,.0f} | {cpu:.2f} | {rss / 1e6:.0f} MB | {rate / m_rate:.2f}x | "
              f"{statistics.median(paired):.2f}x ({min(paired):.2f}-{max(paired):.2f}) |")
    print("\n| live run | start-up (first /metrics answer) | lines/s after start-up | vs mtail (medians) |")
    print("|---|---|---|---|")
    for name in [k for k in results if k.startswith("live")]:
        up = statistics.median(r["startup"] for r in results[name])
        after = statistics.median(r["after_startup"] for r in results[name])
        ratios[name + " after start-up"] = after / m_rate
        print(f"| {name} | {up:.2f} s | {after:,.0f} | {after / m_rate:.2f}x |")
    print(f"\nsame totals everywhere: {'yes' if fair else 'NO'} (HTTP by status {ref['http']}, accepted "
          f"{ref['accepted']:,}, drafted {ref['drafted']:,}, KV store {ref['store']:,} B, load {ref['load']:,} B)")
    if not fair:
        for name, runs_ in results.items():
            print(f"  {name}: {runs_[0]['totals']}")
    return {"ratios": ratios, "fair": fair}


def main() -> int:
    import families
    import latency
    import report_memory
    import scrape

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("n", type=int, nargs="?", default=1_000_000)
    ap.add_argument("rounds", type=int, nargs="?", default=3)
    ap.add_argument("--python", action="append", help="interpreter for our side (repeatable)")
    ap.add_argument("--report-lines", type=int, default=6_000_000,
                    help="lines of the periodic-20 %% log `report` reads for its peak RSS (default 6 M, ~1 GB)")
    ap.add_argument("--latency-samples", type=int, default=200)
    ap.add_argument("--scrapes", type=int, default=300)
    ap.add_argument("--wrapper", default="journald",
                    help="the logs' lines in this wrapper: journald, bare, stamped (the daemon's journald and container "
                         "sources hand lines on so), cri (bench/families.py)")
    ap.add_argument("--mixes-only", action="store_true", help="the two mixes and the families only")
    args = ap.parse_args()
    n, rounds = args.n, args.rounds
    pythons = args.python or [sys.executable]
    if not shutil.which("mtail"):
        print("mtail is not installed (Debian package mtail)", file=sys.stderr)
        return 2
    # As a regular install does (pip compiles at install time): this machine sets
    # PYTHONDONTWRITEBYTECODE, which would otherwise make every run compile the package anew.
    for py in pythons:
        subprocess.run([py, "-m", "compileall", "-q", str(ROOT / "exporter")], check=True)
    print("# bench/compare.py\n")
    for i, py in enumerate(pythons):
        print(f"py{i + 1}: Python {python_label(py)}  ")
    print(f"mtail: {subprocess.run(['mtail', '--version'], capture_output=True, text=True).stdout.splitlines()[0]}")
    summary: dict = {}
    fair = True
    for mix in ("access94", "periodic20"):
        got = throughput(n, rounds, pythons, mix, args.wrapper)
        summary[mix] = got["ratios"]
        fair = fair and got["fair"]

    print("\n### Per line, per family (µs, start-up subtracted; bench/families.py)\n")
    fam = families.measure(pythons, rounds, wrapper=args.wrapper)
    print(families.table(fam).replace("ours", "py1") if len(pythons) == 1 else families.table(fam))
    if args.mixes_only:
        return 0 if fair else 1

    tags = [f"py{i + 1}" for i in range(len(pythons))]
    print("\n### Line appended -> counter moved in /metrics (bench/latency.py)\n")
    lat = {}
    for tag, py in zip(tags, pythons):
        res = latency.measure(py, args.latency_samples)
        lat[tag] = res["ours"]
        lat.setdefault("mtail", res.get("mtail", []))
        print(f"{tag}, {args.latency_samples} samples each, alternating with mtail:\n")
        print(latency.table(res) + "\n")

    print("### Start-up to the first /metrics answer, and idle RSS 3 s later (empty file)\n")
    up = startup_and_idle(pythons, max(3, rounds))
    print("| tool | start-up (median) | idle RSS (median) |")
    print("|---|---|---|")
    for who, v in up.items():
        print(f"| {who} | {statistics.median(u for u, _ in v) * 1e3:.0f} ms | {statistics.median(r for _, r in v) / 1e6:.1f} MB |")

    print("\n### /metrics at 8 servers x 8 engines, Prometheus' Accept header and gzip (bench/scrape.py)\n")
    scr = {}
    for tag, py in zip(tags, pythons):
        series, res = scrape.measure(py, args.scrapes)
        scr[tag] = res
        print(f"{tag}, {series:,} samples, {args.scrapes} scrapes per row:\n")
        print(scrape.table(res) + "\n")

    print(f"### `report` peak RSS, periodic-20 % log of {args.report_lines:,} lines (bench/report_memory.py)\n")
    rep = {}
    print("| python | log | `report --format json` peak RSS | time |")
    print("|---|---|---|---|")
    for tag, py in zip(tags, pythons):
        r = rep[tag] = report_memory.measure(py, args.report_lines / 1e6, html=False)
        print(f"| {tag} | {r['lines']:,} lines, {r['bytes'] / 1e9:.2f} GB | {r['rss'] / 1e6:.1f} MB | {r['wall']:.1f} s |")

    print("\n### Issue 16's table, this run\n")
    print("| measure | " + " | ".join(tags) + " | mtail | target |")
    print("|---|" + "---|" * (len(tags) + 2))

    def row(name, values, m, target):
        print(f"| {name} | " + " | ".join(values) + f" | {m} | {target} |")

    row("access-94 % mix: offline / live / live after start-up, vs mtail",
        [f"{summary['access94'][f'offline {t}']:.2f}x / {summary['access94'][f'live {t}']:.2f}x / "
         f"{summary['access94'][f'live {t} after start-up']:.2f}x" for t in tags], "1x", "≥ 4x")
    row("periodic-20 % mix: offline / live / live after start-up, vs mtail",
        [f"{summary['periodic20'][f'offline {t}']:.2f}x / {summary['periodic20'][f'live {t}']:.2f}x / "
         f"{summary['periodic20'][f'live {t} after start-up']:.2f}x" for t in tags], "1x", "≥ 4x")
    famnames = ("engine stats", "spec decode", "KV transfer", "ignored INFO", "access")
    row("per line: " + " / ".join(famnames) + " (µs)",
        [" / ".join(f"{fam[f][t if len(pythons) > 1 else 'ours']:.1f}" for f in famnames) for t in tags],
        " / ".join(f"{fam[f]['mtail']:.1f}" for f in famnames), "each below mtail's; access ≤ 1 µs")
    row("line appended -> counter moved, p50 / p99",
        [f"{latency.pct(lat[t], .5) * 1e3:.1f} / {latency.pct(lat[t], .99) * 1e3:.1f} ms" for t in tags],
        f"{latency.pct(lat['mtail'], .5) * 1e3:.1f} / {latency.pct(lat['mtail'], .99) * 1e3:.1f} ms" if lat["mtail"] else "-",
        "p99 < 20 ms")
    row("start-up to first /metrics answer", [f"{statistics.median(u for u, _ in up[t]):.3f} s" for t in tags],
        f"{statistics.median(u for u, _ in up['mtail']):.3f} s", "< 0.15 s")
    row("/metrics 8 x 8 engines, gzip, p50 / p99 (changed since the last scrape)",
        [f"{statistics.median(scr[t]['changed'][0]) * 1e3:.1f} / {scrape.pct(scr[t]['changed'][0], .99) * 1e3:.1f} ms"
         for t in tags], "-", "p99 < 10 ms")
    row(f"`report` peak RSS, {args.report_lines / 1e6:g} M lines ({rep[tags[0]]['bytes'] / 1e9:.1f} GB)",
        [f"{rep[t]['rss'] / 1e6:.0f} MB" for t in tags], "-", "< 60 MB, flat")
    row("idle RSS", [f"{statistics.median(r for _, r in up[t]) / 1e6:.1f} MB" for t in tags],
        f"{statistics.median(r for _, r in up['mtail']) / 1e6:.1f} MB", "< 30 MB")
    return 0 if fair else 1


if __name__ == "__main__":
    raise SystemExit(main())
