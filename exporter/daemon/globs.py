"""A glob of files (exporter.sources.file_glob, Kubernetes' pod logs): one SourceRunner per matching
file, started as files appear and let go when they are gone, a pod's series forgotten after its files.

No file is read twice. What decides whether a file is new is its identity (device, inode and head:
exporter.sources.identity), never only that a look found it: a file let go (gone for two looks) that
comes back resumes where it was read to; a directory that cannot be listed for a while (permissions,
no file descriptor left) is reported and its files are kept, not let go, since nothing says they are
gone. At most ``max_open_files`` files are open at once (exporter.daemon.turns); the others wait
their turn, never read again from their first line.
"""

from __future__ import annotations

import asyncio
import os
import time
from collections import OrderedDict
from dataclasses import dataclass

import structlog

from exporter.config.settings import SourceConfig
from exporter.daemon.runners import SourceRunner
from exporter.daemon.supervise import Supervisor
from exporter.daemon.turns import Budget, Turn, default_max_open_files, next_turns
from exporter.framing.clock import Clock
from exporter.framing.lines import MAX_LINE_BYTES
from exporter.metrics import Metrics
from exporter.parsers import BUILT_IN, Families
from exporter.stream.traceback import TRACEBACK_IDLE_SECONDS

log = structlog.get_logger("vllm_log_exporter")

# Files let go whose position is remembered, should they come back (by device and inode, checked by head)
LET_GO_KEPT = 4096


@dataclass
class Child:
    runner: SourceRunner
    task: asyncio.Task | None  # None: waiting for its turn
    from_start: bool
    resume: object = None  # where its first turn begins (a checkpoint), if anywhere
    open_since: float | None = None
    last_read: float = 0.0
    opened_once: bool = False


