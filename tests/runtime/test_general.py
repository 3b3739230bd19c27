"""GENERAL queries (a join on a range, a global aggregate): recomputed at each changed time
and diffed."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import SparkSession
from tests.runtime.runs import T

from dataflow_operator.api.dataflow import DataflowSpec
from dataflow_operator.runtime.engine.config import EngineConfig
from dataflow_operator.runtime.engine.engine import Engine, dataflows_from
from dataflow_operator.runtime.engine.running import BatchOutput

pytestmark = pytest.mark.spark


def _changelog(path: Path, name: str, updates: list[dict[str, Any]]) -> None:
    path.mkdir(parents=True, exist_ok=True)
    (path / name).write_text("".join(json.dumps(u) + "\n" for u in updates))


def _source(name: str, path: Path, schema: str) -> dict[str, Any]:
    return {
        "name": name,
        "changelog": {"path": str(path), "format": "json", "schema": schema},
        "timeline": {"external": "erp"},
    }


@pytest.mark.slow
def test_a_range_join_and_max_are_maintained_by_recompute_and_diff(
    spark: SparkSession, tmp_path: Path
) -> None:
    orders, customers = tmp_path / "orders", tmp_path / "customers"
    _changelog(customers, "a.json", [{"id": 1, "name": "ada", "time": 1, "diff": 1}])
    _changelog(
        orders,
        "a.json",
        [
            {"customer": 1, "amount": 5, "time": 2, "diff": 1},
            {"customer": 1, "amount": 9, "time": 2, "diff": 1},
        ],
    )
    sources = [
        _source("orders", orders, "customer BIGINT, amount BIGINT"),
        _source("customers", customers, "id BIGINT, name STRING"),
    ]
    sql = (
        "SELECT c.name, max(o.amount) AS biggest FROM orders o "
        "JOIN customers c ON o.customer BETWEEN c.id AND c.id GROUP BY c.name"
    )
    spec = DataflowSpec.model_validate(
        {"cluster": "c", "kind": "Subscribe", "sources": sources, "sql": sql}
    )
    outputs: list[BatchOutput] = []
    engine = Engine(spark, EngineConfig(tmp_path / "state", T), on_output=outputs.append)
    try:
        count = DataflowSpec.model_validate(
            {
                "cluster": "c",
                "kind": "Subscribe",
                "sources": sources[:1],
                "sql": "SELECT count(*) AS n FROM orders",
            }
        )
        result = engine.apply(dataflows_from([("biggest", spec), ("count", count)]))
        assert not result.failed, result.failed
        engine.step(T)
        _changelog(orders, "b.json", [{"customer": 1, "amount": 9, "time": 5, "diff": -1}])
        engine.step(T + 1)
        updates = sorted(u for o in outputs for u in o.updates if o.dataflow == "biggest")
        assert updates == [(2, 1, ("ada", 9)), (5, -1, ("ada", 9)), (5, 1, ("ada", 5))]
        # A global aggregate (no GROUP BY) is maintained the same way.
        counts = sorted(u for o in outputs for u in o.updates if o.dataflow == "count")
        assert counts == [(2, 1, (2,)), (5, -1, (2,)), (5, 1, (1,))]
        # Both say so in their report (what the Dataflow's status shows), and why.
        reports = {r.name: r for r in engine.report().dataflows}
        assert {r.strategy for r in reports.values()} == {"Recompute"}
        assert reports["biggest"].strategy_reason == (
            "a join condition that is not a conjunction of equalities between the two inputs"
        )
        assert reports["count"].strategy_reason == (
            "an aggregate without GROUP BY (its one row exists even over no input)"
        )
    finally:
        engine.close()
