"""Make the fuzz tier's corpus (tests/fixtures/hostile/found.jsonl): hostile lines that broke an older
tree of the exporter, so every run replays them against today's.

    .venv/bin/python -m tests.fuzz_corpus OLD_TREE [DRAWS=400] > tests/fixtures/hostile/found.jsonl

OLD_TREE: a checkout of the code to judge (e.g. `git archive <rev> | tar -x -C /tmp/old`). The
candidates: every family's line shape with each of its numbers made hostile (tests.hostile), the bad
records of issue 32, and DRAWS batches drawn by the fuzz tier's own strategies (a fixed seed). Each is
fed, in a subprocess running OLD_TREE's code, line by line and by the batch path; a candidate is kept
when that raised, took more than 2 s, made an event with a number past 1e18 or not finite or a time
outside 2000-2100, or put a non-finite value in /metrics: what it broke is kept with it. Candidates
longer than 64 KB are left out (the line-bound tests hold those); of each kind of breakage (what
broke, digits folded) the 3 shortest of distinct shapes are kept.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys

CHECK = r'''
import json, math, signal, sys
from exporter.framing.clock import Clock
from exporter.stream.pipeline import Pipeline
from exporter.metrics import Metrics

EARLIEST, LATEST, LIMIT = 946684800.0, 4102444800.0, 1e18

class Stall(Exception):
    pass

def alarm(*_):
    raise Stall()

signal.signal(signal.SIGALRM, alarm)

def unbounded(v):
    if isinstance(v, bool):
        return False
    if isinstance(v, (int, float)):
        return not (isinstance(v, int) or math.isfinite(v)) or not -LIMIT <= v <= LIMIT
    if isinstance(v, (list, tuple)):
        return any(map(unbounded, v))
    if isinstance(v, dict):
        return any(map(unbounded, v.values()))
    return False

def judge(lines):
    signal.alarm(2)
    try:
        one = Pipeline(Clock(year=2026))
        events = [e for line in one.join_parts(lines) for e in one.feed(line)[1]] + one.flush()
        batch = Pipeline(Clock(year=2026))
        _, more, access, _ = batch.feed_batch(lines)
        events += more + batch.flush()
        for ev in events:
            if unbounded(ev.fields):
                return "a number past 1e18 or not finite in a " + ev.kind + " event"
            if ev.ts is not None and not EARLIEST <= ev.ts <= LATEST:
                return "a time outside 2000-2100 in a " + ev.kind + " event"
        m = Metrics(process_metrics=False)
        m.observe_many("s", events)
        m.observe_access("s", access)
        for line in m.render().decode().splitlines():
            if line and not line.startswith("#"):
                v = line.rsplit(" ", 1)[1]
                if v in ("+Inf", "-Inf", "NaN") or not -LIMIT <= float(v) <= LIMIT:
                    return "a non-finite or absurd value in /metrics: " + line.split("{")[0]
        return None
    except Stall:
        return "held the pipeline for more than 2 s"
    except RecursionError:
        return "RecursionError"
    except Exception as e:
        import traceback
        where = [f for f in traceback.extract_tb(e.__traceback__) if "/exporter/" in f.filename][-1:]
        at = " (" + where[0].filename.split("/exporter/")[-1] + ", " + where[0].name + ")" if where else ""
        return type(e).__name__ + ": " + str(e)[:80] + at
    finally:
        signal.alarm(0)

for text in sys.stdin:
    print(json.dumps(judge(json.loads(text))), flush=True)
'''


def candidates(draws: int) -> list[list[str]]:
    from hypothesis import HealthCheck, given, seed, settings

    from tests.hostile import BAD_RECORDS, DIGITS, HOSTILE_NUMBERS, family_lines, with_number

    out = [[line] for line in BAD_RECORDS.values()]
    for line in family_lines():
        for i in range(len(DIGITS.findall(line))):
            for number in HOSTILE_NUMBERS:
                out.append([with_number(line, i, number)])
    from tests.test_fuzz import hostile_batch

    @seed(32)
    @settings(max_examples=draws, database=None, deadline=None,
              suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
    @given(hostile_batch)
    def draw(lines):
        out.append(lines)

    draw()
    return [c for c in out if sum(map(len, c)) <= 64_000]


PER_KIND = 3  # lines kept per kind of breakage (what broke, digits folded): the shortest of distinct shapes


def shape(lines: list[str]) -> str:
    return re.sub(r"\d+", "N", " | ".join(lines))[:120]


def main() -> int:
    old = sys.argv[1]
    draws = int(sys.argv[2]) if len(sys.argv) > 2 else 400
    cands = candidates(draws)
    proc = subprocess.run([sys.executable, "-c", CHECK], input="".join(json.dumps(c) + "\n" for c in cands),
                          capture_output=True, text=True, cwd=old, env={"PYTHONPATH": old, "PATH": "/usr/bin:/bin"})
    verdicts = [json.loads(v) for v in proc.stdout.splitlines()]
    if len(verdicts) != len(cands):
        print(proc.stderr[-3000:], file=sys.stderr)
        raise SystemExit(f"{len(verdicts)} verdicts for {len(cands)} candidates")
    by_kind: dict[str, list[tuple[int, int, list[str], str]]] = {}
    for n, (lines, broke) in enumerate(zip(cands, verdicts)):
        if broke is not None:
            by_kind.setdefault(re.sub(r"\d+", "N", broke), []).append((sum(map(len, lines)), n, lines, broke))
    kept = 0
    for kind in sorted(by_kind):
        shapes = set()
        for _, _, lines, broke in sorted(by_kind[kind]):  # the shortest first, of distinct shapes
            if len(shapes) == PER_KIND or shape(lines) in shapes:
                continue
            shapes.add(shape(lines))
            kept += 1
            entry = {"line": lines[0]} if len(lines) == 1 else {"lines": lines}
            entry["broke"] = broke
            print(json.dumps(entry, ensure_ascii=False))
    print(f"{len(cands)} candidates, {sum(v is not None for v in verdicts)} broke the old tree, {kept} kept",
          file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
