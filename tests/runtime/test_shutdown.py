"""Fast shutdown: a busy dataflow dropped beside a running sibling stops, quietly."""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import structlog
from pyspark.sql import SparkSession
from tests.runtime.shutdown_scenarios import (
    HEAVY,
    SIBLING,
    executor_running_tasks,
    groups_of,
    replica,
    report_within,
    wait_busy,
)

from dataflow_operator.runtime.engine.engine import dataflows_from
from dataflow_operator.runtime.storage import Location
from dataflow_operator.runtime.token import Token, TokenDropped, active_tasks

pytestmark = pytest.mark.spark

ROWS = {"cross": 3000, "nested-loop": 3000, "snapshot": 400_000, "recursion": 3000}
SUSTAINED = {"cross": 3.0, "nested-loop": 3.0}
"""Seconds a join's tasks run without a pause before the drop: well inside the join's
stage (the first stages, reading and grouping 3,000 rows, are over by then)."""


@pytest.fixture
def spark_errors(spark: SparkSession) -> Iterator[Any]:
    """Spark's own ERROR (and worse) log lines while the test runs, in a JVM StringWriter."""
    jvm: Any = spark.sparkContext._jvm
    log4j = jvm.org.apache.logging.log4j
    context = log4j.LogManager.getContext(False)
    config = context.getConfiguration()
    writer = jvm.java.io.StringWriter()
    layout = log4j.core.layout.PatternLayout.newBuilder().withPattern("%p %c: %m%n").build()
    appender = log4j.core.appender.WriterAppender.createAppender(
        layout, None, writer, "shutdown-test", False, True
    )
    appender.start()
    config.getRootLogger().addAppender(appender, log4j.Level.ERROR, None)
    context.updateLoggers()
    try:
        yield writer
    finally:
        config.getRootLogger().removeAppender("shutdown-test")
        context.updateLoggers()
        appender.stop()


@pytest.mark.timeout(600)
@pytest.mark.parametrize("kind", ["cross", "nested-loop", "snapshot", "recursion"])
@pytest.mark.slow
def test_a_busy_dataflow_dropped_stops_quietly_while_its_sibling_advances(
    spark: SparkSession,
    tmp_path: Path,
    kind: str,
    spark_errors: Any,
    caplog: pytest.LogCaptureFixture,
    capfd: pytest.CaptureFixture[str],
) -> None:
    with (
        structlog.testing.capture_logs() as logs,
        replica(spark, kind, tmp_path, ROWS[kind]) as running,
    ):
        engine = running.engine
        heavy = engine.running(HEAVY)
        assert heavy is not None
        wait_busy(spark, groups_of(heavy), timeout=240, sustained=SUSTAINED.get(kind, 0.0))
        time.sleep(1.0)  # well inside its work
        groups = groups_of(heavy)
        before = running.frontier(SIBLING)

        started = time.monotonic()
        result = engine.apply(dataflows_from([(SIBLING, running.specs[SIBLING])]))
        assert time.monotonic() - started < 10  # the drop does not wait for the work
        assert result.dropped == [HEAVY] and result.unchanged == [SIBLING]
        report = report_within(engine, timeout=5)
        assert report is not None, "GET /status did not answer during the drop"
        reported = {d.name: d for d in report.dataflows}
        assert HEAVY not in reported or reported[HEAVY].dropping

        deadline = time.monotonic() + 60
        while any(d.name == HEAVY for d in engine.report().dataflows):
            assert time.monotonic() < deadline, "the dropped dataflow never left the report"
            time.sleep(0.05)
        stopped_after = time.monotonic() - started
        assert active_tasks(spark, groups) == 0
        assert stopped_after < 30, stopped_after

        deadline = time.monotonic() + 120
        while running.frontier(SIBLING) <= before:
            assert time.monotonic() < deadline, "the sibling stopped advancing"
            time.sleep(0.1)
        running.stop.set()
        deadline = time.monotonic() + 20
        while executor_running_tasks(spark):  # nothing of the heavy one runs on
            assert time.monotonic() < deadline, "tasks still running after everything stopped"
            time.sleep(0.1)
        assert not running.errors, running.errors
        sibling = next(d for d in engine.report().dataflows if d.name == SIBLING)
        assert sibling.last_error is None
        assert engine.report().shutdowns is not None
        assert engine.report().shutdowns.total == 1  # type: ignore[union-attr]
    errors = [entry for entry in logs if entry["log_level"] == "error"]
    assert errors == [], errors
    stdlib = [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR]
    assert stdlib == [], stdlib  # py4j reports failed callbacks through logging
    assert str(spark_errors.toString()) == ""
    jvm_stderr = capfd.readouterr().err  # what the JVM prints itself, beside its log
    assert "Exception in thread" not in jvm_stderr, jvm_stderr[-2000:]


