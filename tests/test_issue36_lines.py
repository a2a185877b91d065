"""Every line of tests/fixtures/real_lines/issue36.yaml through the pipeline: the families issue 36 asked
for and the contradictions the catalogue found (catalogue/findings.md), real lines where a public thread
holds one, else rendered from the released wheel's format string (labelled synthetic, with release and
file). Each entry says the event its line must give, field by field, and what the lifecycle must make of
it; the same lines with the family's words moved out of place give nothing of it (the trust boundary)."""

from __future__ import annotations

import pytest
import yaml

from tests.conftest import ROOT, run_lines

ENTRIES = yaml.safe_load((ROOT / "tests" / "fixtures" / "real_lines" / "issue36.yaml").read_text(encoding="utf-8"))
# a server that started and serves: what comes after it is a death, not a failed start
BANNER = ["(APIServer pid=1) INFO 12-04 09:59:00 [api_server.py:1] vLLM API server version 0.34.0",
          "(APIServer pid=1) INFO 12-04 09:59:30 [launcher.py:1] Application startup complete."]


def test_every_entry_names_its_origin_and_source():
    assert ENTRIES
    for e in ENTRIES:
        assert e["origin"] in ("real", "synthetic") and e["source"] and e["line"], e
        if e["origin"] == "synthetic":
            assert any(w in e["source"] for w in ("vllm ", "lmcache ", "nixl", "mooncake")), e["source"]


@pytest.mark.parametrize("i", range(len(ENTRIES)), ids=lambda i: f"{i}-{ENTRIES[i]['family'][:40]}")
def test_each_line_becomes_what_it_says(i):
    e = ENTRIES[i]
    lead = BANNER if e.get("serving") else []
    results, events = run_lines(lead + [e["line"]], derived=True)
    mine = [ev for ev in events if ev.line is not None and ev.line > len(lead)]
    if e["expect"] is None:
        assert [ev.kind for ev in mine if ev.kind not in ("server_state",)] == [], (e["line"], mine)
    else:
        kind, fields = e["expect"]
        ev = next((ev for ev in mine if ev.kind == kind), None)
        assert ev is not None, (e["line"], [(x.kind, x.fields) for x in mine])
        for k, v in fields.items():
            got = ev.fields.get(k)
            assert got == (pytest.approx(v) if isinstance(v, float) else v), (k, got, ev.fields)
    for want in e.get("derived", []):
        if want.startswith("not "):
            assert want[4:] not in {ev.kind for ev in events}, (e["line"], want)
        else:
            assert want in {ev.kind for ev in mine}, (e["line"], want, [ev.kind for ev in mine])


def _metrics(lines):
    from exporter.metrics import Metrics
    from tests.helpers import samples

    _, events = run_lines(lines, derived=True)
    m = Metrics(process_metrics=False)
    m.add_server("s")
    m.observe_many("s", events)
    return samples(m.render().decode())


def _line(family: str) -> str:
    return next(e["line"] for e in ENTRIES if e["family"] == family)


def test_lmcache_lines_of_every_release_feed_the_hit_ratio_and_say_nothing_they_do_not_hold():
    """0.3.15+'s lookups count (the hit ratio is back); a retrieve logged without size and cost counts its
    tokens but no bytes or seconds (absent, not a measured 0), so bytes over seconds stays a rate of moves
    that logged both; LMCache's own warning counts by its level."""
    from tests.helpers import value

    s = _metrics([ENTRIES[0]["line"], ENTRIES[1]["line"], _line("lmcache retrieve logged without its size and cost"),
                  _line("LMCache's own warning (counted by level)")])
    assert value(s, "vllm_log_lmcache_requested_tokens_total", server="s") == 1839 + 1848
    assert value(s, "vllm_log_lmcache_hit_tokens_total", server="s") == 1708
    assert value(s, "vllm_log_lmcache_tokens_total", server="s", direction="retrieve") == 1792
    assert value(s, "vllm_log_lmcache_bytes_total", server="s", direction="retrieve") is None
    assert value(s, "vllm_log_lmcache_seconds_total", server="s", direction="retrieve") is None
    assert value(s, "vllm_log_messages_total", server="s", level="warning") == 1


def test_the_block_override_is_the_count_the_server_runs_with():
    from tests.helpers import value

    s = _metrics([_line("GPU block count overridden")])
    assert value(s, "vllm_log_kv_cache_blocks", server="s") == 512
