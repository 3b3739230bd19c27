"""Every incremental operator against Spark's batch answer on one seed, in the fast tier.

The differential tests of each operator (``test_incremental_*.py``) run several seeds,
hypothesis examples and restarts, and are ``slow``; this one runs a query of each
operator side by side in one engine over one batch of one seed (inserts and deletes at
four times), so that the inner loop (``make test-fast``) checks them all against the
oracle too."""

from __future__ import annotations

from pathlib import Path

import pytest
from pyspark.sql import SparkSession
from tests.runtime.test_incremental_derived import JOINS_OF_AGGREGATES, OVER_AGGREGATES
from tests.runtime.test_incremental_join import JOINS, check_joins
from tests.runtime.test_incremental_min_max import EXTREMES
from tests.runtime.test_incremental_sessions import SESSIONS
from tests.runtime.test_incremental_set import SETS
from tests.runtime.test_incremental_top_n import TOP_NS
from tests.runtime.test_incremental_windows import WINDOWED

pytestmark = pytest.mark.spark

OPERATORS = {
    "outer_join": JOINS["full"],
    "join_aggregate": JOINS["comma_filtered"],
    "set_operation": SETS["except_all"],
    "time_window": WINDOWED["sliding"],
    "min_max_distinct": EXTREMES["distinct_count"],
    "top_n": TOP_NS["over_a_join"],
    "order_by_limit": TOP_NS["limit_of_aggregate"],
    "session_window": SESSIONS["per_key"],
    "aggregate_of_aggregate": OVER_AGGREGATES["aggregate_of_joined"],
    "join_of_aggregates": JOINS_OF_AGGREGATES["join_of_aggregates"],
}


def test_every_incremental_operator_matches_spark_on_one_seed(
    spark: SparkSession, tmp_path: Path
) -> None:
    check_joins(spark, tmp_path, seed=3, batches=1, queries=OPERATORS, strategy=None)
