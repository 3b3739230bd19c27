"""The updates of one item a read task reads (a file, a stored part, a table's fold), as
Arrow batches: read by Arrow as far as it reads them exactly (:mod:`.exact_arrow`), then
row by row from the first row not yet emitted, each value converted by its column's
Spark type (:func:`~dataflow_operator.runtime.values.convert_row`), a bad one an error
naming its file and row."""

from __future__ import annotations

import itertools
from collections.abc import Collection, Iterator, Sequence
from typing import Any

import pyarrow as pa

from dataflow_operator.runtime.changelog_store import DIFF, TIME
from dataflow_operator.runtime.sources.batches import UpdateColumns
from dataflow_operator.runtime.sources.changelog_times import time_and_diff
from dataflow_operator.runtime.sources.exact_arrow import NotExact, exact_batches
from dataflow_operator.runtime.sources.logs import records
from dataflow_operator.runtime.sources.options import SourceOptions
from dataflow_operator.runtime.sources.read_tasks import ReadItem
from dataflow_operator.runtime.sources.table_folds import fold_records
from dataflow_operator.runtime.storage import Location
from dataflow_operator.runtime.values import BadValue, convert_row

__all__ = ["ROWS_PER_BATCH", "item_batches", "row_updates"]

ROWS_PER_BATCH = 4096
"""Rows read one by one that make one Arrow batch (and one check for a drop)."""

Fields = Sequence[tuple[str, Any]]
"""A source's data columns: name, Spark type."""


def item_batches(
    item: ReadItem, options: SourceOptions, fields: Fields, columns: UpdateColumns
) -> Iterator[pa.RecordBatch]:
    """``item``'s updates (data columns, own time, diff) as batches of ``columns``."""
    emitted = 0
    if not item.members:
        own = (TIME, DIFF) if item.stored else None
        if options.kind == "changelog" and not item.stored:
            own = (options.time_column, options.diff_column)
        file_format = "parquet" if item.stored else options.format
        try:
            for batch in exact_batches(Location(item.uri), file_format, columns, own, item.time):
                emitted += batch.num_rows
                yield batch
            return
        except NotExact:
            pass
    updates = ((*values, time, diff) for values, time, diff in row_updates(item, options, fields))
    rows = itertools.islice(updates, emitted, None)
    while chunk := list(itertools.islice(rows, ROWS_PER_BATCH)):
        yield columns.from_rows(chunk)


def row_updates(
    item: ReadItem, options: SourceOptions, fields: Fields
) -> Iterator[tuple[tuple[Any, ...], int, int]]:
    """``item``'s updates read row by row: values, time, diff."""
    if item.stored:
        for record in records(Location(item.uri), "parquet"):
            time = int(record[TIME]) if item.time is None else item.time
            yield convert_row(record, fields), time, int(record[DIFF])
        return
    rows: dict[str, int] = {}
    for name, record in _records(item, options):
        rows[name] = number = rows.get(name, 0) + 1
        where = f"{name}: row {number}"
        try:
            values = convert_row(record, fields)
        except BadValue as error:
            raise BadValue(f"{where}: {error}") from None
        if options.kind == "changelog":
            yield values, *time_and_diff(record, options, where)
        else:
            yield values, item.time if item.time is not None else 0, 1


def _records(item: ReadItem, options: SourceOptions) -> Iterator[tuple[str, dict[str, Any]]]:
    """``(file, record)`` for an item's rows; a table's file that is no longer in its
    directory (folded since it was listed) is read from the table's latest fold."""
    file = Location(item.uri)
    if item.members:
        yield from _folded(file, item.members, options)
        return
    found = records(file, options.format)
    try:
        first = next(found, None)  # opens the file
    except FileNotFoundError:
        if options.kind != "table":
            raise
        yield from _folded(file.parent, [file.name], options)
        return
    if first is not None:
        yield file.name, first
        for record in found:
            yield file.name, record


def _folded(
    table: Location, members: Collection[str], options: SourceOptions
) -> Iterator[tuple[str, dict[str, Any]]]:
    """A table's files read from its folds; one gone from both (deleted by hand) says how
    the dataflow starts over: its state directory (``…/dataflows/NAME``, the parent of
    its sources' logs) deleted, it reads the table as it is now."""
    try:
        yield from fold_records(table, members)
    except FileNotFoundError as error:
        state = options.log_dir.parent.parent
        raise FileNotFoundError(
            f"{error}; files of a table are never deleted by hand: to start the dataflow "
            f"over from the table as it is now, stop it and delete its state {state}"
        ) from None
