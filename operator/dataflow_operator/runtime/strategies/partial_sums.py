"""An aggregate's per-row terms summed per group and time where they are computed.

The aggregate's operator (:class:`~.aggregate.GroupTotals`) applies its input row by row
in Python, and pyspark hands a ``transformWithStateInPandas`` operator its rows one by
one too (:mod:`.packed_rows`): for a join with GROUP BY that was a large share of the
Python time of a batch (``bench/RESULTS.md``). Yet a
batch's rows fall into few groups at few times (250,000 facts at one time into at most
10,000 groups). :class:`PartialSums`, a ``mapInArrow`` function run in the tasks that
compute the terms, sums them per group and time with pyarrow's hash aggregation before
the shuffle, so the operator gets one row per group, time and partition instead.

What it sums is what the operator adds (:class:`~dataflow_operator.core.incremental.
AggregatePlan`): the partial sums and ``__count``, the row's diff. A ``min``, ``max`` or
``count(DISTINCT …)`` column is no sum but a value counted with the row's diff: it is
grouped on, its rows' diffs summed into ``__count``, which is the count the operator
gives that value.

It applies only where pyarrow's grouping and sums give exactly what the row-by-row
operator gives (:func:`sums_exactly`): grouped on columns whose equal values are equal
to Python too (not floating point: NaN and -0.0), sums over integers or floating point
(a NaN term is left out, as the operator leaves it out). An integer sum that could pass
the 64-bit range is not pre-summed: the batch's rows go on as they are.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from pyspark.sql import types as T  # noqa: N812 - Spark's convention

if TYPE_CHECKING:
    import pyarrow as pa

__all__ = ["ROWS_AT_ONCE", "PartialSums", "sums_exactly"]

ROWS_AT_ONCE = 1_000_000
"""Summed rows a task keeps before it sums them again, and hands them on if they are
still this many (a batch with that many groups at its times gains nothing more)."""

_GROUPABLE = (
    T.BooleanType,
    T.IntegralType,
    T.StringType,
    T.BinaryType,
    T.DateType,
    T.TimestampType,
    T.TimestampNTZType,
    T.DecimalType,
)
_SUMMABLE = (T.IntegralType, T.FloatType, T.DoubleType)

_INT64_LIMIT = 2**63 - 1


def sums_exactly(grouped: Sequence[T.DataType], summed: Sequence[T.DataType]) -> bool:
    """Whether :class:`PartialSums` gives exactly what the operator would, grouping on
    columns of the ``grouped`` types and summing ones of the ``summed`` types."""
    return all(isinstance(t, _GROUPABLE) for t in grouped) and all(
        isinstance(t, _SUMMABLE) for t in summed
    )


@dataclass(frozen=True, slots=True)
class PartialSums:
    """A ``mapInArrow`` function: its input rows with the ``summed`` columns summed per
    distinct value of the ``grouped`` ones (the group, ``__time``, any min/max value);
    the output has the input's schema."""

    grouped: tuple[str, ...]
    summed: tuple[str, ...]

    def __call__(self, batches: Iterable[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        """Sum ``batches`` (a task's input), a batch at a time, then all together."""
        kept: list[pa.Table] = []
        held = 0
        schema: pa.Schema | None = None
        for batch in batches:
            if batch.num_rows == 0:
                continue
            schema = batch.schema
            summed = self._summed([batch], schema)
            if summed is None:
                yield batch
                continue
            kept.append(summed)
            held += summed.num_rows
            if held >= ROWS_AT_ONCE:
                kept, held = self._again(kept, schema)
                if held >= ROWS_AT_ONCE:
                    yield from (b for t in kept for b in t.to_batches())
                    kept, held = [], 0
        if kept and schema is not None:
            kept, _ = self._again(kept, schema)
            yield from (b for t in kept for b in t.to_batches())

    def _again(self, kept: list[pa.Table], schema: pa.Schema) -> tuple[list[pa.Table], int]:
        """``kept`` summed into one table (left as they are if that could overflow)."""
        batches = [b for table in kept for b in table.to_batches()]
        summed = self._summed(batches, schema)
        if summed is None:
            return kept, sum(t.num_rows for t in kept)
        return [summed], summed.num_rows

    def _summed(self, batches: list[pa.RecordBatch], schema: pa.Schema) -> pa.Table | None:
        """``batches``' rows summed per group, in ``schema``; ``None`` if an integer sum
        could pass the 64-bit range."""
        import pyarrow as pa
        import pyarrow.compute as pc

        table = pa.Table.from_batches(batches, schema)
        terms = []
        for name in self.summed:
            column = table.column(name)
            if pa.types.is_floating(column.type):
                # The operator leaves a NaN term out (to pandas it is a NULL).
                column = pc.if_else(pc.is_nan(column), None, column)
            elif not _fits_int64(column, table.num_rows):
                return None
            terms.append(column)
        table = pa.table(
            [*(table.column(n) for n in self.grouped), *terms],
            names=[*self.grouped, *self.summed],
        )
        sums = table.group_by(list(self.grouped), use_threads=False).aggregate(
            [
                (name, "sum", pc.ScalarAggregateOptions(skip_nulls=True, min_count=1))
                for name in self.summed
            ]
        )
        columns = {
            **{name: sums.column(name) for name in self.grouped},
            **{name: sums.column(f"{name}_sum") for name in self.summed},
        }
        return pa.table([columns[field.name].cast(field.type) for field in schema], schema=schema)


def _fits_int64(column: pa.ChunkedArray, rows: int) -> bool:
    """Whether any sum of ``column``'s values stays within a signed 64-bit integer."""
    import pyarrow.compute as pc

    bounds = pc.min_max(column)
    low, high = bounds["min"].as_py(), bounds["max"].as_py()
    if low is None:
        return True
    largest: int = max(abs(low), abs(high))
    return largest * rows <= _INT64_LIMIT
