"""Restarting a deployed exporter while its log keeps being written: every line counted once.

Shared by the compose (tests/test_compose.py), Quadlet (tests/test_quadlet.py) and Helm
(tests/test_helm.py) tests. A restart is the deployment's own stop (compose stop, the unit's
ExecStop, kube down; each returns once the exporter has exited, its state saved on SIGTERM) and
start, while a writer keeps adding lines through the stop, the start and the new process' first
moments. The new process counts from 0, so it must count exactly the lines written since the stop:
fewer is a lost line (no state kept, or a checkpoint not honoured), more a line counted twice.

Before the stop the writer pauses until the old process has counted what was written: what it read
in the instant of a SIGTERM is the daemon's own tests' business (tests/test_signals.py), and it
cannot be observed here once the process is gone.

The feeds write to what each source follows: a file, a real journal (systemd-journal-remote), or
a container whose log a real podman API service serves.
"""

from __future__ import annotations

import os
import subprocess
import threading
import time
from pathlib import Path

from tests.helpers import wait_until
from tests.journal import Journal, access


class FileFeed:
    def __init__(self, path: Path, line=lambda i: access(i) + "\n"):
        self.path, self.line, self.written = path, line, 0
        path.parent.mkdir(parents=True, exist_ok=True)
        if not path.exists():
            path.write_text("")
            path.chmod(0o640)  # root's, as runtimes and loggers write logs

    def write(self, n: int) -> None:
        with open(self.path, "a") as f:
            f.write("".join(self.line(i) for i in range(self.written, self.written + n)))
        self.written += n

    def close(self) -> None:
        pass


class JournalFeed:
    """Entries of unit grandpa.service in real journal files."""

    def __init__(self, directory: Path):
        self.journal, self.written = Journal(directory), 0
        self.journal.write([access(-1)])  # a journal with none of the unit's entries makes journalctl exit 1

    def write(self, n: int) -> None:
        self.journal.write([access(i) for i in range(self.written, self.written + n)])
        self.written += n

    def close(self) -> None:
        pass


LOGGER = r'''#!/bin/sh
# prints numbered vLLM access lines, odd ones on stderr, until it has printed as many as /ctl/target says
trap 'exit 0' TERM
n=0
while :; do
  t=$(cat /ctl/target 2>/dev/null)
  while [ "$n" -lt "${t:-0}" ]; do
    line="(APIServer pid=53) INFO:     127.0.0.1:$n - \"GET /v1/models HTTP/1.1\" 200 OK"
    if [ $((n % 2)) = 0 ]; then echo "$line"; else echo "$line" >&2; fi
    n=$((n + 1))
  done
  sleep 0.05
done
'''


class ContainerFeed:
    """A container printing lines on demand, and a real ``podman system service`` serving its log
    on ``sock`` (what a container: source reads)."""

    def __init__(self, tmp: Path, env: dict, image: str, name: str):
        self.tmp, self.env, self.name, self.written = tmp, env, name, 0
        self.sock = tmp / "podman.sock"
        (tmp / "ctl").mkdir(parents=True)
        (tmp / "logger.sh").write_text(LOGGER)
        self.service = subprocess.Popen(["podman", "system", "service", "--time=0", f"unix://{self.sock}"],
                                        env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            wait_until(lambda: self.sock.exists(), 20, 0.05, what="podman API socket")
            r = subprocess.run(["podman", "run", "-d", "--name", name, "--network=none", "-v", f"{tmp / 'ctl'}:/ctl:ro",
                                "-v", f"{tmp / 'logger.sh'}:/logger.sh:ro", image, "/bin/sh", "/logger.sh"],
                               env=env, capture_output=True, text=True, timeout=120)
            assert r.returncode == 0, r.stderr
        except BaseException:
            self.close()  # the API service must not outlive a feed that could not start
            raise

    def write(self, n: int) -> None:
        self.written += n
        part = self.tmp / "ctl" / "target.part"
        part.write_text(str(self.written))
        os.replace(part, self.tmp / "ctl" / "target")

    def close(self) -> None:
        subprocess.run(["podman", "rm", "-f", "-t", "0", self.name], env=self.env, capture_output=True, timeout=120)
        if self.service.poll() is None:
            self.service.kill()
            self.service.wait(10)
        self.sock.unlink(missing_ok=True)


def restart_mid_stream(feed, counted, stop, start, first: int = 10, during: int = 40, after: int = 5,
                       counted_before: int = 0) -> None:
    """``counted()``: what the running exporter has counted of the feed's lines (raises or None
    while none answers; ``counted_before`` of them already). ``during`` lines are written 50 ms apart
    from the stop on, through the start."""
    feed.write(first)
    wait_until(lambda: counted() == counted_before + first, 30, 0.2,
               what=f"the first {first} lines counted before the stop")
    stop()
    writer = threading.Thread(target=lambda: [feed.write(1) or time.sleep(0.05) for _ in range(during)])
    writer.start()
    try:
        start()
    finally:
        writer.join(60)
    wait_until(lambda: counted() == during, 90, 0.5,
               what=f"the {during} lines written across the restart, each once (the new process counts from 0)")
    feed.write(after)
    wait_until(lambda: counted() == during + after, 30, 0.2, what="lines after the restart")
    time.sleep(3)  # several polls and reconnects later: nothing more may come
    assert counted() == during + after
