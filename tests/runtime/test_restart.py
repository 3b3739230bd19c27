"""A replica restarted after it expired resumes and regenerates what it dropped, once."""

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

from dataflow_operator.api.injection import EXIT_EXPIRED, EXIT_OK
from dataflow_operator.core.time import format_timestamp
from dataflow_operator.runtime.inserts import insert_rows

pytestmark = pytest.mark.spark


@pytest.mark.local_cluster
@pytest.mark.slow
def test_restart_after_expiration_regenerates_the_dropped_retraction_once(
    spark: SparkSession, tmp_path: Path
) -> None:
    events = tmp_path / "events"
    insert_rows(events, [{"content": "hello", "event_ts": format_timestamp(T)}])
    manifest = write_manifests(
        tmp_path / "df.yaml",
        [
            dataflow_manifest(
                "last-30-days",
                LAST_30_DAYS_SQL,
                [table_source("events", events, "content STRING, event_ts TIMESTAMP")],
            )
        ],
    )
    common = [str(manifest), "--clock", "simulated", "--tick", "3d"]
    common += ["--state-dir", str(tmp_path / "state"), "--expiration-offset", "21d"]

    first = run_replica(spark, tmp_path, [*common, "--start-time", str(T)])
    assert first.code == EXIT_EXPIRED
    assert [line[:2] for line in first.lines] == [[str(T), "1"]]

    # A row inserted while the replica is down is ingested by the restarted one.
    insert_rows(events, [{"content": "later", "event_ts": format_timestamp(T + 21 * DAY)}])
    restart = T + 21 * DAY
    second = run_replica(
        spark,
        tmp_path,
        [*common, "--start-time", str(restart), "--until", str(T + 32 * DAY)],
    )
    assert second.code == EXIT_OK, second.err
    # The retraction the first run dropped (it fell past its expiration) comes now,
    # exactly once; the insert of "hello" is not repeated.
    assert second.lines == [
        [str(restart), "1", format_timestamp(T + 21 * DAY), "later"],
        [str(T + 30 * DAY + 1), "-1", format_timestamp(T), "hello"],
    ]
    assert second.dataflow("last-30-days")["expiration"] == restart + 21 * DAY
