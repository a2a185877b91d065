"""One streaming pass over a saved log for the offline commands: events in order, with progress."""

from __future__ import annotations

import os
import sys
import zlib
import time
from typing import Iterator

from exporter.parsers.events import Event
from exporter.framing.clock import Clock
from exporter.sources.logfile import LogOpenError, open_binary
from exporter.parsers.rules import families
from exporter.stream.pipeline import Pipeline
from exporter.framing.lines import MAX_LINE_BYTES, LineSplitter

PROGRESS_MIN_BYTES = 8 << 20
MAX_UNTIMED_WAITING = 10_000  # events held for a time before the log's first stamp (then sent untimed)
CHUNK = 1 << 17  # smaller chunks stay in the CPU caches (bench/compare.py: ~5-10 % faster than 1 MiB)
BAD_LINES_SHOWN = 10
# events whose time is read only from their own line: uvicorn's "Application startup complete." starts vLLM's
# stats logging loop when its record carries a stamp (exporter.stream.windows, StatsClock.serving), and a
# neighbour's stamp is not its time (the first window would be cut by up to a second, as the daemon never does)
OWN_TIME_ONLY = frozenset({"ready"})


class NeighbourTimes:
    """Events of lines that carry no time (argparse's error, a bare traceback Python printed as the
    process died, uvicorn's lines) take the time of the event before them, or, before the log's
    first stamp, of the first stamped event after them; in a log with no stamp at all, ``fallback``
    (the file's modification time: when its process last wrote). So ``backfill`` and ``report``
    place them on the log's clock instead of dropping them. The daemon needs none of this: it
    stamps what it reads with the time it read it. Kinds in OWN_TIME_ONLY stay untimed, as in the daemon."""

    def __init__(self, fallback: float | None = None):
        self.last: float | None = None
        self.waiting: list[Event] = []
        self.fallback = fallback

    def fill(self, events: list[Event]) -> list[Event]:
        if self.last is not None and not self.waiting and all(ev.ts is not None for ev in events):
            if events:
                self.last = events[-1].ts
            return events
        out: list[Event] = []
        for ev in events:
            if ev.ts is None and ev.kind in OWN_TIME_ONLY:
                out.append(ev)
                continue
            if ev.ts is None:
                if self.last is not None:
                    ev.ts = self.last
                elif len(self.waiting) < MAX_UNTIMED_WAITING:
                    self.waiting.append(ev)
                    continue
            else:
                if self.waiting:
                    for w in self.waiting:
                        w.ts = ev.ts
                    out.extend(self.waiting)
                    self.waiting = []
                self.last = ev.ts
            out.append(ev)
        return out

    def end(self) -> list[Event]:
        out, self.waiting = self.waiting, []
        for ev in out:
            ev.ts = self.fallback
        return out


