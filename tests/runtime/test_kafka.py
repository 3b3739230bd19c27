"""Kafka sources: Spark's Kafka connector where it is on the classpath, a clear error where not."""

from __future__ import annotations

from pathlib import Path

import pytest
from pyspark.sql import SparkSession
from tests.runtime.runs import T

from dataflow_operator.api.dataflow import DataflowSpec
from dataflow_operator.runtime.engine.config import EngineConfig
from dataflow_operator.runtime.engine.engine import Engine, dataflows_from
from dataflow_operator.runtime.engine.install import KAFKA_PROVIDER

pytestmark = pytest.mark.spark

SPEC = {
    "cluster": "c",
    "kind": "Subscribe",
    "sources": [
        {
            "name": "clicks",
            "kafka": {
                "bootstrapServers": "127.0.0.1:9092",
                "topic": "clicks",
                "schema": "url STRING",
            },
        }
    ],
    "sql": "SELECT url FROM clicks",
}


def _has_connector(spark: SparkSession) -> bool:
    try:
        spark.sparkContext._jvm.java.lang.Class.forName(KAFKA_PROVIDER)  # type: ignore[union-attr]
    except Exception:
        return False
    return True


def test_missing_connector_is_one_clear_error(spark: SparkSession, tmp_path: Path) -> None:
    if _has_connector(spark):
        pytest.skip(
            "the Kafka connector is on this classpath; the missing-connector error cannot show"
        )
    engine = Engine(spark, EngineConfig(tmp_path / "state", T))
    try:
        result = engine.apply(dataflows_from([("clicks", DataflowSpec.model_validate(SPEC))]))
        error = result.failed["clicks"]
        assert error.startswith('source "clicks": the Kafka connector')
        assert "\n" not in error
        assert engine.report().dataflows[0].last_error == error
    finally:
        engine.close()


def test_reads_a_topic_with_the_connector(spark: SparkSession, tmp_path: Path) -> None:
    if not _has_connector(spark):
        pytest.skip(
            "spark-sql-kafka-0-10 is not on this Spark's classpath (it is in the container "
            "image); and no Kafka broker runs in CI"
        )
    pytest.skip("needs a Kafka broker at 127.0.0.1:9092 (the e2e suite provides one)")
