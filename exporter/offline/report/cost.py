"""The report's Cost section (``report --price-per-hour``): what the run cost at a price per hour, and
per million tokens. A price is the operator's, not the log's: the section exists only when one is given.

The run's cost is the price times its hours (first to last line: idle time is paid for too). Its tokens
are each stats window's average throughput times the window's length, read from the log as the exporter
reads it (exporter.stream.windows: its vllm_log_generation_tokens_total gives the same sum); the prompt tokens are those the engine computed (since vLLM 0.16 the log's prompt throughput leaves out
prefix-cache hits). The busy windows (tokens generated) give a price per million generated tokens each:
their median and Tukey hinges are what ``compare`` holds two runs' figures against.
"""

from __future__ import annotations

from typing import Any

from exporter.stream.windows import StatsClock

MILLION = 1e6


class WindowTokens:
    """Generated and prompt tokens of the run: each window's throughputs times its length, as
    exporter.metrics.engine counts them (the same clock, fed the same start, ready and stop events; a
    first window counted once its length is decided, at the latest at the end: ``finish``)."""

    def __init__(self, stats_interval: float):
        self.clock = StatsClock(stats_interval)
        self.generated = 0.0
        self.prompt = 0.0
        self._first: dict = {}  # a first window's throughputs, until its length is decided
        self._last: dict = {}  # each engine's last window's throughputs (owed seconds are counted over them)

    def hook(self, handlers: dict) -> None:
        """Joins RunStats' handlers: its own for these kinds run first."""
        for kind, mine in (("engine_stats", self._window), ("init_engine", self._ready),
                           ("supported_tasks", self._ready), ("version", self._start),
                           ("ready", self._serving), ("engine_death", self._down), ("server_stop", self._down)):
            theirs = handlers.get(kind)
            handlers[kind] = mine if theirs is None else (lambda ev, f, a=theirs, b=mine: (a(ev, f), b(ev, f)))

    def finish(self) -> None:
        """The run's end: first windows no line decided are counted with the best interval known."""
        self._down(None, None)

    def _start(self, ev, f) -> None:
        self._last.clear()
        self.clock.forget("run")  # (decides a first window still pending: counted here)
        for key in list(self._first):
            self._count_first(key)

    def _down(self, ev, f) -> None:
        self.clock.settle("run")
        for key in list(self._first):
            self._count_first(key)

    def _ready(self, ev, f) -> None:
        self.clock.ready("run", ev.ts)

    def _serving(self, ev, f) -> None:
        if f.get("signature") == "Application startup complete":
            self.clock.serving("run", ev.ts)

    def _count_first(self, key) -> None:
        dt = self.clock.take_first(key)
        p0, g0 = self._first.pop(key, (0.0, 0.0))
        self.prompt += p0 * dt
        self.generated += g0 * dt

    def _window(self, ev, f) -> None:
        key = ("run", f.get("engine", 0))
        prompt = max(0.0, f.get("prompt_tokens_per_second") or 0.0)
        gen = max(0.0, f.get("generation_tokens_per_second") or 0.0)
        dt = self.clock.window(key, ev.ts, bool(prompt or gen))
        if self.clock.first_pending(key):
            self._first.setdefault(key, (prompt, gen))
        elif key in self._first:
            self._count_first(key)
        if self.clock.shown(key) is None:  # (as exporter.metrics.engine: a window may be owed seconds later)
            self._last[key] = (prompt, gen)
        elif self.clock.owed:
            owed, last = self.clock.take_owed(key), self._last.pop(key, None)
            if owed and last is not None:
                self.prompt += last[0] * owed
                self.generated += last[1] * owed
        self.prompt += prompt * dt
        self.generated += gen * dt


def summary(stats, price_per_hour: float) -> dict[str, Any]:
    """The section's figures from a RunStats (its range, window tokens and busy windows)."""
    first, last = stats.first_ts, stats.last_ts
    hours = (last - first) / 3600 if first is not None and last is not None else None
    cost = price_per_hour * hours if hours is not None else None
    stats.window_tokens.finish()
    generated, prompt = stats.window_tokens.generated, stats.window_tokens.prompt

    def per_million(tokens: float):
        return cost / tokens * MILLION if cost is not None and tokens > 0 else None

    busy = stats.gen_busy
    hinges = busy.hinges()

    def at(tps):  # a busy window's price per million generated tokens: the hour's price over its hour's tokens
        return price_per_hour / (tps * 3600) * MILLION if tps else None

    return {
        "price_per_hour": price_per_hour,
        "hours": hours,
        "cost": cost,
        "generated_tokens": generated,
        "prompt_tokens": prompt,
        "per_million_generated": per_million(generated),
        "per_million_prompt": per_million(prompt),
        "busy_windows": len(busy),
        "busy_per_million_generated": at(busy.median()) if len(busy) else None,
        # a higher throughput is a lower price: the hinges swap
        "busy_per_million_generated_iqr": [at(hinges[1]), at(hinges[0])] if hinges else None,
    }


def markdown(c: dict) -> list[str]:
    def money(v):
        return "–" if v is None else f"{v:,.4g}"

    hours = "–" if c["hours"] is None else f"{c['hours']:,.2f} h"
    iqr = c["busy_per_million_generated_iqr"]
    spread = f" ({money(iqr[0])}-{money(iqr[1])})" if iqr else ""
    return [
        "## Cost", "",
        f"At {money(c['price_per_hour'])} per hour (`--price-per-hour`; in your currency), from the first line "
        "to the last. Tokens: each stats window's average throughput times the stats interval; prompt tokens "
        "are those the engine computed (prefix-cache hits left out since vLLM 0.16).", "",
        "| Figure | Value |", "|---|---|",
        f"| Run length | {hours} |",
        f"| Cost of the run | {money(c['cost'])} |",
        f"| Generated tokens | {c['generated_tokens']:,.0f} |",
        f"| Prompt tokens computed | {c['prompt_tokens']:,.0f} |",
        f"| Cost per 1 M generated tokens (over the run, idle time included) | {money(c['per_million_generated'])} |",
        f"| Cost per 1 M prompt tokens (over the run) | {money(c['per_million_prompt'])} |",
        f"| Cost per 1 M generated tokens while busy, median of {c['busy_windows']:,} windows (IQR) | "
        f"{money(c['busy_per_million_generated'])}{spread} |",
        "",
    ]
