"""Logging through structlog: JSON lines in a container, readable lines on a terminal."""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import Mapping
from typing import Any, TextIO

import structlog

__all__ = ["FORMAT_ENV", "configure_logging", "console_output", "get_logger"]

FORMAT_ENV = "DATAFLOW_LOG_FORMAT"
"""``json`` or ``console``: forces the format of what the commands report on stderr."""


def console_output(stream: TextIO | None = None, env: Mapping[str, str] | None = None) -> bool:
    """Whether to report for a person (readable lines) rather than as JSON lines.

    The one place that decides: ``DATAFLOW_LOG_FORMAT=console`` or ``=json`` forces it;
    otherwise readable when ``stream`` (default stderr) is a terminal, JSON elsewhere
    (a container's log, a pipe, a file).
    """
    fmt = (os.environ if env is None else env).get(FORMAT_ENV, "").strip().lower()
    if fmt in {"json", "console"}:
        return fmt == "console"
    return (sys.stderr if stream is None else stream).isatty()


def configure_logging(*, json: bool | None = None, level: str | None = None) -> None:
    """Configure structlog and the standard library's logging once, at start-up.

    ``json`` defaults to ``not`` :func:`console_output` (JSON in a container's log, or
    with ``DATAFLOW_LOG_FORMAT=json``); ``level`` defaults to ``DATAFLOW_LOG_LEVEL`` or INFO.
    """
    if json is None:
        json = not console_output()
    level_name = (level or os.environ.get("DATAFLOW_LOG_LEVEL") or "INFO").upper()
    shared: list[Any] = [
        structlog.contextvars.merge_contextvars,
        structlog.processors.add_log_level,
        structlog.processors.TimeStamper(fmt="iso", utc=True),
    ]
    # JSON keeps an exception as a structured ``exception`` field; the console renders it.
    # Neither shows a frame's local variables: they may hold a token or a password, and
    # rendering them is slow (on the control API it runs on the event loop's thread).
    rendering: list[Any] = (
        [
            structlog.processors.ExceptionRenderer(
                structlog.tracebacks.ExceptionDictTransformer(show_locals=False)
            ),
            structlog.processors.JSONRenderer(),
        ]
        if json
        else [
            structlog.dev.ConsoleRenderer(
                colors=False, exception_formatter=structlog.dev.plain_traceback
            )
        ]
    )
    structlog.configure(
        processors=[*shared, structlog.stdlib.ProcessorFormatter.wrap_for_formatter],
        logger_factory=structlog.stdlib.LoggerFactory(),
        wrapper_class=structlog.stdlib.BoundLogger,
        cache_logger_on_first_use=True,
    )
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(
        structlog.stdlib.ProcessorFormatter(
            foreign_pre_chain=shared,
            processors=[structlog.stdlib.ProcessorFormatter.remove_processors_meta, *rendering],
        )
    )
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level_name)
    # py4j logs every JVM call at INFO; only its problems belong in the replica's log.
    logging.getLogger("py4j").setLevel(max(logging.WARNING, root.level))


def get_logger(logger_name: str, /, **context: Any) -> structlog.stdlib.BoundLogger:
    """A logger bound to ``context`` (e.g. namespace and name of an object)."""
    logger: structlog.stdlib.BoundLogger = structlog.get_logger(logger_name)
    return logger.bind(**context) if context else logger
