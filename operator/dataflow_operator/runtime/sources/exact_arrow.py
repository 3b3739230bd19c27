"""Arrow batches of a source file made its updates, where they are exactly the updates
the row-by-row reading makes of the same rows.

Reading a source row by row in Python (:func:`~dataflow_operator.runtime.values.convert`
per value) is slow next to Arrow, which parses JSON lines and Parquet in C++. But the
row-by-row reading defines what a value means (``"12"`` is the integer 12, a field
matches its column whatever its case, a bad value is an error naming its row), and Arrow
must never read a file otherwise. The formats (:mod:`.file_format`) parse a block of a
file by Arrow, then ask here whether what Arrow made of it is exact:

- every column's values cast to the column's Arrow type (:func:`exact_updates`: an
  integer that does not fit its column is not exact; a text timestamp only in the one
  shape Arrow and Python parse alike, :func:`exact_timestamps`);
- no field differs from its column's name only by case (:func:`exact_names`);
- a changelog's time and diff are integers on every row.

What each format's parser must check besides (the types Arrow parses as the row-by-row
reading converts them) is the format's own (:mod:`.json_format`, :mod:`.parquet_format`).
Nothing here raises for a block that is not exact: it answers ``None``, and the format
hands that block to the row-by-row reading.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable
from dataclasses import dataclass

import pyarrow as pa
import pyarrow.compute as pc

from dataflow_operator.runtime.sources.batches import UpdateColumns

__all__ = [
    "UpdateLayout",
    "exact_cast",
    "exact_names",
    "exact_timestamps",
    "exact_updates",
    "newest_integer",
]


@dataclass(frozen=True, slots=True)
class UpdateLayout:
    """What a file's rows become: updates of ``columns``, each at ``time`` (else at the
    time in the file's own ``times[0]`` column), with the diff in ``times[1]`` (else 1).

    ``times``: a changelog's time and diff columns, or the runtime's own in a stored
    changelog; ``None``: the rows carry none. One of ``time`` and ``times`` is set.
    """

    columns: UpdateColumns
    times: tuple[str, str] | None
    time: int | None

    def __post_init__(self) -> None:
        if self.time is None and self.times is None:
            raise ValueError("an update layout needs a time or the file's time column")

    @property
    def data_names(self) -> list[str]:
        """The data columns' names."""
        return [name for name, _, _ in self.columns.fields]


def exact_names(
    schema: pa.Schema, wanted: Iterable[str], *, exact_only: bool
) -> dict[str, str] | None:
    """Each wanted column's field in ``schema``: the same name, else (unless
    ``exact_only``) the one field that differs only by case, as the row-by-row reading
    matches; ``None`` when a column has fields that differ only by case and Arrow cannot
    tell which one the row-by-row reading takes (``exact_only``: any such field)."""
    by_lower: dict[str, list[str]] = {}
    for present in schema.names:
        by_lower.setdefault(present.lower(), []).append(present)
    matched: dict[str, str] = {}
    for name in wanted:
        variants = by_lower.get(name.lower(), [])
        if name in variants and len(variants) == 1:
            matched[name] = name
        elif variants and (exact_only or len(variants) > 1):
            return None
        elif variants:
            matched[name] = variants[0]
    return matched


def exact_updates(
    batch: pa.RecordBatch, names: dict[str, str], layout: UpdateLayout
) -> pa.RecordBatch | None:
    """``batch`` as updates of ``layout`` (each column from its field in ``names``, a
    missing one null), or ``None`` when they would not be the row-by-row reading's: a
    value that does not cast exactly to its column, a time or diff that is missing or
    not an integer."""
    rows = batch.num_rows
    arrays = []
    for name, _, arrow in layout.columns.fields:
        found = names.get(name)
        if found is None:
            arrays.append(pa.nulls(rows, arrow))
            continue
        values = exact_cast(batch.column(found), arrow)
        if values is None:
            return None
        arrays.append(values)
    diff = None
    if layout.times is not None:
        own_time, diff = (_integers(batch, names.get(column)) for column in layout.times)
        if own_time is None or diff is None:
            return None
        if layout.time is None:
            arrays.append(own_time)
    if layout.time is not None:
        arrays.append(pa.repeat(pa.scalar(layout.time, pa.int64()), rows))
    arrays.append(pa.repeat(pa.scalar(1, pa.int64()), rows) if diff is None else diff)
    return pa.RecordBatch.from_arrays(arrays, schema=layout.columns.schema)


