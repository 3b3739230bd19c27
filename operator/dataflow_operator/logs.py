"""Logging through structlog: JSON lines in a container, readable lines on a terminal."""

from __future__ import annotations

import logging
import os
import sys
from typing import Any

import structlog

__all__ = ["configure_logging", "get_logger"]


def configure_logging(*, json: bool | None = None, level: str | None = None) -> None:
    """Configure structlog and the standard library's logging once, at start-up.

    ``json`` defaults to true when stderr is not a terminal (a container's log) or when
    ``DATAFLOW_LOG_FORMAT=json``; ``level`` defaults to ``DATAFLOW_LOG_LEVEL`` or INFO.
    """
    if json is None:
        fmt = os.environ.get("DATAFLOW_LOG_FORMAT")
        json = fmt == "json" if fmt else not sys.stderr.isatty()
    level_name = (level or os.environ.get("DATAFLOW_LOG_LEVEL") or "INFO").upper()
    shared: list[Any] = [
        structlog.contextvars.merge_contextvars,
        structlog.processors.add_log_level,
        structlog.processors.TimeStamper(fmt="iso", utc=True),
    ]
    renderer: Any = (
        structlog.processors.JSONRenderer() if json else structlog.dev.ConsoleRenderer(colors=False)
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
            processors=[structlog.stdlib.ProcessorFormatter.remove_processors_meta, renderer],
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
