"""Session windows maintained in Spark state, checked differentially against Spark's batch
query (the harness of the join tests).

The rows' times are expressions of the harness's columns (``timestamp_seconds(v)``), so
random inserts and deletes join sessions into one and split them again."""

from __future__ import annotations

import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pyspark.sql import SparkSession
from tests.runtime.test_incremental_join import check_joins, seeded_half
from tests.wide import examples, seeds

from dataflow_operator.core.incremental import Strategy, plan_query

pytestmark = pytest.mark.spark

SESSIONS = {
    "per_key": (
        "SELECT k, count(*) AS n, sum(v) AS total, session_window.start AS first, "
        "session_window.end AS last FROM l GROUP BY k, session_window(timestamp_seconds(v), "
        "'2 seconds')"
    ),
    # the window as a struct; a WHERE applied before the rows are put in sessions
    "global": (
        "SELECT session_window, min(s) AS low, max(v) AS high FROM l WHERE s IS NOT NULL "
        "GROUP BY session_window(timestamp_seconds(v), '1 second')"
    ),
    "having": (
        "SELECT s, session_window.end AS e, count(*) AS n FROM l GROUP BY s, "
        "session_window(timestamp_seconds(v * 2), '3 seconds') HAVING count(*) > 1"
    ),
    # rows without a time are in no session; a gap in milliseconds
    "untimed": (
        "SELECT k, s, count(v) AS n, session_window.start AS b FROM l GROUP BY k, s, "
        "session_window(timestamp_millis(CASE WHEN v > 7 THEN NULL ELSE v * 700 END), "
        "'1500 milliseconds')"
    ),
    "other_input": (
        "SELECT w, count(*) AS n, avg(k) AS mean FROM r "
        "GROUP BY w, session_window(timestamp_seconds(r.k * 3), '3 seconds')"
    ),
}


def check_sessions(
    spark: SparkSession,
    directory: Path,
    seed: int,
    queries: dict[str, str],
    batches: int = 4,
    restart_before: int | None = None,
    changing: list[str] | None = None,
) -> None:
    """The join harness over session-window queries, each a GROUP BY over a sessionizer."""
    for sql in queries.values():
        derived = plan_query(sql, ["l", "r"]).maintenance.derived
        assert [d.plan.strategy for d in derived] == [Strategy.SESSION], sql
    check_joins(
        spark,
        directory,
        seed,
        batches=batches,
        restart_before=restart_before,
        queries=queries,
        strategy=Strategy.AGGREGATE,
        changing=changing,
    )


@pytest.mark.slow
@pytest.mark.parametrize("seed", seeds([21], wider=[22, 23]))
def test_session_windows_match_spark(spark: SparkSession, tmp_path: Path, seed: int) -> None:
    check_sessions(spark, tmp_path, seed, SESSIONS)


@settings(max_examples=examples(), deadline=None, suppress_health_check=list(HealthCheck))
@given(seed=st.integers(min_value=0, max_value=2**32 - 1))
@pytest.mark.slow
def test_session_windows_match_spark_on_random_changes(spark: SparkSession, seed: int) -> None:
    with tempfile.TemporaryDirectory(prefix="sessions-") as directory:
        queries = seeded_half(SESSIONS, seed)  # the fixed seed above runs them all
        check_sessions(spark, Path(directory), seed, queries, batches=3)


@pytest.mark.slow
def test_sessions_restarted_from_their_checkpoint_match_spark(
    spark: SparkSession, tmp_path: Path
) -> None:
    # Batches in which one input changes alone: the sessions' state and what the
    # aggregate over them holds must come back from the checkpoint after the restart.
    queries = {name: SESSIONS[name] for name in ("per_key", "other_input")}
    check_sessions(
        spark,
        tmp_path,
        5,
        queries,
        batches=5,
        restart_before=2,
        changing=["lr", "l", "r", "l", "lr"],
    )
