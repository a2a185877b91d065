"""Every vLLM line the seed article quotes parses to the numbers the article shows."""

import pytest

from tests.conftest import FIXTURES, run_lines

GIB = 2**30


@pytest.fixture(scope="module")
def events():
    lines = (FIXTURES / "seed_article.log").read_text(encoding="utf-8").splitlines()
    results, evs = run_lines(lines)
    assert "unparsed" not in results
    return evs


def kinds(events, kind):
    return [e for e in events if e.kind == kind]


def test_version_and_model(events):
    (v,) = kinds(events, "version")
    assert v.fields["version"] == "0.11.2.dev280+gilded.gnosis.v20.vllmf5981f1.si2b9bf2a.fi801d57a.cu132.20260803.r24"
    assert v.process == "APIServer" and v.pid == 52
    (m,) = kinds(events, "model")
    assert m.fields["model"] == "/models/snapshots/7872f01b1d1fe23eabc4c98b48bffcef5a386062"


def test_kv_capacity(events):
    assert kinds(events, "kv_cache_size")[0].fields["tokens"] == 285336
    mc = kinds(events, "max_concurrency")[0].fields
    assert mc == {"tokens_per_request": 262144, "concurrency": 1.09}
    assert kinds(events, "kv_cache_memory")[0].fields["bytes"] == round(8.59 * GIB)


def test_memory_split_table(events):
    (p,) = kinds(events, "memory_profile")
    f = p.fields
    # The article's per-GPU table: 81.01 / 2.45 / 0.20 / 0.14 / 8.59 GiB.
    assert f["weights_bytes"] / GIB == pytest.approx(81.01)
    assert f["peak_activation_bytes"] / GIB == pytest.approx(2.45)
    assert f["non_torch_bytes"] / GIB == pytest.approx(0.20)
    assert f["cuda_graph_bytes"] / GIB == pytest.approx(0.14)
    assert f["kv_cache_bytes"] / GIB == pytest.approx(8.59)
    assert f["gpu_memory_utilization"] == 0.975
    assert f["kv_cache_bytes_to_fit"] == 9288604570 and f["kv_cache_bytes_to_fill"] == 10511114752


def test_init_engine(events):
    assert kinds(events, "init_engine")[0].fields == {"seconds": 47.53, "compilation_seconds": 12.64}


def test_offload_pool_and_experimental_warning(events):
    assert kinds(events, "offload_pool")[0].fields["bytes"] == 8.59e9
    assert any("OffloadingSpec" in e.fields["message"] for e in kinds(events, "log"))


def test_spec_decode_best_and_worst_windows(events):
    best, worst = [e.fields for e in kinds(events, "spec_decode")]
    assert best["mean_acceptance_length"] == 5.90 and best["speculative_depth"] == 5
    assert best["draft_acceptance_rate"] == 0.981
    assert best["accepted_tokens"] == 2982 and best["drafted_tokens"] == 3040
    assert best["accepted_tokens_per_second"] == 298.18
    assert best["per_position_acceptance_rate"] == [1.000, 0.998, 0.993, 0.972, 0.941]
    assert worst["draft_acceptance_rate"] == 0.419 and worst["mean_acceptance_length"] == 3.09
    assert worst["per_position_acceptance_rate"] == [0.789, 0.542, 0.362, 0.247, 0.152]


def test_engine_stats_windows(events):
    stats = [e.fields for e in kinds(events, "engine_stats")]
    assert max(s["generation_tokens_per_second"] for s in stats) == 359.0
    assert max(s["prompt_tokens_per_second"] for s in stats) == 5790.1
    assert max(s["kv_cache_usage"] for s in stats) == 0.794
    assert max(s["prefix_cache_hit_rate"] for s in stats) == 0.974
    assert max(s["external_prefix_cache_hit_rate"] for s in stats) == 0.114


def test_kv_offload_rates(events):
    xfers = [e.fields for e in kinds(events, "kv_transfer")]
    store = xfers[0]
    # 1,415,335,680 bytes in 27.17 ms = 52.09 GB/s; 185,264,640 bytes in 3.37 ms = 54.91 GB/s.
    assert store["store_bytes"] / store["store_seconds"] / 1e9 == pytest.approx(52.09, abs=0.005)
    load = xfers[1]
    assert load["load_bytes"] / load["load_seconds"] / 1e9 == pytest.approx(54.91, abs=0.005)
    assert load["store_bytes"] == 299439360


def test_access_log(events):
    logs = kinds(events, "access_log")
    assert len(logs) == 5 and all(e.fields["status"] == 200 for e in logs)


def test_scheduler_warning(events):
    assert any(e.fields["logger"] == "vllm.py:1758" for e in kinds(events, "log"))
