"""How many files the globs hold open at once, and whose turn it is when they match more.

A node's pod logs can outnumber the file descriptors the exporter may hold (200 pods under a limit of
128). Each followed file holds one while it is open, so at most ``max_open_files`` of a glob's files
are open at once (shared by every glob; the rest of the limit is left to HTTP connections and the
exporter's own files). The others wait, and take turns: a file that has been open a while and has read
to its end is let go (its position and head kept, its stream's state too) so that one waiting can be
read; when its turn comes again it is opened where it was, checked by its device, inode and head
(exporter.sources.identity), never read again from its first line. A file that never had a turn is
reported: ``vllm_log_exporter_source_up`` 0 for its server and one warning per glob.
"""

from __future__ import annotations

import resource
from dataclasses import dataclass

# A file open at least this long (a glob's look comes every 2 s), and idle (nothing new) this long,
# may give its turn to one waiting.
TURN_SECONDS = 2.0
IDLE_SECONDS = 1.0
RESERVE = 64  # descriptors for everything else: pipes, the state file, inotify, journalctl, podman


def nofile_limit() -> int:
    try:
        soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    except (OSError, ValueError):
        soft = 1024
    return 65536 if soft == resource.RLIM_INFINITY or soft <= 0 else soft


def default_max_open_files() -> int:
    """Half of what is left after the reserve (the other half is HTTP connections' default)."""
    return max(8, (nofile_limit() - RESERVE) // 2)


@dataclass
class Budget:
    """The open files every glob shares."""

    limit: int
    used: int = 0
    said: bool = False  # the warning that files wait was given

    def room(self) -> int:
        return max(0, self.limit - self.used)


@dataclass
class Turn:
    """A glob's file as the turns see it."""

    key: str
    open_since: float | None  # None: waiting
    last_read: float  # when its last lines came (or it began waiting)
    opened_once: bool = False


def next_turns(files: list[Turn], room: int, now: float) -> tuple[list[str], list[str]]:
    """(files to let go, files to open): those waiting longest get the room there is, and as many
    more as there are open files that had their turn (open TURN_SECONDS, idle IDLE_SECONDS; longest
    open first) to give them. Pure."""
    waiting = sorted((t for t in files if t.open_since is None), key=lambda t: t.last_read)
    if not waiting:
        return [], []
    done = sorted((t for t in files if t.open_since is not None and now - t.open_since >= TURN_SECONDS
                   and now - t.last_read >= IDLE_SECONDS), key=lambda t: t.open_since)
    let_go = [t.key for t in done[:max(0, len(waiting) - room)]]
    return let_go, [t.key for t in waiting[:room + len(let_go)]]
