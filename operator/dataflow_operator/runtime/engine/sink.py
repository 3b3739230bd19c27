"""Writing one batch's updates into a changelog store from the executors.

A MaterializedView's or an Index's batch never passes through the driver: its updates
are consolidated in Spark (equal ``(row, time)`` summed, zero diffs dropped), cut at the
dataflow's ``until``, and each task writes its share as one Parquet part
(``part-<batch>-<task>.parquet``) through the store's location; only the row counts
come back. The driver then records the new upper, so readers see the batch whole.
"""

from __future__ import annotations

from collections.abc import Iterator

import pyarrow as pa
from pyspark.sql import DataFrame
from pyspark.sql import functions as F  # noqa: N812 - Spark's convention
from pyspark.sql import types as T  # noqa: N812 - Spark's convention

from dataflow_operator.runtime.changelog_store import DIFF, TIME, ChangelogStore

__all__ = ["consolidated_frame", "write_batch"]


def _groupable(data_type: T.DataType) -> bool:
    """Spark can group by values of this type (maps cannot be compared)."""
    if isinstance(data_type, T.MapType):
        return False
    if isinstance(data_type, T.ArrayType):
        return _groupable(data_type.elementType)
    if isinstance(data_type, T.StructType):
        return all(_groupable(f.dataType) for f in data_type.fields)
    return True


def consolidated_frame(frame: DataFrame, until: int | None) -> DataFrame:
    """The updates below ``until``, with equal ``(row, time)`` summed and zeros dropped."""
    if until is not None:
        frame = frame.filter(F.col(TIME) < F.lit(until))
    if not all(_groupable(f.dataType) for f in frame.schema.fields):
        return frame  # kept as they are, as the driver-side consolidation does
    keys = [F.col(f"`{c}`") for c in frame.columns if c != DIFF]
    summed = frame.groupBy(*keys).agg(F.sum(DIFF).cast("long").alias(DIFF))
    return summed.filter(F.col(DIFF) != 0).select(*[F.col(f"`{c}`") for c in frame.columns])


def write_batch(frame: DataFrame, store: ChangelogStore, batch: int, until: int | None) -> int:
    """Write batch ``batch``'s updates from the executors; the number of updates written.

    Parts an interrupted attempt at the same batch left are removed first, so a batch
    redone after a crash is written exactly once.
    """
    store.clear(batch)
    uri = store.location.uri

    def write(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        from pyspark import TaskContext

        collected = list(batches)
        rows = sum(b.num_rows for b in collected)
        if rows:
            context = TaskContext.get()
            task = context.partitionId() if context is not None else 0
            part = ChangelogStore(uri).part(batch, task)
            part.write_parquet(pa.Table.from_batches(collected))
        yield pa.RecordBatch.from_pydict({"rows": [rows]})

    counts = consolidated_frame(frame, until).mapInArrow(write, "rows LONG").collect()
    return sum(int(row["rows"]) for row in counts)
