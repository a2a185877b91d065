#!/usr/bin/env python3
"""Microseconds per line, per line family, end to end: ours (`report`) and mtail (`--one_shot`).

    python bench/families.py [ROUNDS=3] [--python PY ...] [--rules FILE] [--no-mtail] [--wrapper W] [--wall]

For each family (engine stats, spec decode, KV transfer, the request logger's lines, the engine client's
"Finished request" records, WARNING lines, other INFO lines that no parser wants, access-log lines) a file of LINES lines of only that family is cut from the periodic-20 % benchmark
log (bench/gen_log.py --mix periodic20); each tool runs over it and over a file of one line, alternating,
and (time - one-line-file time) / lines is the cost of one line: reading, framing, parsing and counting
it, without start-up. Time is the child's CPU time (user + system; ``--wall``: the wall clock, as before). Medians of ROUNDS. With several ``--python`` (e.g. wrappers that run two
checkouts: before and after a change), every one runs in each round, alternating; ``--no-mtail``
leaves mtail out and compares each with the first instead.

``--rules FILE`` adds a tool, ours with the user's rules of FILE (``report --rules``), run in the same
rounds, alternating with ours without them (bench/rules10.yaml: ten rules, one of which reads every
spec-decode line; bench/rules10_unused.yaml: ten rules the log never matches); without mtail, each with rules
is compared with itself without.
"""

from __future__ import annotations

import argparse
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
LINES = 50_000

FAMILIES = (
    ("engine stats", lambda l: "Avg prompt throughput" in l),
    ("spec decode", lambda l: "SpecDecoding metrics" in l),
    ("KV transfer", lambda l: "KV Transfer metrics" in l),
    # the request logger's lines (--enable-log-requests): read for their bounded facts since issue 36, so no
    # longer among the lines nobody parses (the generated log's are cut short: no lora_request, so no event)
    ("request log", lambda l: "Received request " in l),
    # the engine client's "Finished request" records (V0's; V1's "Added request" alike): they echo a request's id, a
    # client's text, so the pipeline learns each (its later lines are the client's); no fact is counted from them
    ("requests finished", lambda l: "Finished request " in l),
    # WARNING records: every failure family's needles are tried on them (the bench log's are nearly all the
    # serving layer's "The following fields were present in the request but ignored")
    ("warnings", lambda l: " WARNING " in l),
    ("ignored INFO", lambda l: "HTTP/1.1\" " not in l and " INFO " in l and "metrics: " not in l
     and "Avg prompt throughput" not in l),
    ("access", lambda l: "HTTP/1.1\" " in l),
)


# Other wrappers than journald's ("Aug 04 02:43:00 gpu-host vllm[4242]: "), each as its source holds a line:
# none (`vllm serve > FILE`, stdin, `podman logs`); the container API's RFC 3339 stamp (the exporter's podman/docker
# source asks for timestamps); a Kubernetes node log's stamp, stream and full-line tag (CRI).
WRAPPERS = ("journald", "bare", "stamped", "cri")
_MONTHS = {m: i + 1 for i, m in enumerate(("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov",
                                           "Dec"))}


def _rewrapped(line: str, wrapper: str) -> str:
    head, _, bare = line.partition("]: ")
    if wrapper == "bare":
        return bare
    mon, day, hms = head.split()[:3]
    stamp = f"2026-{_MONTHS[mon]:02d}-{int(day):02d}T{hms}.123456789Z "
    return stamp + ("stderr F " if wrapper == "cri" else "") + bare


def wrapped_files(files: dict[str, Path], wrapper: str) -> dict[str, Path]:
    """The same lines in another ``wrapper`` (WRAPPERS), written once beside them."""
    if wrapper == "journald":
        return files
    out = {}
    for name, path in files.items():
        other = path.with_name(f"{path.stem}-{wrapper}.log")
        if not other.exists():
            with open(path, encoding="utf-8") as src:
                other.write_text("".join(_rewrapped(line, wrapper) for line in src), encoding="utf-8")
        out[name] = other
    return out


def family_files() -> dict[str, Path]:
    src = ROOT / "bench" / "out" / "periodic20-1000000.log"
    if not src.exists():
        subprocess.run([sys.executable, str(ROOT / "bench" / "gen_log.py"), "1000000", str(src), "--mix", "periodic20"],
                       check=True)
    out = ROOT / "bench" / "out"
    files = {name: out / f"family-{name.replace(' ', '-')}.log" for name, _ in FAMILIES}
    if all(f.exists() for f in files.values()):
        return files
    picked: dict[str, list[str]] = {name: [] for name, _ in FAMILIES}
    with open(src, encoding="utf-8") as f:
        for line in f:
            for name, test in FAMILIES:
                if test(line):
                    picked[name].append(line)
                    break
    # "ignored INFO": those that no family reads, as the usual way judges each line alone (without the engine
    # client's records the rest are the start-up's lines, most of which are facts: the memory split, the config...)
    sys.path.insert(0, str(ROOT))
    from exporter.framing.clock import Clock
    from exporter.stream.pipeline import Pipeline
    picked["ignored INFO"] = [line for line in picked["ignored INFO"]
                              if Pipeline(Clock(year=2026)).feed(line.rstrip("\n")) == ("ignored", [])]
    for name, lines in picked.items():
        # repeat to LINES when the log has fewer (the other INFO lines are ~2 % of it)
        body = (lines * (LINES // max(1, len(lines)) + 1))[:LINES]
        files[name].write_text("".join(body), encoding="utf-8")
    return files


def timed(cmd: list[str]) -> float:
    """The command's CPU time (user + system of the child), or its wall time with ``--wall``: on this shared
    VM other sessions' work stretches wall time by up to 2x, CPU time much less."""
    if WALL:
        t0 = time.perf_counter()
        subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True, cwd=ROOT)
        return time.perf_counter() - t0
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True, cwd=ROOT)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


