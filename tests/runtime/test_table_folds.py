"""A table's consumed insert files are folded: its directory stays small, and every reader
still reads every row exactly once — those that read the files before and those that come
after (a new dataflow, a new replica), and one whose file goes between planning and
reading."""

from __future__ import annotations

import itertools
import os
import time
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from pyspark.sql.types import LongType, StructField
from tests.runtime.source_rows import rows_read, source_schema

from dataflow_operator.runtime.clock import ClockFile
from dataflow_operator.runtime.inserts import insert_rows
from dataflow_operator.runtime.sources.reader import ChangelogReader
from dataflow_operator.runtime.sources.table_folds import (
    FOLDS_DIR,
    LOCK,
    LOCK_STALE_SECONDS,
    MERGE_RATIO,
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

    assert fold_table(table, [c]) == 1  # the next fold holds the previous one's files too
    assert _json_files(table) == []
    fold = latest_fold(table)
    assert fold is not None and fold.members() == [a, b, c]
    assert sorted(r["id"] for _, r in fold_records(table, [a, b, c])) == [1, 2, 3, 4]
    d = insert_rows(table, [{"id": 5}]).name
    assert fold_table(table, [d]) == 1
    # the fold before the latest stays (a reader may just have opened it), older ones go,
    # and so do the segments neither refers to
    fold = latest_fold(table)
    assert fold is not None
    kept = {s.name for s in fold.segments()} | {s.name for s in _fold(table, 1).segments()}
    assert table.child(FOLDS_DIR).list() == sorted(
        ["fold-000000000001.json", "fold-000000000002.json", *kept]
    )


def _fold(table: Location, number: int) -> Fold:
    return Fold(table.child(FOLDS_DIR, f"fold-{number:012d}.json"), number)


def test_a_fold_rewrites_what_it_adds_not_the_table(tmp_path: Path) -> None:
    table = Location.of(tmp_path / "table")
    first = insert_rows(table, [{"id": i} for i in range(64)]).name
    fold_table(table, [first])
    written: list[int] = []
    real = Location.write_parquet

    def counted(location: Location, rows: pa.Table) -> None:
        written.append(rows.num_rows)
        real(location, rows)

    names = [first]
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(Location, "write_parquet", counted)
        for i in range(64, 128):
            names.append(insert_rows(table, [{"id": i}]).name)
            fold_table(table, names[-1:])
    # 64 one-row folds onto 64 rows: each row is rewritten a few times, never the table
    # at each fold (that would be 64 x 96 rows on average)
    assert sum(written) <= 64 * 8
    assert max(written) == 128  # the first segment, rewritten once the rest matched it
    fold = latest_fold(table)
    assert fold is not None and fold.members() == names
    segments = fold.segments()
    for older, newer in itertools.pairwise(segments):
        assert older.rows >= MERGE_RATIO * newer.rows
    assert sorted(r["id"] for _, r in fold_records(table, names)) == list(range(128))


def test_a_reader_of_recent_files_reads_only_the_segments_holding_them(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    table = Location.of(tmp_path / "table")
    names = [insert_rows(table, [{"id": i} for i in range(100)]).name]
    fold_table(table, names)
    names.append(insert_rows(table, [{"id": 100}]).name)
    fold_table(table, names[-1:])
    fold = latest_fold(table)
    assert fold is not None and len(fold.segments()) == 2
    opened: list[str] = []
    real = Location.read_parquet_batches

    def recorded(location: Location, **options: Any) -> Any:
        opened.append(location.name)
        return real(location, **options)

    monkeypatch.setattr(Location, "read_parquet_batches", recorded)
    assert [r["id"] for _, r in fold_records(table, names[-1:])] == [100]
    assert opened == [fold.segments()[-1].name]


def test_a_fold_written_before_segments_is_read_and_kept_as_the_first_segment(
    tmp_path: Path,
) -> None:
    table, (a, b) = _table(tmp_path, [1, 2], [3])
    legacy = pa.table({"file": [a, a], "line": ['{"id":1}', '{"id":2}']})
    table.child(FOLDS_DIR, "fold-000000000004.parquet").write_parquet(legacy)
    table.child(a).delete()
    fold = latest_fold(table)
    assert fold is not None and fold.members() == [a]
    assert [r["id"] for _, r in fold_records(table, [a])] == [1, 2]

    assert fold_table(table, [b]) == 1
    fold = latest_fold(table)
    assert fold is not None and fold.number == 5 and fold.members() == [a, b]
    assert sorted(r["id"] for _, r in fold_records(table, [a, b])) == [1, 2, 3]


def test_a_fold_replaced_as_it_is_opened_is_read_from_the_newer_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from dataflow_operator.runtime.sources import table_folds

    table, (a,) = _table(tmp_path, [1])
    fold_table(table, [a])
    gone = Fold(table.child(FOLDS_DIR, "fold-000000000000.json.gone"), 0)
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


def test_a_file_that_is_one_json_array_is_folded_as_its_objects(tmp_path: Path) -> None:
    table = Location.of(tmp_path / "table")
    table.child("array.json").write_text('[\n  {"id": 1},\n  {"id": 2}\n]\n')
    table.child("lines.json").write_text('{"id": 3}\r\n\n{"id": 4}\n')
    assert fold_table(table, ["array.json", "lines.json"]) == 2
    rows = [(f, r["id"]) for f, r in fold_records(table, ["array.json", "lines.json"])]
    assert rows == [("array.json", 1), ("array.json", 2), ("lines.json", 3), ("lines.json", 4)]


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
