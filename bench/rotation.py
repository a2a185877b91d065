"""Lines written vs lines counted by the real exporter while the log is rotated under it.

    python3 bench/rotation.py --mode copytruncate --rate 20000 --seconds 10 --every 1
    python3 bench/rotation.py --mode rename --rate 0 --seconds 10 --every 0.2

``copytruncate`` does what logrotate does (copy the file, then truncate it) every ``--every``
seconds while a writer appends ``--rate`` lines a second (0: as fast as it can); ``rename`` renames
the file away (keeping ``--keep`` rotations, shifted like logrotate's ``rotate N``) and starts a new
one. The exporter follows from the start; at the end the script waits until its count stops moving
and prints written, counted, the difference, and the exporter's source events. Loopback only.
"""

from __future__ import annotations

import argparse
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

from prometheus_client.parser import text_string_to_metric_families

ROOT = Path(__file__).resolve().parent.parent
LINE = ('Aug 04 02:50:{s:02d} h vllm[1]: (APIServer pid=53) INFO:     10.0.0.1:5 - "GET /health?n={n} HTTP/1.1" 200 OK\n')


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def scrape(port: int) -> dict:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as r:
        text = r.read().decode()
    out = {}
    for fam in text_string_to_metric_families(text):
        for s in fam.samples:
            if s.name == "vllm_log_exporter_lines_total":
                out["counted"] = out.get("counted", 0) + s.value
            elif s.name == "vllm_log_exporter_source_events_total":
                out[s.labels["event"]] = s.value
    return out


def rotate(path: Path, mode: str, keep: int) -> None:
    if mode == "copytruncate":
        shutil.copyfile(path, str(path) + ".1")
        os.truncate(path, 0)
        return
    for i in range(keep - 1, 0, -1):
        src = Path(f"{path}.{i}")
        if src.exists():
            os.replace(src, f"{path}.{i + 1}")
    os.replace(path, f"{path}.1")
    path.touch()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--mode", choices=("copytruncate", "rename"), default="copytruncate")
    ap.add_argument("--rate", type=int, default=20000, help="lines per second (0: unthrottled)")
    ap.add_argument("--seconds", type=float, default=10)
    ap.add_argument("--every", type=float, default=1.0, help="seconds between rotations")
    ap.add_argument("--keep", type=int, default=3)
    ap.add_argument("--python", default=sys.executable)
    args = ap.parse_args()

    work = Path(tempfile.mkdtemp(prefix="vle-rotation-"))
    log = work / "gp.log"
    log.touch()
    port = free_port()
    proc = subprocess.Popen([args.python, "-m", "exporter", "--source", f"gp={log}", "--from-start",
                             "--web.listen-address", f"127.0.0.1:{port}", "--log.format", "json"],
                            cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        for _ in range(100):
            try:
                scrape(port)
                break
            except OSError:
                time.sleep(0.1)
        n, start = 0, time.monotonic()
        next_rotation = start + args.every
        rotations = 0
        f = open(log, "a")
        while time.monotonic() - start < args.seconds:
            batch = 200
            f.write("".join(LINE.format(s=(n + i) % 60, n=n + i) for i in range(batch)))
            f.flush()
            n += batch
            now = time.monotonic()
            if now >= next_rotation:
                f.close()
                rotate(log, args.mode, args.keep)
                rotations += 1
                f = open(log, "a")
                next_rotation += args.every
            if args.rate:
                ahead = n / args.rate - (time.monotonic() - start)
                if ahead > 0:
                    time.sleep(ahead)
        f.close()
        elapsed = time.monotonic() - start
        last, same = -1.0, 0
        for _ in range(600):  # until the count has not moved for 2 s (bounded: 60 s)
            m = scrape(port)
            same = same + 1 if m.get("counted") == last else 0
            last = m.get("counted", 0)
            if same >= 20:
                break
            time.sleep(0.1)
        m = scrape(port)
    finally:
        proc.terminate()
        proc.wait(10)
        shutil.rmtree(work, ignore_errors=True)
    counted = int(m.get("counted", 0))
    print(f"mode={args.mode} rate={n / elapsed:,.0f} lines/s rotations={rotations} written={n:,} counted={counted:,} "
          f"lost={n - counted:,} ({(n - counted) / n:.2%}) events=" +
          ",".join(f"{k}:{int(v)}" for k, v in sorted(m.items()) if k != "counted"))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
