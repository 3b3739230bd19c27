"""A changelog row's time and diff, and a changelog file's newest time.

The driver reads every new changelog file's newest time before a batch, to hold back
input at or past the expiration (:meth:`.reader.ChangelogReader.latestOffset`); the
tasks read each row's time and diff. Both name the file and row of a bad value.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from dataflow_operator.runtime.sources.logs import records, suffix_of
from dataflow_operator.runtime.sources.options import SourceOptions
from dataflow_operator.runtime.storage import Location
from dataflow_operator.runtime.values import BadValue, convert

__all__ = ["PRODUCER_UPPER", "newest_integer", "newest_time", "producer_upper", "time_and_diff"]

PRODUCER_UPPER = "_upper.json"
"""A changelog directory's progress file: ``{"upper": ms, ...}``, replaced atomically by
its producer once every update at a time below ``upper`` is in the directory's files (a
MaterializedView's sink writes it so, with its ``batch``)."""


def time_and_diff(record: dict[str, Any], options: SourceOptions, where: str) -> tuple[int, int]:
    """A changelog record's time and diff; a :class:`BadValue` naming ``where`` if either
    is not an integer."""
    time_column, diff_column = options.time_column, options.diff_column
    try:
        time = convert(record.get(time_column), "long")
    except BadValue:
        raise BadValue(
            f"{where}: time column {time_column!r} is not an integer: {record.get(time_column)!r}"
        ) from None
    raw = record.get(diff_column)
    if isinstance(raw, str) and raw.strip().lstrip("+-").isdigit():
        raw = int(raw)
    if not isinstance(raw, int) or isinstance(raw, bool):
        raise BadValue(f"{where}: diff column {diff_column!r} is not an integer: {raw!r}")
    if time is None:
        raise BadValue(f"{where}: time column {time_column!r} is missing")
    return int(time), raw


def newest_time(file: Location, options: SourceOptions) -> int | None:
    """The newest time in a changelog file, ``None`` when it has no rows: by Arrow when it
    can tell (a fifth of the time; a bad diff is then reported when the file is read),
    else row by row."""
    newest = newest_integer(file, options.format, options.time_column)
    if newest is not None:
        return newest
    rows = records(file, options.format)
    times = (time_and_diff(r, options, f"{file.name}: row {n}")[0] for n, r in enumerate(rows, 1))
    return max(times, default=None)


def newest_integer(file: Location, file_format: str, column: str) -> int | None:
    """The largest value of ``column`` in a JSON-lines or Parquet file, read by Arrow a
    block at a time; ``None`` when Arrow cannot tell it exactly (no rows, another layout, a
    value that is not an integer, a null): read the file row by row then."""
    suffix = suffix_of(file)
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


def producer_upper(directory: Location) -> int | None:
    """The upper in ``directory``'s :data:`PRODUCER_UPPER`; ``None`` when there is none or
    it does not hold an integer ``upper``."""
    try:
        text = directory.child(PRODUCER_UPPER).read_text_or_none()
        upper = json.loads(text)["upper"] if text else None
    except (ValueError, KeyError, TypeError):
        return None
    return upper if isinstance(upper, int) and not isinstance(upper, bool) else None
