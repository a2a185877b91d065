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
from exporter.sources.base import LineSplitter

PROGRESS_MIN_BYTES = 8 << 20
CHUNK = 1 << 20


class Pass:
    """Iterate the events of ``path``; ``results`` counts lines by result along the way."""

    def __init__(self, path: str, clock: Clock, progress: bool | None = None, on_result=None):
        self.on_result = on_result
        self.path = path
        self.clock = clock
        self.pipeline = Pipeline(clock)
        self.results = {"parsed": 0, "ignored": 0, "unparsed": 0}
        self.progress = progress

    def batches(self) -> Iterator[tuple[list[Event], dict[tuple, int], tuple]]:
        """(events, access-log counts, their time span) per chunk, through the pipeline's batch path."""
        f = open_binary(self.path)
        split = LineSplitter(self.path)
        show, size = self._progress(f)
        done, last = 0, 0.0
        feed = self.pipeline.feed_batch
        results = self.results
        try:
            while True:
                data = f.read(CHUNK)
                lines = split.feed(data) if data else split.flush()
                if lines:
                    counts, events, access, span = feed(lines)
                    for k, n in counts.items():
                        results[k] += n
                    yield events, access, span
                if not data:
                    break
                if show:
                    done += len(data)
                    now = time.monotonic()
                    if now - last > 0.5:
                        last = now
                        print(f"\r{self.path}: {100 * done / size:5.1f}%", end="", file=sys.stderr, flush=True)
            yield self.pipeline.flush(), {}, (None, None)
        except (OSError, EOFError) as e:
            raise LogOpenError(f"{self.path}: read failed: {e}") from None
        finally:
            if show:
                print(f"\r{self.path}: done.     ", file=sys.stderr)
            if f is not sys.stdin.buffer:
                f.close()

    def _progress(self, f) -> tuple[bool, int]:
        size = 0
        if self.path != "-":
            try:
                size = os.fstat(f.fileno()).st_size if not hasattr(f, "fileobj") else 0
            except (OSError, ValueError):
                size = 0
        show = self.progress if self.progress is not None else (sys.stderr.isatty() and size > PROGRESS_MIN_BYTES)
        return bool(show and size), size

    def __iter__(self) -> Iterator[Event]:
        f = open_binary(self.path)
        show, size = self._progress(f)
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
