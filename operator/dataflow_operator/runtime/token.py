"""Tokens: the cancellation scope of one dataflow or one one-off operation.

A token names a Spark job group (unique per run: Spark cancels a group's future jobs for
good) and a job tag, both set with interrupt-on-cancel in the thread that starts the work
(Spark's streaming thread inherits the tag), and a marker file that the sources' readers
in executors' Python workers see. :meth:`Token.drop` marks
it dropped (readable from any thread), writes the marker, and cancels its jobs, including
jobs not started yet (a recursion loop's next iteration).

Errors raised while a token is dropped are the shutdown's own: :func:`log_failure` logs
them at debug level, and at error level otherwise, per token, never by muting Spark.
"""

from __future__ import annotations

import logging
import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from typing import Any

from pyspark.sql import SparkSession

from dataflow_operator.logs import get_logger
from dataflow_operator.runtime.storage import Location

__all__ = ["Token", "TokenDropped", "active_tasks"]

log = get_logger(__name__)

_LOCAL_PROPERTIES = ("spark.jobGroup.id", "spark.job.description", "spark.job.interruptOnCancel")


STOP_SIGNATURE = (
    "py4j.protocol.Py4JJavaError: An error occurred while calling the sink: "
    "java.lang.InterruptedException"
)
"""What Spark's stream thread looks for in a Python callback's error to take it for the
interruption of a stop it asked for (``StreamExecution.PROXY_ERROR``)."""


class TokenDropped(RuntimeError):
    """The work's token was dropped; raised by :meth:`Token.check` and by a dropped
    dataflow's sink.

    Its message ends with :data:`STOP_SIGNATURE`, so that a ``foreachBatch`` sink raising
    it ends its stopped query quietly. Raise it ``from None``: Spark matches the whole
    Python traceback with a backtracking regular expression, and a chained Java error
    (thousands of lines) overflows the stream thread's stack.
    """

    def __init__(self, tag: str) -> None:
        super().__init__(f"{tag} was dropped; {STOP_SIGNATURE}")
        self.tag = tag


class _QuietWhenDropped(logging.Filter):
    """Drops py4j's report of a Python callback that failed because its token was dropped.

    Only :class:`TokenDropped` is filtered, which only a dropped token's work raises: the
    same logger still reports every other callback error.
    """

    def filter(self, record: logging.LogRecord) -> bool:
        error = record.exc_info[1] if record.exc_info else None
        return not isinstance(error, TokenDropped)


logging.getLogger("py4j.clientserver").addFilter(_QuietWhenDropped())


class Token:
    """One dataflow's (or operation's) cancellation scope; see the module docstring."""

    def __init__(self, tag: str, marker: Location | None = None) -> None:
        self.tag = tag
        self.group = f"{tag}-{uuid.uuid4().hex[:12]}"
        self.marker = marker
        self._dropped = threading.Event()
        self.dropped_at: float | None = None
        """``time.monotonic()`` when dropped."""
        if marker is not None:
            with suppress(OSError):
                marker.delete()  # a new run of the same dataflow is not dropped

    @property
    def dropped(self) -> bool:
        """True once :meth:`drop` was called (from any thread)."""
        return self._dropped.is_set()

    def check(self) -> None:
        """Raise :class:`TokenDropped` if the token is dropped (for loops the runtime drives)."""
        if self.dropped:
            raise TokenDropped(self.tag)

    @contextmanager
    def scope(self, spark: SparkSession, description: str | None = None) -> Iterator[None]:
        """Spark jobs started in this thread meanwhile carry the token's group and tag."""
        context = spark.sparkContext
        saved = {key: context.getLocalProperty(key) for key in _LOCAL_PROPERTIES}
        had_tag = self.tag in context.getJobTags()
        context.setJobGroup(self.group, description or self.tag, interruptOnCancel=True)
        context.addJobTag(self.tag)
        try:
            yield
        finally:
            if not had_tag:
                context.removeJobTag(self.tag)
            for key, value in saved.items():
                context.setLocalProperty(key, value)  # type: ignore[arg-type]  # None clears

    def drop(self, spark: SparkSession | None = None) -> None:
        """Mark dropped, write the marker; with ``spark``, cancel the jobs (now and to come)."""
        if not self._dropped.is_set():
            self.dropped_at = time.monotonic()
            self._dropped.set()
        if self.marker is not None:
            with suppress(OSError):
                self.marker.write_text("")
        if spark is not None:
            self.cancel(spark, self.group, self.tag)

    @staticmethod
    def cancel(spark: SparkSession, group: str, tag: str | None = None) -> None:
        """Cancel the jobs of job group ``group`` (and its future jobs), and of ``tag``."""
        context = spark.sparkContext
        try:
            if tag is not None:
                context.cancelJobsWithTag(tag)
            jsc: Any = context._jsc
            jsc.sc().cancelJobGroupAndFutureJobs(group)
        except Exception as error:  # the context may be stopping
            log.debug("cancel", group=group, error=str(error)[:200])

    def log_failure(self, event: str, **fields: Any) -> None:
        """Log a failure of the token's work: an error, unless the token was dropped."""
        if self.dropped:
            log.debug(event, shutdown=True, **fields)
        else:
            log.error(event, **fields)


def active_tasks(spark: SparkSession, groups: list[str]) -> int:
    """Tasks still running in the stages of the jobs of ``groups`` (job group ids).

    Jobs that succeeded are skipped: their tasks all ended. A recursion runs one job per
    iteration, so its group holds hundreds of them, and each stage lookup sorts Spark's
    status store; only running and cancelled jobs can still have tasks at work.
    """
    tracker = spark.sparkContext.statusTracker()
    active = 0
    for group in groups:
        for job in tracker.getJobIdsForGroup(group):
            info = tracker.getJobInfo(job)
            if info is None or info.status == "SUCCEEDED":
                continue
            for stage in info.stageIds:
                stage_info = tracker.getStageInfo(stage)
                active += stage_info.numActiveTasks if stage_info is not None else 0
    return active
