"""A dataflow reading another dataflow's output (views over views)."""

from __future__ import annotations

from pathlib import Path

import pytest
from pyspark.sql import SparkSession
from tests.runtime.runs import (
    DAY,
    LAST_30_DAYS_SQL,
    T,
    dataflow_manifest,
    run_replica,
    table_source,
    write_manifests,
)

from dataflow_operator.api.dataflow import DataflowSpec
from dataflow_operator.api.injection import EXIT_OK
from dataflow_operator.api.protocol import DesiredDataflows
from dataflow_operator.core.time import format_timestamp
from dataflow_operator.runtime.engine.config import EngineConfig
from dataflow_operator.runtime.engine.engine import Engine, dataflows_from
from dataflow_operator.runtime.engine.running import BatchOutput
from dataflow_operator.runtime.inserts import insert_rows

pytestmark = pytest.mark.spark


@pytest.mark.slow
def test_chain_of_two_dataflows(spark: SparkSession, tmp_path: Path) -> None:
    events = tmp_path / "events"
    insert_rows(
        events,
        [
            {"content": "hello", "event_ts": format_timestamp(T)},
            {"content": "old", "event_ts": format_timestamp(T - 40 * DAY)},
        ],
    )
    source = table_source("events", events, "content STRING, event_ts TIMESTAMP")
    manifest = write_manifests(
        tmp_path / "chain.yaml",
        [
            dataflow_manifest("recent", LAST_30_DAYS_SQL, [source], kind="Index"),
            dataflow_manifest(
                "loud",
                "SELECT upper(content) AS loud, event_ts FROM recent WHERE content <> 'x'",
                [{"name": "recent", "dataflow": {"name": "recent"}}],
            ),
        ],
    )
    argv = [str(manifest), "--start-time", str(T), "--clock", "simulated", "--tick", "10d"]
    argv += ["--until", str(T + 31 * DAY), "--state-dir", str(tmp_path / "state")]
    result = run_replica(spark, tmp_path, argv)
    assert result.code == EXIT_OK, result.err
    # Only the downstream Subscribe prints; it sees the upstream's insert and retraction.
    assert result.lines == [
        [str(T), "1", "HELLO", format_timestamp(T)],
        [str(T + 30 * DAY + 1), "-1", "HELLO", format_timestamp(T)],
    ]
    assert result.dataflow("recent")["frontier"] == [T + 31 * DAY]
    assert result.dataflow("loud")["frontier"] == [T + 31 * DAY]


@pytest.mark.slow
def test_changing_the_upstream_restarts_its_readers(spark: SparkSession, tmp_path: Path) -> None:
    events = tmp_path / "events"
    insert_rows(events, [{"n": 1}, {"n": 2}])
    source = table_source("events", events, "n BIGINT")

    def specs(threshold: int) -> DesiredDataflows:
        up = {"cluster": "c", "kind": "Index", "sources": [source]}
        up["sql"] = f"SELECT n FROM events WHERE n >= {threshold}"
        down = {"cluster": "c", "kind": "Subscribe", "sql": "SELECT n * 10 AS m FROM big"}
        down["sources"] = [{"name": "big", "dataflow": {"name": "big"}}]
        return dataflows_from(
            [("big", DataflowSpec.model_validate(up)), ("tens", DataflowSpec.model_validate(down))]
        )

    outputs: list[BatchOutput] = []
    config = EngineConfig(tmp_path / "state", T, reset=frozenset({"big", "tens"}))
    engine = Engine(spark, config, on_output=outputs.append)
    try:
        assert not engine.apply(specs(2)).failed
        engine.step(T)
        result = engine.apply(specs(1))
        assert result.reinstalled == ["big", "tens"]
        engine.step(T + DAY)
        updates = [sorted(o.updates) for o in outputs if o.updates]
        assert updates == [[(T, 1, (20,))], [(T + DAY, 1, (10,)), (T + DAY, 1, (20,))]]
        assert engine.peek("big").rows == [[1, 1], [2, 1]]
    finally:
        engine.close()
