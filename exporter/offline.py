"""One streaming pass over a saved log for the offline commands: events in order, with progress."""

from __future__ import annotations

import os
import sys
import time
from typing import Iterator

from exporter.events import Event
from exporter.framing import Clock
from exporter.logfile import LogOpenError, open_binary
from exporter.pipeline import Pipeline

PROGRESS_MIN_BYTES = 8 << 20


class Pass:
    """Iterate the events of ``path``; ``results`` counts lines by result along the way."""

    def __init__(self, path: str, clock: Clock, progress: bool | None = None, on_result=None):
        self.on_result = on_result
        self.path = path
        self.clock = clock
        self.pipeline = Pipeline(clock)
        self.results = {"parsed": 0, "ignored": 0, "unparsed": 0}
        self.progress = progress

    def __iter__(self) -> Iterator[Event]:
        f = open_binary(self.path)
        size = 0
        if self.path != "-":
            try:
                size = os.fstat(f.fileno()).st_size if not hasattr(f, "fileobj") else 0
            except (OSError, ValueError):
                size = 0
        show = self.progress if self.progress is not None else (sys.stderr.isatty() and size > PROGRESS_MIN_BYTES)
        done = 0
        last = 0.0
        feed = self.pipeline.feed
        results = self.results
        on_result = self.on_result
        try:
            for raw in f:
                r, events = feed(raw.decode("utf-8", "replace").rstrip("\n"))
                results[r] += 1
                yield from events
                if on_result is not None:
                    on_result(r)
                if show:
                    done += len(raw)
                    now = time.monotonic()
                    if now - last > 0.5:
                        last = now
                        print(f"\r{self.path}: {100 * done / size:5.1f}%", end="", file=sys.stderr, flush=True)
            yield from self.pipeline.flush()
        except (OSError, EOFError) as e:
            raise LogOpenError(f"{self.path}: read failed: {e}") from None
        finally:
            if show:
                print(f"\r{self.path}: done.     ", file=sys.stderr)
            if f is not sys.stdin.buffer:
                f.close()
