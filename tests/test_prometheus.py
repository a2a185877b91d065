"""A real Prometheus scrapes the real exporter on loopback; the series arrive with the right values."""

import pytest

from exporter.parsers.events import ERROR_KINDS

from tests.helpers import Exporter, Prometheus, have, wait_until

pytestmark = pytest.mark.skipif(not have("prometheus"), reason="prometheus (Debian package) not installed")

LINES = [
    "Aug 04 02:44:21 h grandpa[1]: (EngineCore pid=179) INFO 08-04 02:44:21 [kv_cache_utils.py:2428] GPU KV cache size: 285,336 tokens",
    "Aug 04 02:46:09 h grandpa[1]: (APIServer pid=53) INFO 08-04 02:46:09 [loggers.py:314] Engine 000: Avg prompt "
    "throughput: 0.0 tokens/s, Avg generation throughput: 359.0 tokens/s, Running: 1 reqs, Waiting: 0 reqs, GPU KV "
    "cache usage: 1.9%, Prefix cache hit rate: 88.1%, External prefix cache hit rate: 0.8%",
    "Aug 04 02:46:09 h grandpa[1]: (APIServer pid=53) INFO 08-04 02:46:09 [metrics.py:125] SpecDecoding metrics: Mean "
    "acceptance length: 5.90, Current speculative depth: 5, Accepted throughput: 298.18 tokens/s, Drafted throughput: "
    "303.98 tokens/s, Accepted: 2982 tokens, Drafted: 3040 tokens, Per-position acceptance rate: 1.000, 0.998, 0.993, "
    "0.972, 0.941, Avg Draft acceptance rate: 98.1%",
    "Aug 04 02:49:49 h grandpa[1]: (APIServer pid=53) INFO 08-04 02:49:49 [metrics.py:103] KV Transfer metrics: "
    "vllm:kv_offload_store_bytes=1415335680, vllm:kv_offload_store_time=0.027173248052597042",
]


def test_prometheus_scrapes_the_exporter(tmp_path):
    log = tmp_path / "grandpa.log"
    log.write_text("\n".join(LINES) + "\n")
    with Exporter("--source", str(log), "--from-start") as ex:
        config = {
            "global": {"scrape_interval": "1s", "evaluation_interval": "1s"},
            "scrape_configs": [{"job_name": "vllm-log", "static_configs": [{"targets": [f"127.0.0.1:{ex.port}"]}]}],
        }
        with Prometheus(tmp_path, config) as prom:
            def got(expr):
                res = prom.query(expr)
                return float(res[0]["value"][1]) if res else None

            wait_until(lambda: got('up{job="vllm-log"}') == 1, 30, 0.5, what="target up")
            wait_until(lambda: got('vllm_log_kv_cache_tokens{server="grandpa"}') == 285336, 15, 0.5, what="kv tokens")
            assert got('vllm_log_generation_throughput_tokens_per_second{server="grandpa",engine="0"}') == 359.0
            assert got('vllm_log_spec_decode_draft_acceptance_ratio{server="grandpa"}') == 0.981
            assert got('vllm_log_spec_decode_position_acceptance_ratio{server="grandpa",position="4"}') == 0.941
            assert got('vllm_log_spec_decode_accepted_tokens_total{server="grandpa"}') == 2982
            rate = got('vllm_log_kv_offload_bytes_total{direction="store"} / vllm_log_kv_offload_seconds_total{direction="store"}')
            assert rate == pytest.approx(52.085e9, rel=1e-3)
            assert got('sum(vllm_log_errors_total{server="grandpa"})') == 0
            # born at 0 for every kind
            assert got('count(vllm_log_errors_total{server="grandpa"})') == len(ERROR_KINDS)
