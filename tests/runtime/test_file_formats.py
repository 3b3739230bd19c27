"""Each source format reads its files two ways, chosen up front, and the two agree.

A format (:mod:`dataflow_operator.runtime.sources.file_format`) first chooses, from the
columns, whether Arrow may read its files at all, then, block by block, hands over
Arrow's updates or the block's records for the row-by-row reading. Here: which format
reads which file, each format's choices, and that reading an item so gives exactly what
converting the format's records row by row gives (rows, times, numbering in errors),
every row once, also across the chunks a JSON file is parsed in.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pyspark.sql.types import (
    DataType,
    DateType,
    LongType,
    StringType,
    StructField,
    TimestampType,
)
from tests.runtime.source_rows import source_schema

from dataflow_operator.runtime.sources import json_format
from dataflow_operator.runtime.sources.batches import UpdateColumns
from dataflow_operator.runtime.sources.exact_arrow import UpdateLayout
from dataflow_operator.runtime.sources.file_format import Block, Rows
from dataflow_operator.runtime.sources.formats import (
    CSV,
    FORMATS,
    JSON_LINES,
    PARQUET,
    format_of,
)
from dataflow_operator.runtime.sources.item_updates import RowReading, item_batches, item_layout
from dataflow_operator.runtime.sources.options import SourceOptions
from dataflow_operator.runtime.sources.read_tasks import ReadItem
from dataflow_operator.runtime.storage import Location
from dataflow_operator.runtime.values import BadValue

BATCH_TIME = 5_000
N = [("n", LongType())]


def _columns(fields: list[tuple[str, DataType]]) -> UpdateColumns:
    schema = source_schema(*(StructField(name, kind) for name, kind in fields))
    return UpdateColumns.of(schema, [name for name, _ in fields])


def _options(tmp_path: Path, kind: str, file_format: str = "json") -> SourceOptions:
    return SourceOptions(
        {
            "kind": kind,
            "path": str(tmp_path),
            "log_dir": str(tmp_path / "logs"),
            "format": file_format,
        }
    )


def _item(file: Path, kind: str) -> ReadItem:
    return ReadItem(Location.of(file).uri, None if kind == "changelog" else BATCH_TIME, 0)


def _write_json(file: Path, rows: list[Any]) -> Path:
    file.write_text("".join(json.dumps(row) + "\n" for row in rows))
    return file


def _read(
    file: Path, fields: list[tuple[str, DataType]], kind: str = "table", file_format: str = "json"
) -> list[dict[str, Any]] | str:
    """What a task reads of ``file``: its updates, or the error."""
    options = _options(file.parent, kind, file_format)
    try:
        batches = item_batches(_item(file, kind), options, fields, _columns(fields))
        return [row for batch in batches for row in batch.to_pylist()]
    except BadValue as error:
        return f"BadValue: {error}"


def _row_by_row(
    file: Path, fields: list[tuple[str, DataType]], kind: str = "table", file_format: str = "json"
) -> list[dict[str, Any]] | str:
    """What converting the format's records one by one gives: the definition."""
    item, options, columns = (
        _item(file, kind),
        _options(file.parent, kind, file_format),
        _columns(fields),
    )
    records = format_of(Location(item.uri), file_format).records(Location(item.uri))
    try:
        updates = list(RowReading(item, options, fields).updates(file.name, records))
    except BadValue as error:
        return f"BadValue: {error}"
    return columns.from_rows(updates).to_pylist() if updates else []


def _blocks(
    file: Path, fields: list[tuple[str, DataType]], kind: str = "table", file_format: str = "json"
) -> list[Block]:
    item, options = _item(file, kind), _options(file.parent, kind, file_format)
    layout = item_layout(item, options, _columns(fields))
    return list(format_of(Location(item.uri), file_format).blocks(Location(item.uri), layout))


def _kinds(blocks: list[Block]) -> list[str]:
    return ["rows" if isinstance(block, Rows) else "arrow" for block in blocks]


# --- which format reads a file ------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "declared", "expected"),
    [
        ("a.json", "json", "json"),
        ("a.csv", "json", "csv"),
        ("a.parquet", "json", "parquet"),
        ("a", "json", "json"),
        ("a.json", "csv", "csv"),  # a csv source reads a .json file as CSV
        ("a.txt", "csv", "csv"),
        ("a.PARQUET", "csv", "parquet"),
        ("a.json", "parquet", "json"),  # but a parquet source reads it as JSON lines
        ("a.txt", "parquet", "parquet"),
        ("a", "parquet", "parquet"),
        ("a.CSV", "parquet", "csv"),
    ],
)
def test_a_files_suffix_then_its_sources_format_choose_its_reader(
    name: str, declared: str, expected: str
) -> None:
    assert format_of(Location.of(f"/data/{name}"), declared) is FORMATS[expected]


