"""A kafka source's batches are read by the executors' tasks, in offset ranges the driver
plans (``runtime/sources/kafka_stage.py``), against the real broker.

Each step stages the next batch before the clock moves: the ranges (at most
``maxRecordsPerBatch``, cut so both task slots of ``local[2]`` get work) are read by Spark
tasks in Python workers, which write their parts of the ingested collection; the reader
then takes the batch up. The output is exactly the records, read once.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest
from pyspark.sql import SparkSession
from tests.kafka_broker import TansuBroker, create_topic, fresh_topic, produce
from tests.runtime.runs import T

from dataflow_operator.api.dataflow import DataflowSpec
from dataflow_operator.runtime.engine.config import EngineConfig
from dataflow_operator.runtime.engine.engine import Engine, dataflows_from
from dataflow_operator.runtime.engine.layout import DataflowLayout
from dataflow_operator.runtime.sources.kafka_staged import StagedBatch
from dataflow_operator.runtime.storage import Location

pytestmark = [pytest.mark.spark, pytest.mark.kafka_broker]

PARTITIONS = 3
PER_PARTITION = 400
MAX_RECORDS = 500


def _spec(servers: str, topic: str) -> DataflowSpec:
    kafka = {
        "bootstrapServers": servers,
        "topic": topic,
        "schema": "k BIGINT, v STRING",
        "maxRecordsPerBatch": MAX_RECORDS,
    }
    return DataflowSpec.model_validate(
        {
            "cluster": "c",
            "kind": "Index",
            "sources": [{"name": "events", "kafka": kafka}],
            "sql": "SELECT k % 7 AS g, count(*) AS n FROM events GROUP BY k % 7",
        }
    )


def _read_all(spark: SparkSession, tmp_path: Path, kafka_broker: TansuBroker) -> list[StagedBatch]:
    """Produce the records, step an engine until they are read; check the output is
    every record counted once; return each step's staged batch."""
    servers, topic = kafka_broker.servers, fresh_topic("ranges")
    create_topic(servers, topic, PARTITIONS)
    records = [
        (p, T + i, json.dumps({"k": p * PER_PARTITION + i, "v": f"r{i}"}))
        for p in range(PARTITIONS)
        for i in range(PER_PARTITION)
    ]
    produce(servers, topic, records)
    state = tmp_path / "state"
    engine = Engine(spark, EngineConfig(state, T))
    logs = DataflowLayout.of(Location.of(str(state)), "counts", None).source_logs("events")
    staged: list[StagedBatch] = []
    try:
        assert engine.apply(dataflows_from([("counts", _spec(servers, topic))])).failed == {}
        for step in range(1, 5):
            engine.step(T + PER_PARTITION + step)
            batch = StagedBatch.read(logs)
            assert batch is not None, "the step's batch was not read by the executors"
            staged.append(batch)
        assert engine.failures() == {}
        rows = engine.peek("counts").rows
    finally:
        engine.close()
    keys = [p * PER_PARTITION + i for p in range(PARTITIONS) for i in range(PER_PARTITION)]
    assert {int(g): int(n) for g, n, _ in rows} == dict(Counter(k % 7 for k in keys))
    # each batch read at most maxRecordsPerBatch, shared by the partitions, then the rest
    read = [sum(b.positions.values()) - sum(b.start_positions.values()) for b in staged]
    assert read[:2] == [MAX_RECORDS, MAX_RECORDS] and sum(read) == PARTITIONS * PER_PARTITION
    assert staged[-1].positions == dict.fromkeys(range(PARTITIONS), PER_PARTITION)
    return staged


@pytest.mark.slow
def test_the_tasks_read_each_batch_in_ranges_and_every_record_counts_once(
    spark: SparkSession, tmp_path: Path, kafka_broker: TansuBroker
) -> None:
    staged = _read_all(spark, tmp_path, kafka_broker)
    # local[2]: the driver is the one executor; its Python workers read the ranges
    assert [b.readers for b in staged[:3]] == [1, 1, 1]


@pytest.mark.local_cluster
@pytest.mark.slow
def test_the_executors_of_a_cluster_share_each_batch(
    spark: SparkSession, tmp_path: Path, kafka_broker: TansuBroker
) -> None:
    """On ``local-cluster[2,1,1024]`` (two executor JVMs, one core each) both executors read
    ranges of every batch that has records for both."""
    staged = _read_all(spark, tmp_path, kafka_broker)
    assert [b.readers for b in staged[:3]] == [2, 2, 2]
