"""A child's own peak memory and CPU time, not what it inherited from the bench that started it.

The kernel's ``ru_maxrss`` of a child is not its own peak alone: at exec the kernel keeps the larger
of the new program's high-water mark and the old image's (fs/exec.c, ``setmax_mm_hiwater_rss``), and
Python's subprocess starts children with vfork, where the old image is the parent's. So a bench holding
300 MB read 334 MB for a `report` whose own peak was 24 MB (issue 35). Here the child is started by a
small launcher (a fresh ``python -S``): the launcher forks, the fork execs the program, and the
launcher's ``os.wait4`` gives that child's rusage, whose high-water mark started from the launcher's
few MB. The launcher passes SIGTERM and SIGINT on, so a daemon measured this way is stopped as usual.
The launcher's own memory and CPU are outside the child's figures; a wall time measured around it
includes one `python -S` start-up.

    with OwnPeak([python, "-m", "exporter", "report", log], stdout=subprocess.PIPE) as child:
        out = child.proc.stdout.read()
    child.cpu, child.rss, child.returncode   # after the with block

``python bench/own_peak.py`` shows the difference: the same `report` measured both ways from a
parent that holds 300 MB.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile

# SIGTERM/SIGINT are blocked across the fork, so one that comes before the handler is in place waits
# for it (and reaches the child); one that comes before the block ends the launcher before any fork.
_LAUNCHER = r"""
import os, signal, sys
out, cmd = sys.argv[1], sys.argv[2:]
sigs = {signal.SIGTERM, signal.SIGINT}
signal.pthread_sigmask(signal.SIG_BLOCK, sigs)
pid = os.fork()
if pid == 0:
    try:
        signal.pthread_sigmask(signal.SIG_UNBLOCK, sigs)
        os.execvp(cmd[0], cmd)
    finally:
        os._exit(127)
for sig in sigs:
    signal.signal(sig, lambda s, f: os.kill(pid, s))
signal.pthread_sigmask(signal.SIG_UNBLOCK, sigs)
_, status, ru = os.wait4(pid, 0)
with open(out, "w") as f:
    f.write(f"{ru.ru_utime + ru.ru_stime} {ru.ru_maxrss * 1024} {os.waitstatus_to_exitcode(status)}")
"""


class OwnPeak:
    """``cmd`` started through the launcher; ``proc`` is the launcher (its stdin/stdout/stderr are the
    child's); after ``wait()``: ``cpu`` seconds, ``rss`` peak bytes and ``returncode`` of the child."""

    def __init__(self, cmd: list[str], **popen_kw):
        fd, self._out = tempfile.mkstemp(prefix="own-peak-")
        os.close(fd)
        self.proc = subprocess.Popen([sys.executable, "-S", "-c", _LAUNCHER, self._out, *map(str, cmd)], **popen_kw)
        self.cpu = self.rss = None
        self.returncode = None

    def terminate(self) -> None:
        self.proc.terminate()

    def wait(self) -> tuple[float | None, float | None]:
        """(cpu, rss) of the child; (None, None) when the launcher was ended before it started one
        (``returncode`` is then the launcher's)."""
        self.proc.wait()
        try:
            with open(self._out) as f:
                fields = f.read().split()
        finally:
            os.unlink(self._out)
        if not fields:
            self.returncode = self.proc.returncode
            return None, None
        self.cpu, self.rss, self.returncode = float(fields[0]), float(fields[1]), int(fields[2])
        return self.cpu, self.rss

    def __enter__(self) -> "OwnPeak":
        return self

    def __exit__(self, *exc) -> None:
        if self.returncode is None:
            self.wait()


def inherited_and_own(cmd: list[str], hold_mb: int = 300) -> tuple[float, float]:
    """(ru_maxrss of a plain subprocess, the child's own peak) of ``cmd`` run from this process while
    it holds ``hold_mb`` MB."""
    ballast = bytearray(hold_mb << 20)
    for i in range(0, len(ballast), 4096):  # touched: resident, as a bench's results are
        ballast[i] = 1
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    _, _, ru = os.wait4(proc.pid, 0)
    with OwnPeak(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL) as child:
        pass
    del ballast
    return ru.ru_maxrss * 1024, child.rss


if __name__ == "__main__":
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parent))
    import report_memory

    log = report_memory.log_of(1)
    cmd = [sys.executable, "-m", "exporter", "report", str(log), "--format", "json", "--year", "2026"]
    os.chdir(report_memory.ROOT)
    plain, own = inherited_and_own(cmd)
    print(f"`report` of {log.name} from a parent holding 300 MB: ru_maxrss of a plain subprocess "
          f"{plain / 1e6:.1f} MB, its own peak {own / 1e6:.1f} MB")
