"""One runner per source: its lines through its stream into the metrics and alerts.

A :class:`SourceRunner` reads one source (file, journald, container, stdin, demo) and doubles as its
status; a :class:`GlobRunner` keeps one SourceRunner per file a glob matches (Kubernetes' pod logs),
starting them as files appear and forgetting a pod's series after its files are gone.
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
from exporter.sources.base import Backoff, Source
from exporter.stream.pipeline import Pipeline
from exporter.stream.traceback import TRACEBACK_IDLE_SECONDS

log = structlog.get_logger("vllm_log_exporter")
# The most lines fed at once before the event loop gets a turn: a few milliseconds of the commonest
# lines, ~20 ms of the dearest short ones; a line of --max-line-bytes costs up to ~30 ms on its own
# (bench/hostile.py), and a batch holds few of those (a source reads 128 KiB at a time).
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
                 alerts=None, max_line: int = MAX_LINE_BYTES, families: Families = BUILT_IN):
        self.alerts = alerts  # exporter.alerts.from_events.Alerts, when alerts are pushed
        self.source = source
        self.name = source.name
        self.identity = identity
        self.state_key = state_key or source.name
        self.metrics = metrics
        self.max_line = max_line
        self._cut_warned = False
        self.pipeline = Pipeline(clock, on_bad_line=self._bad_line, max_line=max_line, on_cut=self.line_cut,
                                 families=families)
        self.is_up = False
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
        counts, events, access, _ = self.pipeline.feed_batch(batch)  # (each line guarded there)
        self.metrics.count_lines(name, counts)
        try:
            if events:
                self.metrics.observe_many(name, events)
                if self.alerts is not None:
                    self.alerts.observe(name, events)
            if access:
                self.metrics.observe_access(name, access)
        except Exception as e:  # noqa: BLE001 - what the lines said is lost, the source goes on
            self._bad_line(self.pipeline.lineno, "(a batch's events)", e)

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
                    if len(batch) <= SLICE_LINES:
                        self.feed(batch)
                        continue
                    # A batch of many lines (128 KiB of empty ones is 131,072) is read a slice at a
                    # time, the event loop answering scrapes in between: 650 ms in one go before.
                    for i in range(0, len(batch), SLICE_LINES):
                        self.feed(batch[i:i + SLICE_LINES])
                        await asyncio.sleep(0)
                self.flush(None)
                log.info("source ended", source=self.name)
                return
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("source failed; restarting", source=self.name)
                self.up(False)
                self.restarted()
                await backoff.sleep()


class GlobRunner:
    """A glob of files (exporter.sources.file_glob): one SourceRunner per matching file, started and
    let go as files come and go."""

    SCAN_SECONDS = 2.0

    def __init__(self, sc: SourceConfig, metrics: Metrics, clock: Clock, saved: dict, alerts=None,
                 forget_after: float = 900.0, max_line: int = MAX_LINE_BYTES, families: Families = BUILT_IN):
        self.max_line = max_line
        from exporter.sources import file_glob

        self.sc, self.metrics, self.clock, self.saved, self.alerts = sc, metrics, clock, saved, alerts
        self.families = families
        self.glob = file_glob
        self.name = sc.name
        self.children: dict[str, tuple[SourceRunner, asyncio.Task]] = {}
        self.blind: set[str] = set()  # servers whose directory cannot be listed
        self.missing: dict[str, int] = {}
        # servers (pods) with no file left, and since when (monotonic): their series go after forget_after
        self.forget_after = forget_after
        self.gone: dict[str, float] = {}
        # where a match's real path may lie (exporter.sources.file_glob)
        self.roots = file_glob.roots(sc.path)
        # what the last look reported, so each is said once (and its end once)
        self.refused: dict[str, str] = {}
        self.unreadable: dict[str, str] = {}

    def _server(self, path: str) -> str:
        return self.glob.server_for(path) if self.sc.server_label == "file" else self.sc.name

    def _child(self, path: str, from_start: bool) -> SourceRunner:
        """``path``: the real path of a match (a link's target), which is what is followed."""
        from exporter.sources.file import FileSource

        server = self._server(path)
        pod = self.glob.pod_of(path) if self.sc.server_label == "file" else None
        if pod is not None:
            self.metrics.set_pod(server, *pod)
        key, identity = f"{self.sc.name}:{path}", f"file:{path}"
        resume = self.saved[key][1] if key in self.saved and self.saved[key][0] == identity else None
        return SourceRunner(FileSource(server, path, from_start=from_start, resume=resume, max_line=self.max_line,
                                       within=self.roots),
                            self.metrics, self.clock, identity, key, alerts=self.alerts, max_line=self.max_line,
                            families=self.families)

    def _report(self, look, now: float) -> None:
        """Links out of the tree and directories that cannot be listed: a warning each when first
        seen, and vllm_log_exporter_source_up 0 for the pod whose files they hide (for a directory
        that is no pod's, under the glob's own name) while they stay so: nothing goes invisible in
        silence."""
        for path, real in look.refused.items():
            if self.refused.get(path) != real:
                log.warning("file not followed: a symbolic link out of the followed directories", source=self.sc.name,
                            path=path, target=real, allowed=list(self.roots))
        self.refused = dict(look.refused)
        blind: set[str] = set()
        for d, why in look.unreadable.items():
            server = (self.glob.server_of_directory(d) if self.sc.server_label == "file" else None) or self.sc.name
            blind.add(server)
            if d not in self.unreadable:
                log.warning("directory cannot be listed: the logs in it are not read; retrying", source=self.sc.name,
                            directory=d, error=why, server=server, uid=os.geteuid(), gid=os.getegid())
        for d in self.unreadable.keys() - look.unreadable.keys():
            log.info("directory readable again (or gone)", source=self.sc.name, directory=d)
        self.unreadable = dict(look.unreadable)
        for server in blind:  # source_up alone: what was never read is absent, not counted as 0
            self.metrics.set_source_up(server, False)
            self.gone.pop(server, None)
        for server in self.blind - blind:
            children = [r for r, _ in self.children.values() if r.name == server]
            if children:  # readable again: its files' sources say how they are
                self.metrics.set_source_up(server, any(r.is_up for r in children))
            else:  # gone with its pod (or empty): nothing is down any more; the rest goes as a pod's does
                self.metrics.drop_source_up(server)
                self.gone.setdefault(server, now)
        self.blind = blind

    def scan(self, first: bool, now: float | None = None) -> None:
        now = time.monotonic() if now is None else now
        look = self.glob.look(self.sc.path)
        found = set(look.files.values())
        for path in sorted(found):
            self.missing.pop(path, None)
            if path not in self.children:
                # files there at start begin where configured; later ones are new from their first line
                runner = self._child(path, self.sc.from_start if first else True)
                self.children[path] = (runner, asyncio.create_task(runner.run(), name=f"source:{runner.name}:{path}"))
                log.info("following file", source=self.sc.name, path=path, server=runner.name)
        for path in [p for p in self.children if p not in found]:
            self.missing[path] = self.missing.get(path, 0) + 1
            if self.missing[path] >= 2:  # its file source has read a renamed or deleted file to its end
                runner, task = self.children.pop(path)
                self.missing.pop(path)
                task.cancel()
                runner.flush(None)
                log.info("file gone, no longer followed", source=self.sc.name, path=path)
                if runner.name != self.sc.name and all(r.name != runner.name for r, _ in self.children.values()):
                    self.gone.setdefault(runner.name, now)
        self._report(look, now)
        for server in [s for s in self.gone if any(r.name == s for r, _ in self.children.values())]:
            del self.gone[server]  # a file of it came back (a container restarted in the same pod)
        if self.forget_after > 0:
            for server, since in list(self.gone.items()):
                if now - since >= self.forget_after:
                    n = self.metrics.forget_server(server)
                    if self.alerts is not None:
                        self.alerts.forget(server)
                    del self.gone[server]
                    log.info("pod gone, its series dropped", source=self.sc.name, server=server, series=n)

    async def run(self) -> None:
        self.scan(first=True)
        try:
            while True:
                await asyncio.sleep(self.SCAN_SECONDS)
                self.scan(first=False)
        finally:
            tasks = [t for _, t in self.children.values()]
            for t in tasks:
                t.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)

    def flush(self, idle: float | None = TRACEBACK_IDLE_SECONDS) -> None:
        for runner, _ in self.children.values():
            runner.flush(idle)

    def set_families(self, families: Families) -> None:
        self.families = families  # for files found later
        for runner, _ in self.children.values():
            runner.set_families(families)

    def states(self) -> dict[str, bool]:
        out: dict[str, bool] = {}
        for runner, _ in self.children.values():
            out[runner.name] = out.get(runner.name, False) or runner.is_up
        for server in self.blind:  # some of its files cannot be seen
            out[server] = False
        return out

    def checkpoints(self) -> dict[str, tuple[str, dict]]:
        out: dict[str, tuple[str, dict]] = {}
        for runner, _ in self.children.values():
            out.update(runner.checkpoints())
        return out
