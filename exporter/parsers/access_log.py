"""uvicorn's access log: ``INFO:     10.10.10.2:52922 - "POST /v1/chat/completions HTTP/1.1" 200 OK``.

The client address is matched but never kept. The query string is dropped from ``path``. The
reason phrase depends on the Python that ran vLLM (422 is "Unprocessable Entity" or "Unprocessable
Content"), so only the number is read.
"""

from __future__ import annotations

import re

from exporter.parsers.events import Event
from exporter.framing.frame import Frame
from exporter.parsers.base import Parser

# `<client> - "<METHOD> <path> HTTP/<v>" <status>`; the client is any token, never kept.
_REQUEST = re.compile(r'([A-Za-z]+) (.*) HTTP/(\d(?:\.\d)?)" (\d{3})\b')
SEP = ' - "'
SEEN: dict[str, tuple[str, str, int, str]] = {}
SEEN_MAX = 4096
NEEDLE = " HTTP/"


def match_tail(tail: str) -> tuple[str, str, int, str] | None:
    """``match`` for the text after the first `` - "`` of a line whose client token is not empty."""
    r = SEEN.get(tail)
    if r is not None:
        return r
    m = _REQUEST.match(tail)
    if m is None:
        return None
    method, path, version, status = m.group(1, 2, 3, 4)
    q = path.find("?")
    if q >= 0:
        path = path[:q]
    r = (method, path, int(status), version)
    if len(SEEN) >= SEEN_MAX:
        SEEN.clear()
    SEEN[tail] = r
    return r


def match(text: str) -> tuple[str, str, int, str] | None:
    """(method, path without query, status, http version) of an access-log line, else None.

    Also used on raw lines by the pipeline's batch path, so both paths agree by construction. A
    plain find of the ` - "` separator, then an anchored match, costs a fraction of a regex search
    over the whole (wrapped) line.
    """
    i = text.find(SEP)
    if i > 0 and not text[i - 1].isspace():
        # The part after the client address repeats endlessly ("POST /v1/chat/completions HTTP/1.1"
        # 200 OK): remember what it said. Bounded, so random paths cannot grow it.
        r = match_tail(text[i + 4:])
        if r is not None:
            return r
        i = text.find(SEP, i + 1)
    while i > 0:
        if not text[i - 1].isspace():
            m = _REQUEST.match(text, i + 4)
            if m:
                method, path, version, status = m.group(1, 2, 3, 4)
                q = path.find("?")
                if q >= 0:
                    path = path[:q]
                return method, path, int(status), version
        i = text.find(SEP, i + 1)
    return None


def _parse(frame: Frame) -> list[Event] | None:
    r = match(frame.message)
    if r is None:
        return None
    return [Event("access_log", {"method": r[0], "path": r[1], "status": r[2], "http_version": r[3]})]


PARSER = Parser("access_log", (NEEDLE,), _parse)
