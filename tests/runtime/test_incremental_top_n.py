"""Top-N per partition maintained in Spark state, checked differentially against Spark's
batch query (the harness of the join tests).

Each query orders by every column its output shows (or ties only rows it shows alike),
so that Spark's own answer does not depend on how it numbers tied rows."""

from __future__ import annotations

import tempfile
from collections import Counter
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pyspark.sql import SparkSession
from tests.runtime.runs import maintained_and_batch
from tests.runtime.test_incremental_join import check_joins, seeded_half
from tests.wide import examples, seeds

from dataflow_operator.core.incremental import Strategy

pytestmark = pytest.mark.spark

TOP_NS = {
    "top_two": (
        "SELECT k, s, v, rn FROM (SELECT *, ROW_NUMBER() OVER "
        "(PARTITION BY k ORDER BY v DESC, s) AS rn FROM l) WHERE rn <= 2"
    ),
    "first": (
        "SELECT k, v FROM (SELECT k, v, ROW_NUMBER() OVER (PARTITION BY k "
        "ORDER BY v, s DESC NULLS FIRST) AS r FROM l WHERE v > 1) AS t WHERE r = 1 AND t.v < 8"
    ),
    "global_range": (
        "SELECT s, v, rn FROM (SELECT s, v, ROW_NUMBER() OVER (ORDER BY v DESC, s) AS rn "
        "FROM l) WHERE rn BETWEEN 2 AND 4"
    ),
    # Ranked over a join (Nexmark's q9): the join maintained on its own, the top-N over it.
    "over_a_join": (
        "SELECT v, w, rn FROM (SELECT l.v, r.w, ROW_NUMBER() OVER (PARTITION BY l.k "
        "ORDER BY l.v DESC, r.w, l.s) AS rn FROM l JOIN r ON l.k = r.k) WHERE rn <= 2"
    ),
    "expressions": (
        "SELECT * FROM (SELECT k, upper(s) AS u, ROW_NUMBER() OVER (PARTITION BY k % 2 "
        "ORDER BY v * 2 DESC, upper(s) NULLS LAST, k) AS rn FROM l) WHERE 3 > rn"
    ),
    # ORDER BY … LIMIT: a top-N without partitions, its output without a rank
    "limit": "SELECT k, s, v FROM l ORDER BY v DESC, k, s LIMIT 3",
    "offset": "SELECT v AS x, s FROM l WHERE v > 1 ORDER BY x, 2 NULLS LAST LIMIT 2 OFFSET 1",
    "limit_of_aggregate": "SELECT k, count(*) AS n FROM l GROUP BY k ORDER BY n DESC, k LIMIT 2",
    "limit_of_join": "SELECT l.v, r.w FROM l JOIN r ON l.k = r.k ORDER BY l.v, r.w DESC LIMIT 4",
}


@pytest.mark.slow
@pytest.mark.parametrize("seed", seeds([11], wider=[12, 13]))
def test_top_ns_match_spark(spark: SparkSession, tmp_path: Path, seed: int) -> None:
    check_joins(spark, tmp_path, seed, queries=TOP_NS, strategy=Strategy.TOP_N)


@settings(max_examples=examples(), deadline=None, suppress_health_check=list(HealthCheck))
@given(seed=st.integers(min_value=0, max_value=2**32 - 1))
@pytest.mark.slow
def test_top_ns_match_spark_on_random_changes(spark: SparkSession, seed: int) -> None:
    with tempfile.TemporaryDirectory(prefix="top-n-") as directory:
        queries = seeded_half(TOP_NS, seed)  # the fixed seed above runs them all
        check_joins(
            spark, Path(directory), seed, batches=3, queries=queries, strategy=Strategy.TOP_N
        )


@pytest.mark.slow
def test_a_top_n_restarted_from_its_checkpoint_matches_spark(
    spark: SparkSession, tmp_path: Path
) -> None:
    # Batches in which only one input changes: the other's frontier holds the top-N's
    # output back, and what it held must come out of the checkpoint after the restart.
    queries = {name: TOP_NS[name] for name in ("top_two", "global_range")}
    check_joins(
        spark,
        tmp_path,
        seed=4,
        batches=5,
        restart_before=2,
        queries=queries,
        strategy=Strategy.TOP_N,
        changing=["lr", "l", "r", "l", "lr"],
    )


SPECIAL = [
    {"g": 1, "d": float("nan"), "t": "2026-01-01T00:00:00.000001Z"},
    {"g": 1, "d": float("inf"), "t": "2026-01-01T00:00:00Z"},
    {"g": 1, "d": None, "t": "2026-01-01T00:00:00Z"},
    {"g": 1, "d": -0.0, "t": "2026-01-01T00:00:00.000002Z"},
    {"g": 1, "d": 0.0, "t": "2026-01-01T00:00:00.000001Z"},
    {"g": 1, "d": float("-inf"), "t": "2025-12-31T23:59:59Z"},
    {"g": 1, "d": 2.5, "t": None},
    {"g": -0.0, "d": 2.5, "t": "2026-01-01T00:00:00Z"},
    {"g": 0.0, "d": 1e300, "t": "2026-01-01T00:00:00Z"},
    {"g": None, "d": 1.0, "t": "2026-01-01T00:00:00Z"},
]


@pytest.mark.parametrize(
    "order", ["d DESC, t", "d NULLS LAST, t DESC", "t DESC NULLS FIRST, d", "d DESC NULLS FIRST, t"]
)
def test_special_values_rank_as_spark_ranks_them(
    spark: SparkSession, tmp_path: Path, order: str
) -> None:
    # NaN above every number, the infinities, NULLs first or last, -0.0 equal to 0.0 (as a
    # partition too), and timestamps a microsecond apart.
    sql = (
        "SELECT g, d, t, rn FROM (SELECT *, ROW_NUMBER() OVER (PARTITION BY g "
        f"ORDER BY {order}) AS rn FROM events) WHERE rn <= 5"
    )
    schema = "g DOUBLE, d DOUBLE, t TIMESTAMP"
    got, expected = maintained_and_batch(spark, tmp_path, sql, schema, SPECIAL)
    assert _comparable(got) == _comparable(expected)


def _comparable(rows: Counter[tuple[Any, ...]]) -> Counter[str]:
    """Rows as text: NaN equals NaN, -0.0 and 0.0 are one partition, timestamps are
    UTC (the session's time zone; Spark's rows carry none, the engine's say UTC)."""

    def value(v: Any) -> Any:
        if isinstance(v, datetime):
            return (
                v.replace(tzinfo=None)
                if v.tzinfo is None
                else v.astimezone(UTC).replace(tzinfo=None)
            )
        return 0.0 if v == 0 else v

    return Counter({repr(tuple(value(v) for v in row)): n for row, n in rows.items()})
