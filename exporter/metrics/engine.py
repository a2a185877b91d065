"""What each engine's stats windows say: throughput, requests, KV cache usage.

Emitted (label ``engine``: 0-63, or ``aggregated`` for vLLM's aggregated DP line):
    vllm_log_prompt_throughput_tokens_per_second, vllm_log_generation_throughput_tokens_per_second,
    vllm_log_requests_running, vllm_log_requests_waiting, vllm_log_requests_swapped (V0),
    vllm_log_kv_cache_usage_ratio{device} (the main KV cache: GPU memory, or host memory on vLLM's
    CPU backend), vllm_log_swap_kv_cache_usage_ratio (V0's CPU swap space),
    vllm_log_prefix_cache_hit_ratio, vllm_log_external_prefix_cache_hit_ratio, vllm_log_mm_cache_hit_ratio,
    vllm_log_computed_prompt_tokens_total (prompt tokens the engine computed: not prefix-cache hits,
    not KV transferred in), vllm_log_generation_tokens_total (both window average x window length,
    the length read from the log: exporter.stream.windows; a first window counted once its length is
    decided there), vllm_log_stats_interval_seconds (the
    interval the log shows), vllm_log_preemptions_total (absent unless a line carried the field: V1's logger never
    prints it, see its HELP), vllm_log_stats_windows_total,
    vllm_log_requests_running_seconds_total and vllm_log_requests_waiting_seconds_total (each window's
    count x its length: what the window gauges said survives scrapes that missed them),
    vllm_log_engine_stalled (1: the last window was busy and no window came for 3 intervals),
    vllm_log_estimated_flops_per_second_per_device, vllm_log_estimated_memory_bytes_per_second_per_device
    (vLLM's analytic MFU line, 0.34+ with --enable-mfu-metrics)

Speculative decoding is exporter.metrics.spec_decode.
"""

from __future__ import annotations

import time

from exporter.parsers.events import Event
from exporter.stream.incidents import busy_window
from exporter.metrics.labels import DEVICES, engine_label
from exporter.stream.windows import StatsClock

IDLE_AFTER_WINDOWS = 2  # stats intervals without a stats line before an engine's window gauges read 0
STALLED_AFTER_WINDOWS = 3  # ... and, when its last window was busy, before it reads stalled
# An engine's first window waits for the log to show the interval (exporter.stream.windows); after a busy
# line the next comes one interval later, so an engine this long without a line has no more to show: its
# first window is counted with the best interval known. At least a minute: vLLM's interval may be longer
# than the configured one, which is all the exporter knows then.
SETTLE_AFTER_WINDOWS = 2.5
SETTLE_AFTER_SECONDS = 60.0


def _device(fields: dict) -> str:
    """The main KV cache's device as a label: the word vLLM logs, within a fixed set."""
    d = fields.get("device")
    d = d.lower() if isinstance(d, str) else "gpu"
    return d if d in DEVICES else "other"


