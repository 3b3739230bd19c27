"""Benchmark: a source task's reading of one file, without Spark.

Reads files of ``--rows`` rows (default 200,000) as a source's task does
(:func:`dataflow_operator.runtime.sources.item_updates.item_batches`: the Arrow batches
handed to Spark), in each format the sources read, and prints the rows per second (the
best of ``--repeat`` reads, default 3):

- ``json changelog``: JSON lines with their own time and diff, every value one Arrow
  reads exactly;
- ``json table, one odd row``: the same rows as a table's file, one near the end an
  integer written as a string (``"12"``), which Arrow does not read as the row-by-row
  reading does;
- ``json table, timestamps``: a column Arrow does not parse from JSON (row by row);
- ``csv table``: CSV (row by row);
- ``parquet table``: Parquet;
- ``json changelog, newest time``: what the driver reads of the same changelog file
  before a batch (:func:`~dataflow_operator.runtime.sources.changelog_times.newest_time`:
  the file's newest time, by Arrow), not what a task reads.

    .venv/bin/python bench/source_read.py [--rows N] [--repeat R]
"""

from __future__ import annotations

import argparse
import csv
import json
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
from pyspark.sql.types import (
    BooleanType,
    DataType,
    LongType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

from dataflow_operator.runtime.changelog_store import DIFF, TIME
from dataflow_operator.runtime.sources.batches import UpdateColumns
from dataflow_operator.runtime.sources.changelog_times import newest_time
from dataflow_operator.runtime.sources.item_updates import item_batches
from dataflow_operator.runtime.sources.options import BATCH_TIME, HEARTBEAT, SourceOptions
from dataflow_operator.runtime.sources.read_tasks import ReadItem
from dataflow_operator.runtime.storage import Location

DATA = [("id", LongType()), ("name", StringType()), ("flag", BooleanType())]


def _row(k: int) -> dict[str, object]:
    return {"id": k, "name": f"n{k % 1000}", "flag": k % 2 == 0}


def _columns(data: list[tuple[str, DataType]]) -> UpdateColumns:
    runtime = [(TIME, LongType()), (DIFF, LongType()), (HEARTBEAT, BooleanType())]
    fields = [StructField(n, t) for n, t in [*data, *runtime, (BATCH_TIME, TimestampType())]]
    return UpdateColumns.of(StructType(fields), [name for name, _ in data])


def _files(work: Path, rows: int) -> dict[str, tuple[str, str, Path, list[tuple[str, DataType]]]]:
    """Per case: the source's kind, its format, the file, its data columns."""
    lines = [json.dumps(_row(k) | {"time": 100 + k, "diff": 1}) + "\n" for k in range(rows)]
    (work / "changelog.json").write_text("".join(lines))
    table = [_row(k) for k in range(rows)]
    table[-10] = {**table[-10], "id": "12"}
    (work / "odd.json").write_text("".join(json.dumps(r) + "\n" for r in table))
    stamped = [{**_row(k), "at": "2026-01-01T00:00:00Z"} for k in range(rows)]
    (work / "stamped.json").write_text("".join(json.dumps(r) + "\n" for r in stamped))
    with (work / "table.csv").open("w", newline="") as out:
        writer = csv.DictWriter(out, fieldnames=["id", "name", "flag"])
        writer.writeheader()
        writer.writerows(_row(k) for k in range(rows))
    pq.write_table(pa.Table.from_pylist([_row(k) for k in range(rows)]), work / "table.parquet")
    at = [("at", TimestampType())]
    return {
        "json changelog": ("changelog", "json", work / "changelog.json", DATA),
        "json table, one odd row": ("table", "json", work / "odd.json", DATA),
        "json table, timestamps": ("table", "json", work / "stamped.json", DATA + at),
        "csv table": ("table", "csv", work / "table.csv", DATA),
        "parquet table": ("table", "parquet", work / "table.parquet", DATA),
    }


def _reading(
    work: Path, kind: str, file_format: str, file: Path, data: list[tuple[str, DataType]]
) -> Callable[[], int]:
    options = SourceOptions(
        {"kind": kind, "path": str(work), "log_dir": str(work / "logs"), "format": file_format}
    )
    columns = _columns(data)
    item = ReadItem(Location.of(file).uri, None if kind == "changelog" else 5_000, 0)

    def read() -> int:
        return sum(batch.num_rows for batch in item_batches(item, options, data, columns))

    return read


def _newest(work: Path, file: Path, rows: int) -> Callable[[], int]:
    options = SourceOptions(
        {"kind": "changelog", "path": str(work), "log_dir": str(work / "logs"), "format": "json"}
    )

    def read() -> int:
        assert newest_time(Location.of(file), options) == 100 + rows - 1
        return rows

    return read


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--rows", type=int, default=200_000)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as directory:
        work = Path(directory)
        readings = {
            case: _reading(work, kind, file_format, file, data)
            for case, (kind, file_format, file, data) in _files(work, args.rows).items()
        }
        readings["json changelog, newest time"] = _newest(work, work / "changelog.json", args.rows)
        for case, read in readings.items():
            seconds = []
            for _ in range(args.repeat):
                started = time.perf_counter()
                assert read() == args.rows
                seconds.append(time.perf_counter() - started)
            best = min(seconds)
            print(f"{case:28} {best:7.3f} s  {args.rows / best / 1000:8.1f}k rows/s")


if __name__ == "__main__":
    main()
