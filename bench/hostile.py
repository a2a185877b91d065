#!/usr/bin/env python3
"""The hostile lines of issue 32 against the real daemon: its memory under one huge line, and how
fast /healthz and /metrics answer while big lines stream.

    python bench/hostile.py memory [LIMIT_MIB=256]
    python bench/hostile.py latency [SECONDS=20] [RECORD_KB=700]

memory: for each line (a ~1 MiB JSON record whose exc_info is a 200,000-item list, one whose message
is a million newlines, Kubernetes CRI lines of 11, 47 and 93 MB in 16 KiB P parts, a 93 MB plain
line), a log holding that line and then a CUDA OOM line is read by `python -m exporter serve
--from-start --state-file` inside a real cgroup v1 memory folder whose limit is LIMIT_MIB (the Helm
chart's limits.memory). It waits until both lines are counted, then reports the process's peak RSS
(VmHWM), the group's peak usage (memory.max_usage_in_bytes: RSS and page cache), the OOM kills, and
whether the state file's offset passed the line. An idle exporter on an empty log is the baseline.

latency: the exporter follows a file; five RECORD_KB JSON records (an ERROR record whose exc_info is
a traceback of that size) are appended at once every second for SECONDS, while /healthz and /metrics
are fetched in turn every 50 ms; p50, p99 and max of each, and how many records were read.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CGROUP = Path("/sys/fs/cgroup/memory")
CRI_STAMP = "2026-08-04T02:50:00.000000000Z"
OOM_LINE = "(EngineCore_DP0 pid=7) ERROR 08-04 02:50:00 [core.py:1] torch.OutOfMemoryError: CUDA out of memory."


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def get(url: str, timeout: float = 30) -> tuple[int, str]:
    with urllib.request.urlopen(url, timeout=timeout) as r:
        return r.status, r.read().decode()


def lines_total(port: int) -> float:
    body = get(f"http://127.0.0.1:{port}/metrics")[1]
    return sum(float(l.rsplit(" ", 1)[1]) for l in body.splitlines() if l.startswith("vllm_log_exporter_lines_total{"))


def value(port: int, name: str) -> float:
    body = get(f"http://127.0.0.1:{port}/metrics")[1]
    return sum(float(l.rsplit(" ", 1)[1]) for l in body.splitlines() if l.startswith(name + "{"))


def vm_hwm(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) * 1024
    return 0


class Exited(Exception):
    pass


def start(args: list[str], port: int, prefix: list[str] = ()) -> subprocess.Popen:
    cmd = [*prefix, sys.executable, "-m", "exporter", "serve", "--web.listen-address", f"127.0.0.1:{port}",
           "--log.format", "json", *args]
    proc = subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, "PYTHONPATH": str(ROOT)})
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise Exited(f"exporter exited {proc.returncode}: {proc.stderr.read()[-2000:]}")
        try:
            if get(f"http://127.0.0.1:{port}/healthz", 1)[0] == 200:
                return proc
        except OSError:
            pass
        time.sleep(0.1)
    proc.kill()
    raise SystemExit("exporter did not answer /healthz in 30 s")


def stop(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


# -- the lines ----------------------------------------------------------------------------------


def json_exc_list(f) -> None:
    f.write(json.dumps({"levelname": "ERROR", "name": "vllm.v1.engine.core", "message": "EngineCore failed",
                        "exc_info": ["Traceback (most recent call last):"] + ["x"] * 200_000
                        + ["torch.OutOfMemoryError: CUDA out of memory."]}) + "\n")


def json_newlines(f) -> None:
    f.write(json.dumps({"levelname": "WARNING", "name": "vllm.entrypoints", "message": "\n" * 1_000_000}) + "\n")


def cri(mb: int):
    def write(f) -> None:
        filler = "x" * (16 << 10)
        f.write(f"{CRI_STAMP} stderr P {OOM_LINE[:60]}\n")
        for _ in range((mb * 1_000_000) // (16 << 10)):
            f.write(f"{CRI_STAMP} stderr P {filler}\n")
        f.write(f"{CRI_STAMP} stderr F end\n")
    return write


def plain(mb: int):
    def write(f) -> None:
        chunk = "y" * 1_000_000
        for _ in range(mb):
            f.write(chunk)
        f.write("\n")
    return write


CASES = [("empty log (baseline)", None), ("JSON record ~1 MiB, exc_info list of 200,000", json_exc_list),
         ("JSON record, message of 1,000,000 newlines", json_newlines), ("CRI line of 11 MB", cri(11)),
         ("CRI line of 47 MB", cri(47)), ("CRI line of 93 MB", cri(93)), ("plain line of 93 MB", plain(93))]


def memory(limit_mib: int) -> int:
    if not (CGROUP / "memory.limit_in_bytes").exists():
        raise SystemExit("no cgroup v1 memory controller at /sys/fs/cgroup/memory")
    print(f"cgroup v1 memory limit {limit_mib} MiB; python {sys.version.split()[0]}")
    print("| line | bytes | peak RSS (VmHWM) | group peak (RSS + cache) | OOM kills | lines read | truncated "
          "| state passed it |")
    print("|---|---:|---:|---:|---:|---:|---:|---|")
    for name, write in CASES:
        with tempfile.TemporaryDirectory() as tmp:
            log, state = Path(tmp) / "gp.log", Path(tmp) / "state.json"
            with open(log, "w", encoding="utf-8") as f:
                if write is not None:
                    write(f)
                    f.write(OOM_LINE + "\n")
            size = log.stat().st_size
            group = CGROUP / f"vle-bench-hostile-{os.getpid()}-{time.monotonic_ns()}"
            group.mkdir()
            try:
                (group / "memory.limit_in_bytes").write_text(str(limit_mib << 20))
                port = free_port()
                prefix = ["sh", "-c", f'echo $$ > {group}/cgroup.procs && exec "$@"', "sh"]
                want = 0 if write is None else 2
                got = -1.0
                try:
                    proc = start(["--source", f"gp={log}", "--from-start", "--state-file", str(state)], port, prefix)
                except Exited:  # killed before it answered /healthz (the limit, reading the line)
                    proc = None
                deadline = time.monotonic() + 180
                while proc is not None and time.monotonic() < deadline and proc.poll() is None:
                    try:
                        got = lines_total(port)
                    except OSError:
                        pass
                    if got >= want:
                        break
                    time.sleep(0.2)
                time.sleep(1.0 if write is None else 0.5)
                killed = proc is None or proc.poll() is not None
                peak = vm_hwm(proc.pid) if not killed else 0
                cut = value(port, "vllm_log_exporter_lines_truncated_total") if not killed else float("nan")
                if proc is not None:
                    stop(proc)
                time.sleep(0.3)
                group_peak = int((group / "memory.max_usage_in_bytes").read_text())
                ooms = 0
                for line in (group / "memory.oom_control").read_text().splitlines():
                    if line.startswith("oom_kill "):
                        ooms = int(line.split()[1])
                try:
                    offset = json.loads(state.read_text())["sources"]["gp"]["checkpoint"]["offset"]
                except (OSError, ValueError, KeyError, TypeError):
                    offset = None
                passed = "yes" if offset == size else f"no ({offset})"
                print(f"| {name} | {size:,} | {'killed' if killed else f'{peak / 2**20:.0f} MiB'} | "
                      f"{group_peak / 2**20:.0f} MiB | {ooms} | {max(got, 0):.0f} of {want} | {cut:.0f} | {passed} |",
                      flush=True)
            finally:
                for _ in range(50):
                    try:
                        group.rmdir()
                        break
                    except OSError:
                        time.sleep(0.1)
    return 0


def latency(seconds: float, record_kb: int) -> int:
    frame = '  File "/usr/lib/python3/site-packages/vllm/v1/engine/core.py", line 1, in run\n'
    exc = "Traceback (most recent call last):\n" + frame * (record_kb * 1000 // len(frame)) \
        + "RuntimeError: boom"
    record = json.dumps({"levelname": "ERROR", "name": "vllm.v1.engine.core", "message": "EngineCore failed",
                         "exc_info": exc}) + "\n"
    with tempfile.TemporaryDirectory() as tmp:
        log = Path(tmp) / "v.log"
        log.write_text("")
        port = free_port()
        proc = start(["--source", f"v={log}"], port)
        times: dict[str, list[float]] = {"/healthz": [], "/metrics": []}
        stop_at = time.monotonic() + seconds
        written = 0

        def writer() -> None:
            nonlocal written
            while time.monotonic() < stop_at:
                with open(log, "a", encoding="utf-8") as f:
                    f.write(record * 5)
                written += 5
                time.sleep(1.0)

        t = threading.Thread(target=writer)
        t.start()
        i = 0
        try:
            while time.monotonic() < stop_at:
                path = ("/healthz", "/metrics")[i % 2]
                i += 1
                t0 = time.perf_counter()
                get(f"http://127.0.0.1:{port}{path}")
                times[path].append(time.perf_counter() - t0)
                time.sleep(0.05)
            t.join()
            deadline = time.monotonic() + 60
            while lines_total(port) < written and time.monotonic() < deadline:
                time.sleep(0.2)
            read = lines_total(port)
        finally:
            stop(proc)
    print(f"{written} records of {len(record) / 1000:.0f} KB written (5 at once every second for {seconds:.0f} s), "
          f"{read:.0f} read")
    print("| endpoint | requests | p50 | p99 | max |")
    print("|---|---:|---:|---:|---:|")
    for path, ts in times.items():
        ts.sort()
        p = lambda q: ts[min(len(ts) - 1, int(q * len(ts)))] * 1000  # noqa: E731
        print(f"| {path} | {len(ts)} | {p(0.5):.1f} ms | {p(0.99):.1f} ms | {ts[-1] * 1000:.1f} ms |")
    return 0


def main() -> int:
    args = sys.argv[1:]
    if not args or args[0] not in ("memory", "latency"):
        print(__doc__, file=sys.stderr)
        return 2
    if args[0] == "memory":
        return memory(int(args[1]) if len(args) > 1 else 256)
    return latency(float(args[1]) if len(args) > 1 else 20.0, int(args[2]) if len(args) > 2 else 700)


if __name__ == "__main__":
    sys.exit(main())
