"""DISTINCT and set operations maintained by per-row multiplicity in Spark state, checked
differentially against Spark's batch query (the harness of the join tests)."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pyspark.sql import SparkSession
from tests.runtime.runs import T
from tests.runtime.test_incremental_join import check_joins, seeded_half
from tests.wide import examples, seeds

from dataflow_operator.api.dataflow import DataflowSpec
from dataflow_operator.core.incremental import Strategy, plan_query
from dataflow_operator.runtime.engine.config import EngineConfig
from dataflow_operator.runtime.engine.engine import Engine, dataflows_from
from dataflow_operator.runtime.engine.running import BatchOutput

pytestmark = pytest.mark.spark

SETS = {
    "distinct": "SELECT DISTINCT k, s FROM l WHERE v < 8",
    "union": "SELECT k, s FROM l UNION SELECT k, s FROM r",
    "except": "SELECT k FROM l EXCEPT SELECT k FROM r WHERE w <> 'c'",
    "except_all": "SELECT k, s FROM l EXCEPT ALL SELECT k, s FROM r",
    "intersect": "SELECT s FROM l INTERSECT SELECT s FROM r",
    "intersect_all": "SELECT k FROM l INTERSECT ALL SELECT k FROM r",
}


# 2: the first step's inputs are not in step (uppers 14 and 12), so the second step's
# batch holds what the watermark has not reached and the third, in step, is told its
# inputs' frontier with those updates still held (the order the counts apply them in).
@pytest.mark.slow
@pytest.mark.parametrize("seed", seeds([2024, 2], wider=[5, 6, 9]))
def test_set_operations_match_spark(spark: SparkSession, tmp_path: Path, seed: int) -> None:
    check_joins(spark, tmp_path, seed, queries=SETS, strategy=Strategy.SET)


@settings(max_examples=examples(), deadline=None, suppress_health_check=list(HealthCheck))
@given(seed=st.integers(min_value=0, max_value=2**32 - 1))
@pytest.mark.slow
def test_set_operations_match_spark_on_random_changes(spark: SparkSession, seed: int) -> None:
    with tempfile.TemporaryDirectory(prefix="sets-") as directory:
        queries = seeded_half(SETS, seed)  # the fixed seed above runs them all
        check_joins(spark, Path(directory), seed, batches=3, queries=queries, strategy=Strategy.SET)


@pytest.mark.slow
def test_distinct_after_a_temporal_filter(spark: SparkSession, tmp_path: Path) -> None:
    events = tmp_path / "events"
    events.mkdir()
    rows = [
        {"k": 1, "expires": 25, "time": 10, "diff": 1},
        {"k": 1, "expires": 99, "time": 10, "diff": 1},
        {"k": 2, "expires": 25, "time": 10, "diff": 1},
    ]
    (events / "0.json").write_text("".join(json.dumps(r) + "\n" for r in rows))
    sql = "SELECT DISTINCT k FROM events WHERE mz_now() < expires"
    plan = plan_query(sql, ["events"])
    assert plan.temporal.staged and plan.maintenance.strategy is Strategy.SET
    spec = DataflowSpec.model_validate(
        {
            "cluster": "c",
            "kind": "Subscribe",
            "sources": [
                {
                    "name": "events",
                    "changelog": {
                        "path": str(events),
                        "format": "json",
                        "schema": "k INT, expires BIGINT",
                    },
                    "timeline": {"external": "erp"},
                }
            ],
            "sql": sql,
        }
    )
    outputs: list[BatchOutput] = []
    engine = Engine(spark, EngineConfig(tmp_path / "state", T), on_output=outputs.append)
    try:
        assert not engine.apply(dataflows_from([("recent", spec)])).failed
        engine.step(T)
        later = {"k": 3, "expires": 99, "time": 30, "diff": 1}
        (events / "1.json").write_text(json.dumps(later) + "\n")
        engine.step(T + 1)
        engine.step(T + 2)
        updates = sorted(u for o in outputs for u in o.updates)
        # k=2 leaves at 25 (its only row expired); k=1 stays (its other row is valid).
        assert updates == [(10, 1, (1,)), (10, 1, (2,)), (25, -1, (2,)), (30, 1, (3,))]
    finally:
        engine.close()
