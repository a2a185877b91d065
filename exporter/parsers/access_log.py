"""uvicorn's access log: ``INFO:     10.10.10.2:52922 - "POST /v1/chat/completions HTTP/1.1" 200 OK``.

The client address is matched but never kept. The query string is dropped from ``path``. The
reason phrase depends on the Python that ran vLLM (422 is "Unprocessable Entity" or "Unprocessable
Content"), so only the number is read.

Where uvicorn prints it (the trust boundary, issue 32): uvicorn's access logger has a formatter of
its own, so an access line carries no vLLM logger header (``[file.py:N] ``) before the client, and
it ends with the status and its reason phrase. The path and query are the client's text, and other
records echo a client's text too (a request id from ``X-Request-Id``, a prompt): a request line
quoted inside a vLLM record, or followed by more text, is not an access line. uvicorn 0.55 prints
the path raw (``raw_path``, ``"`` as ``%22``); older releases printed it decoded, spaces included.
"""

from __future__ import annotations

import re

from exporter.parsers.events import Event
from exporter.framing.frame import Frame
from exporter.parsers.base import Parser

# `<client> - "<METHOD> <path> HTTP/<v>" <status>`; the client is any token, never kept.
_REQUEST = re.compile(r'([A-Za-z]+) (.*) HTTP/(\d(?:\.\d)?)" (\d{3})\b')
# ... and nothing after the status but its reason phrase (http.HTTPStatus's: letters, spaces, "-"
# and "'"; none for a code Python has no phrase for)
_WHOLE = re.compile(r'([A-Za-z]+) (.*) HTTP/(\d(?:\.\d)?)" (\d{3})(?: [A-Za-z][A-Za-z\' -]*)?\s*')
SEP = ' - "'
SEEN: dict[str, tuple[str, str, int, str]] = {}
SEEN_MAX = 4096
WHOLE: dict[str, tuple[str, str, int, str] | None] = {}
SEEN_TAIL_CHARS = 512
NEEDLE = " HTTP/"
# what a vLLM logger header ends with ("[loggers.py:335] ", "metrics.py:367] "): never before an
# access line's client
HEADER_END = "] "


def match_tail(tail: str) -> tuple[str, str, int, str] | None:
    """``match`` for the text after the first `` - "`` of a line whose client token is not empty."""
    r = SEEN.get(tail)
    if r is not None:
        return r
    m = _REQUEST.match(tail)
    if m is None:
        return None
    return _remember(SEEN, tail, _request(m))


def whole_tail(tail: str) -> tuple[str, str, int, str] | None:
    """``match_tail`` for a tail that ends with the status and its reason phrase, else None. Cached
    both ways (bounded), so the common tails cost one lookup."""
    try:
        return WHOLE[tail]
    except KeyError:
        pass
    m = _WHOLE.fullmatch(tail)
    return _remember(WHOLE, tail, _request(m) if m is not None else None)


def _request(m: re.Match) -> tuple[str, str, int, str]:
    """(method, path without its query, status, HTTP version) of a request match."""
    method, path, version, status = m.group(1, 2, 3, 4)
    q = path.find("?")
    if q >= 0:
        path = path[:q]
    return (method, path, int(status), version)


def _remember(cache: dict, tail: str, r):
    """``r``, kept for ``tail`` in ``cache`` unless the tail is long (4,096 one-megabyte tails would
    hold 4 GB); the cache starts over when full."""
    if len(tail) <= SEEN_TAIL_CHARS:
        if len(cache) >= SEEN_MAX:
            cache.clear()
        cache[tail] = r
    return r


def from_uvicorn(frame: Frame) -> tuple[str, str, int, str] | None:
    """(method, path without query, status, http version) when ``frame`` is an access line where
    uvicorn prints one: the message's first `` - "`` follows the client token, no vLLM header stands
    between the line's wrappers and it, and the request line and status end the line. A JSON
    record is one when it is uvicorn's (framing's ``uvicorn``). The batch path counts raw lines by
    the same rule, with the whole line before the separator (wrappers too) free of a header's end."""
    msg = frame.message
    i = msg.find(SEP)
    if i <= 0 or msg[i - 1].isspace():
        return None
    if not frame.uvicorn:
        clean = frame.clean
        j = clean.find(SEP, frame.inner_at)
        if j < 0 or HEADER_END in clean[frame.inner_at:j]:
            return None
    return whole_tail(msg[i + 4:])


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
    tries = 8  # (a wrapper may hold the separator too; a line holding it 50,000 times is no access line)
    while i > 0 and tries:
        tries -= 1
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
    r = from_uvicorn(frame)
    if r is None:
        return None
    return [Event("access_log", {"method": r[0], "path": r[1], "status": r[2], "http_version": r[3]})]


PARSER = Parser("access_log", (NEEDLE,), _parse)
