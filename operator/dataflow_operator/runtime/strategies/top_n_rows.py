"""A top-N's stateful processor: each partition's rows with their ordering values, and the
change of its ranked rows when they change.

Light to import, as :mod:`.row_counts` is (Spark's pre-init runner unpickles the
processor in a new Python process at every query start): pandas only where rows are
handled. See :mod:`.top_n` for the query around it and
:mod:`dataflow_operator.core.top_n` for the shape.
"""

from __future__ import annotations

import bisect
from collections.abc import Sequence
from decimal import Decimal
from typing import TYPE_CHECKING, Any

from dataflow_operator.runtime.strategies.exact_json import decode_exact
from dataflow_operator.runtime.strategies.partition_rows import PartitionRows

if TYPE_CHECKING:
    pass

__all__ = ["OrderKey", "SortedPartition", "TopNRows", "entry", "sort_key"]

Update = tuple[str, str, str, int]
"""One held input update: partition JSON, row JSON, ordering values JSON, diff."""

Rows = dict[str, int]
"""A partition's rows: :func:`entry` → multiplicity."""

_SEPARATOR = "\x1f"
"""Between an entry's ordering values and its row: JSON text escapes it in strings."""


def entry(values: str, row: str) -> str:
    """A partition's entry of a row and its ordering values (a row's values need not be
    in the row: ``SELECT a … ORDER BY b``)."""
    return f"{values}{_SEPARATOR}{row}"


class OrderKey:
    """How one ``ORDER BY`` value sorts: its direction, where its NULLs go, and whether it
    is a floating-point value (Spark writes NaN and the infinities as strings in JSON;
    NaN sorts above every other value, as in Spark)."""

    __slots__ = ("descending", "floating", "nulls_first")

    def __init__(self, descending: bool, nulls_first: bool, floating: bool) -> None:
        self.descending = descending
        self.nulls_first = nulls_first
        self.floating = floating

    def key(self, value: Any) -> tuple[Any, ...]:
        """A sort key of ``value`` (decoded JSON; ``None`` is NULL) for ascending sorts."""
        if value is None:
            return (0,) if self.nulls_first else (2,)
        comparable: Any = value
        if self.floating:
            comparable = (1,) if value == "NaN" else (0, Decimal(value))
        return (1, _Descending(comparable) if self.descending else comparable)


class _Descending:
    """A value that sorts in the opposite order."""

    __slots__ = ("value",)

    def __init__(self, value: Any) -> None:
        self.value = value

    def __lt__(self, other: _Descending) -> bool:
        return bool(other.value < self.value)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _Descending) and bool(self.value == other.value)

    def __hash__(self) -> int:
        return hash(self.value)


def sort_key(item: str, order: Sequence[OrderKey]) -> tuple[Any, ...]:
    """Where an :func:`entry` sorts: its ordering values (JSON of an object whose fields
    ``"0"``, ``"1"``, … are the ``ORDER BY`` values, a NULL one left out) in ``order``,
    then the row's JSON, which breaks ties (then the entry itself: two entries never
    sort as one)."""
    values, row = item.split(_SEPARATOR, 1)
    decoded = decode_exact(values)
    return (*(o.key(decoded.get(str(i))) for i, o in enumerate(order)), row, item)


class SortedPartition:
    """A partition's rows (:data:`Rows`) and their entries in rank order, kept sorted as
    rows come and go (each sort key computed once)."""

    def __init__(self, rows: Rows, order: Sequence[OrderKey]) -> None:
        self.rows = rows
        self.order = order
        self.keys = sorted(sort_key(item, order) for item in rows)

    def change(self, item: str, diff: int) -> None:
        """Add ``diff`` to the multiplicity of ``item`` (an :func:`entry`)."""
        count = self.rows.get(item, 0) + diff
        if item not in self.rows:
            bisect.insort(self.keys, sort_key(item, self.order))
        if count:
            self.rows[item] = count
            return
        del self.rows[item]
        key = sort_key(item, self.order)
        del self.keys[bisect.bisect_left(self.keys, key)]

    def ranked(self, first: int, last: int) -> list[tuple[str, int]]:
        """The rows ranked ``first`` to ``last`` (1-based), as ``(row JSON, rank)``, a row
        of multiplicity ``n`` ranked ``n`` times in a row (one whose multiplicity is not
        positive not at all)."""
        out: list[tuple[str, int]] = []
        rank = 0
        for key in self.keys:
            row, item = key[-2], key[-1]
            for _ in range(self.rows[item]):
                rank += 1
                if rank > last:
                    return out
                if rank >= first:
                    out.append((row, rank))
        return out


class TopNRows(PartitionRows):
    """Each partition's rows; the ranked rows' changes once the frontier passes a time.

    Input (by position): ``__key, __row, __order, __time, __diff, __bucket``. Output:
    ``__row, __rank, __time, __diff``.
    """

    value_type = str
    output_width = 4

    def __init__(self, order: Sequence[OrderKey], first: int, last: int) -> None:
        self.order = list(order)
        self.first = first
        self.last = last

    def apply(self, due: list[tuple[int, list[Update]]]) -> list[tuple[str, int, int, int]]:
        """Apply each due time's updates in time order (each partition read and written
        once); the ranked rows' changes they cause, as ``(row, rank, time, diff)``."""
        keys = {partition.encode() for _, updates in due for partition, _, _, _ in updates}
        stored = self.partitions.load(keys)
        partitions: dict[bytes, Rows] = {key: stored.get(key, {}) for key in keys}
        sorted_partitions: dict[bytes, SortedPartition] = {}
        out: list[tuple[str, int, int, int]] = []
        for time, updates in due:
            touched: dict[bytes, list[Update]] = {}
            for update in updates:
                touched.setdefault(update[0].encode(), []).append(update)
            for key, changes in touched.items():
                if key not in sorted_partitions:
                    sorted_partitions[key] = SortedPartition(partitions[key], self.order)
                partition = sorted_partitions[key]
                before = partition.ranked(self.first, self.last)
                for _, row, values, diff in changes:
                    partition.change(entry(values, row), diff)
                out += _changes(before, partition.ranked(self.first, self.last), time)
        for key, rows in partitions.items():
            if rows:
                self.partitions.set(key, rows)
            else:
                self.partitions.delete(key)
        self.partitions.store()
        return out


def _changes(
    before: list[tuple[str, int]], after: list[tuple[str, int]], time: int
) -> list[tuple[str, int, int, int]]:
    """The updates from ranked rows ``before`` to ``after`` at ``time``."""
    counts: dict[tuple[str, int], int] = {}
    for entry in before:
        counts[entry] = counts.get(entry, 0) - 1
    for entry in after:
        counts[entry] = counts.get(entry, 0) + 1
    return [(row, rank, time, diff) for (row, rank), diff in counts.items() if diff]
