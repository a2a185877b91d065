"""Statistics of a whole run, built from events in one pass (pure: events in, numbers out).

The figures are the ones the seed article's author computed by hand from a journald log:
throughput over stats windows, spec-decode acceptance, KV-offload rates, the start-up capacity facts
and what follows from them, HTTP status counts and errors. Memory does not grow with the log's
length: per-window values whose median is shown are kept as exact multisets, the rest as running
sums and extremes, and the charts' series are decimated (exporter.offline.report.series).
"""

from __future__ import annotations

import re
from typing import Any

from exporter.parsers.events import ERROR_KINDS, KINDS, Event
from exporter.stream.incidents import busy_window, counts_as_traceback
from exporter.parsers.spec_decode import drafts_of
from exporter.offline.report.cost import WindowTokens
from exporter.offline.report.engine_ops import EngineOps
from exporter.offline.report.rules import RuleStats
from exporter.offline.report.series import BucketCounts, Tally, Trace
from exporter.offline.report.summary import Summary


class Transfers:
    """KV-offload intervals of one direction: sums, extremes, the largest, and a rate chart."""
    __slots__ = ("n", "bytes", "seconds", "min_rate", "max_rate", "largest", "rates")

    def __init__(self):
        self.n = 0
        self.bytes = 0  # as sum() starts: the same type and value as summing the intervals
        self.seconds = 0
        self.min_rate = float("inf")
        self.max_rate = float("-inf")
        self.largest: tuple[float, float] | None = None  # (bytes, seconds) of the interval moving most
        self.rates = Trace()

    def add(self, b: float, s: float, ts: float | None) -> None:
        self.n += 1
        self.bytes += b
        self.seconds += s
        rate = b / s
        self.min_rate = min(self.min_rate, rate)
        self.max_rate = max(self.max_rate, rate)
        if self.largest is None or b > self.largest[0]:
            self.largest = (b, s)
        self.rates.add(ts, rate)

    def __bool__(self) -> bool:
        return self.n > 0


_OOM_NUMBERS = ("gpu", "tried_to_allocate_bytes", "free_bytes", "total_capacity_bytes", "in_use_bytes",
                "allocated_bytes", "reserved_bytes", "exceeded_bytes", "device")

# Start-up facts: before --since they still describe the server the window sees.
FOLD_EVERY = 1024
_NAN = float("nan")

# engine arguments kept under config.settings (from the config dump and "non-default args")
SETTING_KEYS = ("data_parallel_size", "pipeline_parallel_size", "decode_context_parallel_size", "max_num_batched_tokens",
                "gpu_memory_utilization", "num_speculative_tokens", "enable_prefix_caching", "dtype",
                "served_model_name", "enforce_eager", "speculative_method")

MAX_EARLIER_CONFIGS = 50  # earlier starts' configurations kept (a restart loop logs thousands)
FACT_KINDS = frozenset({"version", "model", "engine_config", "kv_cache_size", "gpu_blocks", "max_concurrency",
                        "kv_cache_memory", "model_load", "memory_profile", "init_engine", "offload_pool"})


# a LoRA adapter's name as the report shows it: a plain name (as exporter.metrics.requests bounds its label)
_ADAPTER = re.compile(r"[\w.:@+/-]{1,64}")


# failed starts whose reason the report says in the exception line's own words (which path, which port)
SAID_IN_WORDS = ("model_not_found", "model_access", "address_in_use")


