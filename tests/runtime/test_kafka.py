"""Kafka sources on Spark: read by the project's own data source, so no connector jar is
needed; a broker out of reach holds the dataflow, it does not fail it. (No broker runs on
the development machines: reading a topic for real is the kind e2e suite's, see
``e2e/test_kafka_on_kind.py``.)"""

from __future__ import annotations

import socket
from pathlib import Path

import pytest
from pyspark.sql import SparkSession
from tests.runtime.runs import T

from dataflow_operator.api.dataflow import DataflowSpec
from dataflow_operator.runtime.engine.config import EngineConfig
from dataflow_operator.runtime.engine.engine import Engine, dataflows_from

pytestmark = pytest.mark.spark


def _closed_port() -> int:
    """A local port nothing listens on (bound, then released)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def test_a_broker_out_of_reach_holds_the_dataflow_and_says_why(
    spark: SparkSession, tmp_path: Path
) -> None:
    spec = DataflowSpec.model_validate(
        {
            "cluster": "c",
            "kind": "Subscribe",
            "sources": [
                {
                    "name": "clicks",
                    "kafka": {
                        "bootstrapServers": f"127.0.0.1:{_closed_port()}",
                        "topic": "clicks",
                        "schema": "url STRING",
                    },
                }
            ],
            "sql": "SELECT url FROM clicks",
        }
    )
    engine = Engine(spark, EngineConfig(tmp_path / "state", T))
    try:
        result = engine.apply(dataflows_from([("clicks", spec)]))
        assert result.failed == {}  # no connector needed: the source is the project's own
        engine.step(T + 1000)
        engine.release_inputs(force=True)
        (report,) = engine.report().dataflows
        assert report.last_error is None  # held, not failed: retried every step
        assert not report.hydrated
        (source,) = report.sources
        assert source.last_read_error is not None
        assert source.last_read_error.startswith("topic 'clicks'")
        assert source.committed_offsets == {}
    finally:
        engine.close()
