"""What each engine's stats windows say: throughput, requests, KV cache usage, speculative decoding.

Emitted (label ``engine``: 0-63, or ``aggregated`` for vLLM's aggregated DP line):
    vllm_log_prompt_throughput_tokens_per_second, vllm_log_generation_throughput_tokens_per_second,
    vllm_log_requests_running, vllm_log_requests_waiting, vllm_log_requests_swapped (V0),
    vllm_log_kv_cache_usage_ratio{device} (the main KV cache: GPU memory, or host memory on vLLM's
    CPU backend), vllm_log_swap_kv_cache_usage_ratio (V0's CPU swap space),
    vllm_log_prefix_cache_hit_ratio, vllm_log_external_prefix_cache_hit_ratio, vllm_log_mm_cache_hit_ratio,
    vllm_log_computed_prompt_tokens_total (prompt tokens the engine computed: not prefix-cache hits,
    not KV transferred in), vllm_log_generation_tokens_total (both estimated: window average x window
    length), vllm_log_preemptions_total, vllm_log_stats_windows_total,
    vllm_log_engine_stalled (1: the last window was busy and no window came for 3 intervals)
    vllm_log_spec_decode_accepted_tokens_total, vllm_log_spec_decode_drafted_tokens_total,
    vllm_log_spec_decode_drafts_total (derived from each window's line: see spec_decode.drafts_of),
    vllm_log_spec_decode_mean_acceptance_length, vllm_log_spec_decode_draft_acceptance_ratio,
    vllm_log_spec_decode_position_acceptance_ratio{position}, vllm_log_spec_decode_depth,
    vllm_log_spec_decode_window_mean_acceptance_length (histogram),
    vllm_log_spec_decode_window_draft_acceptance_ratio (histogram)
"""

from __future__ import annotations

import time

from exporter.events import Event
from exporter.incidents import busy_window
from exporter.metrics.labels import DEVICES, POSITIONS, engine_label
from exporter.parsers.spec_decode import drafts_of

IDLE_AFTER_WINDOWS = 2  # stats intervals without a stats line before an engine's window gauges read 0
STALLED_AFTER_WINDOWS = 3  # ... and, when its last window was busy, before it reads stalled
ACCEPTANCE_LENGTH_BUCKETS = (1.0, 1.5, 2.0, 2.5, 3.0, 3.5, 4.0, 4.5, 5.0, 5.5, 6.0, 7.0, 8.0, 10.0, 16.0)
RATIO_BUCKETS = (0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.85, 0.9, 0.95, 0.98, 1.0)


def _device(fields: dict) -> str:
    """The main KV cache's device as a label: the word vLLM logs, within a fixed set."""
    d = fields.get("device")
    d = d.lower() if isinstance(d, str) else "gpu"
    return d if d in DEVICES else "other"