class Pass:
    """Iterate the events of ``path``; ``results`` counts lines by result along the way. With
    ``neighbour_times``, untimed events get their neighbours' time (:class:`NeighbourTimes`)."""

    def __init__(self, path: str, clock: Clock, progress: bool | None = None, on_result=None,
                 max_line: int = MAX_LINE_BYTES, rules=(), neighbour_times: bool = False):
        """``rules``: the user's rules (exporter.config.rules specs), tried after the built-in families;
        ``neighbour_times``: untimed events get their neighbours' time (:class:`NeighbourTimes`)."""
        self.on_result = on_result
        self.times: NeighbourTimes | None = None
        if neighbour_times:
            try:
                fallback = os.stat(path).st_mtime if path != "-" else None
            except OSError:
                fallback = None
            self.times = NeighbourTimes(fallback)
        self.path = path
        self.clock = clock
        self.max_line = max_line
        # a clock of its own: year-less stamps follow this log's order (exporter.framing.clock)
        self.pipeline = Pipeline(clock.fresh(), on_bad_line=self._bad_line, max_line=max_line, on_cut=self._cut,
                                 families=families(rules))
        self.results = {"parsed": 0, "ignored": 0, "unparsed": 0}
        self.progress = progress
        self.bad_lines = 0
        self.cut_lines = 0

    def _cut(self, size: int) -> None:
        """A line longer than --max-line-bytes, read as its first and last parts: said for the first."""
        self.cut_lines += 1
        if self.cut_lines == 1:
            print(f"vllm-log-exporter: {self.path}: a line of {size:,} bytes is longer than --max-line-bytes "
                  f"({self.max_line:,}): read as its first and last parts", file=sys.stderr)

    def _bad_line(self, lineno: int, line: str, error: BaseException) -> None:
        """A line whose reading raised: counted as unparsed by the pipeline, said on stderr in one
        line naming the file and line (the first BAD_LINES_SHOWN of them, then how many in all)."""
        self.bad_lines += 1
        if self.bad_lines <= BAD_LINES_SHOWN:
            print(f"vllm-log-exporter: {self.path}:{lineno}: line could not be read, counted as unparsed "
                  f"({type(error).__name__}: {str(error)[:160]})", file=sys.stderr)

    def _said_bad_lines(self) -> None:
        if self.cut_lines > 1:
            print(f"vllm-log-exporter: {self.path}: {self.cut_lines:,} lines longer than --max-line-bytes in all, "
                  "each read as its first and last parts", file=sys.stderr)
        if self.bad_lines > BAD_LINES_SHOWN:
            print(f"vllm-log-exporter: {self.path}: {self.bad_lines:,} lines could not be read in all "
                  f"(the first {BAD_LINES_SHOWN} named above), counted as unparsed", file=sys.stderr)

    def line_lists(self) -> Iterator[list[str]]:
        """The file's lines a chunk at a time (cut like the daemon cuts them), with progress on a TTY.

        Reads only: the pipeline is fed by ``batches`` or iteration, or by the caller."""
        f = open_binary(self.path)
        split = LineSplitter(self.path, self.max_line, on_cut=self._cut)
        size = 0
        if self.path != "-" and not hasattr(f, "fileobj"):  # a .gz file's size says nothing of progress
            try:
                size = os.fstat(f.fileno()).st_size
            except (OSError, ValueError):
                size = 0
        show = self.progress if self.progress is not None else (sys.stderr.isatty() and size > PROGRESS_MIN_BYTES)
        show = bool(show and size)
        done, last = 0, 0.0
        try:
            while True:
                data = f.read(CHUNK)
                lines = split.feed(data) if data else split.flush(final=True)
                if lines:
                    yield lines
                if not data:
                    return
                if show:
                    done += len(data)
                    now = time.monotonic()
                    if now - last > 0.5:
                        last = now
                        print(f"\r{self.path}: {100 * done / size:5.1f}%", end="", file=sys.stderr, flush=True)
        except (OSError, EOFError, zlib.error) as e:  # zlib.error: a .gz garbled inside
            raise LogOpenError(f"{self.path}: read failed: {e}") from None
        finally:
            if show:
                print(f"\r{self.path}: done.     ", file=sys.stderr)
            if f is not sys.stdin.buffer:
                f.close()
            self._said_bad_lines()

    def batches(self) -> Iterator[tuple[list[Event], dict[tuple, int], tuple]]:
        """(events, access-log counts, their time span) per chunk, through the pipeline's batch path."""
        feed = self.pipeline.feed_batch
        results = self.results
        times = self.times
        for lines in self.line_lists():
            counts, events, access, span = feed(lines)
            for k, n in counts.items():
                results[k] += n
            yield (times.fill(events) if times else events), access, span
        last = self.pipeline.flush()
        yield (times.fill(last) + times.end() if times else last), {}, (None, None)

    def __iter__(self) -> Iterator[Event]:
        """Every event, line by line (each access line an event of its own, with its timestamp)."""
        feed = self.pipeline.feed
        results = self.results
        on_result = self.on_result
        join = self.pipeline.join_parts
        times = self.times
        for lines in self.line_lists():
            for line in join(lines):
                r, events = feed(line)
                results[r] += 1
                yield from (times.fill(events) if times and events else events)
                if on_result is not None:
                    on_result(r)
        last = self.pipeline.flush()
        yield from (times.fill(last) + times.end() if times else last)