class EngineMetrics:
    """Part of exporter.metrics.Metrics: the engine families and their handlers."""

    def _declare_engine(self, SE: list[str]) -> None:
        c, w = self._counter, self._gauge
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
        self.preemptions = c("vllm_log_preemptions", "Preemptions the stats lines reported ('Preemptions: N', "
                             "logged only in a window that had some), and V0's preemption warning (what its "
                             "total_num_cumulative_preemption grew by). Absent until a line carries it: vLLM's V1 "
                             "logger (0.11 to 0.32 at least) resets its count before it checks it, so the field "
                             "is never printed and the log cannot tell preemptions; vLLM's own "
                             "vllm:num_preemptions_total can.", SE)
        self.windows = c("vllm_log_stats_windows", "Engine stats lines seen.", SE)
        # A gauge's value lives only until the next window, and a scrape that fails or comes later
        # never sees it: these add up what every window said, so rate() over any range has it.
        self.running_s = c("vllm_log_requests_running_seconds", "Seconds requests spent running, summed over "
                           "requests: each stats window's running count x the window's length (the count is the "
                           "one at the window's end: an estimate). rate() is the mean number running over a "
                           "range, whatever scrapes missed.", SE)
        self.waiting_s = c("vllm_log_requests_waiting_seconds", "Seconds requests spent waiting for the scheduler, "
                           "summed over requests: each stats window's waiting count x the window's length (the "
                           "count is the one at the window's end: an estimate of vLLM's "
                           "vllm:request_queue_time_seconds_sum). rate() is the mean number waiting over a range, "
                           "whatever scrapes missed.", SE)
        self.est_flops = w("vllm_log_estimated_flops_per_second_per_device", "vLLM's analytic estimate of the "
                           "floating-point operations per second each device ran in the last window (its 'MFU: x "
                           "TF/s/device' line, --enable-mfu-metrics): from the model's shapes, not measured.", SE)
        self.est_bytes = w("vllm_log_estimated_memory_bytes_per_second_per_device", "vLLM's analytic estimate of the "
                           "bytes each device read and wrote per second in the last window (its 'MFU: ... GB/s/device').",
                           SE)
        self.stalled = w("vllm_log_engine_stalled", "1 when the engine's last stats window was busy (requests running "
                         "or tokens produced) and no stats line came for 3 intervals since: vLLM logs one every "
                         "interval while it works.", SE)

        self.stats_interval_g = w("vllm_log_stats_interval_seconds", "The stats interval the log shows (vLLM's "
                                  "VLLM_LOG_STATS_INTERVAL): the mean spacing of consecutive stats lines. Token "
                                  "counters use it (or the lines' own spacing, where stamps carry sub-second "
                                  "time) instead of the configured --stats-interval.", SE)
        # The log's own clock for window lengths; interval_warning(server, seen, configured) is told
        # once per server when the log's interval is not the configured one.
        self.interval_warning = None
        self._clock = StatsClock(self.stats_interval, warn=lambda *a: self.interval_warning and self.interval_warning(*a))
        self._last_window: dict[tuple[str, str], float] = {}  # log time of each engine's last window
        self._window_seen: dict[tuple[str, str], float] = {}  # when it was read (monotonic)
        self._busy: dict[tuple[str, str], bool] = {}  # whether that last window was busy
        # a first window's throughputs and request counts, until its length is decided (exporter.stream.windows)
        self._first_tps: dict[tuple[str, str], tuple] = {}
        # each engine's last window's throughputs and request counts: owed seconds of it are counted over them
        # (exporter.stream.windows take_owed: a window capped at the configured interval, then shown longer)
        self._last_tps: dict[tuple[str, str], tuple] = {}
        self._idle_values = tuple(fam.values for fam in (self.prompt_tps, self.gen_tps, self.running,
                                                          self.waiting, self.swapped, self.est_flops, self.est_bytes))
        # what describes a running engine's load; hit rates describe the windows that were
        self._down_values = self._idle_values + (self.kv_usage.values, self.swap_kv.values)
        self._window_gauges = tuple((fam.values, name) for fam, name in (
            (self.prompt_tps, "prompt_tokens_per_second"), (self.gen_tps, "generation_tokens_per_second"),
            (self.running, "running"), (self.waiting, "waiting"), (self.swapped, "swapped"),
            (self.swap_kv, "swap_kv_cache_usage"),
            (self.prefix_hit, "prefix_cache_hit_rate"), (self.ext_prefix_hit, "external_prefix_cache_hit_rate"),
            (self.mm_cache_hit, "mm_cache_hit_rate"),
        ))
        # after a stop or a death, a window the API server still logs describes the engine before it:
        # no load gauge takes it (the engine runs nothing and holds no KV cache now)
        down = {id(v) for v in self._down_values}
        self._window_gauges_gone = tuple((v, n) for v, n in self._window_gauges if id(v) not in down)

    def go_idle(self, now: float, log_time: bool = False) -> None:
        """vLLM logs no stats line while an engine is idle, so a window gauge would keep the last
        busy value for ever: after IDLE_AFTER_WINDOWS stats intervals without a line, an engine's
        throughput and request gauges read 0. ``now`` is monotonic time (the daemon), or log time
        with ``log_time`` (backfill)."""
        seen = self._last_window if log_time else self._window_seen
        interval = self._clock.interval  # the log's, per engine
        stalled = self.stalled.values
        # Under data parallel vLLM logs an engine's window only when that engine sent it outputs: an
        # engine given no more requests goes quiet after a window that still counted its last one
        # (vllm-ascend#10049 shows engines missing from the log while /metrics has them). While
        # another engine of the same server still logs, one engine's silence is no stall; a hung DP
        # engine is still reported by vLLM's own hang warnings (shm broadcast waits).
        logging = {k[0] for k, t in seen.items() if now - t <= STALLED_AFTER_WINDOWS * interval(k)}
        for key, t in seen.items():
            quiet = now - t
            iv = interval(key)
            stall = STALLED_AFTER_WINDOWS * iv
            if quiet > IDLE_AFTER_WINDOWS * iv:
                for values in self._idle_values:
                    if values.get(key):
                        values[key] = 0.0
                if quiet > stall and self._busy.get(key) and key in stalled and key[0] not in logging:
                    stalled[key] = 1.0
        if self._first_tps:  # first windows of engines gone quiet: no line will decide them
            for key in list(self._first_tps):
                t = seen.get(key)
                if t is not None and now - t > max(SETTLE_AFTER_WINDOWS * interval(key), SETTLE_AFTER_SECONDS):
                    self._clock.settle(key[0], key)
                    self._count_first(key)

    def settle_windows(self, server: str) -> None:
        """No more lines of ``server`` will decide its first windows (its input ended, it stopped): they
        are counted now, with the best interval known."""
        self._clock.settle(server)
        for key in [k for k in self._first_tps if k[0] == server]:
            self._count_first(key)

    def _count_first(self, key: tuple) -> None:
        """A first window, decided: its throughputs and request counts over its length, once."""
        self._count(self._first_tps.pop(key, None), key, self._clock.take_first(key))

    def _count(self, figures: tuple | None, key: tuple, dt: float) -> None:
        """A window's throughputs and request counts (prompt, generation, running, waiting) over ``dt`` seconds."""
        if not dt or figures is None:
            return
        for values, per_second in zip((self.prompt_tokens.values, self.gen_tokens.values, self.running_s.values,
                                       self.waiting_s.values), figures):
            if per_second is not None:
                values[key] = values.get(key, 0.0) + per_second * dt

    def _forget_windows(self, server: str) -> None:
        self._clock.forget(server)  # (a first window still pending is decided there, and counted here)
        for key in [k for k in self._first_tps if k[0] == server]:
            self._count_first(key)
        for d in (self._last_window, self._window_seen, self._busy, self._last_tps):
            for key in [k for k in d if k[0] == server]:
                del d[key]

    def _engine_ready(self, server: str, ev: Event) -> None:
        """An engine core said it is ready (its init engine line): the first stats window starts."""
        self._clock.ready(server, ev.ts)

    def _on_ready(self, server: str, ev: Event, f: dict) -> None:
        if f.get("signature") == "Application startup complete":
            self._clock.serving(server, ev.ts)

    def _engine_down(self, server: str) -> None:
        """The engine died or was stopped: it runs nothing and holds no KV cache from now on (the
        last window's figures would otherwise stand until the next start), and it is not stalled. Its
        first windows still pending are counted now."""
        self.settle_windows(server)
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
        gone = self._gone(server)
        for values, name in self._window_gauges_gone if gone else self._window_gauges:
            v = f.get(name)
            if v is not None:
                values[key] = float(v)
        v = f.get("kv_cache_usage")
        if v is not None and not gone:
            self.kv_usage.values[(server, eng, _device(f))] = float(v)
        self._window_seen[key] = time.monotonic()
        # a window logged after a stop or death (requests in flight at SIGTERM) must not arm the
        # stall check of an engine that is gone
        self._busy[key] = busy_window(f) and not gone
        self.stalled.values[key] = 0.0
        prompt = max(0.0, f.get("prompt_tokens_per_second") or 0.0)
        gen = max(0.0, f.get("generation_tokens_per_second") or 0.0)
        dt = self._clock.window(key, ev.ts, bool(prompt or gen))
        running, waiting = f.get("running"), f.get("waiting")
        if self._clock.first_pending(key):
            if key not in self._first_tps:  # the first line: counted once its window's length is decided
                self._first_tps[key] = (prompt, gen, None if running is None else max(0, running),
                                        None if waiting is None else max(0, waiting))
        elif key in self._first_tps:  # decided by this line (the log showed the interval)
            self._count_first(key)
        if ev.ts is not None:
            self._last_window[key] = ev.ts
        iv = self._clock.shown(key)
        if iv is not None:
            self.stats_interval_g.values[key] = iv
            if self._clock.owed:  # the last window, counted by the configured interval, was longer: vLLM's
                self._count(self._last_tps.pop(key, None), key, self._clock.take_owed(key))
        else:  # (until the log shows the interval, a window may be owed seconds at the next line)
            self._last_tps[key] = (prompt, gen, None if running is None else max(0, running),
                                   None if waiting is None else max(0, waiting))
        c = self.prompt_tokens.values
        c[key] = c.get(key, 0.0) + prompt * dt
        c = self.gen_tokens.values
        c[key] = c.get(key, 0.0) + gen * dt
        c = self.windows.values
        c[key] = c.get(key, 0.0) + 1.0
        if running is not None:
            c = self.running_s.values
            c[key] = c.get(key, 0.0) + max(0, running) * dt
        if waiting is not None:
            c = self.waiting_s.values
            c[key] = c.get(key, 0.0) + max(0, waiting) * dt
        p = f.get("preemptions")
        if p is not None:  # absent until a line carries the field: see the family's HELP
            c = self.preemptions.values
            c[key] = c.get(key, 0.0) + max(0, p)
        mfu = f.get("mfu")
        if isinstance(mfu, dict):  # vllm-project/vllm#30738's segment inside the stats line
            self._on_mfu(server, ev, mfu, eng)

    def _on_mfu(self, server: str, ev: Event, f: dict, eng: str | None = None) -> None:
        key = (server, eng or self._engine(server, f))
        for fam, name in ((self.est_flops, "flops_per_second"), (self.est_bytes, "bytes_per_second")):
            v = f.get(name)
            if v is not None:
                fam.values[key] = float(v)

    def _on_prefix_cache(self, server: str, ev: Event, f: dict) -> None:
        v = f.get("gpu_prefix_cache_hit_rate")
        if v is not None:
            self._set(self.prefix_hit, (server, "0"), v)