WALL = False


def mtail_cmd(path: Path) -> list[str]:
    return ["mtail", "--progs", str(ROOT / "bench" / "mtail"), "--logs", str(path), "--one_shot",
            "--one_shot_format=prometheus", "--logtostderr"]


def ours_cmd(python: str, path: Path, rules: str | None = None) -> list[str]:
    return [python, "-m", "exporter", "report", str(path), "--format", "json", "--year", "2026",
            *(["--rules", rules] if rules else [])]


def measure(pythons: list[str], rounds: int, rules: str | None = None, mtail: bool = True, wrapper: str = "journald"
            ) -> dict[str, dict[str, float]]:
    """family -> tool -> microseconds per line (median of rounds). ``wrapper``: the lines in that wrapper
    (wrapped_files)."""
    files = wrapped_files(family_files(), wrapper)
    # the start-up's file: one line (`report` refuses a log with none), the first of the ignored INFO lines
    empty = ROOT / "bench" / "out" / "one-line.log"
    with open(files["ignored INFO"], encoding="utf-8") as f:
        empty.write_text(f.readline(), encoding="utf-8")
    tools = ([("mtail", mtail_cmd)] if mtail else []) + [
        (f"py{i + 1}" if len(pythons) > 1 else "ours", lambda p, py=py: ours_cmd(py, p)) for i, py in enumerate(pythons)]
    if rules:
        tools += [(f"py{i + 1}+rules" if len(pythons) > 1 else "ours+rules", lambda p, py=py: ours_cmd(py, p, rules))
                  for i, py in enumerate(pythons)]
    samples: dict[tuple[str, str], list[float]] = {}
    for _ in range(rounds):
        for tool, cmd in tools:
            base = min(timed(cmd(empty)) for _ in range(2))
            for name, path in files.items():
                samples.setdefault((name, tool), []).append((timed(cmd(path)) - base) / LINES * 1e6)
    out: dict[str, dict[str, float]] = {}
    for (name, tool), v in samples.items():
        out.setdefault(name, {})[tool] = statistics.median(v)
    return out


def table(res: dict[str, dict[str, float]]) -> str:
    tools = list(next(iter(res.values())))
    # each of ours against mtail; without mtail, with rules against without, or each against the first python
    base = "mtail" if "mtail" in tools else None
    if base:
        ours = [t for t in tools if t != "mtail"]
        ref = {t: base for t in ours}
    elif any(t.endswith("+rules") for t in tools):
        ours = [t for t in tools if t.endswith("+rules")]
        ref = {t: t.removesuffix("+rules") for t in ours}
    else:
        ours = tools[1:]
        ref = {t: tools[0] for t in ours}
    head = "| family | " + " | ".join(f"{t} (µs)" for t in tools) + " | " + " | ".join(
        f"{t} / {ref[t]}" for t in ours) + " |"
    rows = [head, "|" + "---|" * (1 + len(tools) + len(ours))]
    for name, by in res.items():
        rows.append(f"| {name} | " + " | ".join(f"{by[t]:.2f}" for t in tools) + " | "
                    + " | ".join(f"{by[t] / by[ref[t]]:.2f}x" for t in ours) + " |")
    return "\n".join(rows)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("rounds", type=int, nargs="?", default=3)
    ap.add_argument("--python", action="append")
    ap.add_argument("--rules", help="also run ours with these rules (report --rules FILE), alternating")
    ap.add_argument("--wall", action="store_true", help="time by the wall clock (default: the child's CPU time)")
    ap.add_argument("--wrapper", choices=WRAPPERS, default="journald",
                    help="the lines in this wrapper: journald's (default), none (a plain file), the container API's "
                         "RFC 3339 stamp, a Kubernetes node log's (cri)")
    ap.add_argument("--bare", action="store_true", help="the same as --wrapper bare")
    ap.add_argument("--no-mtail", action="store_true",
                    help="leave mtail out (with --rules: ours against ours with rules; else against the first --python)")
    args = ap.parse_args()
    global WALL
    WALL = args.wall
    pythons = args.python or [sys.executable]
    for py in pythons:
        subprocess.run([py, "-m", "compileall", "-q", str(ROOT / "exporter")], check=True)
    print(table(measure(pythons, args.rounds, args.rules, not args.no_mtail, "bare" if args.bare else args.wrapper)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
