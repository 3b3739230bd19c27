"""Every incremental operator against Spark's batch answer on one seed, side by side.

The differential tests of each operator (``test_incremental_*.py``) run several seeds,
hypothesis examples and restarts, and are ``slow``; this one runs a query of each
operator side by side in one engine over one batch of one seed (inserts and deletes at
four times). A query costs Spark's planning and first batch, seconds each, so the inner
loop (``make test-fast``) runs :data:`FAST` — a join's arrangements and an aggregate's
totals over them, and a top-N's ranked state over a join — and the rest are ``slow``."""

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

FAST = {
    "join_aggregate": JOINS["comma_filtered"],
    "top_n": TOP_NS["over_a_join"],
}
"""The operators the fast tier checks: between them, each kind of state a join, an
aggregate and a top-N keep."""
REST = {
    "outer_join": JOINS["full"],
    "set_operation": SETS["except_all"],
    "time_window": WINDOWED["sliding"],
    "min_max_distinct": EXTREMES["distinct_count"],
    "order_by_limit": TOP_NS["limit_of_aggregate"],
    "session_window": SESSIONS["per_key"],
    "aggregate_of_aggregate": OVER_AGGREGATES["aggregate_of_joined"],
    "join_of_aggregates": JOINS_OF_AGGREGATES["join_of_aggregates"],
}


@pytest.mark.parametrize(
    "operators",
    [pytest.param(FAST, id="fast"), pytest.param(REST, id="rest", marks=pytest.mark.slow)],
)
def test_every_incremental_operator_matches_spark_on_one_seed(
    spark: SparkSession, tmp_path: Path, operators: dict[str, str]
) -> None:
    check_joins(spark, tmp_path, seed=3, batches=1, queries=operators, strategy=None)
