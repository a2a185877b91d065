"""Kubernetes node logs: join the parts of a line that the CRI log format split.

containerd and CRI-O write each line a container prints as
``<RFC 3339 stamp> <stdout|stderr> <P|F> <text>``; a line longer than their buffer (16 KiB) becomes
``P`` (partial) records closed by an ``F`` (full) record of the same stream. Framing strips the
tag; this joins the parts first, so a long traceback frame or a KV-transfer line counts as one line
with its first part's stamp. Other lines pass through untouched.

Pure, with one piece of state: the parts still waiting for their ``F``, per stream.
"""

from __future__ import annotations

import re

_RECORD = re.compile(r"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?(?:Z|[+-]\d\d:?\d\d)) (stdout|stderr) ([PF]) ?")



def may_hold_parts(text: str) -> bool:
    return "out P" in text or "err P" in text


class CriJoiner:
    def __init__(self):
        self.pending: dict[str, tuple[str, list[str]]] = {}  # stream -> (first part's stamp, texts)

    def feed(self, lines: list[str]) -> list[str]:
        out = []
        pending = self.pending
        for line in lines:
            if not (pending or "out P" in line or "err P" in line):
                out.append(line)
                continue
            m = _RECORD.match(line)
            if m is None:
                out.append(line)
                continue
            stamp, stream, tag = m.groups()
            text = line[m.end():]
            if tag == "P":
                if stream in pending:
                    pending[stream][1].append(text)
                else:
                    pending[stream] = (stamp, [text])
                continue
            if stream in pending:
                first, parts = pending.pop(stream)
                out.append(f"{first} {stream} F {''.join(parts)}{text}")
            else:
                out.append(line)
        return out

    def flush(self) -> list[str]:
        """The parts whose ``F`` never came (the file ended): each stream's as one line."""
        out = [f"{stamp} {stream} F {''.join(parts)}" for stream, (stamp, parts) in self.pending.items()]
        self.pending.clear()
        return out
