"""A table's directory: missing until its first insert (an empty table meanwhile), and
holding only its rows' files (``.json``; anything else is skipped with one warning)."""

from __future__ import annotations

from pathlib import Path

import pytest
import structlog
from pyspark.sql import SparkSession
from tests.runtime.runs import (
    DAY,
    T,
    dataflow_manifest,
    run_replica,
    table_source,
    write_manifests,
)

from dataflow_operator.api.injection import EXIT_OK
from dataflow_operator.runtime.inserts import insert_rows
from dataflow_operator.runtime.sources.logs import table_rows_files
from dataflow_operator.runtime.storage import Location

pytestmark = pytest.mark.spark


def test_only_json_files_are_a_tables_rows_and_each_other_is_recorded_once(
    tmp_path: Path,
) -> None:
    logs = Location.of(tmp_path / "logs")
    names = ["a.json", "b.csv", "c.json.tmp", "notes.txt", "D.JSON"]
    assert table_rows_files(names, logs) == ["a.json", "D.JSON"]
    assert table_rows_files([*names, "e.txt"], logs) == ["a.json", "D.JSON"]
    assert (tmp_path / "logs" / "skipped.log").read_text().split() == [
        "b.csv",
        "c.json.tmp",
        "notes.txt",
        "e.txt",
    ]


def test_a_missing_table_is_empty_until_its_first_insert_and_other_files_are_skipped(
    spark: SparkSession, tmp_path: Path
) -> None:
    items = tmp_path / "items"  # not created: no insert yet
    manifest = write_manifests(
        tmp_path / "df.yaml",
        [
            dataflow_manifest(
                "names", "SELECT a FROM items", [table_source("items", items, "a INT")]
            )
        ],
    )
    common = [str(manifest), "--clock", "simulated", "--tick", "1d"]
    common += ["--state-dir", str(tmp_path / "state")]

    first = run_replica(spark, tmp_path, [*common, "--start-time", str(T), "--batches", "2"])
    assert first.code == EXIT_OK, first.err
    assert (first.out, first.err) == ("", "")
    assert first.dataflow("names").get("lastError") is None
    assert not items.exists()  # the run made no directory of the user's

    insert_rows(items, [{"a": 1}])
    (items / "rows.csv").write_text("a\n2\n")
    (items / "draft.json.tmp").write_text('{"a": 3}\n')
    (items / "notes.txt").write_text("not rows\n")
    with structlog.testing.capture_logs() as logs:
        second = run_replica(
            spark, tmp_path, [*common, "--start-time", str(T + 2 * DAY), "--batches", "3"]
        )
    assert second.code == EXIT_OK, second.err
    assert second.lines == [[str(T + 2 * DAY), "1", "1"]]
    skipped = [e for e in logs if e["event"].startswith("table file skipped")]
    assert sorted(Path(e["file"]).name for e in skipped) == [
        "draft.json.tmp",
        "notes.txt",
        "rows.csv",
    ]
