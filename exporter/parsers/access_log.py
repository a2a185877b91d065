"""uvicorn's access log: ``INFO:     10.10.10.2:52922 - "POST /v1/chat/completions HTTP/1.1" 200 OK``.

The client address is matched but never kept. The query string is dropped from ``path``. The
reason phrase depends on the Python that ran vLLM (422 is "Unprocessable Entity" or "Unprocessable
Content"), so only the number is read.
"""

from __future__ import annotations

import re

from exporter.events import Event
from exporter.framing import Frame
from exporter.parsers.base import Parser

_ACCESS = re.compile(r'(?:^|\s)\S+ - "([A-Za-z]+) (.*) HTTP/(\d(?:\.\d)?)" (\d{3})\b')


def _parse(frame: Frame) -> list[Event] | None:
    m = _ACCESS.search(frame.message)
    if not m:
        return None
    path = m.group(2)
    q = path.find("?")
    if q >= 0:
        path = path[:q]
    return [
        Event(
            "access_log",
            {"method": m.group(1), "path": path, "status": int(m.group(4)), "http_version": m.group(3)},
        )
    ]


PARSER = Parser("access_log", ('" HTTP/', ' HTTP/1', ' HTTP/2'), _parse)
