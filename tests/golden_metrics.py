"""Golden /metrics (as node_exporter keeps its fixture /proc's output): for every real vLLM capture
under tests/fixtures/ and every packaged sample log, the exporter's whole exposition after reading
it, committed under tests/golden/. tests/test_golden.py diffs it, so every change to any series
(a name, a label, a value, a HELP text) shows in review as a diff someone has to accept.

Rewrite them after a change you mean, then read the diff and commit it with the change (the steps
are ``HOW_TO_ACCEPT`` below, which `make golden` and a failing test print)::

    make golden          # = .venv/bin/python -m tests.golden_metrics

What counts as a capture: a log (``NAME.log.gz`` or ``NAME.log``) with the ``NAME.truth.json``
tools/capture_vllm_run.py writes beside it, anywhere under tests/fixtures/ (found by walking the
folder, so a capture added there gets a golden file by ``make golden`` and the test fails until it
has one). Its ``stats_interval`` is the one vLLM was run with; the samples use the daemon's default.

The exposition is the daemon's: a SourceRunner reads the log as a source to its end (the end-of-input
flush decides pending tracebacks and failed starts), into the same Metrics the daemon serves, and
``Metrics.render()`` writes what /metrics would answer. Deterministic by construction:
- year-less stamps read as 2026 in UTC (``--year 2026 --timezone UTC``);
- the wall clock is frozen at ``FROZEN_TIME`` inside the metrics and the stream (a stand-in for the
  time of day, which the log does not hold): window gauges go idle after two stats intervals of
  *wall* time, so a loaded machine must not change the answer; ``vllm_log_last_line_timestamp_seconds``
  (wall time) then reads ``FROZEN_TIME``, and any other series that fell back to the wall clock would too;
- families are sorted by name and each family's samples by their text, so a change of order alone
  is no diff;
- left out: the process's own series (``process_*``, ``python_*``) and the exporter's version
  (``vllm_log_exporter_build_info``, which moves with every release).
"""

from __future__ import annotations

import asyncio
import contextlib
import gzip
import json
import os
import sys
import tempfile
import time
from dataclasses import dataclass
from datetime import timezone
from pathlib import Path

from exporter.daemon.runners import SourceRunner
from exporter.framing.clock import Clock
from exporter.metrics import Metrics
from exporter.sources.stdin import StdinSource

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "tests" / "fixtures"
DATA = ROOT / "exporter" / "data"
GOLDEN = ROOT / "tests" / "golden"
YEAR = 2026
FROZEN_TIME = 1798761600.0  # 2027-01-01T00:00:00Z: after every capture and sample, unmistakable in a diff
DEFAULT_STATS_INTERVAL = 10.0  # the daemon's default (vLLM's VLLM_LOG_STATS_INTERVAL)
LEFT_OUT_PREFIXES = ("process_", "python_")
LEFT_OUT = {"vllm_log_exporter_build_info"}
FROZEN_PACKAGES = ("exporter.metrics", "exporter.stream")

# How a developer accepts a change to the golden files: printed by `make golden` and by a failing
# tests/test_golden.py, so that both say the same steps.
HOW_TO_ACCEPT = """\
To accept the change (only if your change means to move these series):
  1. make golden                 rewrites tests/golden/ (= .venv/bin/python -m tests.golden_metrics)
  2. git diff tests/golden       read every line: each must be one your change means to move
  3. git add tests/golden        and commit it with the change, saying why the series moved; a renamed
                                 series or a changed label also gets a line in CHANGELOG.md (Unreleased)
A rebase or merge conflict in tests/golden/: do not merge those files by hand; run `make golden` on
the merged code, then steps 2 and 3 (`git add tests/golden`, then `git rebase --continue`)."""


@dataclass(frozen=True)
class Capture:
    key: str  # where its golden file lives, below tests/golden/, without ".prom"
    log: Path
    server: str
    stats_interval: float

    @property
    def golden(self) -> Path:
        return GOLDEN / f"{self.key}.prom"


def _stem(path: Path) -> str:
    name = path.name
    for suffix in (".gz", ".log"):
        name = name.removesuffix(suffix)
    return name


def captures() -> list[Capture]:
    """Every real capture under tests/fixtures/ and every packaged sample, in a stable order."""
    out = []
    for truth in sorted(FIXTURES.rglob("*.truth.json")):
        stem = truth.name.removesuffix(".truth.json")
        logs = [p for p in (truth.with_name(stem + ".log.gz"), truth.with_name(stem + ".log")) if p.exists()]
        if not logs:
            raise FileNotFoundError(f"{truth.relative_to(ROOT)} has no {stem}.log.gz or {stem}.log beside it")
        interval = json.loads(truth.read_text()).get("stats_interval") or DEFAULT_STATS_INTERVAL
        rel = truth.parent.relative_to(FIXTURES).as_posix()
        out.append(Capture(f"{rel}/{stem}", logs[0], stem, float(interval)))
    for sample in sorted(DATA.glob("*.log")):
        out.append(Capture(f"exporter-data/{sample.stem}", sample, sample.stem, DEFAULT_STATS_INTERVAL))
    return out


