"""KV offload and KV connectors: vLLM's own offloading lines and LMCache's.

Emitted:
    vllm_log_kv_offload_bytes_total{direction="store|load"}, vllm_log_kv_offload_seconds_total{direction},
    vllm_log_kv_offload_throughput_bytes_per_second{direction} (histogram of per-interval rates),
    vllm_log_kv_offload_cpu_cache_usage_ratio, vllm_log_kv_offload_pool_bytes,
    vllm_log_kv_connector_transfers_total{result="ok|failed"},
    vllm_log_lmcache_bytes_total{direction="store|retrieve"}, vllm_log_lmcache_seconds_total{direction},
    vllm_log_lmcache_tokens_total{direction}, vllm_log_lmcache_requested_tokens_total,
    vllm_log_lmcache_hit_tokens_total, vllm_log_lmcache_store_skipped_tokens_total,
    vllm_log_kv_connector_failures_total{connector="nixl|mooncake|moriio|p2p_nccl|simple|lmcache|hf3fs|umbp|other",
    reason} (a KV connector's transfer, handshake, timeout, expired lease, notification, store or sender-thread
    failure, a slow submission, a peer's buffer full, a circuit breaker opened),
    vllm_log_kv_offload_failures_total{reason} (vLLM's KV offload tiers: transfer, io, lookup, tier_poll_failed,
    tier_poll_stopped, tier_poll_stall, stuck, peer_down, peer_timeout),
    vllm_log_kv_offload_store_refusals_total (stores the offloading connector turned away for want of room:
    'Request ...: cannot store chunks', vLLM's vllm:kv_offload_allocation_failure),
    vllm_log_mooncake_store_load_keys_total{tier="memory|disk|unknown"},
    vllm_log_mooncake_store_load_bytes_total{tier}, vllm_log_mooncake_store_load_failed_keys_total (Mooncake's
    store connector's loads by the tier that held them, with VLLM_MOONCAKE_STORE_TIER_LOG=1),
    vllm_log_ec_connector_failures_total{connector="nixl|mooncake",reason} (an encoder-cache connector's control
    channel, transfer, timeout, handshake, notification or store failure, or a request failed for want of its
    remote encoding)
"""

from __future__ import annotations

from exporter.parsers.events import Event

# No interconnect moves a petabyte a second: a faster rate is a nonsense time (a hostile
# `kv_offload_store_time=1e-31`), left out of the histogram (its bytes and seconds still count).
MAX_RATE = 1e15

# Per-interval offload rates: PCIe 3 x16 (~16 GB/s) to PCIe 5 x16 (~64 GB/s) and NVLink-C2C beyond.
THROUGHPUT_BUCKETS = (1e8, 5e8, 1e9, 2.5e9, 5e9, 1e10, 1.5e10, 2e10, 3e10, 4e10, 5e10, 5.5e10, 6e10, 8e10, 1.2e11, 2e11)
_DIRECTIONS = (("store", "store_bytes", "store_seconds"), ("load", "load_bytes", "load_seconds"))
CONNECTORS = ("nixl", "mooncake", "moriio", "p2p_nccl", "simple", "lmcache", "hf3fs", "umbp")
CONNECTOR_REASONS = ("transfer", "handshake", "timeout", "expired", "store", "sender_exit", "unavailable", "notify",
                     "slow", "buffer_full", "circuit_open")
EC_CONNECTORS = ("nixl", "mooncake")
EC_REASONS = ("control", "transfer", "missing", "timeout", "handshake", "notify", "store")
OFFLOAD_REASONS = ("transfer", "io", "lookup", "tier_poll_failed", "tier_poll_stopped", "tier_poll_stall", "stuck",
                   "peer_down", "peer_timeout")


def _bounded(value, allowed) -> str:
    return value if value in allowed else "other"


