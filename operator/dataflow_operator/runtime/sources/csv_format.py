"""CSV: a header line, then one row per line, every value text.

Read row by row only (:class:`csv.DictReader`): every value is text, which the row-by-row
reading converts by its column's type otherwise than Arrow's CSV parser would (``yes`` is
true in a boolean column, an empty field is not a null). So :meth:`Csv.arrow_reading`
chooses the row-by-row reading for every file.
"""

from __future__ import annotations

import csv
from collections.abc import Iterator
from typing import Any, ClassVar

from dataflow_operator.runtime.sources.exact_arrow import UpdateLayout
from dataflow_operator.runtime.sources.file_format import ArrowReading, FileFormat
from dataflow_operator.runtime.storage import Location

__all__ = ["Csv"]


class Csv(FileFormat):
    """CSV files; see the module docstring."""

    name: ClassVar[str] = "csv"

    def records(self, file: Location) -> Iterator[dict[str, Any]]:
        """Each row as a dict of its header's names to its text values."""
        yield from csv.DictReader(file.read_lines())

    def arrow_reading(self, layout: UpdateLayout) -> ArrowReading | None:
        """``None``: CSV is read row by row, whatever the columns."""
        return None

    def newest_integer(self, file: Location, column: str) -> int | None:
        """``None``: a CSV value is text, whose integer the row-by-row reading tells."""
        return None