def exact_cast(values: pa.Array, arrow: pa.DataType) -> pa.Array | None:
    """``values`` as ``arrow``, or ``None`` when the cast would not be exact."""
    if pa.types.is_timestamp(arrow) and (
        pa.types.is_string(values.type) or pa.types.is_large_string(values.type)
    ):
        return exact_timestamps(values, arrow)
    try:
        return values.cast(arrow, safe=True)
    except pa.ArrowException:
        return None


_MOMENT = r"^[0-9]{4}-[0-9]{2}-[0-9]{2}[T ][0-9]{2}:[0-9]{2}:[0-9]{2}(\.[0-9]{1,6})?"
_ZONED = _MOMENT + r"(Z|[+-][0-9]{2}:[0-9]{2})$"
_LOCAL = _MOMENT + "$"
_UTC_MICROSECONDS = pa.timestamp("us", tz="UTC")
_EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)
_KEPT = tuple(
    (dt.datetime(*day, tzinfo=dt.UTC) - _EPOCH) // dt.timedelta(microseconds=1)
    for day in ((1, 1, 2), (9999, 12, 30))
)
"""Microseconds since the epoch of the instants whose local time in every zone is a day
of Python's years (1 to 9999)."""


def exact_timestamps(texts: pa.Array, arrow: pa.DataType) -> pa.Array | None:
    """Timestamps written as text, as ``arrow``, where they are exactly what the row-by-row
    reading makes of them (Python's ``datetime.fromisoformat``, a time without a zone in
    UTC); ``None`` otherwise.

    Exact: every text is ``YYYY-MM-DD`` then ``T`` or a space, ``HH:MM:SS``, at most six
    digits of a second's fraction, and either all end in a zone (``Z`` or ``±HH:MM``) or
    none does; Arrow then rejects what Python rejects (a 25th hour, February 30th) and
    reads the rest as Python does. Any other spelling Python takes (spaces around, a comma
    before the fraction, more digits, ``YYYYMMDD``, a number of milliseconds) is left to
    the row-by-row reading, as are instants near the ends of Python's years.
    """
    try:
        if pc.all(pc.match_substring_regex(texts, _ZONED)).as_py():
            moments = texts.cast(_UTC_MICROSECONDS)
        elif pc.all(pc.match_substring_regex(texts, _LOCAL)).as_py():
            moments = texts.cast(pa.timestamp("us")).cast(_UTC_MICROSECONDS)  # read as UTC
        else:
            return None
        bounds = pc.min_max(moments.cast(pa.int64()))
        lowest, highest = bounds["min"].as_py(), bounds["max"].as_py()
        if lowest is not None and not _KEPT[0] <= lowest <= highest <= _KEPT[1]:
            return None
        return moments.cast(arrow)
    except pa.ArrowException:
        return None


def _integers(batch: pa.RecordBatch, name: str | None) -> pa.Array | None:
    """A time or diff column as ``int64``; ``None`` unless every row has an integer."""
    values = batch.column(name) if name is not None else None
    if values is None or values.null_count or not pa.types.is_integer(values.type):
        return None
    return values.cast(pa.int64())


def newest_integer(batches: Iterable[pa.RecordBatch], column: str) -> int | None:
    """The largest value of ``column`` in ``batches`` as Arrow parses them; ``None`` when
    Arrow cannot tell it exactly (no rows, a value that is not an integer, a null, a
    block Arrow cannot parse): the row-by-row reading tells it then."""
    newest: int | None = None
    try:
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
