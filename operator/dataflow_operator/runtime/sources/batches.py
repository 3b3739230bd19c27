"""The Arrow batches a source's read task hands Spark.

A task's updates are Arrow record batches of :class:`UpdateColumns` (the data columns,
``__time``, ``__diff``), read by Arrow (:mod:`.exact_arrow`) or converted from rows read
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
    """A source's updates as Arrow sees them: its data columns (name, Spark type name,
    Arrow type as Spark's conversion types it), then ``__time`` and ``__diff``;
    ``output``: the schema of what Spark reads (those, then the batch's columns)."""

    fields: tuple[tuple[str, str, pa.DataType], ...]
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
        return cls(
            tuple(
                (name, by_name[name].dataType.typeName(), output.field(name).type) for name in data
            ),
            output,
            tuple(
                LocalDataToArrowConversion._create_converter(by_name[name].dataType)
                for name in data
            ),
        )

    @property
    def schema(self) -> pa.Schema:
        """Data columns, ``__time``, ``__diff``."""
        data = [(name, arrow) for name, _, arrow in self.fields]
        return pa.schema([*data, (TIME, pa.int64()), (DIFF, pa.int64())])

    def from_rows(self, rows: Sequence[tuple[Any, ...]]) -> pa.RecordBatch:
        """Updates ``(*values, time, diff)``, values as :func:`~.values.convert` gives them,
        converted as Spark converts the rows a data source returns."""
        columns: list[list[Any]] = [[] for _ in range(len(self.fields) + 2)]
        for row in rows:
            for index, value in enumerate(row):
                columns[index].append(value)
        arrays = [
            [convert(value) for value in values]
            for convert, values in zip(self.converters, columns, strict=False)
        ]
        return pa.RecordBatch.from_arrays([*arrays, *columns[-2:]], schema=self.schema)

    def spark_batch(self, updates: pa.RecordBatch, batch_time: int) -> pa.RecordBatch:
        """``updates`` as Spark reads them: with ``__hb`` false and the batch's time."""
        rows = updates.num_rows
        stamp = pa.scalar(_timestamp(batch_time), self.output.field(len(self.fields) + 3).type)
        return pa.RecordBatch.from_arrays(
            [*updates.columns, pa.repeat(pa.scalar(False), rows), pa.repeat(stamp, rows)],
            schema=self.output,
        )

    def heartbeat(self, batch_time: int) -> pa.RecordBatch:
        """The batch's heartbeat row: no data, time ``batch_time``, diff 0."""
        stamp = pa.scalar(_timestamp(batch_time), self.output.field(len(self.fields) + 3).type)
        arrays = [pa.nulls(1, arrow) for _, _, arrow in self.fields]
        times = [pa.array([batch_time], pa.int64()), pa.array([0], pa.int64())]
        return pa.RecordBatch.from_arrays(
            [*arrays, *times, pa.array([True]), pa.array([stamp])], schema=self.output
        )


def _timestamp(epoch_ms: int) -> dt.datetime:
    return dt.datetime.fromtimestamp(epoch_ms / 1000, tz=dt.UTC)
