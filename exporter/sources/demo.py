"""Replay the packaged sample log in real time, in a loop, with its timestamps moved to now.

Each line's outer wrapper (journald) is replaced by an RFC 3339 stamp of the moment it is replayed,
so every consumer (metrics, staleness, alerts) sees a live server. Gaps are replayed as they were
(``speed`` > 1 shortens them, and none is longer than ``max_gap`` seconds).

The first pass is played fast, in ``first_pass_seconds``: someone trying the demo sees every
family (stats, speculative decoding, KV offload, HTTP statuses, the OOM, the dead engines, the
restarts) within half a minute, and the alerts fire. Every later pass keeps the log's own pace.
"""

from __future__ import annotations

import asyncio
import time
from datetime import datetime, timezone
from importlib import resources
from typing import AsyncIterator

from exporter.framing.clock import Clock

from exporter.framing.frame import frame_line
from exporter.sources.base import Status


def sample_lines(name: str = "sample.log") -> list[str]:
    return resources.files("exporter").joinpath("data", name).read_text(encoding="utf-8").splitlines()


def schedule(lines: list[str], clock: Clock | None = None) -> list[tuple[float, str]]:
    """(seconds since the first line, the line as vLLM wrote it) for every line."""
    clock = clock or Clock(year=2026)
    out, first, last = [], None, 0.0
    for line in lines:
        f = frame_line(line, clock)
        t = f.ts if f.ts is not None else (first or 0.0) + last
        if first is None:
            first = t
        last = max(last, t - first)
        out.append((last, f.inner))
    return out


def stamp(now: float) -> str:
    dt = datetime.fromtimestamp(now, tz=timezone.utc)
    return f"{dt:%Y-%m-%dT%H:%M:%S}.{dt.microsecond:06d}Z "


class DemoSource:
    def __init__(self, name: str = "demo", speed: float = 1.0, max_gap: float = 15.0, loops: int | None = None,
                 first_pass_seconds: float | None = 30.0, sample: str = "sample.log"):
        self.name = name
        self.sample = sample
        self.speed = speed
        self.max_gap = max_gap
        self.loops = loops
        self.first_pass_seconds = first_pass_seconds

    async def batches(self, status: Status) -> AsyncIterator[list[str]]:
        plan = schedule(sample_lines(self.sample))
        status.up(True)
        paced, prev = 0.0, 0.0
        for offset, _ in plan:
            paced += min(self.max_gap, (offset - prev) / self.speed)
            prev = offset
        n = 0
        while self.loops is None or n < self.loops:
            n += 1
            squeeze = 1.0
            if n == 1 and self.first_pass_seconds and paced > self.first_pass_seconds:
                squeeze = self.first_pass_seconds / paced
            prev = 0.0
            batch: list[str] = []
            for offset, inner in plan:
                gap = min(self.max_gap, (offset - prev) / self.speed) * squeeze
                prev = offset
                if gap > 0:
                    if batch:
                        yield batch
                        batch = []
                    await asyncio.sleep(gap)
                batch.append(stamp(time.time()) + inner)
            if batch:
                yield batch
            await asyncio.sleep(min(self.max_gap, 10 / self.speed))
        status.up(False)
