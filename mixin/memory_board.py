"""The Memory and KV board: capacity found at start-up, KV offload, LMCache, and KV that did not arrive."""

from __future__ import annotations

from mixin import config as C
from mixin.board import BAD, GOOD, S, SE, TOKS, Board

# vLLM's own series: its scrape job is the vllm_job variable
V = 'cluster=~"$cluster", job=~"$vllm_job", host=~"$host", server=~"$server"'

def memory_kv() -> dict:
    b = Board("vllm-log-memory-kv", "vLLM / Memory and KV",
              "Start-up capacity facts (KV tokens, concurrency, memory split) and KV offload over PCIe.",
              ["vllm-log-exporter", "vllm"])
    b.row("Capacity found at start-up")
    b.stat("KV cache capacity", [(f"vllm_log_kv_cache_tokens{{{SE}}}", "{{server}} e{{engine}} {{device}}")],
           "suffix: tokens", decimals=0,
           description="Tokens the main KV cache of each engine holds, as found by the start-up profile: GPU memory, "
                       "or host memory on vLLM's CPU backend (the device in the name).")
    b.stat("Max concurrency", [(f"vllm_log_max_concurrency{{{SE}}}", "{{server}} e{{engine}}")], "suffix:x", decimals=2,
           steps=[(None, BAD), (1, GOOD)],
           description="Requests of the full configured length that fit in each engine's KV cache at once; below 1 a "
                       "full-length request cannot be served.")
    b.stat("Context length", [(f"vllm_log_max_model_len_tokens{{{SE}}}", "{{server}} e{{engine}}"),
                              (f"vllm_log_max_model_len_requested_tokens{{{SE}}}", "asked for {{server}} e{{engine}}")],
           "suffix: tokens", decimals=0,
           description="Tokens per request the server serves (max_model_len) and, when vLLM cut it to fit its KV cache "
                       "(--max-model-len auto, VllmMaxModelLenReduced), the length asked for: longer requests get HTTP 400.")
    b.stat("KV cache memory (all workers)", [(f"sum by (server) (vllm_log_kv_cache_memory_bytes{{{S}}})", "{{server}}")],
           "bytes", description="GPU memory the workers gave to the KV cache, summed.")
    b.stat("Engine init", [(f"vllm_log_engine_init_seconds{{{SE}}}", "init {{server}} e{{engine}}"),
                           (f"vllm_log_engine_compile_seconds{{{SE}}}", "compile {{server}} e{{engine}}")], "s",
           description="Profile, KV cache creation and warm-up at start, and the compilation part of it, per engine "
                       "(data-parallel rank).")
    b.stat("Weights download", [(f"vllm_log_weights_download_seconds{{{S}}}", "{{server}} {{worker}}")], "s",
           description="Time fetching the model's weights from the hub at start-up (logged only when they were not "
                       "cached: a start that downloads every time wants a persistent cache volume).")
    b.stat("CPU offload pool", [(f"vllm_log_kv_offload_pool_bytes{{{S}}}", "{{server}}")], "bytes",
           description="Host memory set aside for KV offload at start-up.")
    b.bargauge("GPU memory split per worker",
               [(f"vllm_log_model_weights_bytes{{{S}}}", "{{server}} {{worker}} weights"),
                (f"vllm_log_kv_cache_memory_bytes{{{S}}}", "{{server}} {{worker}} kv_cache"),
                (f"vllm_log_startup_memory_bytes{{{S}}}", "{{server}} {{worker}} {{component}}")], "bytes", w=12, h=9,
               description="Weights, KV cache, peak activation, non-torch memory and CUDA graphs per worker (the "
                           "multimodal encoder's CUDA graphs as encoder_cuda_graph).")
    b.bargauge("Model weights per worker", [(f"vllm_log_model_weights_bytes{{{S}}}", "{{server}} {{worker}}")], "bytes",
               w=12, h=9, description="GPU memory the model's weights take on each worker.")
    b.bargauge("Last CUDA OOM per GPU", [
        (f"vllm_log_oom_requested_bytes{{{S}}}", "{{server}} GPU {{gpu}} asked for"),
        (f"vllm_log_oom_free_bytes{{{S}}}", "{{server}} GPU {{gpu}} free"),
    ], "bytes", w=12, h=6, steps=[(None, BAD)],
        description="What the last OOM on each GPU tried to allocate, and what PyTorch said was free then.")
    b.row("KV offload")
    b.timeseries("Offload rate (bytes / recorded copy time)", [
        (f"sum by (server, direction) (rate(vllm_log_kv_offload_bytes_total{{{S}}}[$__rate_interval]))"
         f" / sum by (server, direction) (rate(vllm_log_kv_offload_seconds_total{{{S}}}[$__rate_interval]))",
         "{{server}} {{direction}}"),
    ], "Bps", min_=0, steps=[(None, BAD), (C.KV_OFFLOAD_MIN_BYTES_PER_SECOND, GOOD)], line=True,
        description="Store is GPU to host RAM, load is host RAM to GPU; PCIe 5.0 x16 is ~64 GB/s one way. The dashed "
                    f"line is VllmKvOffloadSlow's {C.KV_OFFLOAD_MIN_BYTES_PER_SECOND / 1e9:.0f} GB/s.")
    b.timeseries("Offload bytes moved", [
        (f"sum by (server, direction) (rate(vllm_log_kv_offload_bytes_total{{{S}}}[$__rate_interval]))", "{{server}} {{direction}}"),
    ], "Bps", min_=0, description="Bytes moved per second of wall time, per direction.")
    b.heatmap("Per-interval offload rate",
              f"sum by (le) (increase(vllm_log_kv_offload_throughput_bytes_per_second_bucket{{{S}}}[$__rate_interval]))", "Bps",
              description="How each logged interval's rate (bytes / its recorded time) spreads over time.")
    b.timeseries("CPU offload cache usage", [(f"vllm_log_kv_offload_cpu_cache_usage_ratio{{{S}}}", "{{server}}")],
                 "percentunit", min_=0, max_=1, description="Share of the host offload pool in use.")
    b.row("KV that did not arrive")
    b.timeseries("KV connector failures (disaggregation)", [
        (f"sum by (server, connector, reason) (increase(vllm_log_kv_connector_failures_total{{{S}}}[$__rate_interval]))",
         "{{server}} {{connector}} {{reason}}"),
    ], "short", min_=0, decimals=0, custom={"drawStyle": "bars", "fillOpacity": 70},
        description="Failures KV connectors logged (NIXL, Mooncake, MoRIIO, P2P NCCL, V0's simple connector, LMCache's "
                    "multiprocess adapter, hf3fs, UMBP): transfers, handshakes and bootstrap, timeouts, leases that "
                    "expired before the decoder pulled, lost notifications, store operations, a sender thread that "
                    "exited, slow submissions, a peer's buffer full, a circuit breaker opened. VllmKvTransferFailing "
                    "fires on several transfers, handshakes or timeouts in 10 minutes.")
    b.timeseries("KV offload failures and stalls", [
        (f"sum by (server, reason) (increase(vllm_log_kv_offload_failures_total{{{S}}}[$__rate_interval]))",
         "{{server}} {{reason}}"),
    ], "short", min_=0, decimals=0, custom={"drawStyle": "bars", "fillOpacity": 70},
        description="vLLM's own KV offload tiers: transfers and I/O that failed, lookups, the tier-poll thread failing, "
                    "stopping or stalled (peers then wait for engine steps), drains stuck on a transfer, P2P peers down.")
    b.timeseries("KV offload stores turned away (log and vLLM)", [
        (f"sum by (server) (increase(vllm_log_kv_offload_store_refusals_total{{{S}}}[$__rate_interval]))",
         "log {{server}}"),
        (f"sum by (server) (increase(vllm:kv_offload_allocation_failure_total{{{V}}}[$__rate_interval]))",
         "vLLM {{server}}"),
    ], "short", min_=0, decimals=0, custom={"drawStyle": "bars", "fillOpacity": 70},
        description="Stores of a request's KV the offloading connector turned away for want of room in its tier: the "
                    "log's 'Request ...: cannot store chunks' (vllm_log_kv_offload_store_refusals_total) beside vLLM's "
                    "own vllm:kv_offload_allocation_failure, which counts the same. The KV stays on the GPU only: a "
                    "later prefix hit computes it again. A steady stream: a tier too small for the traffic.")
    b.timeseries("Encoder-cache connector failures (encoder disaggregation)", [
        (f"sum by (server, connector, reason) (increase(vllm_log_ec_connector_failures_total{{{S}}}[$__rate_interval]))",
         "{{server}} {{connector}} {{reason}}"),
    ], "short", min_=0, decimals=0, custom={"drawStyle": "bars", "fillOpacity": 70},
        description="Encoder outputs (images, audio embeddings) that did not arrive from the encoder server: the EC "
                    "connectors' control channel, NIXL reads failed or timed out, Mooncake pushes that never came, "
                    "the embedding store, and requests failed for want of their remote encoding (missing).")
    b.timeseries("Mooncake store loads by tier", [
        (f"sum by (server, tier) (rate(vllm_log_mooncake_store_load_keys_total{{{S}}}[$__rate_interval]))",
         "{{server}} {{tier}}"),
        (f"sum by (server) (rate(vllm_log_mooncake_store_load_failed_keys_total{{{S}}}[$__rate_interval]))",
         "{{server}} failed"),
    ], "short", min_=0, description="KV keys Mooncake's store connector loaded per second, by the tier that held them "
                                    "(memory or disk: a disk tier is slower), and the keys that failed (computed "
                                    "again). Logged only with VLLM_MOONCAKE_STORE_TIER_LOG=1.")
    b.row("LMCache")
    b.timeseries("LMCache rate (bytes / recorded time)", [
        (f"sum by (server, direction) (rate(vllm_log_lmcache_bytes_total{{{S}}}[$__rate_interval]))"
         f" / sum by (server, direction) (rate(vllm_log_lmcache_seconds_total{{{S}}}[$__rate_interval]))",
         "{{server}} {{direction}}"),
    ], "Bps", min_=0, description="LMCache's stores (GPU to its cache) and retrievals (back to the GPU): bytes over "
                                  "the time LMCache recorded, not its own logged throughput.")
    b.timeseries("LMCache hit ratio", [
        (f"sum by (server) (rate(vllm_log_lmcache_hit_tokens_total{{{S}}}[$__rate_interval]))"
         f" / sum by (server) (rate(vllm_log_lmcache_requested_tokens_total{{{S}}}[$__rate_interval]))", "{{server}}"),
    ], "percentunit", min_=0, max_=1, description="Of the prompt tokens LMCache looked up, the share it had cached.")
    b.timeseries("LMCache tokens moved", [
        (f"sum by (server, direction) (rate(vllm_log_lmcache_tokens_total{{{S}}}[$__rate_interval]))",
         "{{server}} {{direction}}"),
    ], TOKS, min_=0, description="Tokens of KV cache LMCache stored and retrieved per second.")
    return b.model()
