"""Parquet: a user's files, and the changelogs the runtime stores (``__time``/``__diff``).

Both readings go through the file's record batches as Arrow reads them: row by row,
each batch's rows as dicts; by Arrow, each batch cast to the columns. A field matches
its column by name, else by the one name that differs only by case, as the row-by-row
reading matches it.

The choices (:mod:`.file_format`): Arrow reads any columns (the types are in the file,
not parsed from text); then each batch is read by Arrow when every matched field's type
casts exactly to its column's (:func:`casts_exactly`) and the batch is exact
(:mod:`.exact_arrow`), else row by row.
"""

from __future__ import annotations

import functools
from collections.abc import Iterator
from typing import Any, ClassVar

import pyarrow as pa

from dataflow_operator.runtime.sources.exact_arrow import (
    UpdateLayout,
    exact_names,
    exact_updates,
    newest_integer,
)
from dataflow_operator.runtime.sources.file_format import ArrowReading, Block, FileFormat, Rows
from dataflow_operator.runtime.storage import Location

__all__ = ["Parquet", "casts_exactly"]


class Parquet(FileFormat):
    """Parquet files; see the module docstring."""

    name: ClassVar[str] = "parquet"

    def records(self, file: Location) -> Iterator[dict[str, Any]]:
        """Each row of each record batch, as a dict."""
        for batch in file.read_parquet_batches():
            yield from batch.to_pylist()

    def arrow_reading(self, layout: UpdateLayout) -> ArrowReading:
        """Arrow's reading, batch by batch: always (the file's types decide per batch)."""
        return functools.partial(_blocks, layout=layout)

    def newest_integer(self, file: Location, column: str) -> int | None:
        """From ``column`` alone (the others are not read)."""
        return newest_integer(file.read_parquet_batches(columns=[column]), column)


def _blocks(file: Location, *, layout: UpdateLayout) -> Iterator[Block]:
    for batch in file.read_parquet_batches():
        updates = _exact(batch, layout)
        yield updates if updates is not None else Rows(iter(batch.to_pylist()))


def _exact(batch: pa.RecordBatch, layout: UpdateLayout) -> pa.RecordBatch | None:
    names = exact_names(batch.schema, layout.data_names, exact_only=False)
    if names is None:
        return None
    for name, _, arrow in layout.columns.fields:
        found = names.get(name)
        if found is not None and not casts_exactly(batch.schema.field(found).type, arrow):
            return None
    for name in layout.times or ():
        if name in batch.schema.names:
            names[name] = name
    return exact_updates(batch, names, layout)


def casts_exactly(source: pa.DataType, target: pa.DataType) -> bool:
    """Whether Parquet values of ``source`` are, cast to ``target``, what the row-by-row
    reading makes of them (an integer that does not fit makes the cast fail, and the
    batch is then not exact)."""
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
