"""One runner per source: its lines through its stream into the metrics and alerts.

A :class:`SourceRunner` reads one source (file, journald, container, stdin, demo) and doubles as its
status; exporter.daemon.globs keeps one SourceRunner per file a glob matches (Kubernetes' pod logs).
"""

from __future__ import annotations

import asyncio
import os
import time

import structlog

from exporter.config.settings import SourceConfig
from exporter.framing.clock import Clock
from exporter.framing.lines import MAX_LINE_BYTES
from exporter.metrics import Metrics
from exporter.parsers import BUILT_IN, Families
from exporter.alerts.from_events import FUTURE_SKEW_SECONDS
from exporter.daemon.supervise import Supervisor
from exporter.sources.base import Backoff, Source
from exporter.stream.pipeline import Pipeline
from exporter.stream.traceback import TRACEBACK_IDLE_SECONDS

log = structlog.get_logger("vllm_log_exporter")
# Work yields by time, not by count: a batch is fed in slices, the first of FIRST_SLICE lines, each
# next one twice as many while a slice takes under a quarter of SLICE_SECONDS (at most SLICE_LINES),
# half as many when one takes more; the event loop gets a turn whenever SLICE_SECONDS have passed. A
# batch of 2 KB lines a user's rule takes 10 ms each over (Python's re, quadratic) held the loop 10 s
# when batches were cut by count; a line of --max-line-bytes costs up to ~30 ms on its own.
SLICE_SECONDS = 0.05
FIRST_SLICE = 8
SLICE_LINES = 2048


def make_source(sc: SourceConfig, resume=None, max_line: int = MAX_LINE_BYTES) -> Source:
    if sc.type == "file":
        from exporter.sources.file import FileSource

        return FileSource(sc.name, sc.path, from_start=sc.from_start, resume=resume, max_line=max_line)
    if sc.type == "stdin":
        from exporter.sources.stdin import StdinSource

        return StdinSource(sc.name, max_line=max_line)
    if sc.type == "journald":
        from exporter.sources.journald import JournaldSource

        return JournaldSource(sc.name, sc.match, from_start=sc.from_start, directory=sc.journal_directory,
                              resume=resume, max_line=max_line)
    if sc.type == "container":
        from exporter.sources.container import ContainerSource

        return ContainerSource(sc.name, sc.container, socket=sc.socket, from_start=sc.from_start, resume=resume,
                               max_line=max_line)
    if sc.type == "demo":
        from exporter.sources.demo import DemoSource

        return DemoSource(sc.name, speed=sc.speed, sample=sc.sample)
    raise ValueError(sc.type)


