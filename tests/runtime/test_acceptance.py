"""The issue's acceptance run: a 30-day temporal filter, with and without expiration."""

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
from dataflow_operator.api.injection import EXIT_EXPIRED, EXIT_OK
from dataflow_operator.core.durations import Duration
from dataflow_operator.core.time import format_timestamp
from dataflow_operator.runtime.engine.config import EngineConfig, expired_message
from dataflow_operator.runtime.engine.engine import Engine, dataflows_from
from dataflow_operator.runtime.inserts import insert_rows

pytestmark = pytest.mark.spark

# mz_now() <= event_ts + 30 days holds while mz_now() < event_ts + 30 days + 1 ms: the
# retraction is at the first millisecond the row is no longer valid.
RETRACTION = T + 30 * DAY + 1


def _setup(tmp_path: Path) -> Path:
    events = tmp_path / "data" / "events"
    insert_rows(events, [{"content": "hello", "event_ts": format_timestamp(T)}])
    source = table_source("events", events, "content STRING, event_ts TIMESTAMP")
    return write_manifests(
        tmp_path / "last-30-days.yaml",
        [dataflow_manifest("last-30-days", LAST_30_DAYS_SQL, [source])],
    )


def _argv(manifest: Path, tmp_path: Path, *extra: str) -> list[str]:
    return [
        str(manifest),
        "--start-time",
        str(T),
        "--clock",
        "simulated",
        "--tick",
        "1d",
        "--state-dir",
        str(tmp_path / "state"),
        *extra,
    ]


@pytest.mark.slow
def test_thirty_days_give_one_insert_and_one_retraction(
    spark: SparkSession, tmp_path: Path
) -> None:
    manifest = _setup(tmp_path)
    result = run_replica(spark, tmp_path, _argv(manifest, tmp_path, "--until", str(T + 31 * DAY)))
    assert result.code == EXIT_OK, result.err
    assert [line[:2] for line in result.lines] == [[str(T), "1"], [str(RETRACTION), "-1"]]
    assert all(line[-1] == "hello" for line in result.lines)
    assert result.lines[0][2] == result.lines[1][2] == format_timestamp(T)
    dataflow = result.dataflow("last-30-days")
    assert dataflow["frontier"] == [T + 31 * DAY]
    assert "expiration" not in dataflow
    assert dataflow["stateRows"] == 0  # the retraction left state when it fired


@pytest.mark.slow
def test_expiration_offset_stops_before_it_with_only_the_insert(
    spark: SparkSession, tmp_path: Path
) -> None:
    manifest = _setup(tmp_path)
    argv = _argv(manifest, tmp_path, "--until", str(T + 31 * DAY), "--expiration-offset", "21d")
    result = run_replica(spark, tmp_path, argv)
    expiration = T + 21 * DAY
    assert result.code == EXIT_EXPIRED
    assert result.lines == [[str(T), "1", format_timestamp(T), "hello"]]
    assert result.err.splitlines()[-1] == expired_message(expiration, expiration)
    assert result.status["expiration"] == expiration
    assert result.status["phase"] == "Expired"
    dataflow = result.dataflow("last-30-days")
    assert dataflow["expiration"] == expiration
    assert dataflow["until"] == [expiration]
    assert dataflow["expired"] is True
    assert dataflow["frontier"][0] <= expiration  # never past the expiration
    assert dataflow["stateRows"] == 0  # the retraction was dropped before state


@pytest.mark.slow
def test_expiration_keeps_fresh_rows_out_of_state(spark: SparkSession, tmp_path: Path) -> None:
    rows = [{"content": f"row {i}", "event_ts": format_timestamp(T)} for i in range(50)]
    figures = {}
    for offset in (None, Duration(21 * DAY)):
        events = tmp_path / str(offset) / "events"
        insert_rows(events, rows)
        spec = DataflowSpec.model_validate(
            {
                "cluster": "c",
                "kind": "Index",
                "sources": [table_source("events", events, "content STRING, event_ts TIMESTAMP")],
                "sql": LAST_30_DAYS_SQL,
            }
        )
        engine = Engine(spark, EngineConfig(tmp_path / str(offset) / "state", T, offset))
        try:
            assert not engine.apply(dataflows_from([("recent", spec)])).failed
            engine.step(T)
            report = engine.report().dataflows[0]
            figures[offset] = report.state_rows
            assert len(engine.peek("recent").rows) == 50  # both show every row now
        finally:
            engine.close()
    plain, expiring = figures.values()
    assert plain >= 1  # their retractions wait in state…
    assert expiring == 0  # …unless they fall past the expiration: then nothing is kept
