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
from dataflow_operator.runtime.sources.file_format import ArrowReading, FileFormat, utf8_lines
from dataflow_operator.runtime.storage import Location
from dataflow_operator.runtime.values import BadValue

__all__ = ["Csv"]


class Csv(FileFormat):
    """CSV files; see the module docstring."""

    name: ClassVar[str] = "csv"

    def records(self, file: Location) -> Iterator[dict[str, Any]]:
        """Each row as a dict of its header's names to its text values; a row with more or
        fewer values than the header names is a
        :class:`~dataflow_operator.runtime.values.BadValue` naming the file, the line and
        the columns."""
        reader = csv.DictReader(utf8_lines(file))
        for record in reader:
            header = reader.fieldnames or []
            extra = record.pop(None, None)
            missing = [name for name in header if record.get(name) is None]
            if extra or missing:
                count = len(header) + len(extra or []) - len(missing)
                raise BadValue(
                    f"{file.name}: line {reader.line_num}: {count} value(s), but the header "
                    f"names {len(header)} ({', '.join(header)}); give each row one value per "
                    "column (empty for NULL)"
                )
            yield record

    def arrow_reading(self, layout: UpdateLayout) -> ArrowReading | None:
        """``None``: CSV is read row by row, whatever the columns."""
        return None

    def newest_integer(self, file: Location, column: str) -> int | None:
        """``None``: a CSV value is text, whose integer the row-by-row reading tells."""
        return None