class SourceRunner:
    """Feeds one source's lines through its pipeline into the metrics; doubles as its Status."""

    def __init__(self, source: Source, metrics: Metrics, clock: Clock, identity: str = "", state_key: str = "",
                 alerts=None, max_line: int = MAX_LINE_BYTES, families: Families = BUILT_IN, supervisor=None):
        self.alerts = alerts  # exporter.alerts.from_events.Alerts, when alerts are pushed
        self.supervisor = supervisor or Supervisor()
        self.source = source
        self.name = source.name
        self.identity = identity
        self.state_key = state_key or source.name
        self.metrics = metrics
        self.max_line = max_line
        self._cut_warned = False
        # a clock of its own: year-less stamps follow this source's order (exporter.framing.clock)
        self.pipeline = Pipeline(clock.fresh(), on_bad_line=self._bad_line, max_line=max_line, on_cut=self.line_cut,
                                 families=families)
        self.is_up = False
        self.last_fed = 0.0  # (monotonic) when its last lines were read
        self._future_said = False
        self.feeding = False  # in the middle of a batch (a glob never ends a file's turn then)
        self.waiting_for: str | None = None  # what the source waits for that may never come (a missing file)
        self._bad_lines = 0  # lines that could not be read since the last warning about them
        self._bad_warn_at = 0.0  # (monotonic) no warning about such lines before this
        metrics.add_server(self.name)

    def up(self, up: bool) -> None:
        self.is_up = up
        self.metrics.set_source_up(self.name, up)

    def restarted(self) -> None:
        self.metrics.source_restarted(self.name)

    def waiting(self, reason: str | None) -> None:
        self.waiting_for = reason

    def waits(self) -> dict[str, str]:
        return {self.name: self.waiting_for} if self.waiting_for else {}

    def note(self, event: str) -> None:
        self.metrics.source_event(self.name, event)

    def line_cut(self, size: int) -> None:
        """A line longer than --max-line-bytes (the source's own, or one joined from CRI parts, or a JSON
        record of too many lines) was cut: counted, and said once per source."""
        self.metrics.line_truncated(self.name)
        if not self._cut_warned:
            self._cut_warned = True
            log.warning("line longer than --max-line-bytes, cut to its first and last parts; further ones are "
                        "only counted (vllm_log_exporter_lines_truncated_total)", source=self.name,
                        path=getattr(self.source, "path", None), limit_bytes=self.max_line, line_size=size)

    def feed(self, batch: list[str]) -> None:
        name = self.name
        self.pipeline.clock.tick()
        counts, events, access, _ = self.pipeline.feed_batch(batch, span=False)  # (each line guarded there)
        self.metrics.count_lines(name, counts)
        if events:
            self._future(events)
        try:
            if events:
                self.metrics.observe_many(name, events)
                if self.alerts is not None:
                    self.alerts.observe(name, events)
            if access:
                self.metrics.observe_access(name, access)
        except Exception as e:  # noqa: BLE001 - what the lines said is lost, the source goes on
            self._bad_line(self.pipeline.lineno, "(a batch's events)", e)

    def _future(self, events) -> None:
        """Events stamped further ahead of this clock than FUTURE_SKEW_SECONDS: counted, and said once
        per source (a zone read wrong dates every line so; their alerts start when they were read)."""
        limit = time.time() + FUTURE_SKEW_SECONDS
        ahead = [ev.ts for ev in events if ev.ts is not None and ev.ts > limit]
        if not ahead:
            return
        self.metrics.future_stamps.inc((self.name,), len(ahead))
        if not self._future_said:
            self._future_said = True
            log.warning("log stamps lie in the future: is --timezone (or --year) the log's? Their alerts start "
                        "when the lines were read; further ones are only counted "
                        "(vllm_log_exporter_future_timestamps_total)", source=self.name,
                        ahead_seconds=round(max(ahead) - limit + FUTURE_SKEW_SECONDS))

    def _bad_line(self, lineno: int, line: str, error: BaseException) -> None:
        """A line whose reading raised (the pipeline counted it as unparsed): one warning line, the
        first at once, then at most one a minute with how many there were meanwhile. A bug or an
        unforeseen line costs that line, never the source or its neighbours."""
        self._bad_lines += 1
        now = time.monotonic()
        if now < self._bad_warn_at:
            return
        self._bad_warn_at = now + 60.0
        log.warning("line could not be read; counted as unparsed", source=self.name,
                    path=getattr(self.source, "path", None), line=lineno, lines_since_last_warning=self._bad_lines,
                    error=f"{type(error).__name__}: {str(error)[:200]}", text=line[:200])
        self._bad_lines = 0

    def flush(self, idle: float | None = TRACEBACK_IDLE_SECONDS) -> None:
        events = self.pipeline.flush(idle)
        for ev in events:
            self.metrics.observe(self.name, ev)
        if events and self.alerts is not None:
            self.alerts.observe(self.name, events)

    def states(self) -> dict[str, bool]:
        return {self.name: self.is_up}

    def set_families(self, families: Families) -> None:
        """The user's rules changed (a reload): the next line is tried against the new ones."""
        self.pipeline.families = families

    def checkpoints(self) -> dict[str, tuple[str, dict]]:
        checkpoint = getattr(self.source, "checkpoint", None)
        cp = checkpoint() if checkpoint is not None else None
        return {} if cp is None else {self.state_key: (self.identity, cp)}

    async def run(self) -> None:
        backoff = Backoff(1.0, 30.0)
        while True:
            try:
                async for batch in self.source.batches(self):
                    try:
                        await self._feed_sliced(batch)
                    except Exception as e:  # noqa: BLE001 - that batch is lost, counted; the next is read
                        self.supervisor.failed("source", e, self.name, then="its batch lost, reading on")
                self.flush(None)
                self.metrics.settle_windows(self.name)  # no line will come to decide a first stats window
                log.info("source ended", source=self.name)
                return
            except asyncio.CancelledError:
                raise
            except Exception as e:  # noqa: BLE001 - counted and said in one line; read on from where it was
                self.supervisor.failed("source", e, self.name)
                self.up(False)
                self.restarted()
                await backoff.sleep()

    async def _feed_sliced(self, batch: list[str]) -> None:
        self.last_fed = time.monotonic()
        n = len(batch)
        if n <= FIRST_SLICE:
            self.feed(batch)
            return
        clock = time.perf_counter
        turn = clock()  # (the loop just gave this task its turn)
        size, i = FIRST_SLICE, 0
        self.feeding = True
        try:
            while i < n:
                t0 = clock()
                self.feed(batch[i:i + size])
                i += size
                t1 = clock()
                if t1 - t0 < SLICE_SECONDS / 4:
                    size = min(SLICE_LINES, size * 2)
                elif t1 - t0 > SLICE_SECONDS / 2:
                    size = max(1, size // 2)
                if i < n and t1 - turn >= SLICE_SECONDS:
                    await asyncio.sleep(0)  # scrapes, health checks and the other sources get their turn
                    turn = clock()
        finally:
            self.feeding = False
