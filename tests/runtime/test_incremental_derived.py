"""Queries made of maintained subqueries — an aggregate of an aggregate, a join with an
aggregate, a join of two aggregates, a projection of one — checked differentially
against Spark's batch query (the harness of the join tests)."""

from __future__ import annotations

import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pyspark.sql import SparkSession
from tests.runtime.test_incremental_join import check_joins, seeded_half
from tests.wide import examples, seeds

from dataflow_operator.core.incremental import Strategy

pytestmark = pytest.mark.spark

OVER_AGGREGATES = {
    # Nexmark q4's shape: an aggregate of a join's aggregate.
    "aggregate_of_joined": (
        "SELECT w, sum(total) AS t, count(*) AS n, max(total) AS top FROM ("
        "SELECT r.w, l.k, sum(l.v) AS total FROM l JOIN r ON l.k = r.k GROUP BY r.w, l.k"
        ") AS g GROUP BY w"
    ),
    # Two levels of one source's aggregates: how many keys have each count.
    "aggregate_of_aggregate": (
        "SELECT n, count(*) AS keys FROM (SELECT k, count(*) AS n FROM l GROUP BY k) AS c "
        "GROUP BY n"
    ),
}
JOINS_OF_AGGREGATES = {
    # q7's shape: the rows that are their key's highest.
    "join_with_aggregate": (
        "SELECT l.k, l.v, l.s FROM l JOIN (SELECT k, max(v) AS top FROM l GROUP BY k) AS m "
        "ON l.k = m.k AND l.v = m.top"
    ),
    # q8's and q5's shape: two aggregates joined, one of them of an aggregate.
    "join_of_aggregates": (
        "SELECT a.k, a.n, b.m FROM (SELECT k, count(*) AS n FROM l GROUP BY k) AS a "
        "JOIN (SELECT k, max(n) AS m FROM (SELECT k, w, count(*) AS n FROM r GROUP BY k, w) "
        "AS c GROUP BY k) AS b ON a.k = b.k AND a.n >= b.m"
    ),
}
PROJECTIONS = {
    "projection_of_aggregate": (
        "SELECT k, n * 2 AS twice FROM (SELECT k, count(*) AS n FROM l GROUP BY k) AS c WHERE n > 1"
    ),
}


@pytest.mark.slow
@pytest.mark.parametrize("seed", seeds([17], wider=[18, 19]))
def test_queries_of_maintained_subqueries_match_spark(
    spark: SparkSession, tmp_path: Path, seed: int
) -> None:
    for name, (queries, strategy) in {
        "aggregates": (OVER_AGGREGATES, Strategy.AGGREGATE),
        "joins": (JOINS_OF_AGGREGATES, Strategy.JOIN),
        "projections": (PROJECTIONS, Strategy.LINEAR),
    }.items():
        check_joins(spark, tmp_path / name, seed, queries=queries, strategy=strategy)


@settings(max_examples=examples(), deadline=None, suppress_health_check=list(HealthCheck))
@given(seed=st.integers(min_value=0, max_value=2**32 - 1))
@pytest.mark.slow
def test_joins_of_aggregates_match_spark_on_random_changes(spark: SparkSession, seed: int) -> None:
    with tempfile.TemporaryDirectory(prefix="derived-") as directory:
        queries = seeded_half(JOINS_OF_AGGREGATES, seed)
        check_joins(spark, Path(directory), seed, batches=3, queries=queries)


@pytest.mark.slow
def test_an_aggregate_of_a_joined_aggregate_restarted_from_its_checkpoint_matches_spark(
    spark: SparkSession, tmp_path: Path
) -> None:
    # Batches in which one input changes alone: the join's output waits for the other's
    # frontier, and the aggregates above it with it, across the restart.
    check_joins(
        spark,
        tmp_path,
        seed=8,
        batches=5,
        restart_before=2,
        queries=OVER_AGGREGATES,
        strategy=Strategy.AGGREGATE,
        changing=["lr", "l", "r", "l", "lr"],
    )
