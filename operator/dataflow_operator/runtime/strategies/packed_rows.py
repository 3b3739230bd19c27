"""A stateful operator's input rows packed per bucket, so that pyspark hands them over whole.

``transformWithStateInPandas`` hands a processor its input in a slow way (pyspark
4.3's ``worker.py``): it turns each Arrow batch into pandas, walks it row by row to group
the rows by key, and builds new frames from the rows' tuples. For the join that was
about a third of its Python worker's time on large batches. So the rows go to the
operator packed instead: :func:`pack` (a ``mapInArrow`` function, run where the rows
are computed) writes the rows of each bucket in each Arrow batch as one Arrow IPC
stream, and the operator gets a few such rows per bucket, which :func:`unpacked` reads
back into one frame, column by column.

Light to import: processors import it (pyarrow and pandas are imported where rows are
handled).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING

from dataflow_operator.runtime.strategies.columns import BUCKET

if TYPE_CHECKING:
    import pandas as pd
    import pyarrow as pa

__all__ = ["PACK", "PACKED_SCHEMA", "pack", "unpacked"]

PACK = "__pack"
"""The column holding a bucket's rows as an Arrow IPC stream."""

PACKED_SCHEMA = f"{PACK} BINARY, {BUCKET} INT"
"""The rows :func:`pack` yields: the packed rows, then their bucket."""


def pack(batches: Iterable[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """Each Arrow batch's rows grouped by their :data:`BUCKET` column: one row per bucket,
    holding that bucket's rows (without the bucket column) as an Arrow IPC stream."""
    import pyarrow as pa
    import pyarrow.compute as pc

    for batch in batches:
        if batch.num_rows == 0:
            continue
        buckets = batch.column(BUCKET)
        rows = batch.drop_columns([BUCKET])
        packs: list[bytes] = []
        numbers: list[int] = []
        for bucket in pc.unique(buckets).to_pylist():
            picked = rows.filter(pc.equal(buckets, bucket))
            sink = pa.BufferOutputStream()
            with pa.ipc.new_stream(sink, picked.schema) as writer:
                writer.write_batch(picked)
            packs.append(sink.getvalue().to_pybytes())
            numbers.append(bucket)
        yield pa.RecordBatch.from_arrays(
            [pa.array(packs, pa.binary()), pa.array(numbers, pa.int32())],
            names=[PACK, BUCKET],
        )


def unpacked(frames: Iterable[pd.DataFrame]) -> pd.DataFrame | None:
    """The rows packed in ``frames`` (the operator's input: :data:`PACK` first) as one
    frame, or ``None`` if there are none."""
    import pyarrow as pa

    tables = [
        pa.ipc.open_stream(packed).read_all() for frame in frames for packed in frame.iloc[:, 0]
    ]
    if not tables:
        return None
    return pa.concat_tables(tables).to_pandas()
