"""Tumbling and sliding time windows in GROUP BY, kept as group keys in Spark state.
Checked differentially against Spark's batch query after every step, over one source
and over a join (the harness of tests/runtime/test_incremental_join.py)."""

from __future__ import annotations

from pathlib import Path

import pytest
from pyspark.sql import SparkSession
from tests.runtime.test_incremental_join import check_joins
from tests.wide import seeds

from dataflow_operator.core.incremental import Strategy

pytestmark = pytest.mark.spark

EVENT_TIME = "timestamp_seconds(v * 600)"
"""The harness's ``l.v`` (0 to 9) as an event time, ten minutes apart."""

WINDOWED = {
    "tumbling": (
        f"SELECT unix_seconds(window.start) AS opens, count(*) AS n, sum(v) AS total FROM l "
        f"GROUP BY window({EVENT_TIME}, '30 minutes')"
    ),
    "sliding": (
        f"SELECT k, unix_seconds(window.end) AS closes, max(s) AS high, count(*) AS n FROM l "
        f"WHERE s IS NOT NULL GROUP BY k, window({EVENT_TIME}, '30 minutes', '10 minutes') "
        "HAVING count(*) > 1"
    ),
}


@pytest.mark.parametrize("seed", seeds([21], wider=[3, 8, 50]))
@pytest.mark.slow
def test_time_windows_match_spark(spark: SparkSession, tmp_path: Path, seed: int) -> None:
    check_joins(spark, tmp_path, seed=seed, queries=WINDOWED, strategy=Strategy.AGGREGATE)


@pytest.mark.slow
def test_a_time_window_over_a_join_matches_spark(spark: SparkSession, tmp_path: Path) -> None:
    joined = {
        "joined": (
            "SELECT r.w, unix_seconds(window.start) AS opens, count(*) AS n FROM l "
            "JOIN r ON l.k = r.k GROUP BY r.w, window(timestamp_seconds(l.v * 600), '1 hour')"
        )
    }
    check_joins(spark, tmp_path, seed=4, queries=joined, strategy=Strategy.JOIN)
