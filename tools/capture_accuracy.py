#!/usr/bin/env python3
"""How close the exporter's token counters come to vLLM's own on the captured runs.

    python tools/capture_accuracy.py [--stats-interval 10]

For every capture with tokens (tests/fixtures/vllm-<release>-cpu/{traffic,preemption,interval5,
json_config}*.log.gz) it reads the log as the daemon does (the exporter configured with
``--stats-interval``, 10 s by default: not what vLLM ran with) up to the moment vLLM's counters were
scraped (``vllm_final_t``), and prints the generated and computed prompt tokens' error against
them, whether the stamps were sub-second, and the first window: as counted, and as vLLM's counters
imply it (its tokens less the later windows', over its throughputs). With whole-second stamps the
first window is known to about a second only; that is most of what is left.
"""

from __future__ import annotations

import argparse
import gzip
import json
import math
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from exporter.framing.clock import Clock  # noqa: E402
from exporter.metrics import Metrics  # noqa: E402
from exporter.stream.pipeline import Pipeline  # noqa: E402

FIXTURES = ROOT / "tests" / "fixtures"
TOKEN_RUNS = ("traffic", "preemption", "interval5", "json_config")


def measure(log: Path, truth: dict, configured: float) -> dict:
    lines = gzip.decompress(log.read_bytes()).decode("utf-8", "replace").splitlines()
    until = math.floor(truth["vllm_final_t"]) if "vllm_final_t" in truth else None
    pipe = Pipeline(Clock(year=2026))
    m = Metrics(process_metrics=False, stats_interval=configured)
    m.add_server("s")
    events = []
    for i in range(0, len(lines), 256):
        events += pipe.feed_batch(lines[i:i + 256])[1]
    events += pipe.flush()
    events = [e for e in events if until is None or e.ts is None or e.ts < until]
    m.observe_many("s", events)
    m.settle_windows("s")  # the end of the input: a first window no line decided counts now
    got = {n: v for (n, _), v in _samples(m).items()}
    v, interval = truth["vllm_final"], truth["stats_interval"]
    windows = [e.fields for e in events if e.kind == "engine_stats"]
    stamps = [e.ts for e in events if e.kind == "engine_stats"]
    ready = [e.ts for e in events if e.kind in ("supported_tasks", "init_engine") and e.ts is not None]
    out = {"windows": len(windows), "sub_second": any(t % 1 for t in stamps if t is not None)}
    for name, field, key in (("gen", "generation_tokens_per_second", "generation_tokens"),
                             ("prompt", "prompt_tokens_per_second", "local_compute_prompt_tokens")):
        mine = got.get("vllm_log_generation_tokens_total" if name == "gen" else "vllm_log_computed_prompt_tokens_total", 0.0)
        out[name] = 100 * (mine / v[key] - 1)
        first = windows[0].get(field) or 0.0
        if first:
            out[f"first_{name}"] = (v[key] - interval * sum(w.get(field) or 0.0 for w in windows[1:])) / first
    if ready and stamps:
        out["first_stamps"] = stamps[0] - ready[-1]
    return out


def _samples(m: Metrics) -> dict:
    from prometheus_client.parser import text_string_to_metric_families

    s = {}
    for fam in text_string_to_metric_families(m.render().decode()):
        for smp in fam.samples:
            s[(smp.name, tuple(sorted(smp.labels.items())))] = s.get((smp.name, ()), 0.0) + smp.value
    return s


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--stats-interval", type=float, default=10.0, help="the exporter's configured interval, s")
    args = ap.parse_args(argv)
    print(f"{'release':8} {'capture':16} {'windows':>7} {'stamps':>10} {'generated':>9} {'computed':>9}"
          f"  first window: stamps' difference, implied by vLLM (gen/prompt)")
    for d in sorted(FIXTURES.glob("vllm-*-cpu"), key=lambda p: tuple(int(x) for x in p.name.split("-")[1].split("."))):
        for log in sorted(d.glob("*.log.gz")):
            name = log.name[:-len(".log.gz")]
            if not name.startswith(TOKEN_RUNS):
                continue
            truth = json.loads((d / f"{name}.truth.json").read_text())
            r = measure(log, truth, args.stats_interval)
            print(f"{d.name.split('-')[1]:8} {name:16} {r['windows']:7d} {'sub-second' if r['sub_second'] else 'seconds':>10}"
                  f" {r['gen']:+8.2f}% {r['prompt']:+8.2f}%  {r.get('first_stamps', float('nan')):.2f} s,"
                  f" {r.get('first_gen', float('nan')):.2f}/{r.get('first_prompt', float('nan')):.2f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
