"""vLLM's own records that begin with a request's id: the engine core's refusal of an invalid request
(``Request %s failed validation: %s``, 0.33+) and a KV offload store turned away (``Request %s: cannot store
chunks``, 0.26+, and its older wordings). Counted without the id, read only where vLLM prints them
(tests/fixtures/real_lines/request_refusals.yaml), beside the /metrics series each explains."""

from __future__ import annotations

import pytest
import yaml

from exporter.framing.clock import Clock
from exporter.stream import fastpath
from tests.conftest import ROOT, metrics_of, run_lines
from tests.helpers import value

ENTRIES = yaml.safe_load((ROOT / "tests" / "fixtures" / "real_lines" / "request_refusals.yaml").read_text())


@pytest.mark.parametrize("i", range(len(ENTRIES)), ids=lambda i: ENTRIES[i]["family"][:50])
def test_each_line_gives_its_fact_and_nothing_of_the_id(i):
    e = ENTRIES[i]
    _, events = run_lines([e["line"]], derived=True)
    kinds = [ev.kind for ev in events if ev.kind in ("validation_failure", "kv_offload_store_refused")]
    assert kinds == ([e["expect"]] if e["expect"] else []), (e["line"], [(x.kind, x.fields) for x in events])
    # never an error, a death or a stall, and no field that could hold the id
    assert not {"error", "engine_death", "start_failed"} & {ev.kind for ev in events}
    assert all(ev.fields == {} for ev in events if ev.kind in ("validation_failure", "kv_offload_store_refused"))


def test_the_fast_path_never_skips_a_refusal_unread():
    clock = Clock(year=2026)
    for e in ENTRIES:
        if e["expect"]:
            assert not fastpath.ignorable(e["line"], clock), e["line"]




def test_each_is_counted_by_server_and_absent_until_the_log_says_it():
    lines = [e["line"] for e in ENTRIES]
    s = metrics_of(lines)
    assert value(s, "vllm_log_request_validation_failures_total", server="s") == 2
    assert value(s, "vllm_log_kv_offload_store_refusals_total", server="s") == 4
    quiet = metrics_of(["(APIServer pid=1) INFO 03-02 14:07:55 [api_server.py:1] vLLM API server version 0.34.0"])
    assert value(quiet, "vllm_log_request_validation_failures_total", server="s") is None
    assert value(quiet, "vllm_log_kv_offload_store_refusals_total", server="s") is None


def test_the_help_names_the_vllm_series_each_explains():
    from exporter.metrics import Metrics

    text = Metrics(process_metrics=False).render().decode()
    helps = {line.split()[2]: line for line in text.splitlines() if line.startswith("# HELP")}
    assert 'vllm:request_success_total{finished_reason="error"}' in helps["vllm_log_request_validation_failures_total"]
    assert "vllm:kv_offload_allocation_failure" in helps["vllm_log_kv_offload_store_refusals_total"]
