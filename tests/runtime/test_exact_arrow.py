"""A source's files read by Arrow give exactly the rows the row-by-row reading gives.

The reader reads a file by Arrow where Arrow reads it exactly, the rest row by row (each
format's choice: :mod:`dataflow_operator.runtime.sources.file_format`). Each case here is
read twice, once as the reader does and once with Arrow's reading turned off, and the
two must agree: the same rows, or the same error.
"""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from pyspark.sql.types import (
    BooleanType,
    DoubleType,
    FloatType,
    IntegerType,
    LongType,
    StringType,
    StructField,
    TimestampType,
)
from tests.runtime.source_rows import rows_read, source_schema

from dataflow_operator.runtime.sources import file_format, item_updates
from dataflow_operator.runtime.sources.batches import UpdateColumns
from dataflow_operator.runtime.sources.exact_arrow import exact_timestamps
from dataflow_operator.runtime.sources.read_tasks import ReadItem, ReadTask
from dataflow_operator.runtime.sources.reader import ChangelogReader
from dataflow_operator.runtime.storage import Location
from dataflow_operator.runtime.values import BadValue, convert

FIELDS = [
    StructField("n", LongType()),
    StructField("i", IntegerType()),
    StructField("x", DoubleType()),
    StructField("f", FloatType()),
    StructField("s", StringType()),
    StructField("b", BooleanType()),
]
BATCH_TIME = 5_000


def _uri(file: Path) -> str:
    return Location.of(file).uri


def _reader(
    tmp_path: Path, kind: str, fields: list[StructField], file_format: str = "json"
) -> ChangelogReader:
    options = {"kind": kind, "path": str(tmp_path), "log_dir": str(tmp_path / "logs")}
    options |= {"format": file_format, "until": "-1"}
    return ChangelogReader(options, source_schema(*fields))


def _read(
    source: ChangelogReader, item: ReadItem, monkeypatch: pytest.MonkeyPatch, *, exact: bool
) -> list[tuple[Any, ...]] | str:
    """The rows the task emits, or the error it raises."""
    with monkeypatch.context() as patch:
        if not exact:

            def row_by_row(self: file_format.FileFormat, file: Location, _: Any) -> Any:
                return iter([file_format.Rows(self.records(file))])

            patch.setattr(file_format.FileFormat, "blocks", row_by_row)
        try:
            return rows_read(source, ReadTask([item], BATCH_TIME, False, None))
        except (BadValue, pa.ArrowInvalid) as error:
            return f"{type(error).__name__}: {error}"


def _same_either_way(
    source: ChangelogReader, item: ReadItem, monkeypatch: pytest.MonkeyPatch
) -> list[tuple[Any, ...]] | str:
    exact = _read(source, item, monkeypatch, exact=True)
    assert exact == _read(source, item, monkeypatch, exact=False)
    return exact


VALUES = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**40), 2**40),
    st.integers(-3, 3).map(float),  # 1.0: an integer to the row-by-row reading
    st.floats(allow_nan=False, allow_infinity=False, width=32),
    st.sampled_from(["12", "-3", "1.5", "true", "yes", "x", ""]),
    st.just({"nested": 1}),
)
KEYS = st.sampled_from(["n", "i", "x", "f", "s", "b", "N", "S", "other"])
RECORDS = st.lists(st.dictionaries(KEYS, VALUES, max_size=5), min_size=1, max_size=12)


@settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(records=RECORDS, clean=st.integers(0, 3))
@example(records=[{"n": 2.0**63}], clean=0)  # out of BIGINT's range: a bad value either way
def test_a_json_table_file_reads_the_same_by_arrow_and_row_by_row(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, records: list[dict[str, Any]], clean: int
) -> None:
    # Clean rows first (Arrow reads them), then whatever the strategy drew.
    rows = [
        {"n": k, "i": k, "x": k / 2, "f": 0.5, "s": f"s{k}", "b": k % 2 == 0} for k in range(clean)
    ]
    file = tmp_path / "t.json"
    file.write_text("".join(json.dumps(r) + "\n" for r in rows + records))
    _same_either_way(
        _reader(tmp_path, "table", FIELDS), ReadItem(_uri(file), BATCH_TIME, 0), monkeypatch
    )


