"""A source reader's schema and the rows its tasks emit, as tuples (a task emits Arrow
record batches)."""

from __future__ import annotations

from typing import Any

from pyspark.sql.types import BooleanType, LongType, StructField, StructType, TimestampType

from dataflow_operator.runtime.changelog_store import DIFF, TIME
from dataflow_operator.runtime.sources.options import BATCH_TIME, HEARTBEAT
from dataflow_operator.runtime.sources.read_tasks import ReadTask
from dataflow_operator.runtime.sources.reader import ChangelogReader


def source_schema(*data: StructField) -> StructType:
    """A reader's schema, as the engine gives it: ``data``, then the runtime's columns."""
    runtime = [
        StructField(TIME, LongType()),
        StructField(DIFF, LongType()),
        StructField(HEARTBEAT, BooleanType()),
        StructField(BATCH_TIME, TimestampType()),
    ]
    return StructType([*data, *runtime])


def rows_read(reader: ChangelogReader, task: ReadTask) -> list[tuple[Any, ...]]:
    """Every row ``task`` emits, in order: data columns, time, diff, heartbeat, batch time."""
    return [tuple(row.values()) for batch in reader.read(task) for row in batch.to_pylist()]
