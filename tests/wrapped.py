"""The fixtures' journald lines as the other commonest wrappers hold them, for the tests of framing's common shapes.

vLLM's own line reaches the exporter with no wrapper (a plain file, stdin, ``podman logs``), behind the RFC 3339
stamp the container API adds (``timestamps=1``), or in a Kubernetes node log (stamp, stream, ``F``); the stamps
here are in UTC and in another zone, with and without a fraction.
"""

from __future__ import annotations

import re

_JOURNALD = re.compile(r"[A-Z][a-z]{2} {1,2}\d{1,2} \d\d:\d\d:\d\d \S+ [^\s\[:]+\[\d+\]: ")
STAMPS = ("2026-08-04T02:45:02.123456789Z ", "2026-08-04T02:45:02Z stdout F ",
          "2026-08-04T04:45:02.5+02:00 stderr F ", "2026-08-03T21:45:02-05:00 ")


def rewrapped(lines: list[str]) -> list[str]:
    """Each journald line of ``lines`` without its wrapper, and behind one of STAMPS (in turn)."""
    out = []
    for i, line in enumerate(lines):
        m = _JOURNALD.match(line)
        if m is not None:
            bare = line[m.end():]
            out += [bare, STAMPS[i % len(STAMPS)] + bare]
    return out
