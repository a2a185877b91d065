"""bench/own_peak.py: a child's peak RSS is its own, not the high-water mark it inherits from the
bench that started it (issue 35: `report` read 334 MB from bench/compare.py, 24 MB alone)."""

from __future__ import annotations

import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "bench"))
from own_peak import OwnPeak, inherited_and_own  # noqa: E402

MB = 1 << 20


def test_the_peak_is_the_childs_own_not_its_parents():
    small = [sys.executable, "-S", "-c", "pass"]
    plain, own = inherited_and_own(small, hold_mb=120)
    assert plain > 120 * MB  # what a plain subprocess reports: the parent's ballast (why the fix)
    assert own < 60 * MB  # a bare interpreter's own


def test_a_child_that_grows_shows_its_growth():
    grows = [sys.executable, "-S", "-c", "b = bytearray(80 << 20)\nfor i in range(0, len(b), 4096): b[i] = 1"]
    with OwnPeak(grows) as child:
        pass
    assert 80 * MB < child.rss < 140 * MB
    assert child.returncode == 0 and child.cpu > 0


def test_exit_status_and_termination_pass_through():
    with OwnPeak([sys.executable, "-S", "-c", "raise SystemExit(3)"]) as child:
        pass
    assert child.returncode == 3
    for settle in (0.0, 0.3):  # at once (the launcher may not have forked yet) and once it has
        sleeper = OwnPeak(["sleep", "30"])
        time.sleep(settle)
        sleeper.terminate()
        sleeper.proc.wait(timeout=10)  # a launcher that did not pass SIGTERM on would wait out the sleep
        sleeper.wait()
        assert sleeper.returncode == -15
