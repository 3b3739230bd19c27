"""Building the Spark session a replica runs in."""

from __future__ import annotations

import os
from collections.abc import Mapping

from pyspark.sql import SparkSession

__all__ = ["LOCAL_DEFAULTS", "spark_session"]

LOCAL_DEFAULTS: dict[str, str] = {
    "spark.driver.host": "127.0.0.1",
    "spark.driver.bindAddress": "127.0.0.1",
    "spark.ui.enabled": "false",
    "spark.sql.shuffle.partitions": "4",
    "spark.sql.session.timeZone": "UTC",
    "spark.sql.streaming.stateStore.providerClass": (
        "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider"
    ),
    "spark.sql.streaming.stopTimeout": "30s",
}
"""Settings for a local replica: loopback only, UTC, small shuffles, RocksDB state."""


def spark_session(
    master: str = "local[2]",
    app_name: str = "dataflow-replica",
    conf: Mapping[str, str] | None = None,
) -> SparkSession:
    """The replica's Spark session (created once per process, then reused).

    ``conf`` overrides :data:`LOCAL_DEFAULTS`; on Kubernetes the operator passes the
    ``spark.kubernetes.*`` settings this way.
    """
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    builder = SparkSession.builder.master(master).appName(app_name)
    for key, value in {**LOCAL_DEFAULTS, **dict(conf or {})}.items():
        builder = builder.config(key, value)
    session = builder.getOrCreate()
    session.sparkContext.setLogLevel("ERROR")
    return session
