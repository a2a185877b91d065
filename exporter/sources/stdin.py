"""Read lines from standard input: ``podman logs -f grandpa 2>&1 | vllm-log-exporter --source -``.

Reads happen in a worker thread, so a pipe, a redirected file and a terminal all work the same.
At end of input the source reports down and stops; the exporter keeps serving what it learnt.
"""

from __future__ import annotations

import asyncio
import os
import sys
from typing import AsyncIterator

import structlog

from exporter.framing.lines import MAX_LINE_BYTES, LineSplitter
from exporter.sources.base import Status

log = structlog.get_logger("vllm_log_exporter.source.stdin")


class StdinSource:
    def __init__(self, name: str = "stdin", fd: int | None = None, max_line: int = MAX_LINE_BYTES):
        self.name = name
        self.fd = fd
        self.max_line = max_line

    async def batches(self, status: Status) -> AsyncIterator[list[str]]:
        fd = self.fd if self.fd is not None else sys.stdin.fileno()
        loop = asyncio.get_running_loop()
        split = LineSplitter(self.name, self.max_line, on_cut=getattr(status, "line_cut", None))
        log.info("reading standard input from its first line to its end", source=self.name)
        status.up(True)
        try:
            while True:
                data = await loop.run_in_executor(None, os.read, fd, 1 << 16)
                if not data:
                    lines = split.flush(final=True)
                    if lines:
                        yield lines
                    return
                lines = split.feed(data)
                if lines:
                    yield lines
        finally:
            status.up(False)
