"""A format of a source's files, read two ways that give the same updates.

A source's files are JSON lines, CSV or Parquet (:mod:`.formats` says which reads a
file). Each format is one :class:`FileFormat` that owns both of its readings:

- **row by row** (:meth:`FileFormat.records`): the file's records as dicts, whose values
  the item's reading converts one at a time by their column's Spark type
  (:func:`~dataflow_operator.runtime.values.convert_row`). This reading *defines* what a
  file holds: ``"12"`` is the integer 12, a field matches its column whatever its case,
  a bad value is an error naming its file and row.
- **by Arrow**, where Arrow reads the file exactly as the row-by-row reading does
  (:mod:`.exact_arrow`), a block of rows at a time in C++.

:meth:`FileFormat.blocks` reads a file into updates, choosing between the two by plain
decisions, never by an exception handed from one reader to the other: first, before the
file is opened, from the columns (:meth:`FileFormat.arrow_reading`: ``None`` when Arrow
cannot read them exactly in this format at all, as CSV, or JSON with a date column);
then, block by block, from what Arrow made of the block. Each block of the file comes out
once, in order: an Arrow batch of updates, or the block's records (:class:`Rows`) for
the row-by-row reading. Every row is read once; none is read again or skipped.

The contract every format keeps, and the tests check on files each way: taking the
batches as they are and converting the :class:`Rows` row by row gives exactly the
updates (values, times, diffs, order, and the first error) that converting
``records(file)`` row by row gives.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, ClassVar, TypeAlias

import pyarrow as pa

from dataflow_operator.runtime.sources.exact_arrow import UpdateLayout
from dataflow_operator.runtime.storage import Location
from dataflow_operator.runtime.values import BadValue

__all__ = ["ArrowReading", "Block", "FileFormat", "Rows", "not_utf8", "utf8_lines"]


def not_utf8(file_name: str, error: UnicodeDecodeError) -> BadValue:
    """The one line for a text file that is not UTF-8: its name, the byte, the fix."""
    return BadValue(
        f"{file_name}: not UTF-8 text (it holds the byte 0x{error.object[error.start]:02x}); "
        "save the file as UTF-8"
    )


def utf8_lines(file: Location) -> Iterator[str]:
    """The file's lines, read as they are consumed; bytes that are not UTF-8 are a
    :class:`~dataflow_operator.runtime.values.BadValue` naming the file."""
    try:
        yield from file.read_lines()
    except UnicodeDecodeError as error:
        raise not_utf8(file.name, error) from None


@dataclass(frozen=True, slots=True)
class Rows:
    """Records of a file for the row-by-row reading, in the file's order, read as they
    are consumed (a bad record raises when it is reached, after the ones before it)."""

    records: Iterator[dict[str, Any]]


Block: TypeAlias = pa.RecordBatch | Rows
"""A block of a file: updates read by Arrow (of the layout's ``columns.schema``), or
records to read row by row."""

ArrowReading: TypeAlias = Callable[[Location], Iterator[Block]]
"""A format's Arrow reading of files into one layout's updates: a file's blocks."""


class FileFormat(ABC):
    """One format of source files and its two readings; see the module docstring."""

    name: ClassVar[str]
    """The format's name in a source's spec (``json``, ``csv``, ``parquet``)."""

    @abstractmethod
    def records(self, file: Location) -> Iterator[dict[str, Any]]:
        """The row-by-row reading: ``file``'s records in order, read as they are
        consumed (a large file is never held whole; a drop stops the reading at once)."""

    @abstractmethod
    def arrow_reading(self, layout: UpdateLayout) -> ArrowReading | None:
        """The first choice, made before any file is opened: how Arrow reads this
        format's files into ``layout``'s updates, or ``None`` where it cannot read them
        exactly for these columns (every file is then read row by row)."""

    @abstractmethod
    def newest_integer(self, file: Location, column: str) -> int | None:
        """The largest value of ``column`` in ``file`` as Arrow reads it, or ``None``
        when Arrow cannot tell it exactly (the caller reads :meth:`records` then)."""

    def blocks(self, file: Location, layout: UpdateLayout) -> Iterator[Block]:
        """``file`` as blocks in order: Arrow's updates where it reads a block exactly,
        the block's :class:`Rows` where it does not; all of it as one :class:`Rows`
        where :meth:`arrow_reading` says Arrow cannot read these columns."""
        arrow = self.arrow_reading(layout)
        if arrow is None:
            return iter([Rows(self.records(file))])
        return arrow(file)
