"""The report's "Engine operations" section: what was done to a running engine and how it went, from the events
of exporter.parsers.engine_ops (sleep mode, EPLB, elastic data-parallel scaling, V0's preemption warning, the
engine loop found hung, calls to the engine core that failed and that it answered) and
exporter.parsers.spec_decode's diffusion-decoding windows. Pure: events in, numbers
out, and their Markdown; a run without any of these events has no section (and no key in the JSON).

What the log never printed is absent, not 0: a count shown is of lines seen; a figure the lines do not carry
(the data-parallel size before the first scaling, when no configuration line gave it) is left out.
Memory is bounded: per-window values whose median is shown are an exact multiset (series.Tally), the
scalings' list keeps its last MAX_SCALINGS.
"""

from __future__ import annotations

from datetime import datetime, timezone

from exporter.offline.report.series import Tally

MAX_SCALINGS = 50
SLEEP_WORDS = {"sleep": "fall asleep", "wake_up": "wake up", "discard": "discard tags"}
HANG_WORDS = {"iteration_timeout": "Engine iteration timed out (V0; the engine is marked dead)",
              "watchdog": "[Watchdog] Dumped stack (the loop was not fed within its timeout)"}


class EngineOps:
    """Collects the section's figures; ``handlers()`` are RunStats' handlers for the kinds it reads. ``owner``
    is the RunStats (its ``settings`` and ``starts``: the data-parallel size before a scaling)."""

    def __init__(self, owner):
        self.owner = owner
        self.seen = False
        self.sleep: dict[str, list] = {}  # action -> [count, seconds, longest]
        self.balance = Tally()
        self.balance_last: float | None = None
        self.rearranged: dict[str, list] = {}  # "sync" / "async" / "profile" -> [count, seconds]
        self.skipped = 0
        self.scalings: list[dict] = []
        self.scaling_count = 0
        self._size: tuple[int, int] | None = None  # (starts when set, size) after the last scaling
        self.preempt = {"warnings": 0, "preemptions": 0, "last": 0}
        self.preempt_modes: dict[str, int] = {}
        self.hangs: dict[str, list] = {}  # source -> [count, first ts, last ts]
        self.diffusion = {"windows": 0, "committed_tokens": 0, "denoising_steps": 0, "canvas_positions": 0}
        self.diffusion_peak: float | None = None
        self.calls: dict[str, list] = {}  # method -> [count, first ts, last ts]

    def handlers(self) -> dict:
        return {"sleep_mode": self._sleep, "eplb": self._eplb, "dp_scale": self._dp_scale,
                "preemption": self._preemption, "engine_hang": self._hang, "diffusion_decoding": self._diffusion}

    def _sleep(self, ev, f):
        action, secs = f["action"], float(f["seconds"])
        if action in SLEEP_WORDS and secs >= 0:
            s = self.sleep.setdefault(action, [0, 0.0, 0.0])
            s[0] += 1
            s[1] += secs
            s[2] = max(s[2], secs)
            self.seen = True

    def _eplb(self, ev, f):
        op = f["op"]
        if op == "step":
            b = float(f["balancedness"])
            self.balance.add(b)
            self.balance_last = b
        elif op == "rearranged":
            mode = "profile" if f.get("profile") else f["mode"]
            if mode not in ("sync", "async", "profile"):
                return
            r = self.rearranged.setdefault(mode, [0, 0.0])
            r[0] += 1
            r[1] += max(0.0, float(f["seconds"]))
        elif op == "skipped":
            self.skipped += 1
        else:
            return
        self.seen = True

    def _dp_scale(self, ev, f):
        direction, size = f["direction"], int(f["size"])
        if direction not in ("up", "down"):
            return
        starts = len(self.owner.starts)
        before = self._size[1] if self._size is not None and self._size[0] == starts else \
            self.owner.settings.get("data_parallel_size")
        self._size = (starts, size)
        row = {"ts": ev.ts, "direction": direction, "to": size}
        if isinstance(before, int) and not isinstance(before, bool):
            row["from"] = before
        self.scaling_count += 1
        self.scalings.append(row)
        del self.scalings[:-MAX_SCALINGS]
        self.seen = True

    def _preemption(self, ev, f):
        # V0 warns at its 1st, 51st, 101st... preemption with the count so far: add what the count grew by
        # (from 0 when it went back: a new engine), as exporter.metrics.engine_ops does
        n = int(f["cumulative"])
        p = self.preempt
        p["preemptions"] += n - p["last"] if n >= p["last"] else n
        p["last"] = n
        p["warnings"] += 1
        mode = f.get("mode")
        if mode in ("recompute", "swap"):
            self.preempt_modes[mode] = self.preempt_modes.get(mode, 0) + 1
        self.seen = True

    def _hang(self, ev, f):
        source = f["source"]
        if source not in HANG_WORDS:
            return
        h = self.hangs.setdefault(source, [0, None, None])
        h[0] += 1
        if ev.ts is not None:
            h[1] = ev.ts if h[1] is None else min(h[1], ev.ts)
            h[2] = ev.ts if h[2] is None else max(h[2], ev.ts)
        self.seen = True

    def call(self, ev, f):
        """A failed engine call (RunStats hands it on: it counts a failed add_lora among the LoRA events too)."""
        method = f.get("method")
        if not isinstance(method, str):
            return
        if method not in self.calls and len(self.calls) >= MAX_SCALINGS:
            method = "other"
        c = self.calls.setdefault(method, [0, None, None])
        c[0] += 1
        if ev.ts is not None:
            c[1] = ev.ts if c[1] is None else min(c[1], ev.ts)
            c[2] = ev.ts if c[2] is None else max(c[2], ev.ts)
        self.seen = True

    def _diffusion(self, ev, f):
        d = self.diffusion
        add = {k: int(f[k]) for k in ("committed_tokens", "denoising_steps", "canvas_positions")}
        d["windows"] += 1
        for k, v in add.items():
            d[k] += v
        tps = f.get("committed_tokens_per_second")
        if tps is not None and (self.diffusion_peak is None or tps > self.diffusion_peak):
            self.diffusion_peak = float(tps)
        self.seen = True

    def __bool__(self) -> bool:
        return self.seen

    def summary(self) -> dict:
        out: dict = {}
        if self.sleep:
            out["sleep_mode"] = {a: {"count": self.sleep[a][0], "seconds": self.sleep[a][1],
                                     "longest_seconds": self.sleep[a][2]} for a in SLEEP_WORDS if a in self.sleep}
        if len(self.balance) or self.rearranged or self.skipped:
            e: dict = {}
            if len(self.balance):
                e["steps"] = len(self.balance)
                e["balancedness_median"] = self.balance.median()
                e["balancedness_last"] = self.balance_last
                e["balancedness_lowest"] = self.balance.low
            if self.rearranged:
                e["rearranged"] = {m: {"count": self.rearranged[m][0], "seconds": self.rearranged[m][1]}
                                  for m in ("sync", "async", "profile") if m in self.rearranged}
            if self.skipped:
                e["skipped"] = self.skipped
            out["eplb"] = e
        if self.scalings:
            out["dp_scale"] = {"scalings": self.scaling_count, "last": [dict(r) for r in self.scalings]}
        if self.preempt["warnings"]:
            out["preemption"] = {"warnings": self.preempt["warnings"], "preemptions": self.preempt["preemptions"],
                                 "by_mode": dict(sorted(self.preempt_modes.items()))}
        if self.hangs:
            out["engine_hang"] = {s: {"count": n, "first": a, "last": b} for s, (n, a, b) in sorted(self.hangs.items())}
        if self.calls:
            out["failed_calls"] = {m: {"count": n, "first": a, "last": b} for m, (n, a, b) in sorted(self.calls.items())}
        d = self.diffusion
        if d["windows"]:
            out["diffusion_decoding"] = dict(d, tokens_per_denoising_step=(d["committed_tokens"] / d["denoising_steps"]
                                                                          if d["denoising_steps"] else None),
                                             committed_tokens_per_second_peak=self.diffusion_peak)
        return out


