"""refresh.every: a dataflow's output advances only at its refresh times."""

from __future__ import annotations

from pathlib import Path

import pytest
from pyspark.sql import SparkSession
from tests.runtime.runs import DAY, T, table_source

from dataflow_operator.api.dataflow import DataflowSpec
from dataflow_operator.core.time import format_timestamp
from dataflow_operator.runtime.engine.config import EngineConfig
from dataflow_operator.runtime.engine.engine import Engine, dataflows_from
from dataflow_operator.runtime.engine.running import BatchOutput
from dataflow_operator.runtime.inserts import insert_rows

pytestmark = pytest.mark.spark


def test_output_advances_only_at_refresh_times(spark: SparkSession, tmp_path: Path) -> None:
    events = tmp_path / "events"
    insert_rows(events, [{"n": 1}])
    spec = DataflowSpec.model_validate(
        {
            "cluster": "c",
            "kind": "Subscribe",
            "sources": [table_source("events", events, "n BIGINT")],
            "sql": "SELECT n FROM events",
            "refresh": {"every": "10d", "alignedTo": format_timestamp(T)},
        }
    )
    outputs: list[BatchOutput] = []
    engine = Engine(spark, EngineConfig(tmp_path / "state", T), on_output=outputs.append)
    try:
        assert not engine.apply(dataflows_from([("refreshed", spec)])).failed
        engine.step(T)
        insert_rows(events, [{"n": 2}])
        engine.step(T + 3 * DAY)  # between refreshes: nothing new, frontier stays
        frontier_between = engine.report().dataflows[0].frontier
        engine.step(T + 12 * DAY)  # past the refresh at T + 10d
        updates = [u for o in outputs for u in o.updates]
        assert frontier_between == [T + 1]
        assert updates == [(T, 1, (1,)), (T + 10 * DAY, 1, (2,))]
        assert engine.report().dataflows[0].frontier == [T + 10 * DAY + 1]
    finally:
        engine.close()
