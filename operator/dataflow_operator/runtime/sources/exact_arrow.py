"""A file's updates read by Arrow, column at a time, where Arrow reads them exactly.

Reading a source row by row in Python (:func:`~dataflow_operator.runtime.values.convert`
per value) is slow (``bench/RESULTS.md``); Arrow parses JSON lines and Parquet in C++ at
a small fraction of that. But the row-by-row reading defines what a value means (``"12"`` is the
integer 12, a field matches its column whatever its case, a bad value is an error naming
its row), and Arrow must never read a file otherwise. So :func:`exact_batches` reads a
file by Arrow only as far as it can tell that Arrow's values are the ones the row-by-row
reading would give; where it cannot, it raises :class:`NotExact`, and the reader goes on
row by row from the first row not yet emitted (:func:`.item_updates.item_batches`).

Exact means: every column's Spark type is one Arrow parses directly (integers, floating
point, strings, booleans; in Parquet also a column already of the column's Arrow type),
each value parses as that type (Arrow raises otherwise: ``1.0`` is not an ``int64``), no
field differs from its column's name only by case, and a changelog's time and diff are
integers on every row.
"""

from __future__ import annotations

from collections.abc import Iterator

import pyarrow as pa
import pyarrow.json as pa_json

from dataflow_operator.runtime.sources.batches import UpdateColumns
from dataflow_operator.runtime.sources.logs import suffix_of
from dataflow_operator.runtime.storage import Location

__all__ = ["NotExact", "exact_batches"]

_PARSED = {
    "byte": pa.int8(),
    "short": pa.int16(),
    "integer": pa.int32(),
    "long": pa.int64(),
    "float": pa.float64(),  # then cast: rounded once from the double, as row by row
    "double": pa.float64(),
    "string": pa.string(),
    "boolean": pa.bool_(),
}
"""Spark types whose JSON values Arrow parses as the row-by-row reading converts them."""


class NotExact(Exception):
    """Arrow cannot tell that it reads the rest of the file as row by row: read it so."""


def exact_batches(
    file: Location,
    file_format: str,
    columns: UpdateColumns,
    times: tuple[str, str] | None,
    time: int | None,
) -> Iterator[pa.RecordBatch]:
    """``file``'s updates as batches of ``columns.schema``, read by Arrow; raises
    :class:`NotExact` (before the first batch, or between two) where Arrow would read a
    value otherwise than row by row.

    ``times``: the file's time and diff columns (a changelog's, or the runtime's own);
    ``None``: every row has diff 1. ``time``: every row's time (else the row's own).
    """
    suffix = suffix_of(file)
    if suffix == "parquet" or (file_format == "parquet" and suffix not in ("json", "csv")):
        batches = _parquet(file, columns, times)
    elif suffix == "csv" or file_format == "csv":
        raise NotExact("CSV is read row by row")
    else:
        batches = _json(file, columns, times)
    try:
        for found, names in batches:
            yield _updates(found, names, columns, times, time)
    except FileNotFoundError:
        raise NotExact("no longer there (folded)") from None
    except (pa.ArrowException, ValueError) as error:
        raise NotExact(str(error)) from None


def _json(
    file: Location, columns: UpdateColumns, times: tuple[str, str] | None
) -> Iterator[tuple[pa.RecordBatch, dict[str, str]]]:
    wanted: dict[str, pa.DataType] = {}
    for name, spark_type, _ in columns.fields:
        if spark_type not in _PARSED:
            raise NotExact(f"column {name}: {spark_type} is read row by row")
        wanted[name] = _PARSED[spark_type]
    for name in times or ():
        if wanted.setdefault(name, pa.int64()) != pa.int64():
            raise NotExact(f"{name} is both a column and the time or diff")
    options = pa_json.ParseOptions(
        explicit_schema=pa.schema(list(wanted.items())), unexpected_field_behavior="infer"
    )
    for batch in file.read_json_batches(options):
        yield batch, _matched(batch.schema, [*wanted], exact_only=True)


def _parquet(
    file: Location, columns: UpdateColumns, times: tuple[str, str] | None
) -> Iterator[tuple[pa.RecordBatch, dict[str, str]]]:
    for batch in file.read_parquet_batches():
        names = _matched(batch.schema, [name for name, _, _ in columns.fields], exact_only=False)
        for name, _, arrow in columns.fields:
            found = names.get(name)
            if found is not None and not _casts_exactly(batch.schema.field(found).type, arrow):
                raise NotExact(
                    f"column {name}: {batch.schema.field(found).type} is read row by row"
                )
        for name in times or ():
            if name in batch.schema.names:
                names[name] = name
        yield batch, names


def _matched(schema: pa.Schema, wanted: list[str], *, exact_only: bool) -> dict[str, str]:
    """Each wanted column's field in ``schema``: the same name, else (unless
    ``exact_only``) the one that differs only by case, as the row-by-row reading matches."""
    by_lower: dict[str, list[str]] = {}
    for present in schema.names:
        by_lower.setdefault(present.lower(), []).append(present)
    matched: dict[str, str] = {}
    for name in wanted:
        variants = by_lower.get(name.lower(), [])
        if name in variants and len(variants) == 1:
            matched[name] = name
        elif variants and (exact_only or len(variants) > 1):
            raise NotExact(f"column {name}: fields {variants} differ only by case")
        elif variants:
            matched[name] = variants[0]
    return matched


def _casts_exactly(source: pa.DataType, target: pa.DataType) -> bool:
    """Whether Parquet values of ``source`` are, cast to ``target``, what the row-by-row
    reading makes of them (an integer that does not fit makes the cast fail)."""
    if source == target or pa.types.is_null(source):
        return True
    kinds = (pa.types.is_integer, pa.types.is_floating, pa.types.is_string)
    integer, floating, string = (bool(kind(source)) for kind in kinds)
    if pa.types.is_integer(target):
        return integer
    if pa.types.is_floating(target):
        return integer or floating
    if pa.types.is_string(target):
        return string or bool(pa.types.is_large_string(source))
    return False


def _updates(
    batch: pa.RecordBatch,
    names: dict[str, str],
    columns: UpdateColumns,
    times: tuple[str, str] | None,
    time: int | None,
) -> pa.RecordBatch:
    rows = batch.num_rows
    arrays = []
    for name, _, arrow in columns.fields:
        found = names.get(name)
        arrays.append(
            pa.nulls(rows, arrow) if found is None else batch.column(found).cast(arrow, safe=True)
        )
    own_time = diff = None
    if times is not None:
        own_time, diff = (_integers(batch, names.get(column)) for column in times)
    if time is not None:
        arrays.append(pa.repeat(pa.scalar(time, pa.int64()), rows))
    elif own_time is not None:
        arrays.append(own_time)
    else:
        raise NotExact("rows without a time")
    arrays.append(pa.repeat(pa.scalar(1, pa.int64()), rows) if diff is None else diff)
    return pa.RecordBatch.from_arrays(arrays, schema=columns.schema)


def _integers(batch: pa.RecordBatch, name: str | None) -> pa.Array:
    """A time or diff column as ``int64``: every row has an integer, or it is not exact."""
    values = batch.column(name) if name is not None else None
    if values is None or values.null_count or not pa.types.is_integer(values.type):
        raise NotExact("a time or diff that is missing or not an integer")
    return values.cast(pa.int64())
