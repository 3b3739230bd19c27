"""Design 3 as a user runs it: a ``files`` source with ``cleanSource``, across an
expiration restart that must regenerate the retraction it dropped, with the file gone."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import SparkSession
from tests.runtime.runs import DAY, LAST_30_DAYS_SQL, T, dataflow_manifest, run_replica
from tests.runtime.runs import write_manifests as write

from dataflow_operator.api.dataflow import DataflowSpec
from dataflow_operator.api.injection import EXIT_EXPIRED, EXIT_OK
from dataflow_operator.core.time import format_timestamp
from dataflow_operator.runtime.engine.config import EngineConfig
from dataflow_operator.runtime.engine.engine import Engine, dataflows_from

pytestmark = pytest.mark.spark

RETRACTION = T + 30 * DAY + 1


def _files_source(directory: Path, **clean: str) -> dict[str, Any]:
    files = {
        "path": str(directory),
        "format": "json",
        "schema": "content STRING, event_ts TIMESTAMP",
    }
    return {"name": "events", "files": {**files, **clean}}


def _argv(manifest: Path, state: Path, start: int, until: int, *extra: str) -> list[str]:
    return [
        str(manifest),
        "--start-time",
        str(start),
        "--clock",
        "simulated",
        "--tick",
        "1d",
        "--until",
        str(until),
        "--state-dir",
        str(state),
        *extra,
    ]


def _event(directory: Path, name: str, content: str) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / name
    path.write_text(json.dumps({"content": content, "event_ts": format_timestamp(T)}) + "\n")
    return path


@pytest.mark.slow
def test_a_deleted_file_is_retracted_from_the_ingested_collection_exactly_once(
    spark: SparkSession, tmp_path: Path
) -> None:
    events = tmp_path / "events"
    file = _event(events, "a.json", "hello")
    manifest = write(
        tmp_path / "df.yaml",
        [
            dataflow_manifest(
                "recent", LAST_30_DAYS_SQL, [_files_source(events, cleanSource="Delete")]
            )
        ],
    )
    state = tmp_path / "state"

    argv = ("--expiration-offset", "21d")
    first = run_replica(spark, tmp_path, _argv(manifest, state, T, T + 31 * DAY, *argv))
    assert first.code == EXIT_EXPIRED, first.err
    assert [line[:2] for line in first.lines] == [[str(T), "1"]]
    assert not file.exists()  # ingested durably, then released upstream
    (source,) = first.dataflow("recent")["sources"]
    assert source["name"] == "events"
    assert (source["offset"], source["releasedFiles"]) == (1, 1)
    assert source["ingestedRows"] == 1
    assert source["resumptionFrontier"][0] > T

    second = run_replica(spark, tmp_path, _argv(manifest, state, T + 21 * DAY, T + 31 * DAY, *argv))
    assert second.code == EXIT_OK, second.err
    assert [line[:2] for line in second.lines] == [[str(RETRACTION), "-1"]]
    assert second.lines[0][-1] == "hello"
    assert not file.exists()


@pytest.mark.slow
def test_a_failed_archive_is_retried_and_never_stops_the_dataflow(
    spark: SparkSession, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    events = tmp_path / "events"
    file = _event(events, "a.json", "kept")
    archive = tmp_path / "archive"
    archive.write_text("a file where the archive directory should be")  # moves fail
    source = _files_source(events, cleanSource="Archive", archivePath=str(archive))
    manifest = write(tmp_path / "df.yaml", [dataflow_manifest("kept", LAST_30_DAYS_SQL, [source])])
    state = tmp_path / "state"

    failing = run_replica(spark, tmp_path, _argv(manifest, state, T, T + 3 * DAY))
    assert failing.code == EXIT_OK, failing.err
    assert [line[:2] for line in failing.lines] == [[str(T), "1"]]
    report = failing.dataflow("kept")["sources"][0]
    assert report["releaseFailures"] >= 1
    assert "a.json" in report["lastReleaseError"]
    assert file.exists()  # nothing lost
    assert "source input not released; retrying" in capsys.readouterr().out  # the log

    archive.unlink()  # the target is fixed: the next release moves the file
    fixed = run_replica(spark, tmp_path, _argv(manifest, state, T + 3 * DAY, T + 4 * DAY))
    assert fixed.code == EXIT_OK, fixed.err
    assert not file.exists()
    assert (archive / "a.json").exists()
    assert fixed.dataflow("kept")["sources"][0]["releasedFiles"] == 1


def test_a_changed_spec_reads_what_was_released_from_the_ingested_collection(
    spark: SparkSession, tmp_path: Path
) -> None:
    events = tmp_path / "events"
    file = _event(events, "a.json", "hello")
    source = _files_source(events, cleanSource="Delete")

    def spec(sql: str) -> DataflowSpec:
        return DataflowSpec.model_validate(
            {"cluster": "c", "kind": "Index", "sources": [source], "sql": sql}
        )

    config = EngineConfig(tmp_path / "state", T, release_upstream=True, reset=frozenset({"d"}))
    engine = Engine(spark, config)
    try:
        assert not engine.apply(dataflows_from([("d", spec("SELECT content FROM events"))])).failed
        engine.step(T)
        engine.release_inputs(force=True)
        assert not file.exists()
        _event(events, "b.json", "world")  # arrives after the release
        changed = spec("SELECT upper(content) AS loud FROM events")
        assert not engine.apply(dataflows_from([("d", changed)])).failed
        engine.step(T + DAY)
        assert sorted(row[0] for row in engine.peek("d").rows) == ["HELLO", "WORLD"]
    finally:
        engine.close()


@pytest.mark.slow
def test_a_table_s_files_are_folded_and_a_new_replica_still_reads_every_row(
    spark: SparkSession, tmp_path: Path
) -> None:
    from tests.runtime.runs import table_source

    from dataflow_operator.runtime.inserts import insert_rows

    table = tmp_path / "table"
    for i in (1, 2, 3):
        insert_rows(table, [{"id": i}])
    manifest = write(
        tmp_path / "df.yaml",
        [dataflow_manifest("ids", "SELECT id FROM t", [table_source("t", table, "id INT")])],
    )

    def ids(result: Any) -> list[str]:
        assert result.code == EXIT_OK, result.err
        return sorted(line[2] for line in result.lines if line[1] == "1")

    first = tmp_path / "first"
    assert ids(run_replica(spark, tmp_path, _argv(manifest, first, T, T + 2 * DAY))) == [
        "1",
        "2",
        "3",
    ]
    assert list(table.glob("*.json")) == []  # read durably, then folded at the run's end
    folds = sorted(p.name for p in (table / "_folds").iterdir())
    assert folds == ["fold-000000000000.json", "segment-000000000000.parquet"]

    # a new replica (its own state) reads them from the fold
    fresh = run_replica(spark, tmp_path, _argv(manifest, tmp_path / "fresh", T, T + 2 * DAY))
    assert ids(fresh) == ["1", "2", "3"]
    # the first, resumed, reads only what is new
    insert_rows(table, [{"id": 4}])
    again = run_replica(spark, tmp_path, _argv(manifest, first, T + 3 * DAY, T + 5 * DAY))
    assert ids(again) == ["4"]
