"""A table's consumed insert files are folded: its directory stays small, and every reader
still reads every row exactly once — those that read the files before and those that come
after (a new dataflow, a new replica), and one whose file goes between planning and
reading."""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql.types import LongType, StructField
from tests.runtime.source_rows import rows_read, source_schema

from dataflow_operator.runtime.cli.insert import insert_rows
from dataflow_operator.runtime.engine.clock import ClockFile
from dataflow_operator.runtime.sources.reader import ChangelogReader
from dataflow_operator.runtime.sources.table_folds import (
    FOLDS_DIR,
    LOCK,
    LOCK_STALE_SECONDS,
    Fold,
    fold_records,
    fold_table,
    latest_fold,
)
from dataflow_operator.runtime.storage import Location

SCHEMA = source_schema(StructField("id", LongType()))


def _table(tmp_path: Path, *batches: list[int]) -> tuple[Location, list[str]]:
    """A table with one insert per batch of ids; the files' names, in order."""
    table = Location.of(tmp_path / "table")
    names = [insert_rows(table, [{"id": i} for i in ids]).name for ids in batches]
    return table, names


def _json_files(table: Location) -> list[str]:
    return [name for name in table.list() if name.endswith(".json")]


def test_a_fold_holds_the_files_rows_and_removes_them(tmp_path: Path) -> None:
    table, (a, b, c) = _table(tmp_path, [1, 2], [3], [4])
    assert fold_table(table, [a, b]) == 2
    assert _json_files(table) == [c]
    fold = latest_fold(table)
    assert fold is not None and fold.members() == [a, b]
    assert [(f, r["id"]) for f, r in fold_records(table, [a, b])] == [(a, 1), (a, 2), (b, 3)]

    assert fold_table(table, [c]) == 1  # the next fold holds the previous one's rows too
    assert _json_files(table) == []
    fold = latest_fold(table)
    assert fold is not None and fold.members() == [a, b, c]
    assert sorted(r["id"] for _, r in fold_records(table, [a, b, c])) == [1, 2, 3, 4]
    d = insert_rows(table, [{"id": 5}]).name
    assert fold_table(table, [d]) == 1
    # the fold before the latest stays (a reader may just have opened it), older ones go
    assert table.child(FOLDS_DIR).list() == [
        "fold-000000000001.parquet",
        "fold-000000000002.parquet",
    ]


def test_a_fold_replaced_as_it_is_opened_is_read_from_the_newer_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from dataflow_operator.runtime.sources import table_folds

    table, (a,) = _table(tmp_path, [1])
    fold_table(table, [a])
    gone = Fold(table.child(FOLDS_DIR, "fold-000000000000.parquet.gone"), 0)
    found = iter([gone])
    real = table_folds.latest_fold
    monkeypatch.setattr(table_folds, "latest_fold", lambda t: next(found, None) or real(t))
    assert [r["id"] for _, r in fold_records(table, [a])] == [1]


def test_a_file_without_rows_is_remembered_and_a_lost_file_is_named(tmp_path: Path) -> None:
    table = Location.of(tmp_path / "table")
    table.child("empty.json").write_text("\n")
    assert fold_table(table, ["empty.json"]) == 1
    assert list(fold_records(table, ["empty.json"])) == []
    with pytest.raises(FileNotFoundError, match=r"nothing\.json is gone"):
        list(fold_records(table, ["nothing.json"]))


def test_an_interrupted_fold_is_finished_without_doubling_rows(tmp_path: Path) -> None:
    table, (a, b) = _table(tmp_path, [1], [2])
    fold_table(table, [a])
    (tmp_path / "table" / a).write_text('{"id":1}\n')  # as if its removal was interrupted
    assert fold_table(table, [a, b]) == 2
    assert _json_files(table) == []
    assert sorted(r["id"] for _, r in fold_records(table, [a, b])) == [1, 2]


def test_one_process_folds_a_table_at_a_time(tmp_path: Path) -> None:
    table, (a,) = _table(tmp_path, [1])
    lock = tmp_path / "table" / FOLDS_DIR / LOCK
    lock.parent.mkdir()
    lock.touch()
    assert fold_table(table, [a]) == 0  # another process is folding it
    assert _json_files(table) == [a]
    old = time.time() - LOCK_STALE_SECONDS - 1
    os.utime(lock, (old, old))  # left by a process that died while folding
    assert fold_table(table, [a]) == 1
    assert not lock.exists()


def test_a_table_on_an_object_store_is_not_folded() -> None:
    table = Location.of("s3a://bucket/table")
    assert fold_table(table, ["a.json"]) == 0


def _reader(tmp_path: Path, table: Location, name: str, clock: ClockFile) -> ChangelogReader:
    options = {"kind": "table", "path": table.uri, "log_dir": str(tmp_path / name)}
    options |= {"format": "json", "until": "-1", "clock": clock.location.uri}
    return ChangelogReader(options, SCHEMA)


def _read(reader: ChangelogReader, start: dict[str, Any]) -> tuple[dict[str, Any], list[int]]:
    """One batch: the new offset and the ids read."""
    end = reader.latestOffset(start)
    ids = [
        row[0]
        for task in reader.partitions(start, end)
        for row in rows_read(reader, task)
        if not row[-2]  # not the heartbeat
    ]
    return end, sorted(ids)


def test_readers_before_and_after_a_fold_read_every_row_once(tmp_path: Path) -> None:
    table, names = _table(tmp_path, [1, 2], [3])
    clock = ClockFile(Location.of(tmp_path / "clock.json"))
    clock.write(1000)
    before = _reader(tmp_path, table, "before", clock)
    offset, ids = _read(before, before.initialOffset())
    assert ids == [1, 2, 3]

    assert fold_table(table, names) == 2
    insert_rows(table, [{"id": 4}])
    clock.write(2000)
    _, ids = _read(before, offset)
    assert ids == [4]  # what it read before is not read again from the fold

    after = _reader(tmp_path, table, "after", clock)  # a new dataflow, a new replica
    offset, ids = _read(after, after.initialOffset())
    assert ids == [1, 2, 3, 4]
    clock.write(3000)
    assert _read(after, offset)[1] == []


def test_a_file_folded_between_planning_and_reading_is_read_from_the_fold(
    tmp_path: Path,
) -> None:
    table, names = _table(tmp_path, [1], [2])
    clock = ClockFile(Location.of(tmp_path / "clock.json"))
    clock.write(1000)
    reader = _reader(tmp_path, table, "r", clock)
    start = reader.initialOffset()
    end = reader.latestOffset(start)
    tasks = reader.partitions(start, end)
    assert fold_table(table, names) == 2  # another reader's release, meanwhile
    ids = sorted(row[0] for task in tasks for row in rows_read(reader, task) if not row[-2])
    assert ids == [1, 2]
