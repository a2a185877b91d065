"""The report's sentence for a failed start: every reason the parsers know has its own, and the real
refused starts of the captures get theirs, in the exception line's words (which path, which port)."""

from datetime import timezone

import pytest

from exporter.framing.clock import Clock
from exporter.offline.report.markdown import startup_failure_line
from exporter.parsers.events import STARTUP_FAILURE_REASONS
from tests.test_real_vllm_captures import FIXTURES, REFUSALS, captured

GENERIC = startup_failure_line({"ts": 0, "reason": "other"}, {}, timezone.utc)


@pytest.mark.parametrize("reason", STARTUP_FAILURE_REASONS)
def test_every_failed_start_reason_has_a_sentence_of_its_own(reason):
    line = startup_failure_line({"ts": 0, "reason": reason}, {}, timezone.utc)
    others = {r: startup_failure_line({"ts": 0, "reason": r}, {}, timezone.utc)
              for r in STARTUP_FAILURE_REASONS if r != reason}
    assert line.startswith("Start-up failed at ") and line not in others.values(), (reason, line)


@pytest.mark.parametrize("release,scenario", captured(*REFUSALS))
def test_each_refused_start_of_the_captures_is_said_in_its_own_words(release, scenario):
    from exporter.commands.report import read_run
    from exporter.offline.report import markdown

    reason, words = REFUSALS[scenario]
    _, summary = read_run(str(FIXTURES / f"vllm-{release}-cpu" / f"{scenario}.log.gz"), Clock(year=2026), None, None)
    md = markdown.render(summary, "run", timezone.utc)
    (line,) = [ln for ln in md.splitlines() if ln.startswith("Start-up failed at ")]
    said = line.split(": ", 1)[1]
    assert said != GENERIC.split(": ", 1)[1], line  # never the sentence that says nothing
    if reason == "other":
        assert "Root cause" in line and words in line, line
    if reason in ("model_not_found", "address_in_use"):
        assert words in line, line  # the path, the port's error: which one, in vLLM's words
