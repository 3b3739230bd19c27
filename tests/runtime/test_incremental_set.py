"""DISTINCT and set operations maintained by per-row multiplicity in Spark state, checked
differentially against Spark's batch query (the harness of the join tests)."""

from __future__ import annotations

import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pyspark.sql import SparkSession
from tests.runtime.test_incremental_join import check_joins

from dataflow_operator.core.incremental import Strategy

pytestmark = pytest.mark.spark

SETS = {
    "distinct": "SELECT DISTINCT k, s FROM l WHERE v < 8",
    "union": "SELECT k, s FROM l UNION SELECT k, s FROM r",
    "except": "SELECT k FROM l EXCEPT SELECT k FROM r WHERE w <> 'c'",
    "except_all": "SELECT k, s FROM l EXCEPT ALL SELECT k, s FROM r",
    "intersect": "SELECT s FROM l INTERSECT SELECT s FROM r",
    "intersect_all": "SELECT k FROM l INTERSECT ALL SELECT k FROM r",
}


@pytest.mark.parametrize("seed", [3, 2024])
def test_set_operations_match_spark(spark: SparkSession, tmp_path: Path, seed: int) -> None:
    check_joins(spark, tmp_path, seed, queries=SETS, strategy=Strategy.SET)


@settings(max_examples=2, deadline=None, suppress_health_check=list(HealthCheck))
@given(seed=st.integers(min_value=0, max_value=2**32 - 1))
def test_set_operations_match_spark_on_random_changes(spark: SparkSession, seed: int) -> None:
    with tempfile.TemporaryDirectory(prefix="sets-") as directory:
        check_joins(spark, Path(directory), seed, batches=3, queries=SETS, strategy=Strategy.SET)
