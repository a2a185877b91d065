"""The exporter's own logging: structlog, human-readable on a TTY, JSON lines otherwise."""

from __future__ import annotations

import logging
import re
import sys

import structlog

_LEVELS = {"debug": logging.DEBUG, "info": logging.INFO, "warning": logging.WARNING, "error": logging.ERROR}


# what a terminal would act on (exporter.framing.text's controls; config imports no other stage)
_CONTROLS = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\ud800-\udfff]")


def _visible(logger, name, event: dict) -> dict:
    """Log text in the exporter's own console lines (a line that could not be read, a path) shows its
    control characters as U+FFFD: the JSON renderer escapes them itself."""
    for k, v in event.items():
        if isinstance(v, str) and not v.isprintable():
            event[k] = _CONTROLS.sub("\ufffd", v)
    return event


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
            *([_visible] if console else []),
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
