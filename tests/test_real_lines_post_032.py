"""At least one real line from vLLM 0.20 or later (or the newest public one) for every family the
parsers know (issue 25 item 6). The lines and their sources are in tests/fixtures/real_lines/issue25.yaml
(research in docs/research/issue25-post-0.32.md); here each one is fed through the pipeline and what
it must become is written down field by field."""

import pytest
import yaml

from tests.conftest import ROOT, run_lines

ENTRIES = yaml.safe_load((ROOT / "tests" / "fixtures" / "real_lines" / "issue25.yaml").read_text())
GIB = 2 ** 30

# index in the fixture -> (kind, fields that must be there with these values)
EXPECTED = {
    0: ("engine_stats", {"engine": 0, "running": 9, "kv_cache_usage": 0.628, "prompt_tokens_per_second": 6335.3}),
    1: ("engine_stats", {"mm_cache_hit_rate": 0.0, "generation_tokens_per_second": 28.4}),
    2: ("engine_stats", {"running": 18, "waiting": 43, "kv_cache_usage": 0.959}),
    3: ("engine_stats", {"running": 1, "generation_tokens_per_second": 1.2}),
    4: ("engine_stats", {"engine": 1, "mfu": {"flops_per_second": 0.4e12, "bytes_per_second": 0.5e9}}),
    5: ("spec_decode", {"accepted_tokens": 78, "drafted_tokens": 195, "per_position_acceptance_rate": [0.615, 0.415, 0.169]}),
    6: ("spec_decode", {"accepted_tokens": 0, "drafted_tokens": 495, "mean_acceptance_length": 1.0}),
    7: ("spec_decode", {"accepted_tokens": 9321, "draft_acceptance_rate": 0.536}),
    8: ("kv_transfer", {"transfers": 1.0}),
    9: ("lmcache", {"op": "lookup", "total_tokens": 32610, "hit_tokens": 0}),
    10: ("lmcache", {"op": "store_begin", "tokens": 8192, "of_tokens": 8192, "skipped_tokens": 0}),
    11: ("lmcache", {"op": "store", "tokens": 8192, "bytes": round(1.25 * GIB)}),
    12: ("lmcache", {"op": "store_begin", "tokens": 2048, "of_tokens": 43008, "skipped_tokens": 40960}),
    13: ("lmcache", {"op": "store", "tokens": 2048}),
    14: ("lmcache", {"op": "store", "tokens": 0, "of_tokens": 512, "bytes": 0}),
    15: ("oom", {"gpu": 0, "in_use_bytes": round(14.51 * GIB), "processes_on_gpu": 1}),
    16: ("engine_dead", {"signature": "EngineDeadError"}),
    17: ("engine_dead", {"signature": "AsyncLLM output_handler failed"}),
    18: ("engine_dead", {"signature": "EngineDeadError"}),
    19: ("engine_dead", {"signature": "EngineDeadError"}),
    20: ("engine_dead", {"signature": "EngineDeadError"}),
    21: ("traceback", {}),  # a traceback's first line alone: the traceback it opens
    22: (None, {}),  # an INFO line of a DP/TP/EP worker that carries nothing: ignored, not unparsed
    23: ("engine_stats", {"running": 3}),
    24: ("engine_dead", {"signature": "EngineCore encountered a fatal error"}),
    25: ("access_log", {"status": 200, "method": "POST"}),
    26: ("spec_decode", {"accepted_tokens": 78}),
}


def test_every_entry_has_an_expectation_and_a_source():
    assert set(EXPECTED) == set(range(len(ENTRIES)))
    assert all(e["source"] and e["line"] for e in ENTRIES)


@pytest.mark.parametrize("i", range(len(ENTRIES)), ids=lambda i: f"{i}-{ENTRIES[i]['family']}")
def test_each_real_line_becomes_what_it_says(i):
    kind, fields = EXPECTED[i]
    results, events = run_lines([ENTRIES[i]["line"]])
    if kind is None:
        assert results == ["ignored"] and events == []
        return
    assert results[0] == "parsed", ENTRIES[i]["line"]
    ev = next((e for e in events if e.kind == kind), None)
    assert ev is not None, (kind, [e.kind for e in events])
    for k, v in fields.items():
        got = ev.fields.get(k)
        if isinstance(v, float):
            assert got == pytest.approx(v), (k, got)
        elif isinstance(v, int) and k.endswith("bytes"):
            assert abs(got - v) <= 2 ** 20, (k, got)  # printed to two decimals of GiB
        else:
            assert got == v, (k, got)


def test_the_0_34_mfu_line_sets_the_estimated_flops_and_bytes_per_device():
    """vLLM 0.34 v1/metrics/perf.py PerfMetricsLogging.log: "%sMFU: %.1f TF/s/device %.1f GB/s/device"
    with the stats line's prefix (no public paste: the format filled in); it follows each stats line."""
    from exporter.metrics import Metrics
    from tests.helpers import samples, value

    lines = ["(APIServer pid=1) INFO 12-04 10:00:10 [loggers.py:345] Engine 001: Avg prompt throughput: 10.0 tokens/s, "
             "Avg generation throughput: 300.0 tokens/s, Running: 4 reqs, Waiting: 0 reqs, GPU KV cache usage: 5.0%, "
             "Prefix cache hit rate: 0.0%",
             "(APIServer pid=1) INFO 12-04 10:00:10 [perf.py:1725] Engine 001: MFU: 160.6 TF/s/device 106.9 GB/s/device"]
    _, events = run_lines(lines)
    mfu = [e for e in events if e.kind == "mfu"]
    assert [e.fields for e in mfu] == [{"flops_per_second": pytest.approx(160.6e12), "bytes_per_second": pytest.approx(106.9e9),
                                        "engine": 1}]
    m = Metrics(process_metrics=False)
    m.add_server("s")
    for e in events:
        m.observe("s", e)
    s = samples(m.render().decode())
    assert value(s, "vllm_log_estimated_flops_per_second_per_device", server="s", engine="1") == pytest.approx(160.6e12)
    assert value(s, "vllm_log_estimated_memory_bytes_per_second_per_device", server="s", engine="1") == pytest.approx(106.9e9)
    # "MFU details:" (the debug JSON) and a message that only mentions MFU are not the line
    _, events = run_lines(["(APIServer pid=1) DEBUG 12-04 10:00:10 [perf.py:1651] Engine 001: MFU details: {",
                           "(APIServer pid=1) INFO 12-04 10:00:10 [x.py:1] MFU: see the docs"])
    assert not [e for e in events if e.kind == "mfu"]
