"""Reading a saved log for the offline commands: a path, ``-`` for stdin, or a ``.gz`` file.

Lines are split (on ``\\n`` only: a bare ``\\r`` is a tqdm redraw inside a line) and decoded by
exporter.offline.passes, with invalid bytes replaced, so no input can stop a pass.
"""

from __future__ import annotations

import gzip
import sys
from typing import BinaryIO


class LogOpenError(Exception):
    pass


def open_binary(path: str) -> BinaryIO:
    if path == "-":
        return sys.stdin.buffer
    try:
        f = open(path, "rb")
    except OSError as e:
        raise LogOpenError(f"{path}: cannot open: {e.strerror or e}") from None
    head = f.read(2)
    f.seek(0)
    if head == b"\x1f\x8b":
        # a GzipFile over our file object would leave it open when closed: give it the file itself
        f.close()
        return gzip.open(path, "rb")  # type: ignore[return-value]
    return f
