"""Plan node ids: children first from 1, stable for a plan, on the plan Spark runs."""

from __future__ import annotations

import re

import pytest
from pyspark.sql import SparkSession

from dataflow_operator.core.plan import PlanTree, RawNode, number_plan
from dataflow_operator.runtime.hydration.plan import live_plan


def _check_children_first(tree: PlanTree) -> None:
    assert [node.node_id for node in tree] == list(range(1, len(tree) + 1))
    for node in tree:
        assert all(child < node.node_id for child in node.children)
        for child in node.children:
            assert tree.node(child).depth == node.depth + 1
    assert tree.root.depth == 0
    assert sorted(n.node_id for n in tree.preorder()) == list(range(1, len(tree) + 1))


def test_wrappers_are_walked_through_and_recursion_is_flagged() -> None:
    leaf = RawNode("RangeExec", "Range")
    loop = RawNode(
        "UnionLoopExec",
        "UnionLoop",
        children=(RawNode("Project", "Project", children=(RawNode("UnionLoopRef", "Ref"),)),),
    )
    codegen = RawNode(
        "WholeStageCodegenExec",
        "WholeStageCodegen (1)",
        children=(
            RawNode(
                "BroadcastHashJoinExec",
                "BroadcastHashJoin",
                children=(RawNode("InputAdapter", "InputAdapter", children=(leaf,)), loop),
            ),
        ),
    )
    root = RawNode("AdaptiveSparkPlanExec", "AdaptiveSparkPlan", children=(codegen,))
    tree, raws = number_plan(root)
    _check_children_first(tree)
    assert [n.operator for n in tree] == [
        "Range",
        "Ref",
        "Project",
        "UnionLoop",
        "BroadcastHashJoin",
    ]
    assert [n.recursive for n in tree] == [False, True, True, True, False]
    assert raws[1] is leaf
    assert tree.render(node_ids=True)[0] == "BroadcastHashJoin // { node_id: 5 }"
    assert tree.render()[1] == "  Range"


def test_a_plan_without_operators_is_refused() -> None:
    with pytest.raises(ValueError, match="one root operator"):
        number_plan(RawNode("InputAdapter", "InputAdapter"))


@pytest.mark.spark
def test_join_and_aggregate_ids_are_children_first_and_stable(spark: SparkSession) -> None:
    spark.range(2000).selectExpr("id", "id % 10 AS k").createOrReplaceTempView("plan_facts")
    spark.range(10).selectExpr("id AS k", "CAST(id AS STRING) AS name").createOrReplaceTempView(
        "plan_dims"
    )
    sql = (
        "SELECT d.name, count(*) AS c, sum(f.id) AS s "
        "FROM plan_facts f JOIN plan_dims d ON f.k = d.k GROUP BY d.name"
    )
    df = spark.sql(sql)
    before = live_plan(df._jdf.queryExecution().executedPlan())
    tree = before.tree
    _check_children_first(tree)
    operators = [node.operator for node in tree]
    assert "HashAggregate" in operators
    assert any("Join" in op for op in operators)
    assert any(node.is_exchange for node in tree)
    assert not any(node.recursive for node in tree)

    # The same plan numbered again, planned again, and after adaptive execution ran it:
    # the same ids for the same operators.
    again = live_plan(df._jdf.queryExecution().executedPlan()).tree
    replanned = live_plan(spark.sql(sql)._jdf.queryExecution().executedPlan()).tree
    df.collect()
    executed = live_plan(df._jdf.queryExecution().executedPlan()).tree
    shape = [(n.node_id, n.operator, n.children) for n in tree]
    for other in (again, replanned, executed):
        assert [(n.node_id, n.operator, n.children) for n in other] == shape

    # Spark's own formatted explain (of the plan before it runs) numbers them the same.
    spark_ids = _formatted_explain_ids(spark.sql(sql))
    for node in tree:
        assert spark_ids.get(node.node_id, "").startswith(node.operator), (node, spark_ids)


def _formatted_explain_ids(df: object) -> dict[int, str]:
    """``(N) Operator`` headers of Spark's formatted explain, by N."""
    text = df._sc._jvm.PythonSQLUtils.explainString(  # type: ignore[attr-defined]
        df._jdf.queryExecution(),  # type: ignore[attr-defined]
        "formatted",
    )
    return {
        int(m.group(1)): m.group(2) for m in re.finditer(r"^\((\d+)\) (\S+)", text, re.MULTILINE)
    }


@pytest.mark.spark
def test_live_metrics_are_read_from_the_plan(spark: SparkSession) -> None:
    df = spark.range(500).selectExpr("id % 7 AS k").groupBy("k").count()
    df.collect()
    plan = live_plan(df._jdf.queryExecution().executedPlan())
    rows = {
        node.node_id: plan.metrics(node.node_id).get("numOutputRows")
        for node in plan.tree
        if "numOutputRows" in node.metrics
    }
    assert rows, "some operator counts its output rows"
    assert max(v or 0 for v in rows.values()) >= 7


@pytest.mark.spark
def test_recursive_part_is_flagged(spark: SparkSession) -> None:
    df = spark.sql(
        "WITH RECURSIVE r(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM r WHERE n < 5) "
        "SELECT count(*) FROM r"
    )
    tree = live_plan(df._jdf.queryExecution().executedPlan()).tree
    _check_children_first(tree)
    loop = next(node for node in tree if node.operator == "UnionLoop")
    assert loop.recursive and loop.children
    assert all(tree.node(child).recursive for child in loop.children)
    assert not tree.root.recursive
