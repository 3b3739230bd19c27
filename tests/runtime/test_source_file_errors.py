"""A data file a source cannot read is one line naming the file (and the row) and what to
do: a CSV row with more or fewer values than its header, bytes that are not UTF-8, a
table's file deleted by hand."""

from __future__ import annotations

from pathlib import Path

import pytest
from pyspark.sql.types import LongType, StringType, StructField
from tests.runtime.source_rows import source_schema

from dataflow_operator.runtime.sources.batches import UpdateColumns
from dataflow_operator.runtime.sources.formats import format_of
from dataflow_operator.runtime.sources.item_updates import item_batches
from dataflow_operator.runtime.sources.options import SourceOptions
from dataflow_operator.runtime.sources.read_tasks import ReadItem
from dataflow_operator.runtime.storage import Location
from dataflow_operator.runtime.values import BadValue

FIELDS = [("a", LongType()), ("b", StringType())]
COLUMNS = UpdateColumns.of(
    source_schema(*(StructField(name, kind) for name, kind in FIELDS)), ["a", "b"]
)


def _options(tmp_path: Path, kind: str, file_format: str) -> SourceOptions:
    logs = tmp_path / "state" / "dataflows" / "d1" / "sources" / "events"
    return SourceOptions(
        {"kind": kind, "log_dir": str(logs), "path": str(tmp_path / "in"), "format": file_format}
    )


def _rows(tmp_path: Path, name: str, data: bytes, file_format: str) -> list[object]:
    directory = tmp_path / "in"
    directory.mkdir(exist_ok=True)
    (directory / name).write_bytes(data)
    item = ReadItem(Location.of(directory / name).uri, time=5, floor=0)
    batches = item_batches(item, _options(tmp_path, "files", file_format), FIELDS, COLUMNS)
    return [tuple(row.values()) for batch in batches for row in batch.to_pylist()]


@pytest.mark.parametrize(
    ("text", "count"),
    [("a,b\n1,x\n2\n", 1), ("a,b\n1,x\n2,y,extra\n", 3)],
    ids=["missing column", "extra column"],
)
def test_a_csv_row_that_does_not_match_its_header(tmp_path: Path, text: str, count: int) -> None:
    with pytest.raises(BadValue) as raised:
        _rows(tmp_path, "e.csv", text.encode(), "csv")
    assert str(raised.value) == (
        f"e.csv: line 3: {count} value(s), but the header names 2 (a, b); give each row one "
        "value per column (empty for NULL)"
    )


def test_a_csv_row_with_empty_values_is_read_as_nulls(tmp_path: Path) -> None:
    assert _rows(tmp_path, "e.csv", b"a,b\n1,\n", "csv") == [(1, "", 5, 1)]


@pytest.mark.parametrize(("name", "file_format"), [("e.json", "json"), ("e.csv", "csv")])
def test_a_file_that_is_not_utf8_is_named(tmp_path: Path, name: str, file_format: str) -> None:
    data = b'{"a": 1, "b": "caf\xe9"}\n' if file_format == "json" else b"a,b\n1,caf\xe9\n"
    with pytest.raises(BadValue) as raised:
        _rows(tmp_path, name, data, file_format)
    assert str(raised.value) == (
        f"{name}: not UTF-8 text (it holds the byte 0xe9); save the file as UTF-8"
    )
    with pytest.raises(BadValue, match=name):
        file = Location.of(tmp_path / "in" / name)
        list(format_of(file, file_format).records(file))


def test_a_table_file_deleted_by_hand_says_how_to_start_over(tmp_path: Path) -> None:
    table = tmp_path / "in"
    table.mkdir()
    item = ReadItem(Location.of(table / "1.json").uri, time=5, floor=0)  # listed, then deleted
    with pytest.raises(FileNotFoundError) as raised:
        list(item_batches(item, _options(tmp_path, "table", "json"), FIELDS, COLUMNS))
    state = tmp_path / "state" / "dataflows" / "d1"
    assert str(raised.value) == (
        f"table {table}: 1.json is gone from the directory and its folds; files of a table "
        "are never deleted by hand: to start the dataflow over from the table as it is now, "
        f"stop it and delete its state {state}"
    )
