#!/usr/bin/env python3
"""Generate a realistic mixed vLLM log of N lines (journald-framed), seeded and reproducible.

Mostly access-log lines (health/metrics scrapes and completions), a stats window with spec-decode
and, often, KV-transfer lines every 10 s, unrelated INFO/WARNING lines, and one OOM traceback.

    python bench/gen_log.py 1000000 bench/out/mixed-1m.log
    python bench/gen_log.py 1000000 bench/out/periodic20-1m.log --mix periodic20

Mixes: ``access94`` (the default: a busy server, 94 % access-log lines) and ``periodic20`` (a
quieter one: 20 % of the lines are stats, spec-decode, KV-transfer and other INFO lines).
"""

from __future__ import annotations

import argparse
import sys
from datetime import datetime
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from tools.make_sample_log import API, CORE, Log, oom_crash, serving, startup  # noqa: E402


MIXES = {"access94": 4.0, "periodic20": 0.7}  # requests a second while busy


def generate(n: int, seed: int = 1, mix: str = "access94") -> list[str]:
    log = Log(datetime(2026, 8, 4, 0, 0, 0), seed=seed)
    startup(log, compile_s=12.64)
    crashed = False
    rate = MIXES[mix]
    while len(log.lines) < n:
        serving(log, 50, rate=rate)
        # a realistic amount of unrelated chatter between windows
        for _ in range(5):
            log.log(API, "INFO", "serving_chat.py:210", "Received request chatcmpl-1234: prompt: 'hello', params: ...")
            log.log(CORE, "INFO", "scheduler.py:400", "Finished request chatcmpl-1234.")
        if not crashed and len(log.lines) > n // 2:
            oom_crash(log)
            startup(log, compile_s=0.9)
            crashed = True
    return log.lines[:n]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("n", type=int, nargs="?", default=1_000_000)
    ap.add_argument("out", nargs="?")
    ap.add_argument("--mix", choices=sorted(MIXES), default="access94")
    args = ap.parse_args()
    n = args.n
    out = Path(args.out or f"bench/out/{'mixed' if args.mix == 'access94' else args.mix}-{n}.log")
    out.parent.mkdir(parents=True, exist_ok=True)
    lines = generate(n, mix=args.mix)
    out.write_text("\n".join(lines) + "\n", encoding="utf-8")
    access = sum(1 for line in lines if '" HTTP/1.1" ' in line or 'HTTP/1.1" ' in line)
    print(f"wrote {out}: {len(lines)} lines, {out.stat().st_size / 1e6:.1f} MB, "
          f"{100 - 100 * access / len(lines):.1f} % not access-log lines", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