# -- Markdown ---------------------------------------------------------------------------------------

def _time(ts, tz) -> str:
    if ts is None:
        return "–"
    return datetime.fromtimestamp(ts, tz=tz or timezone.utc).strftime("%Y-%m-%d %H:%M:%S %Z").strip()


def _s(v) -> str:
    return "–" if v is None else f"{v:,.3f} s"


def markdown(e: dict, tz=None) -> list[str]:
    """The "Engine operations" section as Markdown lines (each table only for what the log printed)."""
    parts = ["## Engine operations", "", "What was done to the running engine and how it went, in the log's words.", ""]
    sleep = e.get("sleep_mode")
    if sleep:
        parts += ["| Sleep mode (It took ... seconds to ...) | Times | Total | Longest |", "|---|---|---|---|"]
        parts += [f"| {SLEEP_WORDS[a]} | {v['count']:,} | {_s(v['seconds'])} | {_s(v['longest_seconds'])} |"
                  for a, v in sleep.items()] + [""]
    eplb = e.get("eplb")
    if eplb:
        rows = []
        if "steps" in eplb:
            rows += [("EPLB step lines", f"{eplb['steps']:,}"),
                     ("Balancedness (avg_tokens / max_tokens; 1 is even): median / last / lowest",
                      f"{eplb['balancedness_median']:.4f} / {eplb['balancedness_last']:.4f} / "
                      f"{eplb['balancedness_lowest']:.4f}")]
        words = {"sync": "Rearranged experts (while serving)", "async": "Async EPLB rearranged",
                 "profile": "Rearranged experts (profile), the start-up run"}
        for mode, r in (eplb.get("rearranged") or {}).items():
            rows.append((words[mode], f"{r['count']:,} in {_s(r['seconds'])}"))
        if "skipped" in eplb:
            rows.append(("[EPLB] Skip rearrange (no material gain)", f"{eplb['skipped']:,}"))
        parts += ["| EPLB | Value |", "|---|---|"] + [f"| {a} | {b} |" for a, b in rows] + [""]
    dp = e.get("dp_scale")
    if dp:
        parts += ["| [Elastic EP] Scale ... completed | When | Data parallel size |", "|---|---|---|"]
        for r in dp["last"]:
            size = f"{r['from']} → {r['to']}" if "from" in r else f"new size {r['to']}"
            parts.append(f"| Scale {r['direction']} | {_time(r['ts'], tz)} | {size} |")
        parts.append("")
        if dp["scalings"] > len(dp["last"]):
            parts += [f"{dp['scalings']:,} scalings, the last {len(dp['last'])} shown.", ""]
    p = e.get("preemption")
    if p:
        modes = ", ".join(f"{m} {n:,}" for m, n in p["by_mode"].items())
        parts += [f"V0 preempted sequence groups (not enough KV cache space): {p['preemptions']:,} by its "
                  f"total_num_cumulative_preemption, in {p['warnings']:,} warnings (V0 warns at the 1st, 51st, "
                  f"101st...)" + (f"; warnings by mode: {modes}." if modes else "."), ""]
    hangs = e.get("engine_hang")
    if hangs:
        parts += ["| Engine hang | Times | First | Last |", "|---|---|---|---|"]
        parts += [f"| {HANG_WORDS[s]} | {h['count']:,} | {_time(h['first'], tz)} | {_time(h['last'], tz)} |"
                  for s, h in hangs.items()] + [""]
    calls = e.get("failed_calls")
    if calls:
        parts += ["| Failed engine call (Invocation of ... method failed; the engine answered it and served on) "
                  "| Times | First | Last |", "|---|---|---|---|"]
        parts += [f"| {m} | {c['count']:,} | {_time(c['first'], tz)} | {_time(c['last'], tz)} |"
                  for m, c in calls.items()] + [""]
    d = e.get("diffusion_decoding")
    if d:
        tps, peak = d["tokens_per_denoising_step"], d["committed_tokens_per_second_peak"]
        rows = [("DiffusionDecoding metrics windows", f"{d['windows']:,}"),
                ("Committed tokens", f"{d['committed_tokens']:,}"),
                ("Denoising steps", f"{d['denoising_steps']:,}"),
                ("Tokens committed per denoising step (Committed / Denoising steps, the run)",
                 "–" if tps is None else f"{tps:.2f}"),
                ("Canvas positions evaluated", f"{d['canvas_positions']:,}"),
                ("Peak committed token throughput", "–" if peak is None else f"{peak:,.1f} tok/s")]
        parts += ["| Diffusion decoding | Value |", "|---|---|"] + [f"| {a} | {b} |" for a, b in rows] + [""]
    return parts
