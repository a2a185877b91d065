"""Every line of tests/fixtures/real_lines/issue41.yaml through the pipeline: vLLM's records as the platforms
and tools that run it print them (Dynamo, lemonade, vLLM-Omni, Ray Serve, KServe, Ascend, XPU, ROCm), the
failed starts a user meets first, new lines with numbers and a look-alike. Each gives the event its entry
says, alone and under three wrappers (the record is found wherever it stands, docs/wrappers.md)."""

from __future__ import annotations

import pytest
import yaml

from exporter.framing.clock import Clock
from exporter.framing.frame import frame_line
from tests.conftest import ROOT, run_lines
from tests.wrappers import WRAPPERS

ENTRIES = yaml.safe_load((ROOT / "tests" / "fixtures" / "real_lines" / "issue41.yaml").read_text(encoding="utf-8"))
BANNER = ["(APIServer pid=1) INFO 12-04 09:59:00 [api_server.py:1] vLLM API server version 0.34.0",
          "(APIServer pid=1) INFO 12-04 09:59:30 [launcher.py:1] Application startup complete."]
# a collector's stamp, a container log file's, a viewer's; the process prefix of Ray, found behind it
UNDER = ("", "logs --timestamps", "CRI file", "stern")


def test_every_entry_names_its_origin_and_source():
    assert len(ENTRIES) >= 25
    for e in ENTRIES:
        assert e["origin"] in ("real", "synthetic") and e["source"] and e["line"], e


def _check(e: dict, line: str):
    lead = BANNER if e.get("serving") else []
    _, events = run_lines(lead + [line], derived=True)
    mine = [ev for ev in events if ev.line is not None and ev.line > len(lead)]
    if e["expect"] is None:
        assert [ev.kind for ev in mine if ev.kind not in ("server_state",)] == [], (line, mine)
    else:
        kind, fields = e["expect"]
        ev = next((ev for ev in mine if ev.kind == kind), None)
        assert ev is not None, (line, [(x.kind, x.fields) for x in mine])
        for k, v in fields.items():
            got = ev.fields.get(k)
            assert got == (pytest.approx(v) if isinstance(v, float) else v), (k, got, ev.fields)
    for want in e.get("derived", []):
        if want.startswith("not "):
            assert want[4:] not in {ev.kind for ev in events}, (line, want)
        else:
            assert want in {ev.kind for ev in mine}, (line, want, [ev.kind for ev in mine])


@pytest.mark.parametrize("under", UNDER)
@pytest.mark.parametrize("i", range(len(ENTRIES)), ids=lambda i: f"{i}-{ENTRIES[i]['family'][:40]}")
def test_each_line_becomes_what_it_says_wherever_it_stands(i, under):
    e = ENTRIES[i]
    line = e["line"]
    if under:
        f = frame_line(line, Clock(year=2026))
        if under == "stern" and not (f.process or f.level or f.header):
            pytest.skip("a bare line (no vLLM record start) is read under named wrappers only")
        line = WRAPPERS[under][0](line)
    _check(e, line)


def test_no_vllm_record_in_any_capture_or_fixture_is_left_unread():
    """What `parse --stats` calls "unparsed: no vLLM header" holds no vLLM record start anywhere in any capture,
    fixture log, sample or real line: a line that holds one (a process tag, a header) has it read."""
    import gzip

    from exporter.framing import headers

    fixtures = ROOT / "tests" / "fixtures"
    logs = sorted(fixtures.rglob("*.log.gz")) + sorted(fixtures.glob("*.log")) + sorted((ROOT / "exporter" / "data").glob("*.log"))
    lines = [line for p in logs for line in (gzip.open(p, "rt", encoding="utf-8") if p.suffix == ".gz"
                                             else open(p, encoding="utf-8")).read().splitlines()]
    lines += [e["line"] for p in sorted((fixtures / "real_lines").glob("*.yaml"))
              for e in yaml.safe_load(p.read_text(encoding="utf-8"))]
    assert len(lines) > 15000
    clock = Clock(year=2026)
    unread = []
    for line in lines:
        f = frame_line(line, clock)
        if not (f.process or f.level or f.header) and headers.find(f.clean) >= 0:
            unread.append(line)
    assert unread == []
