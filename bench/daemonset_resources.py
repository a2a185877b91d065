#!/usr/bin/env python3
"""RSS and CPU of the exporter as the Helm chart's DaemonSet runs it, for the chart's resources.

    python bench/daemonset_resources.py demo [SECONDS=90]
    python bench/daemonset_resources.py pods [PODS=8] [COPIES=40]

demo: `python -m exporter --demo` (three servers replaying the packaged samples: the first pass in
30 s, then real time) scraped every 5 s like Prometheus; RSS (VmRSS, peak VmHWM) and CPU seconds
(utime + stime from /proc/PID/stat) at the end, and the mean CPU over the run.

pods: kubelet's layout under a temp dir (PODS pods, each 0.log holding exporter/data/sample.log's lines as
vLLM wrote them, without their journald wrapper, in CRI records, COPIES times), followed by the CRI glob
the chart renders with --from-start, so the whole backlog is a burst: the time to read it all, the CPU seconds and peak RSS it took; then
30 s of steady state (one sample's worth of lines a second per pod appended) scraped every 5 s.
"""

from __future__ import annotations

import re
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TICK = 100  # os.sysconf("SC_CLK_TCK") on Linux


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def rss(pid: int) -> tuple[float, float]:
    fields = dict(line.split(":", 1) for line in Path(f"/proc/{pid}/status").read_text().splitlines() if ":" in line)
    return int(fields["VmRSS"].split()[0]) / 1024, int(fields["VmHWM"].split()[0]) / 1024


def cpu_seconds(pid: int) -> float:
    stat = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(stat[11]) + int(stat[12])) / TICK


def scrape(port: int) -> str:
    return urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5).read().decode()


def counter(body: str, name: str) -> float:
    return sum(float(line.rsplit(" ", 1)[1]) for line in body.splitlines() if line.startswith(name + "{"))


def start(args: list[str]) -> tuple[subprocess.Popen, int]:
    port = free_port()
    proc = subprocess.Popen([sys.executable, "-m", "exporter", "--web.listen-address", f"127.0.0.1:{port}",
                             "--log.format", "json", *args], cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    for _ in range(200):
        try:
            scrape(port)
            return proc, port
        except OSError:
            time.sleep(0.1)
    raise SystemExit("exporter did not answer")


def demo(seconds: float) -> None:
    proc, port = start(["--demo"])
    t0, c0 = time.monotonic(), cpu_seconds(proc.pid)
    while time.monotonic() - t0 < seconds:
        scrape(port)
        time.sleep(5)
    now, peak = rss(proc.pid)
    cpu = cpu_seconds(proc.pid) - c0
    proc.terminate()
    proc.wait(10)
    print(f"demo {seconds:.0f} s: RSS {now:.1f} MiB (peak {peak:.1f} MiB), CPU {cpu:.2f} s = "
          f"{1000 * cpu / seconds:.0f} millicores mean")


# the sample's journald wrapper: a pod's log holds what vLLM wrote to its stdout, without it
_JOURNALD = re.compile(r"[A-Z][a-z]{2} {1,2}\d{1,2} \d\d:\d\d:\d\d \S+ [^\s\[:]+\[\d+\]: ")


def cri(lines: list[str]) -> str:
    stamp = "2026-08-04T02:45:03.123456789Z"
    return "".join(f"{stamp} stdout F {_JOURNALD.sub('', line, count=1)}\n" for line in lines)


def pods(n: int, copies: int) -> None:
    sample = (ROOT / "exporter" / "data" / "sample.log").read_text().splitlines()
    with tempfile.TemporaryDirectory() as tmp:
        files = []
        for i in range(n):
            f = Path(tmp) / f"llm_vllm-{i}_uid-{i}" / "vllm" / "0.log"
            f.parent.mkdir(parents=True)
            f.write_text(cri(sample) * copies)
            files.append(f)
        total = n * copies * len(sample)
        t0 = time.monotonic()
        proc, port = start(["--source", f"{tmp}/llm_vllm-*_*/vllm/*.log", "--from-start"])
        c0 = 0.0  # from the process start: imports included
        while counter(scrape(port), "vllm_log_exporter_lines_total") < total:
            if time.monotonic() - t0 > 600:
                raise SystemExit("backlog not read in 600 s")
            time.sleep(0.2)
        took = time.monotonic() - t0
        burst_cpu = cpu_seconds(proc.pid) - c0
        _, peak = rss(proc.pid)
        print(f"pods burst: {n} pods, {total} lines read in {took:.1f} s ({total / took:.0f} lines/s), "
              f"CPU {burst_cpu:.1f} s, peak RSS {peak:.1f} MiB")
        c1, t1 = cpu_seconds(proc.pid), time.monotonic()
        block = cri(sample)
        while time.monotonic() - t1 < 30:
            for f in files:
                with open(f, "a") as out:
                    out.write(block)
            scrape(port)
            time.sleep(1)
        cpu = cpu_seconds(proc.pid) - c1
        now, peak = rss(proc.pid)
        print(f"pods steady: {n} x {len(sample)} lines/s for 30 s: CPU {cpu:.2f} s = {1000 * cpu / 30:.0f} millicores "
              f"mean, RSS {now:.1f} MiB (peak {peak:.1f} MiB)")
        proc.terminate()
        proc.wait(10)


if __name__ == "__main__":
    mode = sys.argv[1] if len(sys.argv) > 1 else "demo"
    if mode == "demo":
        demo(float(sys.argv[2]) if len(sys.argv) > 2 else 90)
    else:
        pods(int(sys.argv[2]) if len(sys.argv) > 2 else 8, int(sys.argv[3]) if len(sys.argv) > 3 else 40)