class RunStats(Summary):
    def __init__(self, since: float | None = None, until: float | None = None, stats_interval: float = 10.0,
                 rules=(), window_tokens: bool = True):
        self.since, self.until = since, until
        # the user's rules (exporter.config.rules specs): a section each, when there are any
        self.rules = RuleStats(rules) if rules else None
        self.stats_interval = stats_interval
        self._windows: dict = {}  # engine -> (log time of its last window, was it busy)
        self.stalls: list[dict] = []
        self.facts: dict[str, Any] = {}
        # engine settings the report's tables do not show (DP size, batched tokens, GPU memory
        # utilisation...): in the JSON under config.settings, for `compare`
        self.settings: dict[str, Any] = {}
        self.workers: dict[str, dict[str, float]] = {}
        # facts, settings and workers are the current start's; each earlier start's are kept here
        # (the last MAX_EARLIER_CONFIGS), so the report says which start a configuration is and shows each
        self.config_started: float | None = None  # when the current configuration's start was logged
        self.earlier_configs: list[dict] = []
        self.starts: list[float | None] = []
        # generation throughput: windows, peak, the non-zero ones' sum and count, and the chart
        self.gen = Trace()
        self.gen_windows = 0
        self.gen_peak: float | None = None
        self.gen_nonzero = [0, 0]  # [count, sum]
        # what a price per hour is divided by (exporter.offline.report.cost): the busy windows' generation throughput
        self.gen_busy = Tally()
        self.single = Tally()  # generation throughput of windows with exactly one request running
        self.by_running: dict[int, Tally] = {}  # the same for every number of running requests (like with like)
        self.prompt = Trace()
        self.prompt_peak: float | None = None
        self.kv_usage = Trace()
        self.kv_usage_peak: float | None = None  # of the main KV cache (GPU, or host memory on the CPU backend)
        self.kv_device = "GPU"
        self.prefix_hit: float | None = None  # peaks
        self.ext_prefix_hit: float | None = None
        self.accept_len = Trace()
        self.accept_len_values = Tally()
        self.accept_ratio = Trace()
        self.accept_ratio_values = Tally()
        self.accepted_tps = Tally()
        self.tokens = {"accepted": 0, "drafted": 0, "drafts": 0, "first_accepted": 0, "first_drafts": 0}
        self.draft_lengths: dict[int, int] = {}  # drafts by length (dynamic draft lengths' histogram)
        self.calibration: list[list[float]] | None = None  # per confidence bin: drafted, accepted, confidence sum
        self.per_position: list[list] = []  # per draft position: [count, sum]
        self.depths: set[int] = set()
        self.transfers = {"store": Transfers(), "load": Transfers()}
        self.lmcache = {"store": {"moves": 0, "bytes": 0, "seconds": 0.0, "tokens": 0},
                        "retrieve": {"moves": 0, "bytes": 0, "seconds": 0.0, "tokens": 0},
                        "requested_tokens": 0, "hit_tokens": 0}
        self.cpu_cache_usage: float | None = None  # peak
        # what the server gave up while serving and KV that did not arrive: "what reason" -> count
        self.given_up: dict[str, int] = {}
        self.dead_ranks: set[int] = set()
        # the request log's bounded facts (exporter.parsers.echo) and the engine steps' times by batch
        self.request_log: dict[str, dict[str, int]] = {"lora": {}, "finish_reason": {}, "aborts": {}, "lora_events": {}}
        self.steps: dict[str, list[float]] = {}  # batch -> [count, sum, max]
        self.http_status: dict[int, int] = {}
        self.http_minutes = BucketCounts(60.0)  # status class -> responses per minute (wider on long runs)
        self.error_times: list[tuple[float, str]] = []
        self.ooms: list[dict] = []  # each OOM's GPU and numbers, where its message gave them
        self.startup_failures: list[dict] = []
        self.stops: list[float | None] = []  # stops that were asked for (exporter.stream.lifecycle), not deaths
        self.http_endpoint: dict[tuple[str, str], int] = {}
        # kind -> [count, (ts, line) of the first, its message]; tracebacks finish out of order, so
        # "first" is decided by time and line number, not by arrival.
        self.errors: dict[str, list] = {k: [0, None, None] for k in ERROR_KINDS}
        self.first_ts: float | None = None
        self.last_ts: float | None = None
        self.events = 0
        self._handlers = {k: getattr(self, "_on_" + k) for k in KINDS if hasattr(self, "_on_" + k)}
        # sleep mode, EPLB, elastic DP, V0 preemptions, hangs, diffusion decoding: a section when the run had any
        self.engine_ops = EngineOps(self)
        self._handlers.update(self.engine_ops.handlers())
        # the tokens of the run, window by window as the exporter counts them (for the Cost section, which exists
        # only with a price: ``window_tokens=False`` spares a run without one a second stats clock on every window)
        self.window_tokens = WindowTokens(stats_interval) if window_tokens else None
        if self.window_tokens is not None:
            self.window_tokens.hook(self._handlers)
        # The per-window series are appended to by their arrays' own append (no Python frame per
        # value) and folded every FOLD_EVERY events.
        self._traces = (self.gen, self.prompt, self.kv_usage, self.accept_len, self.accept_ratio,
                        self.transfers["store"].rates, self.transfers["load"].rates)
        self._tallies = (self.single, self.accept_len_values, self.accept_ratio_values, self.accepted_tps)
        self._fold_due = FOLD_EVERY
        self._gen_t, self._gen_v = self.gen.ts.append, self.gen.vs.append
        self._prompt_t, self._prompt_v = self.prompt.ts.append, self.prompt.vs.append
        self._chart_engine, self._chart_t = None, None  # the engine and time of the charts' last point
        self._kv_t, self._kv_v = self.kv_usage.ts.append, self.kv_usage.vs.append
        self._single = self.single.pending.append
        self._len_t, self._len_v = self.accept_len.ts.append, self.accept_len.vs.append
        self._len = self.accept_len_values.pending.append
        self._ratio_t, self._ratio_v = self.accept_ratio.ts.append, self.accept_ratio.vs.append
        self._ratio = self.accept_ratio_values.pending.append
        self._tps = self.accepted_tps.pending.append

    # -- feeding --------------------------------------------------------------------------------

    def add(self, ev: Event) -> None:
        ts = ev.ts
        if ts is not None:
            if self.since is not None and ts < self.since:
                if ev.kind in FACT_KINDS:
                    # the server running at --since was configured before it: its facts belong here
                    self._fact_before_window(ev)
                return
            if self.until is not None and ts > self.until:
                return
            if self.first_ts is None or ts < self.first_ts:
                self.first_ts = ts
            if self.last_ts is None or ts > self.last_ts:
                self.last_ts = ts
        elif self.since is not None or self.until is not None:
            return
        self.events += 1
        handler = self._handlers.get(ev.kind)
        if handler is not None:
            try:
                handler(ev, ev.fields)
            except (KeyError, TypeError, ValueError, ArithmeticError):
                # fields a handler cannot use (a number parse_frame left out as absurd): the event
                # adds nothing, the run's other events still count
                return
            self._fold_due -= 1
            if not self._fold_due:
                self._fold_due = FOLD_EVERY
                for x in self._traces:
                    x.maybe_fold()
                for x in self._tallies:
                    x.maybe_fold()

    def _fact_before_window(self, ev: Event) -> None:
        if ev.kind == "version":  # a start before the window: what an earlier run said goes
            self.facts = {}
            self.settings = {}
            self.workers = {}
            self.config_started = ev.ts
            self.facts["version"] = ev.fields["version"]
            if ev.fields.get("model"):
                self.facts["model"] = ev.fields["model"]
            return
        self._handlers[ev.kind](ev, ev.fields)

    def _on_version(self, ev, f):
        self._windows.clear()  # a start explains the silence before it
        self.starts.append(ev.ts)
        # each start's own configuration: what an earlier start logged is kept apart, not mixed in
        if self.facts or self.settings or self.workers:
            self.earlier_configs.append(self._config())
            del self.earlier_configs[:-MAX_EARLIER_CONFIGS]
        self.facts, self.settings, self.workers = {}, {}, {}
        self.config_started = ev.ts
        self.facts["version"] = f["version"]
        if f.get("model"):
            self.facts["model"] = f["model"]

    def _on_model(self, ev, f):
        self.facts["model"] = f["model"]

    def _on_engine_config(self, ev, f):
        for key in ("max_num_seqs", "tensor_parallel_size", "max_seq_len", "max_model_len", "quantization",
                    "kv_cache_dtype"):
            if key in f:
                self.facts[key] = f[key]
        for key in ("model", "version"):  # the banner's word wins over the config dump's
            if key in f:
                self.facts.setdefault(key, f[key])
        # the arguments given ("non-default args") win over the engine's config dump (which carries its
        # version), as under data parallel each engine core's dump says data_parallel_size=1
        put = self.settings.setdefault if "version" in f else self.settings.__setitem__
        for key in SETTING_KEYS:
            if key in f:
                put(key, f[key])
        for key in ("access_log", "request_log", "output_log"):  # what vLLM was told to log (or not)
            if key in f:
                self.facts[key] = f[key]

    def _on_kv_cache_size(self, ev, f):
        # the main KV cache, whichever device holds it (the key keeps its name for JSON readers)
        self.facts["gpu_kv_cache_tokens"] = f["tokens"]
        if f.get("device"):
            self.facts["kv_cache_device"] = str(f["device"])

    def _on_gpu_blocks(self, ev, f):
        self.facts["gpu_blocks"] = f["gpu_blocks"]

    def _on_max_concurrency(self, ev, f):
        self.facts["max_concurrency"] = f["concurrency"]
        self.facts["max_model_len"] = f["tokens_per_request"]

    def _worker(self, ev) -> dict:
        return self.workers.setdefault(ev.process or "main", {})

    def _on_kv_cache_memory(self, ev, f):
        self._worker(ev)["kv_cache_bytes"] = f["bytes"]

    def _on_model_load(self, ev, f):
        w = self._worker(ev)
        if "weights_bytes" in f:
            w["weights_bytes"] = f["weights_bytes"]
        if "seconds" in f:
            w["load_seconds"] = f["seconds"]

    def _on_memory_profile(self, ev, f):
        w = self._worker(ev)
        for k in ("peak_activation_bytes", "non_torch_bytes", "cuda_graph_bytes", "total_bytes"):
            if k in f:
                w[k] = f[k]
        if "weights_bytes" in f:
            w.setdefault("weights_bytes", f["weights_bytes"])
        if "kv_cache_bytes" in f:
            w.setdefault("kv_cache_bytes", f["kv_cache_bytes"])
        if "gpu_memory_utilization" in f:
            self.settings["gpu_memory_utilization"] = f["gpu_memory_utilization"]
        if "equivalent_gpu_memory_utilization" in f:  # (0.18+: what CUDA graph profiling left the KV cache)
            self.settings["equivalent_gpu_memory_utilization"] = f["equivalent_gpu_memory_utilization"]

    def _on_init_engine(self, ev, f):
        if "seconds" in f:
            self.facts["init_seconds"] = f["seconds"]
        if "compilation_seconds" in f:
            self.facts["compile_seconds"] = f["compilation_seconds"]

    def _on_offload_pool(self, ev, f):
        self.facts["offload_pool_bytes"] = f["bytes"]

    def _on_kv_cache_extended(self, ev, f):
        self.facts["gpu_blocks"] = f["blocks"]
        if "bytes" in f:
            self._worker(ev)["kv_cache_bytes"] = f["bytes"]

    def _on_max_model_len_reduced(self, ev, f):
        self.facts["max_model_len_requested"] = f["from_tokens"]
        self.facts["max_model_len"] = f["to_tokens"]

    def _give_up(self, what: str, n: int = 1) -> None:
        if what in self.given_up or len(self.given_up) < 64:
            self.given_up[what] = self.given_up.get(what, 0) + n

    def _on_kv_connector_failure(self, ev, f):
        self._give_up(f"KV connector {f.get('connector')}: {f.get('reason')}")

    def _on_kv_offload_failure(self, ev, f):
        self._give_up(f"KV offload: {f.get('reason')}")

    def _on_ec_connector_failure(self, ev, f):
        self._give_up(f"encoder-cache connector {f.get('connector')}: {f.get('reason')}")

    def _on_request_rejected(self, ev, f):
        self._give_up(f"requests turned away: {f.get('reason')}")

    def _on_weight_cache_daemon_exit(self, ev, f):
        self._give_up("weight-cache daemon exits")

    def _bump(self, table: str, key: str) -> None:
        d = self.request_log[table]
        if key in d or len(d) < 32:
            d[key] = d.get(key, 0) + 1
        else:
            d["other"] = d.get("other", 0) + 1

    def _on_request_log(self, ev, f):
        record = f.get("record")
        if record == "received" and "lora" in f:
            lora = f["lora"]
            self._bump("lora", "(base model)" if lora is None else lora if isinstance(lora, str) and _ADAPTER.fullmatch(lora)
                       else "other")
        elif record == "generated" and "finish_reason" in f:
            self._bump("finish_reason", f["finish_reason"])
        elif record == "aborted":
            self._bump("aborts", "abort calls")

    def _on_lora_adapter(self, ev, f):
        if not f.get("during"):  # (one another record counted: exporter.stream.calls)
            self._bump("lora_events", str(f.get("event")))

    def _on_engine_call_failed(self, ev, f):
        self.engine_ops.call(ev, f)
        if f.get("method") == "add_lora":  # a LoRA adapter that would not load, as exporter.metrics counts it
            self._bump("lora_events", "load_failed")

    def _on_iteration(self, ev, f):
        if f.get("dummy"):
            return
        ctx, gen = f.get("ctx_requests", 0), f.get("gen_requests", 0)
        batch = "mixed" if ctx and gen else "prefill" if ctx else "decode" if gen else "idle"
        st = self.steps.setdefault(batch, [0, 0.0, 0.0])
        st[0] += 1
        st[1] += f["seconds"]
        st[2] = max(st[2], f["seconds"])

    def _on_dp_fault_tolerance(self, ev, f):
        if f.get("event") == "scale_down":
            new = {r for r in f.get("dead_ranks", []) if isinstance(r, int)} - self.dead_ranks
            if new and len(self.dead_ranks) < 4096:
                self.dead_ranks |= new
                self._give_up("data-parallel ranks dropped", len(new))
        elif f.get("event") != "status":
            self._give_up(f"fault tolerance: {f.get('event')}")

    def _on_engine_stats(self, ev, f):
        engine = f.get("engine", 0)
        if ev.ts is not None:
            prev = self._windows.get(engine)
            # a busy window and then silence for 3 intervals, with no start or death to explain it; under
            # data parallel not while another engine logged meanwhile (vLLM logs an engine's window only
            # when it sent outputs: an engine given no requests goes quiet), as the daemon's stall check
            if prev is not None and prev[1] and ev.ts - prev[0] > 3 * self.stats_interval and len(self.stalls) < 1000 \
                    and not any(e != engine and prev[0] < w[0] < ev.ts for e, w in self._windows.items()):
                self.stalls.append({"ts": prev[0], "engine": engine, "silent_seconds": ev.ts - prev[0]})
            self._windows[engine] = (ev.ts, busy_window(f))
        # (peaks compared inline, and None-first as max() of the values would keep the first of ties)
        t = _NAN if ev.ts is None else ev.ts
        g = f["generation_tokens_per_second"]
        # the charts show the server: data-parallel engines' windows of one moment add up (one point,
        # not a zigzag between engines)
        same = engine != self._chart_engine and t == self._chart_t
        if same and len(self.gen.vs):
            self.gen.vs[-1] += g
        else:
            self._gen_t(t)
            self._gen_v(g)
        self.gen_windows += 1
        if self.gen_peak is None or g > self.gen_peak:
            self.gen_peak = g
        if g > 0:
            self.gen_nonzero[0] += 1
            self.gen_nonzero[1] += g
            self.gen_busy.add(g)
        running = f.get("running", -1)
        if running == 1:
            self._single(g)
        if running is not None and running >= 0:
            tally = self.by_running.get(running)
            if tally is None and len(self.by_running) < 1024:
                tally = self.by_running[running] = Tally()
            if tally is not None:
                tally.add(g)
        p = f["prompt_tokens_per_second"]
        if same and len(self.prompt.vs):
            self.prompt.vs[-1] += p
        else:
            self._prompt_t(t)
            self._prompt_v(p)
        if self.prompt_peak is None or p > self.prompt_peak:
            self.prompt_peak = p
        v = f.get("kv_cache_usage")
        if v is not None:
            if "device" in f:
                self.kv_device = f["device"]
            if same and len(self.kv_usage.vs):  # each engine's own cache: the fullest one
                self.kv_usage.vs[-1] = max(self.kv_usage.vs[-1], v)
            else:
                self._kv_t(t)
                self._kv_v(v)
            if self.kv_usage_peak is None or v > self.kv_usage_peak:
                self.kv_usage_peak = v
        self._chart_engine, self._chart_t = engine, t
        v = f.get("prefix_cache_hit_rate")
        if v is not None and (self.prefix_hit is None or v > self.prefix_hit):
            self.prefix_hit = v
        v = f.get("external_prefix_cache_hit_rate")
        if v is not None and (self.ext_prefix_hit is None or v > self.ext_prefix_hit):
            self.ext_prefix_hit = v

    def _on_spec_decode(self, ev, f):
        t = _NAN if ev.ts is None else ev.ts
        v = f.get("mean_acceptance_length")
        if v is not None:
            self._len_t(t)
            self._len_v(v)
            self._len(v)
        ratio = f.get("draft_acceptance_rate")
        if ratio is None and f.get("drafted_tokens"):
            ratio = f.get("accepted_tokens", 0) / f["drafted_tokens"]
        if ratio is not None:
            self._ratio_t(t)
            self._ratio_v(ratio)
            self._ratio(ratio)
        v = f.get("accepted_tokens_per_second")
        if v is not None:
            self._tps(v)
        self.tokens["accepted"] += f.get("accepted_tokens") or 0
        self.tokens["drafted"] += f.get("drafted_tokens") or 0
        drafts = drafts_of(f) or 0
        self.tokens["drafts"] += drafts
        hist = f.get("draft_length_histogram") or {}
        for length, n in hist.items():
            self.draft_lengths[length] = self.draft_lengths.get(length, 0) + n
        rates = f.get("per_position_acceptance_rate") or []
        if rates and drafts:
            # the first token's acceptance among drafts that proposed one (VllmDraftAcceptanceCollapsed's)
            self.tokens["first_accepted"] += round(rates[0] * drafts)
            self.tokens["first_drafts"] += drafts - hist.get(0, 0)
        for i, v in enumerate(rates):
            while len(self.per_position) <= i:
                self.per_position.append([0, 0])
            p = self.per_position[i]
            p[0] += 1
            p[1] += v
        if f.get("speculative_depth"):
            self.depths.add(int(f["speculative_depth"]))

    def _on_spec_calibration(self, ev, f):
        bins = f.get("bins")
        if not isinstance(bins, int) or not 0 < bins <= 20:
            return
        if self.calibration is None or len(self.calibration) != bins:
            self.calibration = [[0, 0, 0.0] for _ in range(bins)]
        for col, name in enumerate(("counts", "accepted", "confidence_sums")):
            for row in f.get(name) or ():
                for b, v in zip(self.calibration, row):
                    b[col] += v

    def _on_kv_transfer(self, ev, f):
        for d in ("store", "load"):
            b, s = f.get(f"{d}_bytes"), f.get(f"{d}_seconds")
            if b and s and b > 0 and s > 0:
                self.transfers[d].add(b, s, ev.ts)
        v = f.get("cpu_cache_usage")
        if v is not None and (self.cpu_cache_usage is None or v > self.cpu_cache_usage):
            self.cpu_cache_usage = v

    def _on_lmcache(self, ev, f):
        op = f.get("op")
        if op in ("store", "retrieve"):
            d = self.lmcache[op]
            d["moves"] += 1
            if "bytes" in f and "seconds" in f:  # (a move logged without both is not in the rate)
                d["bytes"] += f["bytes"]
                d["seconds"] += f["seconds"]
            d["tokens"] += f.get("tokens", 0)
        elif op == "lookup":
            self.lmcache["requested_tokens"] += f.get("total_tokens", 0)
            self.lmcache["hit_tokens"] += f.get("hit_tokens", 0)

    def _on_access_log(self, ev, f):
        self._count_access(f["method"], f["path"], f["status"], 1, ev.ts)

    def add_access(self, counts: dict[tuple, int], span: tuple = (None, None)) -> None:
        """Access-log responses counted by (method, path, status, version), from the pipeline's batch path;
        ``span`` is the time of the first and last of them."""
        if self.since is not None or self.until is not None:
            raise ValueError("access counts carry no time: with --since/--until feed events line by line")
        for ts in span:
            if ts is not None:
                self.first_ts = ts if self.first_ts is None else min(self.first_ts, ts)
                self.last_ts = ts if self.last_ts is None else max(self.last_ts, ts)
        # the batch's responses, placed at the middle of its time span (batches are ~1,000 lines)
        when = None
        if span[0] is not None and span[1] is not None:
            when = (span[0] + span[1]) / 2
        for (method, path, status, _version), n in counts.items():
            self._count_access(method, path, status, n, when)

    def _count_access(self, method: str, path: str, status: int, n: int, ts: float | None = None) -> None:
        self.http_status[status] = self.http_status.get(status, 0) + n
        if ts is not None:
            # per minute and status class: memory grows with the run's minutes, not its requests
            cls = f"{status // 100}xx" if 100 <= status <= 599 else "other"
            self.http_minutes.add(ts, cls, n)
        key = (method, path)
        if key in self.http_endpoint or len(self.http_endpoint) < 200:
            self.http_endpoint[key] = self.http_endpoint.get(key, 0) + n
        else:
            self.http_endpoint[("*", "(others)")] = self.http_endpoint.get(("*", "(others)"), 0) + n

    def _error(self, ev, kind):
        e = self.errors[kind]
        e[0] += 1
        if ev.ts is not None and len(self.error_times) < 10_000:
            self.error_times.append((ev.ts, kind))
        key = (ev.ts if ev.ts is not None else float("inf"), ev.line or 0)
        if e[1] is None or key < e[1]:
            e[1] = key
            f = ev.fields
            msg = f.get("message") or f.get("signature") or f.get("error") or ""
            if kind == "traceback" and f.get("exception"):
                msg = f"{f['exception']}: {msg}"
            e[2] = msg[:200]

    def _on_oom(self, ev, f):
        self._error(ev, "oom")
        if len(self.ooms) < 100:
            self.ooms.append({"ts": ev.ts, **{k: f[k] for k in _OOM_NUMBERS if k in f}})

    def _on_start_failed(self, ev, f):
        self._error(ev, "startup_failure")
        if len(self.startup_failures) < 100:
            self.startup_failures.append({"ts": ev.ts, "reason": "other"})

    def _on_start_failure_reason(self, ev, f):
        if not self.startup_failures:
            return
        # the failed start's own reason and numbers replace the generic "failed to start"; "other"
        # brings the root cause's exception line
        current = self.startup_failures[-1]
        if current["reason"] in ("other", "weights_oom") and "cause" not in current:
            kept = {k: v for k, v in f.items() if k != "message"}
            if f.get("reason") in SAID_IN_WORDS and f.get("message"):  # vLLM's exception line: the path, the port
                kept["message"] = str(f["message"])[:200].replace("`", "'")
            self.startup_failures[-1] = {"ts": current["ts"], **kept}

    def _on_cuda_error(self, ev, f):
        self._error(ev, "cuda_error")

    def _on_nccl_error(self, ev, f):
        self._error(ev, "nccl_error")

    def _on_engine_death(self, ev, f):
        self._windows.clear()  # so does a death
        self._error(ev, "engine_dead")

    def _on_server_stop(self, ev, f):
        self._windows.clear()  # and a stop
        self.stops.append(ev.ts)

    def _on_rule(self, ev, f):
        if self.rules is not None:
            self.rules.add(ev)

    def _on_traceback(self, ev, f):
        if counts_as_traceback(f):
            self._error(ev, "traceback")
