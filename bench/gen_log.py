#!/usr/bin/env python3
"""Generate a realistic mixed vLLM log of N lines (journald-framed), seeded and reproducible.

Mostly access-log lines (health/metrics scrapes and completions), a stats window with spec-decode
and, often, KV-transfer lines every 10 s, unrelated INFO/WARNING lines, and one OOM traceback.

    python bench/gen_log.py 1000000 bench/out/mixed-1m.log
"""

from __future__ import annotations

import sys
from datetime import datetime
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from tools.make_sample_log import API, CORE, Log, oom_crash, serving, startup  # noqa: E402


def generate(n: int, seed: int = 1) -> list[str]:
    log = Log(datetime(2026, 8, 4, 0, 0, 0), seed=seed)
    startup(log, compile_s=12.64)
    crashed = False
    while len(log.lines) < n:
        serving(log, 50, rate=4.0)
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
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 1_000_000
    out = Path(sys.argv[2] if len(sys.argv) > 2 else f"bench/out/mixed-{n}.log")
    out.parent.mkdir(parents=True, exist_ok=True)
    lines = generate(n)
    out.write_text("\n".join(lines) + "\n", encoding="utf-8")
    print(f"wrote {out}: {len(lines)} lines, {out.stat().st_size / 1e6:.1f} MB", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
