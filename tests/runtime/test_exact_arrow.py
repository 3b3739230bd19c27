"""A source's files read by Arrow give exactly the rows the row-by-row reading gives.

The reader reads a file by Arrow where Arrow reads it exactly, the rest row by row (each
format's choice: :mod:`dataflow_operator.runtime.sources.file_format`). Each case here is
read twice, once as the reader does and once with Arrow's reading turned off, and the
two must agree: the same rows, or the same error.
"""

from __future__ import annotations

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
from dataflow_operator.runtime.sources.read_tasks import ReadItem, ReadTask
from dataflow_operator.runtime.sources.reader import ChangelogReader
from dataflow_operator.runtime.storage import Location
from dataflow_operator.runtime.values import BadValue

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
