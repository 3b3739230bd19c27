"""Fuses in a batch query's plan: where they stand, and that they change no result.

That a fuse ends a cancelled task is shown by ``test_shutdown.py``'s ``nested-loop``
scenario, which fails without it.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from pyspark.sql import DataFrame, SparkSession

from dataflow_operator.core.fuse import join_fuses
from dataflow_operator.runtime.strategies.fuse import FUSE_COLUMN, fused

pytestmark = pytest.mark.spark

QUERIES = {
    "cross": "SELECT a.x, b.x AS y FROM a, b",
    "theta left join": "SELECT a.x, b.x AS y FROM a LEFT JOIN b ON a.x < b.x",
    "equality join": "SELECT a.x, b.x AS y FROM a JOIN b ON a.x = b.x % 3",
    "semi join": "SELECT x FROM a WHERE x IN (SELECT x - 1 FROM b)",
    "existence join": "SELECT x FROM a WHERE x > 3 OR EXISTS (SELECT 1 FROM b WHERE b.x > a.x)",
    "chain after distinct": (
        "SELECT d.x, b.x AS y, c.x AS z FROM (SELECT DISTINCT x FROM a) AS d "
        "LEFT JOIN b ON d.x <> b.x JOIN c ON b.x = c.x"
    ),
    "join in a recursion": (
        "WITH RECURSIVE r(n) AS (SELECT x FROM a WHERE x = 0 "
        "UNION ALL SELECT b.x FROM r JOIN b ON b.x = r.n + 1) SELECT n FROM r"
    ),
}


@pytest.fixture
def views(spark: SparkSession) -> Iterator[None]:
    """``a`` (x = 0..5) and ``b`` (x = 0..7, twice), ``c`` (x = 2..4): small join inputs."""
    spark.createDataFrame([(i,) for i in range(6)], "x BIGINT").createOrReplaceTempView("a")
    rows = [(i,) for i in range(8)] * 2
    spark.createDataFrame(rows, "x BIGINT").createOrReplaceTempView("b")
    spark.createDataFrame([(i,) for i in range(2, 5)], "x BIGINT").createOrReplaceTempView("c")
    yield
    for name in "abc":
        spark.catalog.dropTempView(name)


def _children(node: Any) -> list[Any]:
    children = node.children()
    return [children.apply(i) for i in range(children.size())]


def _walk(node: Any, parent: Any = None) -> Iterator[tuple[Any, Any]]:
    yield node, parent
    for child in _children(node):
        yield from _walk(child, node)


def _is_fuse(node: Any) -> bool:
    """A node whose output adds the fuse column: the fuse's projection, right after a
    fused node (or, once the optimizer collapsed it into an aggregate below, that one)."""
    if node is None:
        return False
    output = node.output()
    return any(str(output.apply(i).name()) == FUSE_COLUMN for i in range(output.size()))


def _ends_with_fuse(node: Any) -> bool:
    """A fuse's last node: the projection back to the columns, over its filter."""
    if str(node.nodeName()) != "Project":
        return False
    below = _children(node)
    if not below or str(below[0].nodeName()) != "Filter":
        return False
    return _is_fuse(_children(below[0])[0])


def _joins(frame: DataFrame) -> list[tuple[Any, Any]]:
    plan = frame._jdf.queryExecution().optimizedPlan()
    return [(node, parent) for node, parent in _walk(plan) if str(node.nodeName()) == "Join"]


@pytest.mark.parametrize("name", sorted(QUERIES))
@pytest.mark.slow
def test_every_join_gets_the_fuses_core_decides_and_the_result_is_unchanged(
    spark: SparkSession, views: None, name: str
) -> None:
    plain = spark.sql(QUERIES[name])
    guarded = fused(plain)
    joins = _joins(guarded)
    assert joins, "the query has no join to fuse"
    assert FUSE_COLUMN not in str(plain._jdf.queryExecution().optimizedPlan().toString())
    jvm: Any = spark.sparkContext._jvm
    equi_keys = jvm.org.apache.spark.sql.catalyst.planning.ExtractEquiJoinKeys
    for join, parent in joins:
        where = join_fuses(str(join.joinType().toString()), equi_keys.unapply(join).isDefined())
        assert _is_fuse(parent) == where.output, (str(join.joinType()), str(parent))
        if where.inputs:  # (an input may end with a fuse of its own join otherwise)
            assert all(_ends_with_fuse(child) for child in _children(join)), str(join)
    assert sorted(guarded.collect()) == sorted(plain.collect())


def test_a_query_without_joins_is_left_as_it_is(spark: SparkSession, views: None) -> None:
    plain = spark.sql("SELECT x, count(*) AS n FROM b GROUP BY x")
    assert fused(plain) is plain


def test_the_fused_plan_is_what_spark_runs(spark: SparkSession, views: None) -> None:
    guarded = fused(spark.sql(QUERIES["theta left join"]))
    executed = str(guarded._jdf.queryExecution().executedPlan().toString())
    assert "BroadcastNestedLoopJoin" in executed
    assert executed.count("AS __fuse") == 3  # after the join and after each input
