"""Golden /metrics: each real capture's and packaged sample's whole exposition, diffed against the
file committed under tests/golden/ (how they are made and what is left out: tests/golden_metrics.py).
A difference fails with the diff; when the change is meant, ``make golden`` rewrites the files and
the diff goes into review with the change."""

from __future__ import annotations

import difflib

import pytest

from exporter.metrics.engine import EngineMetrics
from tests import golden_metrics as golden
from tests.helpers import families_without_a_sample, readme_demo_leaves_empty

CAPTURES = golden.captures()
MAX_DIFF_CHARS = 8000


def _rel(path) -> str:
    return path.relative_to(golden.ROOT).as_posix()


@pytest.mark.parametrize("cap", CAPTURES, ids=[c.key for c in CAPTURES])
def test_exposition_is_the_committed_golden_file(cap):
    assert cap.golden.exists(), \
        f"{_rel(cap.log)} has no golden file {_rel(cap.golden)}.\n{golden.HOW_TO_ACCEPT}"
    want = cap.golden.read_text(encoding="utf-8")
    assert "\n<<<<<<< " not in "\n" + want, \
        f"{_rel(cap.golden)} holds conflict markers.\n{golden.HOW_TO_ACCEPT}"
    got = golden.expected(cap)
    if got != want:
        pytest.fail(failure_message(cap, want, got), pytrace=False)


def failure_message(cap, want: str, got: str) -> str:
    """The diff (committed file, then what the code gives now), cut if long, and how to accept it."""
    diff = "".join(difflib.unified_diff(want.splitlines(True), got.splitlines(True),
                                        f"{_rel(cap.golden)} (committed)", "what the code gives now", n=0))
    if len(diff) > MAX_DIFF_CHARS:
        diff = diff[:MAX_DIFF_CHARS] + (f"\n... ({len(diff) - MAX_DIFF_CHARS:,} more characters of diff: "
                                        "`make golden`, then `git diff tests/golden` shows all of it)\n")
    return f"/metrics after reading {_rel(cap.log)} is not its golden file:\n{diff}\n{golden.HOW_TO_ACCEPT}"


def test_every_golden_file_has_its_capture():
    stale = [_rel(p) for p in golden.stale_files(CAPTURES)]
    assert stale == [], f"golden files whose capture is gone: {stale}; `make golden` removes them.\n{golden.HOW_TO_ACCEPT}"


def test_captures_are_found_by_walking_the_fixtures():
    keys = {c.key for c in CAPTURES}
    assert {"vllm-0.32-cpu/traffic", "vllm-0.32-cpu/kill_engine", "vllm-0.32-cpu/failed_start",
            "exporter-data/sample", "exporter-data/sample-lmcache", "exporter-data/sample-v0"} <= keys
    traffic = next(c for c in CAPTURES if c.key == "vllm-0.32-cpu/traffic")
    assert traffic.stats_interval == 2.0  # vLLM's, from its truth.json: the token estimates use it


def test_a_changed_series_shows_as_a_difference(monkeypatch):
    """The comparison can fail: an exporter that stops counting stats windows gives another exposition."""
    cap = next(c for c in CAPTURES if c.key == "vllm-0.32-cpu/traffic")
    before = golden.expected(cap)
    assert before == cap.golden.read_text(encoding="utf-8")
    monkeypatch.setattr(EngineMetrics, "_on_engine_stats", lambda self, server, ev, f: None)
    after = golden.expected(cap)
    removed = [line for line in difflib.ndiff(before.splitlines(), after.splitlines()) if line.startswith("- ")]
    assert any(line.startswith("- vllm_log_stats_windows_total{") for line in removed), removed[:5]
    message = failure_message(cap, before, after)  # what a developer reads: the diff and how to accept it
    assert "-vllm_log_stats_windows_total{" in message and "make golden" in message
    assert "git add tests/golden" in message and "rebase" in message


def test_a_long_diff_is_cut_and_says_where_the_rest_is():
    cap = CAPTURES[0]
    want = "".join(f"vllm_log_x{{i=\"{i}\"}} 1.0\n" for i in range(2000))
    message = failure_message(cap, want, "")
    assert len(message) < MAX_DIFF_CHARS + 2000
    assert "more characters of diff: `make golden`, then `git diff tests/golden` shows all of it" in message


def test_the_demo_gives_every_family_a_sample_but_those_the_docs_say_it_does_not_show():
    """The samples read to their end (the demo's first pass; tests/test_daemon.py checks the live demo)."""
    empty = set.intersection(*(families_without_a_sample(p.read_text(encoding="utf-8"))
                               for p in sorted((golden.GOLDEN / "exporter-data").glob("*.prom"))))
    assert empty == readme_demo_leaves_empty(), "a family the demo leaves empty must be said, with why, in docs/demo.md"


def test_the_tool_writes_exactly_the_packaged_samples(tmp_path):
    """exporter/data/ is what tools/make_sample_log.py writes (no hand edits that a regeneration would lose)."""
    import subprocess
    import sys

    r = subprocess.run([sys.executable, str(golden.ROOT / "tools" / "make_sample_log.py"), str(tmp_path)],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    for sample in sorted(golden.DATA.glob("*.log")):
        assert (tmp_path / sample.name).read_bytes() == sample.read_bytes(), \
            f"{sample.name} differs from what tools/make_sample_log.py writes"
