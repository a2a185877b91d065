"""What every source shares: a name, a status sink and backoff (lines are cut by exporter.framing.lines)."""

from __future__ import annotations

import asyncio
from typing import AsyncIterator, Protocol



# Said with every "reading starts at the end" at start-up: a first try on a file that already holds a
# run otherwise shows only zeros, with no word of why.
FROM_START_HINT = "--from-start (from_start: true in a config file) reads what is already there"


class Status(Protocol):
    def up(self, up: bool) -> None: ...
    def restarted(self) -> None: ...
    # optional: note("truncated" | "rotated_late" | "file_skipped"), counted per server
    def note(self, event: str) -> None: ...


class Source(Protocol):
    name: str

    def batches(self, status: Status) -> AsyncIterator[list[str]]: ...


class Backoff:
    def __init__(self, first: float = 0.5, cap: float = 30.0):
        self.first, self.cap = first, cap
        self.delay = first

    def reset(self) -> None:
        self.delay = self.first

    async def sleep(self) -> None:
        await asyncio.sleep(self.delay)
        self.delay = min(self.cap, self.delay * 2)