class EngineMetrics:
    """Part of exporter.metrics.Metrics: the engine families and their handlers."""

    def _declare_engine(self, SE: list[str]) -> None:
        c, w, h = self._counter, self._gauge, self._table.histogram
        # Window gauges: dropped for a server when it starts again, so nothing stale survives a restart.
        self.prompt_tps = w("vllm_log_prompt_throughput_tokens_per_second", "Average prompt throughput of the last stats "
                            "window, as logged: since vLLM 0.16 only the prompt tokens the engine computed (not "
                            "prefix-cache hits, not KV transferred in); before, every prompt token.", SE)
        self.gen_tps = w("vllm_log_generation_throughput_tokens_per_second", "Average generation throughput of the last stats window.", SE)
        self.running = w("vllm_log_requests_running", "Requests running at the last stats window.", SE)
        self.waiting = w("vllm_log_requests_waiting", "Requests waiting at the last stats window.", SE)
        self.swapped = w("vllm_log_requests_swapped", "Requests swapped to CPU at the last stats window (V0).", SE)
        self.kv_usage = w("vllm_log_kv_cache_usage_ratio", "Usage of the main KV cache at the last stats window (0-1): "
                          "GPU memory, or host memory on vLLM's CPU backend (device says which).", SE + ["device"])
        self.swap_kv = w("vllm_log_swap_kv_cache_usage_ratio", "Usage of V0's CPU swap space for KV blocks at the last "
                         "stats window (its 'CPU KV cache usage' beside the GPU one, 0-1).", SE)
        self.prefix_hit = w("vllm_log_prefix_cache_hit_ratio", "Prefix cache hit rate as logged (over recent requests, 0-1).", SE)
        self.ext_prefix_hit = w("vllm_log_external_prefix_cache_hit_ratio", "External (KV connector) prefix cache hit rate (0-1).", SE)
        self.mm_cache_hit = w("vllm_log_mm_cache_hit_ratio", "Multimodal cache hit rate as logged (0-1).", SE)
        self.prompt_tokens = c("vllm_log_computed_prompt_tokens", "Prompt tokens the engine computed (prefilled), "
                               "estimated as window average x window length. Since vLLM 0.16 the log's prompt "
                               "throughput leaves out prefix-cache hits and KV transferred in (before 0.16 it "
                               "counted every prompt token): compare with vLLM's "
                               "vllm:prompt_tokens_by_source_total{source=\"local_compute\"}, not vllm:prompt_tokens_total.", SE)
        self.gen_tokens = c("vllm_log_generation_tokens", "Generated tokens, estimated as window average x window length.", SE)
        self.preemptions = c("vllm_log_preemptions", "Preemptions reported by stats windows.", SE)
        self.windows = c("vllm_log_stats_windows", "Engine stats lines seen.", SE)
        self.stalled = w("vllm_log_engine_stalled", "1 when the engine's last stats window was busy (requests running "
                         "or tokens produced) and no stats line came for 3 intervals since: vLLM logs one every "
                         "interval while it works.", SE)

        self.spec_accepted = c("vllm_log_spec_decode_accepted_tokens", "Draft tokens accepted.", SE)
        self.spec_drafted = c("vllm_log_spec_decode_drafted_tokens", "Draft tokens proposed.", SE)
        self.spec_mean_len = w("vllm_log_spec_decode_mean_acceptance_length", "Mean acceptance length of the last window (includes the bonus token).", SE)
        self.spec_ratio = w("vllm_log_spec_decode_draft_acceptance_ratio", "Draft acceptance rate of the last window (0-1).", SE)
        self.spec_drafts = c("vllm_log_spec_decode_drafts", "Drafts proposed (one per request per step), derived from "
                             "each window's line: accepted / (sum of the per-position rates), or / (mean acceptance "
                             "length - 1) without them. vLLM's own is "
                             "vllm:spec_decode_num_drafts_total. Run-level mean acceptance length = 1 + accepted / drafts.", SE)
        self.spec_depth = w("vllm_log_spec_decode_depth", "Configured speculative depth: the most draft tokens proposed "
                            "per step (a custom build's 'Current speculative depth', else the number of per-position "
                            "rates). Drafted tokens / drafts gives what was proposed on average.", SE)
        self.spec_pos = w("vllm_log_spec_decode_position_acceptance_ratio", "Acceptance rate per draft position in the last window (0-1).", SE + ["position"])
        self.spec_len_hist = h("vllm_log_spec_decode_window_mean_acceptance_length", "Per-window mean acceptance length.", SE,
                               ACCEPTANCE_LENGTH_BUCKETS)
        self.spec_ratio_hist = h("vllm_log_spec_decode_window_draft_acceptance_ratio", "Per-window draft acceptance rate (0-1).", SE,
                                 RATIO_BUCKETS)

        self._last_window: dict[tuple[str, str], float] = {}  # log time of each engine's last window
        self._window_seen: dict[tuple[str, str], float] = {}  # when it was read (monotonic)
        self._busy: dict[tuple[str, str], bool] = {}  # whether that last window was busy
        self._position_keys: dict[tuple[str, str], list[tuple[str, str, str]]] = {}
        self._idle_values = tuple(fam.values for fam in (self.prompt_tps, self.gen_tps, self.running,
                                                          self.waiting, self.swapped))
        # what describes a running engine's load; hit rates describe the windows that were
        self._down_values = self._idle_values + (self.kv_usage.values, self.swap_kv.values)
        self._window_gauges = tuple((fam.values, name) for fam, name in (
            (self.prompt_tps, "prompt_tokens_per_second"), (self.gen_tps, "generation_tokens_per_second"),
            (self.running, "running"), (self.waiting, "waiting"), (self.swapped, "swapped"),
            (self.swap_kv, "swap_kv_cache_usage"),
            (self.prefix_hit, "prefix_cache_hit_rate"), (self.ext_prefix_hit, "external_prefix_cache_hit_rate"),
            (self.mm_cache_hit, "mm_cache_hit_rate"),
        ))

    def go_idle(self, now: float, log_time: bool = False) -> None:
        """vLLM logs no stats line while an engine is idle, so a window gauge would keep the last
        busy value for ever: after IDLE_AFTER_WINDOWS stats intervals without a line, an engine's
        throughput and request gauges read 0. ``now`` is monotonic time (the daemon), or log time
        with ``log_time`` (backfill)."""
        seen = self._last_window if log_time else self._window_seen
        limit = IDLE_AFTER_WINDOWS * self.stats_interval
        stall = STALLED_AFTER_WINDOWS * self.stats_interval
        stalled = self.stalled.values
        for key, t in seen.items():
            quiet = now - t
            if quiet > limit:
                for values in self._idle_values:
                    if values.get(key):
                        values[key] = 0.0
                if quiet > stall and self._busy.get(key) and key in stalled:
                    stalled[key] = 1.0

    def _forget_windows(self, server: str) -> None:
        for d in (self._last_window, self._window_seen, self._busy):
            for key in [k for k in d if k[0] == server]:
                del d[key]

    def _engine_down(self, server: str) -> None:
        """The engine died or was stopped: it runs nothing and holds no KV cache from now on (the
        last window's figures would otherwise stand until the next start), and it is not stalled."""
        for values in self._down_values:
            for key in [k for k in values if k[0] == server]:
                values[key] = 0.0
        for key in [k for k in self._busy if k[0] == server]:
            self._busy[key] = False
            if key in self.stalled.values:
                self.stalled.values[key] = 0.0

    def _hung(self, server: str) -> None:
        """vLLM said a process hangs: the server's engines read stalled until their next window."""
        keys = [k for k in self._busy if k[0] == server] or [(server, "0")]
        for key in keys:
            self.stalled.values[key] = 1.0

    def _engine(self, server: str, f: dict) -> str:
        if "aggregated_engines" in f:
            return "aggregated"
        return engine_label(f.get("engine", 0)) or self._overflow(server, "engine")

    # The handlers below run for every stats window of every engine: counters are bumped as dict
    # entries directly (CounterFamily.inc's checks are for callers that might pass anything).

    def _on_engine_stats(self, server: str, ev: Event, f: dict) -> None:
        eng = self._engine(server, f)
        key = (server, eng)
        if self._stats_off and server in self._stats_off:
            self._stats_came(server)
        for values, name in self._window_gauges:
            v = f.get(name)
            if v is not None:
                values[key] = float(v)
        v = f.get("kv_cache_usage")
        if v is not None:
            self.kv_usage.values[(server, eng, _device(f))] = float(v)
        # A window's length is the logging interval; a longer gap means vLLM hid idle windows at
        # DEBUG, and the window that ends now is still one interval long.
        self._window_seen[key] = time.monotonic()
        # a window logged after a stop or death (requests in flight at SIGTERM) must not arm the
        # stall check of an engine that is gone
        self._busy[key] = busy_window(f) and not self._gone(server)
        self.stalled.values[key] = 0.0
        last = self._last_window.get(key)
        dt = self.stats_interval
        if ev.ts is not None:
            if last is not None and 0 < ev.ts - last < dt:
                dt = ev.ts - last
            self._last_window[key] = ev.ts
        c = self.prompt_tokens.values
        c[key] = c.get(key, 0.0) + max(0.0, f.get("prompt_tokens_per_second", 0.0)) * dt
        c = self.gen_tokens.values
        c[key] = c.get(key, 0.0) + max(0.0, f.get("generation_tokens_per_second", 0.0)) * dt
        c = self.windows.values
        c[key] = c.get(key, 0.0) + 1.0
        c = self.preemptions.values
        c[key] = c.get(key, 0.0) + max(0, f.get("preemptions") or 0)

    def _on_prefix_cache(self, server: str, ev: Event, f: dict) -> None:
        v = f.get("gpu_prefix_cache_hit_rate")
        if v is not None:
            self._set(self.prefix_hit, (server, "0"), v)

    def _on_spec_decode(self, server: str, ev: Event, f: dict) -> None:
        eng = engine_label(f.get("engine", 0)) or self._overflow(server, "engine")
        key = (server, eng)
        acc, dra = f.get("accepted_tokens"), f.get("drafted_tokens")
        c = self.spec_accepted.values
        c[key] = c.get(key, 0.0) + max(0, acc or 0)
        c = self.spec_drafted.values
        c[key] = c.get(key, 0.0) + max(0, dra or 0)
        drafts = drafts_of(f)
        if drafts:
            c = self.spec_drafts.values
            c[key] = c.get(key, 0.0) + drafts
        mean_len = f.get("mean_acceptance_length")
        if mean_len is not None:
            self.spec_mean_len.values[key] = float(mean_len)
            self.spec_len_hist.observe(key, mean_len)
        ratio = f.get("draft_acceptance_rate")
        if ratio is None and acc is not None and dra:
            ratio = acc / dra
        if ratio is not None:
            self.spec_ratio.values[key] = float(ratio)
            self.spec_ratio_hist.observe(key, ratio)
        per_pos = f.get("per_position_acceptance_rate") or []
        depth = f.get("speculative_depth") or (len(per_pos) or None)
        if depth is not None:
            self.spec_depth.values[key] = float(depth)
        # Positions are bounded by the depth vLLM was configured with (a handful, at most ~16).
        values = self.spec_pos.values
        keys = self._position_keys.get(key)
        if keys is None:
            keys = self._position_keys[key] = [(server, eng, p) for p in POSITIONS]
        for k, v in zip(keys, per_pos):
            values[k] = float(v)
