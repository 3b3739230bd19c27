"""A changelog file's newest time, read by Arrow where it can tell exactly, else row by row."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pytest

from dataflow_operator.runtime.sources.changelog_times import newest_integer
from dataflow_operator.runtime.storage import Location


def _json(tmp_path: Path, name: str, rows: list[object]) -> Location:
    path = tmp_path / name
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    return Location.of(path)


@pytest.mark.parametrize(
    ("rows", "newest"),
    [
        ([{"time": 5, "diff": 1}, {"time": 12, "diff": -1}, {"time": 7, "diff": 1}], 12),
        ([{"time": 2**40, "diff": 1}], 2**40),
        ([{"time": "5", "diff": 1}], None),  # a string: the row-by-row reading decides
        ([{"time": 5.5, "diff": 1}], None),
        ([{"time": 5.0, "diff": 1}], None),
        ([{"time": 2**63, "diff": 1}], None),  # past int64
        ([{"time": True, "diff": 1}], None),
        # the other fields are not the time's business, whatever their shapes
        ([{"time": 3, "diff": "x", "v": [1, {"a": None}]}, {"time": 4, "v": "s"}], 4),
        ([{"time": 5, "diff": 1}, {"time": None, "diff": 1}], None),
        ([{"time": 5, "diff": 1}, {"diff": 1}], None),  # missing in a row
        ([{"diff": 1}], None),  # missing everywhere
        ([], None),  # no rows
    ],
)
def test_newest_time_of_a_json_lines_file(
    tmp_path: Path, rows: list[object], newest: int | None
) -> None:
    assert newest_integer(_json(tmp_path, "a.json", rows), "json", "time") == newest


def test_many_blocks_and_other_layouts(tmp_path: Path) -> None:
    rows = [{"time": i, "diff": 1, "pad": "x" * 100} for i in range(20_000)]
    assert newest_integer(_json(tmp_path, "big.json", rows), "json", "time") == 19_999
    array = tmp_path / "array.json"
    array.write_text(json.dumps([{"time": 5, "diff": 1}]))
    assert newest_integer(Location.of(array), "json", "time") is None  # read row by row
    twice = tmp_path / "twice.json"
    twice.write_text('{"time": 9, "diff": 1, "time": 2}\n')  # Python's json keeps the last
    assert newest_integer(Location.of(twice), "json", "time") is None
    csv = tmp_path / "a.csv"
    csv.write_text("time,diff\n5,1\n")
    assert newest_integer(Location.of(csv), "csv", "time") is None
    table = pa.table({"time": pa.array([3, 9, 4], pa.int64()), "diff": [1, 1, 1]})
    parquet = Location.of(tmp_path / "a.parquet")
    parquet.write_parquet(table)
    assert newest_integer(parquet, "parquet", "time") == 9
    assert newest_integer(parquet, "parquet", "when") is None
