from __future__ import annotations

import os
from pathlib import Path

import pytest

from exporter.parsers.events import DERIVED_KINDS
from exporter.framing.clock import Clock
from exporter.stream.pipeline import Pipeline
from tests.podman import images, podman_env  # noqa: F401 - session fixtures: the podman images

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = Path(__file__).resolve().parent / "fixtures"
SAMPLE = ROOT / "exporter" / "data" / "sample.log"
SAMPLE_V0 = ROOT / "exporter" / "data" / "sample-v0.log"
SAMPLE_LMCACHE = ROOT / "exporter" / "data" / "sample-lmcache.log"


@pytest.fixture
def clock() -> Clock:
    return Clock(year=2026)


def run_lines(lines, clock=None, derived=False):
    """Feed lines through a fresh pipeline; return (results, events) with pending tracebacks flushed.
    The events exporter.stream.lifecycle adds are left out unless ``derived``: these tests are of the lines."""
    pipe = Pipeline(clock or Clock(year=2026))
    results, events = [], []
    for line in lines:
        r, ev = pipe.feed(line)
        results.append(r)
        events.extend(ev)
    events.extend(pipe.flush())
    if not derived:
        events = [e for e in events if e.kind not in DERIVED_KINDS]
    return results, events


def metrics_of(lines) -> dict:
    """The samples of /metrics after ``lines`` (one server, "s"), lifecycle events included."""
    from exporter.metrics import Metrics
    from tests.helpers import samples

    _, events = run_lines(lines, derived=True)
    m = Metrics(process_metrics=False)
    m.add_server("s")
    m.observe_many("s", events)
    return samples(m.render().decode())


def one(line: str, kind: str | None = None):
    """The single event of one line (of ``kind`` when given)."""
    _, events = run_lines([line])
    if kind is not None:
        events = [e for e in events if e.kind == kind]
    assert len(events) == 1, (line, events)
    return events[0]


# make test (tools/run_tests.py) runs the property tests on the same examples every time, so that CI
# fails for a change and never for a seed; run pytest yourself for new random examples (and keep any
# failure they find as an @example)
if os.environ.get("VLLM_LOG_EXPORTER_HYPOTHESIS") == "derandomize":
    from hypothesis import settings

    settings.register_profile("derandomize", derandomize=True)
    settings.load_profile("derandomize")