class OffloadMetrics:
    """Part of exporter.metrics.Metrics: the KV offload families and their handlers."""

    def _declare_offload(self, S: list[str]) -> None:
        c, w = self._counter, self._gauge
        D = S + ["direction"]
        self.kv_bytes = c("vllm_log_kv_offload_bytes", "KV offload bytes moved (store: GPU to CPU, load: CPU to GPU).", D)
        self.kv_seconds = c("vllm_log_kv_offload_seconds", "KV offload transfer time as recorded by vLLM.", D)
        self.kv_tput = self._table.histogram(
            "vllm_log_kv_offload_throughput_bytes_per_second", "Per-interval KV offload rate (bytes / recorded time).", D,
            THROUGHPUT_BUCKETS)
        self.kv_cpu_usage = w("vllm_log_kv_offload_cpu_cache_usage_ratio", "CPU offload cache usage (0-1).")
        self.kv_pool = w("vllm_log_kv_offload_pool_bytes", "Size of the CPU KV offload pool created at start-up.")
        self.kv_connector = c("vllm_log_kv_connector_transfers", "KV connector (NIXL, Mooncake) transfers.", S + ["result"])
        self.lmcache_bytes = c("vllm_log_lmcache_bytes", "KV bytes LMCache moved (store: to its cache, retrieve: back "
                               "to the GPU).", D)
        self.lmcache_seconds = c("vllm_log_lmcache_seconds", "Time LMCache reported for those moves.", D)
        self.lmcache_tokens = c("vllm_log_lmcache_tokens", "Tokens LMCache stored or retrieved.", D)
        self.lmcache_requested = c("vllm_log_lmcache_requested_tokens", "Prompt tokens LMCache looked up.")
        self.lmcache_hit = c("vllm_log_lmcache_hit_tokens", "Of those, tokens LMCache had (its hit tokens).")
        self.lmcache_store_skipped = c("vllm_log_lmcache_store_skipped_tokens", "Leading tokens a store left out "
                                       "because LMCache already held them ('Storing KV cache for N out of M tokens "
                                       "(skip_leading_tokens=S)'); the tokens stored are in vllm_log_lmcache_tokens_total.")
        self.kv_connector_failures = c("vllm_log_kv_connector_failures", "Failures a KV connector (prefill/decode "
                                       "disaggregation, KV stores) logged, by connector (nixl, mooncake, moriio, p2p_nccl, "
                                       "simple: V0's, lmcache: its multiprocess adapter, hf3fs, umbp, other) and reason "
                                       "(transfer, handshake, timeout, expired, store, sender_exit, unavailable, notify, "
                                       "slow, buffer_full, circuit_open): KV that did not arrive is computed again or fails "
                                       "the request.", S + ["connector", "reason"])
        self.kv_offload_failures = c("vllm_log_kv_offload_failures", "Failures and stalls vLLM's KV offload tiers "
                                     "logged, by reason (transfer, io, lookup, tier_poll_failed, tier_poll_stopped, "
                                     "tier_poll_stall, stuck, peer_down, peer_timeout).", S + ["reason"])
        self.kv_offload_store_refusals = c("vllm_log_kv_offload_store_refusals", "Stores of a request's KV the "
                                           "offloading connector turned away for want of room in its tier ('Request "
                                           "...: cannot store chunks', WARNING; the ids are not kept): vLLM's own "
                                           "vllm:kv_offload_allocation_failure counts the same. The KV stays on the "
                                           "GPU only; a later hit recomputes it.")
        T = S + ["tier"]
        self.mooncake_load_keys = c("vllm_log_mooncake_store_load_keys", "KV keys Mooncake's store connector loaded, "
                                    "by the tier its store held them in (memory, disk, unknown), from its 'Mooncake "
                                    "load tier summary' lines (VLLM_MOONCAKE_STORE_TIER_LOG=1).", T)
        self.mooncake_load_bytes = c("vllm_log_mooncake_store_load_bytes", "Bytes of those loads, by tier.", T)
        self.mooncake_load_failed = c("vllm_log_mooncake_store_load_failed_keys", "Keys of those loads that failed "
                                      "(the KV is computed again).")
        self.ec_connector_failures = c("vllm_log_ec_connector_failures", "Failures an encoder-cache (EC) connector "
                                       "of encoder disaggregation logged, by connector (nixl, mooncake) and reason "
                                       "(control, transfer, missing: a request failed for want of its remote "
                                       "encoding, timeout, handshake, notify, store): an encoder output that did not "
                                       "arrive is computed again or fails the request.", S + ["connector", "reason"])

    def _touch_offload(self, server: str) -> None:
        for direction in ("store", "load"):
            self.kv_bytes.touch((server, direction))
            self.kv_seconds.touch((server, direction))

    def _on_kv_transfer(self, server: str, ev: Event, f: dict) -> None:
        kv_bytes, kv_seconds = self.kv_bytes.values, self.kv_seconds.values
        for direction, bytes_key, seconds_key in _DIRECTIONS:
            b, s = f.get(bytes_key), f.get(seconds_key)
            if b is None and s is None:
                continue
            key = (server, direction)
            if b is not None and b > 0:
                kv_bytes[key] = kv_bytes.get(key, 0.0) + b
            if s is not None and s > 0:
                kv_seconds[key] = kv_seconds.get(key, 0.0) + s
            if b and s and b > 0 and s > 0 and b / s <= MAX_RATE:
                self.kv_tput.observe(key, b / s)
        usage = f.get("cpu_cache_usage")
        if usage is not None:
            self._set(self.kv_cpu_usage, (server,), usage)
        if f.get("transfers"):
            self.kv_connector.inc((server, "ok"), f["transfers"])
        if f.get("failed_transfers"):
            self.kv_connector.inc((server, "failed"), f["failed_transfers"])

    def _on_lmcache(self, server: str, ev: Event, f: dict) -> None:
        op = f.get("op")
        if op in ("store", "retrieve"):
            # (a retrieve logged without its size and cost, or the pre-v1 engine's chunk lines, hold only some
            # of these: a series the log never gave stays absent rather than a measured 0; bytes and seconds
            # go together, so their ratio is over the same moves)
            key = (server, op)
            if "bytes" in f and "seconds" in f:
                self.lmcache_bytes.inc(key, f["bytes"])
                self.lmcache_seconds.inc(key, f["seconds"])
            if "tokens" in f:
                self.lmcache_tokens.inc(key, f["tokens"])
        elif op == "store_begin":
            self.lmcache_store_skipped.inc((server,), f.get("skipped_tokens", 0))
        elif op == "lookup":
            self.lmcache_requested.inc((server,), f.get("total_tokens", 0))
            self.lmcache_hit.inc((server,), f.get("hit_tokens", 0))

    def _on_kv_connector_failure(self, server: str, ev: Event, f: dict) -> None:
        self.kv_connector_failures.inc((server, _bounded(f.get("connector"), CONNECTORS),
                                        _bounded(f.get("reason"), CONNECTOR_REASONS)))

    def _on_kv_offload_failure(self, server: str, ev: Event, f: dict) -> None:
        self.kv_offload_failures.inc((server, _bounded(f.get("reason"), OFFLOAD_REASONS)))

    def _on_kv_offload_store_refused(self, server: str, ev: Event, f: dict) -> None:
        self.kv_offload_store_refusals.inc((server,))

    def _on_mooncake_load_tiers(self, server: str, ev: Event, f: dict) -> None:
        for tier in ("memory", "disk", "unknown"):
            if f.get(tier + "_keys"):
                self.mooncake_load_keys.inc((server, tier), f[tier + "_keys"])
            if f.get(tier + "_bytes"):
                self.mooncake_load_bytes.inc((server, tier), f[tier + "_bytes"])
        self.mooncake_load_failed.inc((server,), f.get("failed_keys", 0))

    def _on_ec_connector_failure(self, server: str, ev: Event, f: dict) -> None:
        self.ec_connector_failures.inc((server, _bounded(f.get("connector"), EC_CONNECTORS),
                                        _bounded(f.get("reason"), EC_REASONS)))
