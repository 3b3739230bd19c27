"""The updates of one item a read task reads (a file, a stored part, a table's fold), as
Arrow batches of the source's columns.

A file is read by its format (:func:`~.formats.format_of`), which hands over its blocks
in order, each once: updates Arrow read exactly, or records for the row-by-row reading
(:mod:`.file_format` says how a format chooses). Here such records become updates
(:class:`RowReading`): each value converted by its column's Spark type
(:func:`~dataflow_operator.runtime.values.convert_row`), the time and diff as the item's
kind says, and a bad value an error naming its file and row, rows numbered from the
file's first whichever reading read the rows before. The files of a table that are only
in its latest fold are read from there, row by row.
"""

from __future__ import annotations

import itertools
from collections.abc import Collection, Iterable, Iterator, Sequence
from typing import Any

import pyarrow as pa

from dataflow_operator.runtime.changelog_store import DIFF, TIME
from dataflow_operator.runtime.sources.batches import UpdateColumns
from dataflow_operator.runtime.sources.changelog_times import time_and_diff
from dataflow_operator.runtime.sources.exact_arrow import UpdateLayout
from dataflow_operator.runtime.sources.file_format import FileFormat, Rows
from dataflow_operator.runtime.sources.formats import PARQUET, format_of
from dataflow_operator.runtime.sources.options import SourceOptions
from dataflow_operator.runtime.sources.read_tasks import ReadItem
from dataflow_operator.runtime.sources.table_folds import fold_records
from dataflow_operator.runtime.storage import Location
from dataflow_operator.runtime.values import BadValue, convert_row

__all__ = ["ROWS_PER_BATCH", "RowReading", "item_batches", "item_layout"]

ROWS_PER_BATCH = 4096
"""Rows read one by one that make one Arrow batch (and one check for a drop)."""

Fields = Sequence[tuple[str, Any]]
"""A source's data columns: name, Spark type."""
Update = tuple[Any, ...]
"""An update read row by row: the values, its time, its diff."""


def item_batches(
    item: ReadItem, options: SourceOptions, fields: Fields, columns: UpdateColumns
) -> Iterator[pa.RecordBatch]:
    """``item``'s updates (data columns, own time, diff) as batches of ``columns``."""
    rows = RowReading(item, options, fields)
    file = Location(item.uri)
    if item.members:
        yield from _batches(rows.named(_folded(file, item.members, options)), columns)
        return
    file_format = format_of(file, PARQUET.name if item.stored else options.format)
    batches = _file_batches(file, file_format, item_layout(item, options, columns), rows)
    try:
        first = next(batches, None)  # opens the file
    except FileNotFoundError:
        if item.stored or options.kind != "table":
            raise
        # Folded since it was listed: its rows are in the table's latest fold.
        yield from _batches(rows.named(_folded(file.parent, [file.name], options)), columns)
        return
    if first is not None:
        yield first
        yield from batches


def item_layout(item: ReadItem, options: SourceOptions, columns: UpdateColumns) -> UpdateLayout:
    """What ``item``'s rows become: the runtime's own time and diff in a stored part, a
    changelog's own, else the item's time (0 without one, as :class:`RowReading` reads
    it) and diff 1."""
    times = None
    if item.stored:
        times = (TIME, DIFF)
    elif options.kind == "changelog":
        times = (options.time_column, options.diff_column)
    time = 0 if item.time is None and times is None else item.time
    return UpdateLayout(columns, times, time)


class RowReading:
    """An item's records made updates row by row, numbered per file: a user's file's bad
    value is an error naming the file and the row (from 1, the rows Arrow read
    counted: :meth:`read_by_arrow`); a stored part's names neither."""

    def __init__(self, item: ReadItem, options: SourceOptions, fields: Fields) -> None:
        self._item = item
        self._options = options
        self._fields = fields
        self._time = item.time if item.time is not None else 0
        self._numbers: dict[str, int] = {}

    def read_by_arrow(self, file: str, rows: int) -> None:
        """``rows`` rows of ``file`` were read by Arrow: the next one's number is after them."""
        self._numbers[file] = self._numbers.get(file, 0) + rows

    def updates(self, file: str, records: Iterable[dict[str, Any]]) -> Iterator[Update]:
        """The updates of ``records``, the next rows of ``file``."""
        for record in records:
            yield self.update(file, record)

    def named(self, records: Iterable[tuple[str, dict[str, Any]]]) -> Iterator[Update]:
        """The updates of ``(file, record)`` pairs (a table's fold)."""
        for file, record in records:
            yield self.update(file, record)

    def update(self, file: str, record: dict[str, Any]) -> Update:
        """The update of ``record``, the next row of ``file``."""
        item, options = self._item, self._options
        if item.stored:
            time = int(record[TIME]) if item.time is None else item.time
            return (*convert_row(record, self._fields), time, int(record[DIFF]))
        self._numbers[file] = number = self._numbers.get(file, 0) + 1
        where = f"{file}: row {number}"
        try:
            values = convert_row(record, self._fields)
        except BadValue as error:
            raise BadValue(f"{where}: {error}") from None
        if options.kind == "changelog":
            return (*values, *time_and_diff(record, options, where))
        return (*values, self._time, 1)


def _file_batches(
    file: Location, file_format: FileFormat, layout: UpdateLayout, rows: RowReading
) -> Iterator[pa.RecordBatch]:
    """``file``'s blocks as batches: Arrow's as they are, the records converted."""
    for block in file_format.blocks(file, layout):
        if isinstance(block, Rows):
            yield from _batches(rows.updates(file.name, block.records), layout.columns)
        else:
            rows.read_by_arrow(file.name, block.num_rows)
            yield block


def _batches(updates: Iterator[Update], columns: UpdateColumns) -> Iterator[pa.RecordBatch]:
    while chunk := list(itertools.islice(updates, ROWS_PER_BATCH)):
        yield columns.from_rows(chunk)


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