class GlobRunner:
    SCAN_SECONDS = 2.0

    def __init__(self, sc: SourceConfig, metrics: Metrics, clock: Clock, saved: dict, alerts=None,
                 forget_after: float = 900.0, max_line: int = MAX_LINE_BYTES, families: Families = BUILT_IN,
                 supervisor=None, budget: Budget | None = None):
        from exporter.sources import file_glob

        self.max_line = max_line
        self.supervisor = supervisor or Supervisor()
        self.budget = budget or Budget(default_max_open_files())
        self.sc, self.metrics, self.clock, self.saved, self.alerts = sc, metrics, clock, saved, alerts
        self.families = families
        self.glob = file_glob
        self.name = sc.name
        self.children: dict[str, Child] = {}
        self.let_go: OrderedDict[tuple[int, int], object] = OrderedDict()
        self.blind: set[str] = set()  # servers whose directory cannot be listed
        self.missing: dict[str, int] = {}
        # servers (pods) with no file left, and since when (monotonic): their series go after forget_after
        self.forget_after = forget_after
        self.gone: dict[str, float] = {}
        # where a match's real path may lie (exporter.sources.file_glob)
        self.roots = file_glob.roots(sc.path)
        self.base = file_glob.base_directory(sc.path).rstrip(os.sep)
        # what the last look reported, so each is said once (and its end once)
        self.refused: dict[str, str] = {}
        self.unreadable: dict[str, str] = {}
        self.waiting_said = False

    def _server(self, path: str) -> str:
        return self.glob.server_for(path) if self.sc.server_label == "file" else self.sc.name

    def _source(self, server: str, path: str, from_start: bool, resume, quiet: bool = False):
        from exporter.sources.file import FileSource

        return FileSource(server, path, from_start=from_start, resume=resume, max_line=self.max_line,
                          within=self.roots, quiet=quiet)

    def _child(self, path: str, from_start: bool) -> Child:
        """``path``: the real path of a match (a link's target), which is what is followed."""
        server = self._server(path)
        pod = self.glob.pod_of(path) if self.sc.server_label == "file" else None
        if pod is not None:
            self.metrics.set_pod(server, *pod)
        key, identity = f"{self.sc.name}:{path}", f"file:{path}"
        # where it was read to: the state file's position (at start), or its own when it was let go
        saved = self.saved.pop(key, None)
        resume = saved[1] if saved is not None and saved[0] == identity else None
        try:
            st = os.stat(path)
            resume = self.let_go.pop((st.st_dev, st.st_ino), resume)
        except OSError:
            pass
        runner = SourceRunner(self._source(server, path, from_start, resume), self.metrics, self.clock, identity, key,
                              alerts=self.alerts, max_line=self.max_line, families=self.families,
                              supervisor=self.supervisor)
        return Child(runner, None, from_start, resume)

    def _start(self, path: str, child: Child, now: float) -> None:
        if child.opened_once:  # its next turn: where it was (checked by device, inode and head)
            src = child.runner.source
            child.runner.source = self._source(src.name, src.path, True, src.position or child.resume, quiet=True)
        child.task = asyncio.create_task(child.runner.run(), name=f"source:{child.runner.name}:{path}")
        child.open_since, child.last_read, child.opened_once = now, now, True
        self.budget.used += 1

    def _stop(self, child: Child, now: float) -> None:
        """Close its file (a turn given up, or the file gone); never in the middle of a batch."""
        if child.task is not None:
            child.task.cancel()
            child.task = None
            self.budget.used -= 1
        child.open_since, child.last_read = None, now

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
            children = [c.runner for c in self.children.values() if c.runner.name == server]
            if children:  # readable again: its files' sources say how they are
                self.metrics.set_source_up(server, any(r.is_up for r in children))
            else:  # gone with its pod (or empty): nothing is down any more; the rest goes as a pod's does
                self.metrics.drop_source_up(server)
                self.gone.setdefault(server, now)
        self.blind = blind

    def _unseen(self, path: str, unreadable) -> bool:
        """Whether a look that could not list the directories ``unreadable`` may simply not have seen
        ``path``: it lies in one of them, or one of them holds the glob's own directory."""
        for d in unreadable:
            d = d.rstrip(os.sep) + os.sep
            if path.startswith(d) or (self.base + os.sep).startswith(d):
                return True
        return False

    def _let_go(self, path: str, now: float) -> None:
        child = self.children.pop(path)
        self.missing.pop(path, None)
        pos = getattr(child.runner.source, "position", None)
        if pos is not None:  # should it come back (a directory unlisted for a while): where it was
            self.let_go[(pos.dev, pos.ino)] = pos
            while len(self.let_go) > LET_GO_KEPT:
                self.let_go.popitem(last=False)
        self._stop(child, now)
        child.runner.flush(None)
        log.info("file gone, no longer followed", source=self.sc.name, path=path)
        name = child.runner.name
        if name != self.sc.name and all(c.runner.name != name for c in self.children.values()):
            self.gone.setdefault(name, now)

    def scan(self, first: bool, now: float | None = None) -> None:
        now = time.monotonic() if now is None else now
        look = self.glob.look(self.sc.path)
        found = set(look.files.values())
        unlisted = set(look.unreadable)
        for path in sorted(found):
            self.missing.pop(path, None)
            if path not in self.children:
                # files there at start begin where configured; later ones are new from their first line
                self.children[path] = child = self._child(path, self.sc.from_start if first else True)
                child.last_read = now
                log.info("following file", source=self.sc.name, path=path, server=child.runner.name)
        for path in [p for p in self.children if p not in found]:
            if self._unseen(path, unlisted):
                continue  # its directory could not be listed: nothing says it is gone
            self.missing[path] = self.missing.get(path, 0) + 1
            if self.missing[path] >= 2:  # its file source has read a renamed or deleted file to its end
                self._let_go(path, now)
        self._turns(now)
        self._report(look, now)
        for server in [s for s in self.gone if any(c.runner.name == s for c in self.children.values())]:
            del self.gone[server]  # a file of it came back (a container restarted in the same pod)
        if self.forget_after > 0:
            for server, since in list(self.gone.items()):
                if now - since >= self.forget_after:
                    n = self.metrics.forget_server(server)
                    if self.alerts is not None:
                        self.alerts.forget(server)
                    del self.gone[server]
                    log.info("pod gone, its series dropped", source=self.sc.name, server=server, series=n)

    def _turns(self, now: float) -> None:
        """Open the files waiting, as the budget allows, taking turns when there are more than it."""
        for child in self.children.values():
            if child.task is not None and child.runner.last_fed:
                child.last_read = max(child.last_read, child.runner.last_fed)
        turns = [Turn(p, c.open_since, c.last_read, c.opened_once) for p, c in self.children.items()]
        stop, start = next_turns(turns, self.budget.room(), now)
        for path in stop:
            if not self.children[path].runner.feeding:  # (a batch is never cut: it is read whole, then the turn ends)
                self._stop(self.children[path], now)
        for path in start:
            if self.budget.room():
                self._start(path, self.children[path], now)
        never = sum(1 for c in self.children.values() if not c.opened_once)
        if never and not self.waiting_said:
            log.warning("more files than --max-open-files: the others wait their turn (their servers' "
                        "vllm_log_exporter_source_up is 0 until it comes)", source=self.sc.name,
                        waiting=never, max_open_files=self.budget.limit)
        elif not never and self.waiting_said:
            log.info("every file has been opened", source=self.sc.name)
        self.waiting_said = bool(never)

    async def run(self) -> None:
        first = True
        try:
            while True:
                try:
                    self.scan(first=first)
                    first = False
                except Exception as e:  # noqa: BLE001 - this look is lost; the files followed are read on
                    self.supervisor.failed("scan", e, self.name, then="looking again at the next scan")
                await asyncio.sleep(self.SCAN_SECONDS)
        finally:
            tasks = [c.task for c in self.children.values() if c.task is not None]
            for t in tasks:
                t.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)

    def flush(self, idle: float | None = TRACEBACK_IDLE_SECONDS) -> None:
        for child in self.children.values():
            child.runner.flush(idle)

    def set_families(self, families: Families) -> None:
        self.families = families  # for files found later
        for child in self.children.values():
            child.runner.set_families(families)

    def states(self) -> dict[str, bool]:
        out: dict[str, bool] = {}
        for child in self.children.values():
            out[child.runner.name] = out.get(child.runner.name, False) or child.runner.is_up
        for server in self.blind:  # some of its files cannot be seen
            out[server] = False
        return out

    def checkpoints(self) -> dict[str, tuple[str, dict]]:
        out: dict[str, tuple[str, dict]] = {}
        for child in self.children.values():
            out.update(child.runner.checkpoints())
        return out
