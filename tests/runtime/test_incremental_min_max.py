"""min, max and count(DISTINCT …) kept as a multiset per group in Spark state: retracting
the current minimum reveals the next one. Checked differentially against Spark's batch
query, over one source and over a join."""

from __future__ import annotations

from pathlib import Path

import pytest
from pyspark.sql import SparkSession
from tests.runtime.test_incremental_join import check_joins
from tests.wide import seeds

from dataflow_operator.core.incremental import Strategy

pytestmark = pytest.mark.spark

EXTREMES = {
    "per_key": "SELECT k, min(v) AS low, max(v) AS high, count(*) AS n FROM l GROUP BY k",
    "strings": "SELECT s, min(w) AS first, max(k) AS last FROM r WHERE w <> 'c' GROUP BY s",
    "distinct_count": "SELECT k, count(DISTINCT s) AS tags, count(*) AS n FROM l GROUP BY k",
}


@pytest.mark.slow
@pytest.mark.parametrize("seed", seeds([5, 77], wider=[3, 11]))
def test_min_and_max_match_spark(spark: SparkSession, tmp_path: Path, seed: int) -> None:
    check_joins(spark, tmp_path, seed, queries=EXTREMES, strategy=Strategy.AGGREGATE)


@pytest.mark.slow
def test_count_distinct_over_a_join_matches_spark(spark: SparkSession, tmp_path: Path) -> None:
    joined = {
        "joined": (
            "SELECT r.w, count(DISTINCT l.v) AS values, min(l.v) AS low FROM l "
            "LEFT JOIN r ON l.k = r.k GROUP BY r.w"
        )
    }
    check_joins(spark, tmp_path, seed=11, queries=joined, strategy=Strategy.JOIN)
