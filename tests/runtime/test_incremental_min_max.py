"""min, max and count(DISTINCT …) kept as a multiset per group in Spark state: retracting
the current minimum reveals the next one. Checked differentially against Spark's batch
query, over one source and over a join."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest
from pyspark.sql import SparkSession
from tests.runtime.runs import maintained_and_batch
from tests.runtime.test_incremental_join import check_joins
from tests.wide import seeds

from dataflow_operator.core.incremental import Strategy

pytestmark = pytest.mark.spark

EXTREMES = {
    "per_key": "SELECT k, min(v) AS low, max(v) AS high, count(*) AS n FROM l GROUP BY k",
    "strings": "SELECT s, min(w) AS first, max(k) AS last FROM r WHERE w <> 'c' GROUP BY s",
    "distinct_count": "SELECT k, count(DISTINCT s) AS tags, count(*) AS n FROM l GROUP BY k",
    # a row with a NULL in one of them is not counted; FILTER makes its values NULL
    "distinct_pairs": (
        "SELECT k, count(DISTINCT s, v) AS pairs, count(DISTINCT v, s) FILTER (WHERE v > 2) "
        "AS big, count(*) AS n FROM l GROUP BY k"
    ),
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
        ),
        "joined_pairs": (
            "SELECT l.k, count(DISTINCT r.w, l.s) AS pairs FROM l JOIN r ON l.k = r.k GROUP BY l.k"
        ),
    }
    check_joins(spark, tmp_path, seed=11, queries=joined, strategy=Strategy.JOIN)


SPECIAL_PAIRS = [
    {"g": 1, "d": -0.0},
    {"g": 1, "d": 0.0},  # one value with -0.0 for DISTINCT
    {"g": 1, "d": float("nan")},
    {"g": 1, "d": float("nan")},  # NaN equals NaN for DISTINCT
    {"g": 1, "d": None},  # not counted
    {"g": 2, "d": 1.5},
    {"g": None, "d": 1.5},  # not counted
]


def test_count_distinct_pairs_of_special_floats_match_spark(
    spark: SparkSession, tmp_path: Path
) -> None:
    sql = "SELECT g > 0 AS positive, count(DISTINCT g, d) AS pairs FROM events GROUP BY g > 0"
    got, expected = maintained_and_batch(spark, tmp_path, sql, "g DOUBLE, d DOUBLE", SPECIAL_PAIRS)
    assert got == expected == Counter({(True, 3): 1, (None, 0): 1})
