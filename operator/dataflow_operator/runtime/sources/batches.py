"""The Arrow batches a source's read task hands Spark.

A task's updates are Arrow record batches of :class:`UpdateColumns` (the data columns,
``__time``, ``__diff``), read by Arrow (:mod:`.file_format`) or converted from rows read
one by one (:meth:`UpdateColumns.from_rows`). The same batches are recorded in the
ingested collection, and handed to Spark with the batch's columns added
(:meth:`UpdateColumns.output`): Spark takes them as they are, without converting each
value in Python, as it does rows.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa

from dataflow_operator.runtime.changelog_store import DIFF, TIME

__all__ = ["UpdateColumns"]


@dataclass(frozen=True, slots=True)
class UpdateColumns:
    """A source's updates as Arrow sees them: its data columns (``fields``: name, Spark
    type name, Arrow type as Spark's conversion types it), then ``__time`` and ``__diff``
    (``schema``); ``output``: the schema of what Spark reads (those, then the batch's
    columns)."""

    fields: tuple[tuple[str, str, pa.DataType], ...]
    schema: pa.Schema
    output: pa.Schema
    converters: tuple[Any, ...] = field(repr=False)

    @classmethod
    def of(cls, spark_schema: Any, data: Sequence[str]) -> UpdateColumns:
        """The columns of a source whose Spark schema is ``spark_schema`` (a StructType:
        the ``data`` columns, then the runtime's)."""
        from pyspark.sql.conversion import LocalDataToArrowConversion
        from pyspark.sql.pandas.types import to_arrow_schema

        output = to_arrow_schema(spark_schema, timezone="UTC")
        by_name = {f.name: f for f in spark_schema.fields}
        arrow = [(name, output.field(name).type) for name in data]
        return cls(
            tuple((name, by_name[name].dataType.typeName(), kind) for name, kind in arrow),
            pa.schema([*arrow, (TIME, pa.int64()), (DIFF, pa.int64())]),
            output,
            tuple(
                LocalDataToArrowConversion._create_converter(by_name[name].dataType)
                for name in data
            ),
        )

    def from_rows(self, rows: Sequence[tuple[Any, ...]]) -> pa.RecordBatch:
        """Updates ``(*values, time, diff)``, values as :func:`~.values.convert` gives them,
        converted as Spark converts the rows a data source returns."""
        columns: list[list[Any]] = [[] for _ in range(len(self.fields) + 2)]
        for row in rows:
            for index, value in enumerate(row):
                columns[index].append(value)
        data = [
            [convert(value) for value in values]
            for convert, values in zip(self.converters, columns[:-2], strict=True)
        ]
        return pa.RecordBatch.from_arrays([*data, *columns[-2:]], schema=self.schema)

    def spark_batch(self, updates: pa.RecordBatch, batch_time: int) -> pa.RecordBatch:
        """``updates`` as Spark reads them: with ``__hb`` false and the batch's time."""
        rows = updates.num_rows
        return pa.RecordBatch.from_arrays(
            [
                *updates.columns,
                pa.repeat(pa.scalar(False), rows),
                pa.repeat(self._batch_stamp(batch_time), rows),
            ],
            schema=self.output,
        )

    def heartbeat(self, batch_time: int) -> pa.RecordBatch:
        """The batch's heartbeat row: no data, time ``batch_time``, diff 0."""
        data = [pa.nulls(1, arrow) for _, _, arrow in self.fields]
        times = [pa.array([batch_time], pa.int64()), pa.array([0], pa.int64())]
        flags = [pa.array([True]), pa.array([self._batch_stamp(batch_time)])]
        return pa.RecordBatch.from_arrays([*data, *times, *flags], schema=self.output)

    def _batch_stamp(self, batch_time: int) -> pa.Scalar:
        """The batch's time as the ``__bt`` column's TIMESTAMP (the output's last)."""
        moment = dt.datetime.fromtimestamp(batch_time / 1000, tz=dt.UTC)
        return pa.scalar(moment, self.output.field(len(self.output) - 1).type)
