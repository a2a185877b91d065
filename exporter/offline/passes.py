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
CHUNK = 1 << 17  # smaller chunks stay in the CPU caches (bench/compare.py: ~5-10 % faster than 1 MiB)
BAD_LINES_SHOWN = 10


class Pass:
    """Iterate the events of ``path``; ``results`` counts lines by result along the way."""

    def __init__(self, path: str, clock: Clock, progress: bool | None = None, on_result=None,
                 max_line: int = MAX_LINE_BYTES, rules=()):
        """``rules``: the user's rules (exporter.config.rules specs), tried after the built-in families."""
        self.on_result = on_result
        self.path = path
        self.clock = clock
        self.max_line = max_line
        self.pipeline = Pipeline(clock, on_bad_line=self._bad_line, max_line=max_line, on_cut=self._cut,
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
                lines = split.feed(data) if data else split.flush()
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
        for lines in self.line_lists():
            counts, events, access, span = feed(lines)
            for k, n in counts.items():
                results[k] += n
            yield events, access, span
        yield self.pipeline.flush(), {}, (None, None)

    def __iter__(self) -> Iterator[Event]:
        """Every event, line by line (each access line an event of its own, with its timestamp)."""
        feed = self.pipeline.feed
        results = self.results
        on_result = self.on_result
        join = self.pipeline.join_parts
        for lines in self.line_lists():
            for line in join(lines):
                r, events = feed(line)
                results[r] += 1
                yield from events
                if on_result is not None:
                    on_result(r)
        yield from self.pipeline.flush()
