"""What a source's reader keeps in its log directory, and the files it reads.

- ``files.log``: every file of the source's directory the reader has seen, in order,
  with when the listing that first saw it was taken (:func:`read_listing`);
- :data:`HELD_FILE`: the changelog input held back at the expiration (:class:`HeldInput`);
- :data:`INGESTED_DIR`: the ingested collection (:mod:`.ingested`).
"""

from __future__ import annotations

import csv
import json
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from dataflow_operator.runtime.storage import Location
from dataflow_operator.runtime.values import iter_json_lines

__all__ = [
    "FILES_LOG",
    "HELD_FILE",
    "INGESTED_DIR",
    "HeldInput",
    "list_data_files",
    "newest_integer",
    "read_listing",
    "records",
]

FILES_LOG = "files.log"
"""The files a source has seen (name, tab, listing time in epoch ms), one per line."""
INGESTED_DIR = "ingested"
"""The ingested collection's directory in a source's logs."""
HELD_FILE = "held.json"
"""Where a changelog source records the input it holds back at the expiration."""


@dataclass(frozen=True, slots=True)
class HeldInput:
    """A changelog file not read because it has a time at or past the expiration."""

    file: str
    time: int
    """Its newest time."""
    expiration: int

    def to_json(self) -> str:
        """The record's text."""
        return json.dumps({"file": self.file, "time": self.time, "expiration": self.expiration})

    @classmethod
    def read(cls, log_dir: Location) -> HeldInput | None:
        """The input a source's reader holds back (its log directory), if any."""
        text = log_dir.child(HELD_FILE).read_text_or_none()
        if not text:
            return None
        record = json.loads(text)
        return cls(str(record["file"]), int(record["time"]), int(record["expiration"]))


def list_data_files(directory: Location) -> list[str]:
    """Names of the data files of a directory (hidden and ``_`` files are in progress)."""
    return directory.list()


def read_listing(log_dir: Location) -> list[tuple[str, int]]:
    """The files a source has seen, in order, with the wall-clock time (epoch ms) of the
    listing that first saw each (0 when the log does not say)."""
    text = log_dir.child(FILES_LOG).read_text_or_none() or ""
    found = []
    for line in text.splitlines():
        if line:
            name, _, listed = line.partition("\t")
            found.append((name, int(listed) if listed.isdigit() else 0))
    return found


def _suffix(file: Location) -> str:
    return file.name.rsplit(".", 1)[-1].lower() if "." in file.name else ""


def newest_integer(file: Location, file_format: str, column: str) -> int | None:
    """The largest value of ``column`` in a JSON-lines or Parquet file, read by Arrow a
    block at a time; ``None`` when Arrow cannot tell it exactly (no rows, another layout, a
    value that is not an integer, a null): read the file row by row then."""
    suffix = _suffix(file)
    parquet = suffix == "parquet" or (file_format == "parquet" and suffix not in ("json", "csv"))
    if not parquet and (suffix == "csv" or file_format == "csv"):
        return None
    newest: int | None = None
    try:
        if parquet:
            batches: Iterator[pa.RecordBatch] = file.read_parquet_batches(columns=[column])
        else:
            batches = file.read_json_batches()
        for batch in batches:
            values = batch.column(column) if column in batch.schema.names else None
            if values is None or not pa.types.is_integer(values.type) or values.null_count:
                return None
            if len(values):
                found = int(pc.max(values).as_py())
                newest = found if newest is None else max(newest, found)
    except (pa.ArrowException, KeyError, ValueError):
        return None
    return newest


def records(file: Location, file_format: str) -> Iterator[dict[str, Any]]:
    """A data file's records, read as they are consumed: a large file is never held whole
    in the worker, and a drop stops its reading at once."""
    suffix = _suffix(file)
    if suffix == "parquet" or (file_format == "parquet" and suffix not in ("json", "csv")):
        for batch in file.read_parquet_batches():
            yield from batch.to_pylist()
    elif suffix == "csv" or file_format == "csv":
        yield from csv.DictReader(file.read_lines())
    else:
        yield from iter_json_lines(file.read_lines(), file.name)