# --- the first choice: the columns ---------------------------------------------------


def _layout(
    fields: list[tuple[str, DataType]], times: tuple[str, str] | None = None
) -> UpdateLayout:
    return UpdateLayout(_columns(fields), times, None if times else BATCH_TIME)


def test_json_is_read_by_arrow_when_every_column_is_a_type_arrow_parses_exactly() -> None:
    assert JSON_LINES.arrow_reading(_layout([("n", LongType()), ("s", StringType())])) is not None
    assert JSON_LINES.arrow_reading(_layout([("t", TimestampType())])) is not None
    assert JSON_LINES.arrow_reading(_layout([("d", DateType())])) is None
    assert JSON_LINES.arrow_reading(_layout(N, ("time", "diff"))) is not None
    # The time column is also a column of another type: Arrow cannot parse it as both.
    assert JSON_LINES.arrow_reading(_layout([("time", StringType())], ("time", "diff"))) is None


def test_csv_is_always_read_row_by_row_and_parquet_always_by_arrow_first() -> None:
    for layout in (_layout(N), _layout([("t", TimestampType())]), _layout(N, ("time", "diff"))):
        assert CSV.arrow_reading(layout) is None
        assert PARQUET.arrow_reading(layout) is not None


def test_an_update_layout_needs_a_time() -> None:
    with pytest.raises(ValueError, match="needs a time"):
        UpdateLayout(_columns(N), None, None)


# --- the second choice: each block ---------------------------------------------------


def test_a_clean_json_file_is_read_by_arrow_alone(tmp_path: Path) -> None:
    file = _write_json(tmp_path / "t.json", [{"n": k, "S": "x"} for k in range(100)])
    assert _kinds(_blocks(file, N)) == ["arrow"]
    assert _read(file, N) == _row_by_row(file, N)


def test_a_json_file_with_timestamps_is_read_by_arrow_and_with_dates_row_by_row_whole(
    tmp_path: Path,
) -> None:
    for column, value, kinds in (
        (TimestampType(), "2026-01-01T00:00:00Z", ["arrow"]),
        (DateType(), "2026-01-01", ["rows"]),
    ):
        fields = [("n", LongType()), ("t", column)]
        file = _write_json(tmp_path / "t.json", [{"n": k, "t": value} for k in range(3)])
        assert _kinds(_blocks(file, fields)) == kinds
        read = _read(file, fields)
        assert read == _row_by_row(file, fields)
        assert isinstance(read, list) and [row["n"] for row in read] == [0, 1, 2]