TIMES = st.one_of(st.integers(0, 10_000), st.none(), st.just("7"), st.just(7.0), st.just(7.5))
DIFFS = st.one_of(st.integers(-3, 3), st.none(), st.just("+1"), st.just(1.0), st.just(True))


@settings(
    max_examples=100, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    changes=st.lists(st.tuples(st.integers(-5, 5), TIMES, DIFFS), min_size=1, max_size=8),
    floor=st.sampled_from([0, 100]),
)
def test_a_changelog_files_times_and_diffs_read_the_same_by_arrow_and_row_by_row(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    changes: list[tuple[int, Any, Any]],
    floor: int,
) -> None:
    file = tmp_path / "c.json"
    lines = [{"n": n, "time": time, "diff": diff} for n, time, diff in changes]
    file.write_text("".join(json.dumps(line) + "\n" for line in lines))
    fields = [StructField("n", LongType())]
    _same_either_way(
        _reader(tmp_path, "changelog", fields), ReadItem(_uri(file), None, floor), monkeypatch
    )


def test_a_clean_file_is_read_by_arrow_alone(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    file = tmp_path / "c.json"
    rows = [{"n": k, "s": f"s{k}", "time": 100 + k, "diff": 1} for k in range(10_000)]
    file.write_text("".join(json.dumps(r) + "\n" for r in rows))
    fields = [StructField("n", LongType()), StructField("s", StringType())]
    source = _reader(tmp_path, "changelog", fields)

    def never(*_: Any) -> Any:
        raise AssertionError("read row by row")

    monkeypatch.setattr(item_updates.RowReading, "update", never)
    read = rows_read(source, ReadTask([ReadItem(_uri(file), None, 150)], BATCH_TIME, False, None))
    assert [(n, s, time, diff) for n, s, time, diff, _, _ in read[:2]] == [
        (0, "s0", 150, 1),  # times below the floor are advanced to it
        (1, "s1", 150, 1),
    ]
    assert read[-1][:4] == (9_999, "s9999", 10_099, 1)
    assert len(read) == 10_000


@pytest.mark.slow
def test_a_file_arrow_stops_reading_midway_goes_on_row_by_row(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    file = tmp_path / "t.json"
    rows: list[dict[str, Any]] = [{"n": k} for k in range(50_000)]  # more than Arrow's first block
    rows[-1] = {"n": "12"}  # a string: Arrow stops; row by row, the integer 12
    file.write_text("".join(json.dumps(r) + "\n" for r in rows))
    source = _reader(tmp_path, "table", [StructField("n", LongType())])
    read = _same_either_way(source, ReadItem(_uri(file), BATCH_TIME, 0), monkeypatch)
    assert isinstance(read, list)
    assert [row[0] for row in read] == [*range(49_999), 12]


def test_a_bad_value_is_the_row_by_row_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    file = tmp_path / "t.json"
    file.write_text('{"n": 1}\n{"n": true}\n')
    source = _reader(tmp_path, "table", [StructField("n", LongType())])
    error = _same_either_way(source, ReadItem(_uri(file), BATCH_TIME, 0), monkeypatch)
    assert (
        error
        == "BadValue: t.json: row 2: column n: cannot read True as long: expected an integer, got True"
    )


@pytest.mark.parametrize(
    ("column", "field"),
    [
        (pa.array([1, None, 3], pa.int32()), StructField("n", LongType())),
        (pa.array([1, 2, 3], pa.int64()), StructField("x", DoubleType())),
        (pa.array(["a", None, "c"], pa.large_string()), StructField("s", StringType())),
        (
            pa.array([1.5, 2.0, None]),
            StructField("n", LongType()),
        ),  # row by row: 2.0 → 2, 1.5 fails
        (pa.array([0, 1_000, None], pa.timestamp("ms")), StructField("t", TimestampType())),
    ],
)
def test_a_parquet_file_reads_the_same_by_arrow_and_row_by_row(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, column: pa.Array, field: StructField
) -> None:
    file = tmp_path / "t.parquet"
    pq.write_table(pa.table({field.name.upper(): column}), file)  # matched whatever the case
    source = _reader(tmp_path, "table", [field], "parquet")
    _same_either_way(source, ReadItem(_uri(file), BATCH_TIME, 0), monkeypatch)


def _python_timestamp(text: str) -> Any:
    """What the row-by-row reading makes of ``text`` as a TIMESTAMP, or ``"error"``."""
    columns = UpdateColumns.of(source_schema(StructField("t", TimestampType())), ["t"])
    try:
        return columns.from_rows([(convert(text, TimestampType()), 0, 1)]).column(0)[0]
    except (BadValue, ValueError, OverflowError):
        return "error"


TWO_DIGITS = st.integers(0, 99).map("{:02d}".format)
TIMESTAMP_TEXTS = st.builds(
    "{}-{}-{}{}{}:{}:{}{}{}".format,
    st.sampled_from(["0001", "1970", "2024", "2026", "9999"]),
    st.sampled_from(["01", "02", "12", "13", "00"]),
    st.sampled_from(["01", "28", "29", "30", "31", "32", "00"]),
    st.sampled_from(["T", " ", "t"]),
    TWO_DIGITS,
    TWO_DIGITS,
    TWO_DIGITS,
    st.sampled_from(["", ".1", ".123", ".123456", ".1234567", ",5"]),
    st.sampled_from(["", "Z", "z", "+00:00", "-00:00", "+05:30", "+05:60", "-23:59", "+24:00"]),
)
"""Texts in and around the shape both parsers read: days past a month's end, hours,
minutes and seconds up to 99, fractions too long, zones out of range."""


@settings(max_examples=400, deadline=None)
@given(text=TIMESTAMP_TEXTS)
@example(text="0001-01-01T00:00:00+01:00")  # before Python's first year in UTC
@example(text="2024-02-29T23:59:59.999999Z")
def test_a_text_timestamp_arrow_converts_is_the_row_by_row_readings(text: str) -> None:
    arrow = UpdateColumns.of(source_schema(StructField("t", TimestampType())), ["t"]).fields[0][2]
    converted = exact_timestamps(pa.array([text]), arrow)
    if converted is not None:
        assert converted[0] == _python_timestamp(text)


def test_texts_in_the_shape_both_parsers_read_alike_are_converted_by_arrow() -> None:
    arrow = pa.timestamp("us", tz="UTC")
    zoned = pa.array(["2026-01-01T00:00:00.5Z", None, "2026-01-01 05:30:00+05:30"])
    assert exact_timestamps(zoned, arrow) == pa.array(
        [
            dt.datetime(2026, 1, 1, 0, 0, 0, 500_000, tzinfo=dt.UTC),
            None,
            dt.datetime(2026, 1, 1, tzinfo=dt.UTC),
        ],
        arrow,
    )
    local = pa.array(["2026-01-01T00:00:00", "2026-01-02 00:00:00.25"])  # UTC, as row by row
    assert exact_timestamps(local, arrow) is not None
    for others in (
        ["2026-01-01T00:00:00Z", "2026-01-01T00:00:00"],  # with and without a zone
        [" 2026-01-01T00:00:00Z"],  # spaces around
        ["2026-01-01T00:00:00.1234567Z"],  # Python keeps six digits, Arrow refuses more
        ["20260101T000000Z"],
        ["2026-02-30T00:00:00Z"],
    ):
        assert exact_timestamps(pa.array(others), arrow) is None, others


@pytest.mark.parametrize(
    "value",
    [
        "2026-01-01T00:00:00.123Z",
        "2026-01-01 05:30:00+05:30",
        "2026-01-01T00:00:00",
        " 2026-01-01T00:00:00Z",  # row by row
        "2026-02-30T00:00:00Z",  # a bad value either way
        1_767_225_600_000,  # milliseconds: row by row
    ],
)
def test_a_json_file_with_a_timestamp_reads_the_same_by_arrow_and_row_by_row(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, value: Any
) -> None:
    file = tmp_path / "c.json"
    lines = [{"n": 1, "t": "2026-01-01T00:00:00Z", "time": 3, "diff": 1}]
    lines.append({"n": 2, "t": value, "time": 4, "diff": 1})
    file.write_text("".join(json.dumps(line) + "\n" for line in lines))
    fields = [StructField("n", LongType()), StructField("t", TimestampType())]
    _same_either_way(
        _reader(tmp_path, "changelog", fields), ReadItem(_uri(file), None, 0), monkeypatch
    )
