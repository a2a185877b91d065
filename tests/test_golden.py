"""Golden /metrics: each real capture's and packaged sample's whole exposition, diffed against the
file committed under tests/golden/ (how they are made and what is left out: tests/golden_metrics.py).
A difference fails with the diff; when the change is meant, ``make golden`` rewrites the files and
the diff goes into review with the change."""

from __future__ import annotations

import difflib

import pytest

from exporter.metrics.engine import EngineMetrics
from tests import golden_metrics as golden

CAPTURES = golden.captures()
MAX_DIFF_CHARS = 8000


def _rel(path) -> str:
    return path.relative_to(golden.ROOT).as_posix()


@pytest.mark.parametrize("cap", CAPTURES, ids=[c.key for c in CAPTURES])
def test_exposition_is_the_committed_golden_file(cap):
    assert cap.golden.exists(), f"{_rel(cap.log)} has no golden file: run `make golden`, read it, commit it"
    want = cap.golden.read_text(encoding="utf-8")
    got = golden.expected(cap)
    if got != want:
        diff = "".join(difflib.unified_diff(want.splitlines(True), got.splitlines(True),
                                            _rel(cap.golden), "now", n=0))
        pytest.fail(f"/metrics after {_rel(cap.log)} changed:\n{diff[:MAX_DIFF_CHARS]}\n"
                    "If the change is meant: `make golden`, then review and commit tests/golden/ with it.")


def test_every_golden_file_has_its_capture():
    assert [_rel(p) for p in golden.stale_files(CAPTURES)] == [], "run `make golden` to remove them"


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