def test_spark_lines_that_only_repeat_an_interruption_stay_out_of_the_log(
    spark: SparkSession, spark_errors: Any
) -> None:
    log4j: Any = spark.sparkContext._jvm.org.apache.logging.log4j  # type: ignore[union-attr]
    lines = {
        "org.apache.spark.storage.ShuffleBlockFetcherIterator": [
            "Error occurred while fetching local blocks, null",  # an interrupted read
            "Error occurred while fetching local blocks, No space left on device",
        ],
        "org.apache.spark.broadcast.TorrentBroadcast": [
            "Store broadcast broadcast_7 fail, remove all pieces of the broadcast",
        ],
        "org.apache.spark.storage.DiskBlockObjectWriter": [
            "Exception occurred while manually close the output stream to file "
            "/tmp/blockmgr-1/29/temp_shuffle_e6a2, Stream Closed",  # an interrupted write
            "Exception occurred while manually close the output stream to file "
            "/tmp/blockmgr-1/29/temp_shuffle_e6a2, No space left on device",
        ],
        "org.apache.spark.SparkContext": ["a real failure"],
    }
    for logger, messages in lines.items():
        for message in messages:
            log4j.LogManager.getLogger(logger).error(message)
    assert str(spark_errors.toString()).splitlines() == [
        "ERROR org.apache.spark.storage.ShuffleBlockFetcherIterator: "
        "Error occurred while fetching local blocks, No space left on device",
        "ERROR org.apache.spark.storage.DiskBlockObjectWriter: Exception occurred while "
        "manually close the output stream to file /tmp/blockmgr-1/29/temp_shuffle_e6a2, "
        "No space left on device",
        "ERROR org.apache.spark.SparkContext: a real failure",
    ]


def test_py4j_reports_only_callbacks_failed_for_other_reasons(
    caplog: pytest.LogCaptureFixture,
) -> None:
    py4j = logging.getLogger("py4j.clientserver")
    for error in (TokenDropped("dataflow-gone"), ValueError("a real bug")):
        try:
            raise error
        except Exception:
            py4j.exception("There was an exception while executing the Python Proxy")
    failures = [r.exc_info[1] for r in caplog.records if r.exc_info]
    assert [type(e) for e in failures] == [ValueError]


def test_errors_are_quiet_only_for_a_dropped_token() -> None:
    live, dropped = Token("dataflow-live"), Token("dataflow-gone")
    dropped.drop()
    with structlog.testing.capture_logs() as logs:
        live.log_failure("dataflow failed", dataflow="live", error="boom")
        dropped.log_failure("dataflow failed", dataflow="gone", error="cancelled")
    levels = {entry["dataflow"]: entry["log_level"] for entry in logs}
    assert levels == {"live": "error", "gone": "debug"}
    assert dropped.dropped and not live.dropped
    with pytest.raises(RuntimeError):
        dropped.check()
    live.check()


def test_marker_written_on_drop_and_cleared_for_a_new_run(tmp_path: Path) -> None:
    marker = Location.of(tmp_path / "flow" / "dropped")
    token = Token("dataflow-flow", marker)
    assert not marker.exists()
    token.drop()
    assert marker.exists() and token.dropped_at is not None
    Token("dataflow-flow", marker)  # the next run of the same dataflow
    assert not marker.exists()