def test_a_json_array_file_is_read_row_by_row_whole(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(json_format, "CHUNK_BYTES", 16)  # the array spans many chunks
    file = tmp_path / "t.json"
    file.write_text("\n  \n" + json.dumps([{"n": k} for k in range(20)], indent=1))
    assert _kinds(_blocks(file, N)) == ["rows"]
    read = _read(file, N)
    assert isinstance(read, list) and [row["n"] for row in read] == list(range(20))


def test_only_the_chunks_arrow_cannot_read_exactly_go_row_by_row(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(json_format, "CHUNK_BYTES", 64)
    rows: list[dict[str, Any]] = [{"n": k} for k in range(40)]
    rows[20] = {"n": "12"}  # a string: Arrow does not read it as the integer 12
    file = _write_json(tmp_path / "t.json", rows)
    kinds = _kinds(_blocks(file, N))
    assert kinds.count("rows") == 1 and kinds[0] == kinds[-1] == "arrow"
    read = _read(file, N)
    assert read == _row_by_row(file, N)
    assert isinstance(read, list) and [row["n"] for row in read] == [*range(20), 12, *range(21, 40)]


def test_a_bad_value_past_arrows_chunks_names_its_row_and_a_bad_line_its_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(json_format, "CHUNK_BYTES", 32)
    lines = [json.dumps({"n": k}) for k in range(30)]
    bad_value = tmp_path / "v.json"
    bad_value.write_text("\r\n".join([*lines[:10], "", *lines[10:25], '{"n": true}', *lines[25:]]))
    expected = "BadValue: v.json: row 26: column n: cannot read True as long: expected an integer, got True"
    assert _read(bad_value, N) == _row_by_row(bad_value, N) == expected
    bad_line = tmp_path / "l.json"
    bad_line.write_text(
        "\n".join([*lines[:10], "", "  ", *lines[10:25], "{not json", *lines[25:]]) + "\n"
    )
    expected = (
        "BadValue: l.json: line 28: not JSON: Expecting property name enclosed in double quotes"
    )
    assert _read(bad_line, N) == _row_by_row(bad_line, N) == expected


@pytest.mark.parametrize(
    "text",
    [
        '{"n": 1}\n{"n": 2} {"n": 3}\n{"n": 4}\n',  # two objects on a line
        '{"n": 1}\n{"n":\n 2}\n{"n": 4}\n',  # one object on two lines
        '{"n":\n 2}\n{"n": 3} {"n": 4}\n',  # both: as many rows as lines
        '{"n": 1, "o": {"p": 2}\n, "q": 3}\n{"n": 5} {"n": 6}\n',  # a line not opened
        '{"n": 1, "o":\n{"p": 2}}\n{"n": 5} {"n": 6}\n',  # a line not closed
    ],
)
def test_a_line_that_is_not_one_object_fails_by_arrow_as_row_by_row(
    tmp_path: Path, text: str
) -> None:
    """Arrow's reader takes JSON objects whatever the line breaks between them; the
    row-by-row reading takes a line for an object."""
    file = tmp_path / "t.json"
    file.write_text(text)
    read = _read(file, N)
    assert read == _row_by_row(file, N)
    assert isinstance(read, str) and read.startswith("BadValue: t.json: line ")


def test_a_changelogs_times_and_diffs_read_by_arrow_or_row_by_row_are_the_same(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(json_format, "CHUNK_BYTES", 64)
    rows: list[dict[str, Any]] = [{"n": k, "time": 100 + k, "diff": 1} for k in range(30)]
    rows[15]["diff"] = "-1"  # the row-by-row reading reads it as -1
    file = _write_json(tmp_path / "c.json", rows)
    assert "rows" in _kinds(_blocks(file, N, "changelog"))
    read = _read(file, N, "changelog")
    assert read == _row_by_row(file, N, "changelog")
    assert isinstance(read, list) and [row["__diff"] for row in read].count(-1) == 1


def test_a_parquet_batch_arrow_cannot_cast_exactly_goes_row_by_row(tmp_path: Path) -> None:
    exact, inexact = tmp_path / "a.parquet", tmp_path / "b.parquet"
    pq.write_table(pa.table({"N": pa.array([1, 2, None], pa.int32())}), exact)
    pq.write_table(pa.table({"n": pa.array([1.0, 2.0, None])}), inexact)  # floats: row by row
    assert _kinds(_blocks(exact, N, file_format="parquet")) == ["arrow"]
    assert _kinds(_blocks(inexact, N, file_format="parquet")) == ["rows"]
    for file in (exact, inexact):
        read = _read(file, N, file_format="parquet")
        assert read == _row_by_row(file, N, file_format="parquet")
        assert isinstance(read, list) and [row["n"] for row in read] == [1, 2, None]


def test_a_csv_file_is_read_row_by_row(tmp_path: Path) -> None:
    file = tmp_path / "t.csv"
    file.write_text("n,s\n1,a\n2,b\n")
    assert _kinds(_blocks(file, N, file_format="csv")) == ["rows"]
    read = _read(file, N, file_format="csv")
    assert isinstance(read, list) and [row["n"] for row in read] == [1, 2]


# --- chunks and the row-by-row reading agree on any file ----------------------------

LINES = st.one_of(
    st.fixed_dictionaries({"n": st.integers(-(2**40), 2**40)}).map(json.dumps),
    st.fixed_dictionaries({"n": st.sampled_from(["12", 1.0, 1.5, None, True])}).map(json.dumps),
    st.fixed_dictionaries({"N": st.integers(0, 9)}).map(json.dumps),
    st.sampled_from(["", "  ", "[1]", "{", "\u00a0"]),
)
"""Lines of a JSON-lines file, clean and not. Left out: two objects on one line, which
Arrow reads as two rows and the row-by-row reading refuses (as before formats chose)."""


@settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    lines=st.lists(LINES, min_size=0, max_size=30),
    ending=st.sampled_from(["\n", "\r\n", "\r"]),
    chunk=st.sampled_from([1, 8, 40, 1 << 20]),
)
@pytest.mark.slow
def test_any_json_lines_file_reads_as_its_records_row_by_row(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, lines: list[str], ending: str, chunk: int
) -> None:
    monkeypatch.setattr(json_format, "CHUNK_BYTES", chunk)
    file = tmp_path / "t.json"
    file.write_bytes(ending.join(lines).encode())
    assert _read(file, N) == _row_by_row(file, N)
