"""The exporter's own logging: structlog, human-readable on a TTY, JSON lines otherwise."""

from __future__ import annotations

import logging
import sys

import structlog

_LEVELS = {"debug": logging.DEBUG, "info": logging.INFO, "warning": logging.WARNING, "error": logging.ERROR}


def setup(level: str = "info", fmt: str = "auto", stream=None) -> None:
    stream = stream or sys.stderr
    console = fmt == "console" or (fmt == "auto" and stream.isatty())
    renderer = structlog.dev.ConsoleRenderer(colors=stream.isatty()) if console else structlog.processors.JSONRenderer()
    structlog.configure(
        processors=[
            structlog.contextvars.merge_contextvars,
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="iso", utc=True),
            structlog.processors.format_exc_info,
            renderer,
        ],
        wrapper_class=structlog.make_filtering_bound_logger(_LEVELS.get(level, logging.INFO)),
        logger_factory=structlog.PrintLoggerFactory(file=stream),
        cache_logger_on_first_use=False,
    )
    route_stdlib(level)


class _ToStructlog(logging.Handler):
    """The standard library's records (asyncio, aiohttp) as the exporter's own lines, not raw text in a JSON log."""

    def emit(self, record: logging.LogRecord) -> None:
        try:
            fields = {"logger": record.name}
            if record.exc_info and record.exc_info[0] is not None:
                fields["exception"] = logging.Formatter().formatException(record.exc_info)
            structlog.get_logger(record.name).log(record.levelno, record.getMessage(), **fields)
        except Exception:  # noqa: BLE001 - logging must never raise into the caller
            self.handleError(record)


def route_stdlib(level: str = "info") -> None:
    root = logging.getLogger()
    for h in list(root.handlers):
        if isinstance(h, _ToStructlog):
            root.removeHandler(h)
    root.addHandler(_ToStructlog())
    root.setLevel(_LEVELS.get(level, logging.INFO))