class _FrozenTime:
    """The time module, with the wall and monotonic clocks stopped at FROZEN_TIME."""

    def __getattr__(self, name):
        return getattr(time, name)

    @staticmethod
    def time() -> float:
        return FROZEN_TIME

    @staticmethod
    def monotonic() -> float:
        return FROZEN_TIME


@contextlib.contextmanager
def frozen_clock():
    modules = [m for name, m in list(sys.modules.items())
               if name.startswith(FROZEN_PACKAGES) and getattr(m, "time", None) is time]
    for m in modules:
        m.time = _FrozenTime()
    try:
        yield
    finally:
        for m in modules:
            m.time = time


def raw_exposition(cap: Capture) -> str:
    """What the daemon's /metrics answers after reading ``cap`` to its end."""
    data = cap.log.read_bytes()
    if cap.log.suffix == ".gz":
        data = gzip.decompress(data)
    with tempfile.TemporaryFile() as f, frozen_clock():
        f.write(data)
        f.seek(0)
        metrics = Metrics(stats_interval=cap.stats_interval)
        runner = SourceRunner(StdinSource(cap.server, fd=f.fileno()), metrics, Clock(year=YEAR, tz=timezone.utc))
        asyncio.run(runner.run())
        return metrics.render().decode("utf-8")


def normalise(text: str) -> str:
    """Families sorted by name, samples by text; the process's own series and the version left out."""
    families: dict[str, list[str]] = {}
    heads: dict[str, list[str]] = {}
    current = None
    for line in text.splitlines():
        if not line:
            continue
        if line.startswith("# HELP ") or line.startswith("# TYPE "):
            current = line.split(" ", 3)[2]
            heads.setdefault(current, []).append(line)
            families.setdefault(current, [])
        elif line.startswith("#"):
            continue
        else:
            name = line.split("{", 1)[0].split(" ", 1)[0]
            fam = current if current is not None and name.startswith(current) else name
            families.setdefault(fam, []).append(line)
    out = []
    for fam in sorted(families):
        if fam.startswith(LEFT_OUT_PREFIXES) or fam in LEFT_OUT:
            continue
        out.extend(heads.get(fam, []))
        out.extend(sorted(families[fam]))
    return "\n".join(out) + "\n"


def header(cap: Capture) -> str:
    return (f"# Golden /metrics of {cap.log.relative_to(ROOT).as_posix()}: server={cap.server}, "
            f"--stats-interval {cap.stats_interval:g} --year {YEAR} --timezone UTC, wall clock frozen at "
            f"{FROZEN_TIME:.0f}.\n# Written by `make golden` (tests/golden_metrics.py); "
            f"process_*, python_* and vllm_log_exporter_build_info left out.\n")


def expected(cap: Capture) -> str:
    return header(cap) + normalise(raw_exposition(cap))


def stale_files(caps: list[Capture]) -> list[Path]:
    """Golden files whose capture is gone."""
    wanted = {c.golden for c in caps}
    return sorted(p for p in GOLDEN.rglob("*.prom") if p not in wanted)


def main(argv: list[str] | None = None) -> int:
    from exporter.config import logs

    logs.setup("warning", "console")  # not each source's "source ended"
    caps = captures()
    changed = 0
    for cap in caps:
        text = expected(cap)
        old = cap.golden.read_text(encoding="utf-8") if cap.golden.exists() else None
        if text != old:
            cap.golden.parent.mkdir(parents=True, exist_ok=True)
            cap.golden.write_text(text, encoding="utf-8")
            changed += 1
            print(f"{'wrote' if old is None else 'rewrote'} {cap.golden.relative_to(ROOT)}")
    for path in stale_files(caps):
        path.unlink()
        changed += 1
        print(f"removed {path.relative_to(ROOT)} (its capture is gone)")
    if changed:
        print(f"{len(caps)} golden files, {changed} changed: step 1 below is done.\n{HOW_TO_ACCEPT}")
    else:
        print(f"{len(caps)} golden files, none changed: no series moved")
    return 0


if __name__ == "__main__":
    os.chdir(ROOT)
    raise SystemExit(main(sys.argv[1:]))
