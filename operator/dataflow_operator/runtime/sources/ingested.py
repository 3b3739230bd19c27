"""A source's ingested collection: what it read, with times and diffs, durably (design 3).

Every batch, the tasks that read a ``table``, ``files`` or ``changelog`` source's new
files also write what they emitted (data columns, ``__time``, ``__diff``) as one Parquet
part per task, ``part-<seq>-<task>.parquet``, where ``seq`` is the source's offset at the
end of the batch (files consumed). A part is whole or absent, and a retried task writes
the same part again. Once Spark has committed the batch, its parts are durable, and the
source's files below that offset are never needed from the upstream again: a restart
that must regenerate what an earlier run dropped at its expiration reads this collection.

It is a :class:`~dataflow_operator.runtime.changelog_store.ChangelogStore` keyed by offset:
once a batch is committed the engine records it in ``_upper.json`` (its ``batch`` is the
offset ``seq``): every update read below offset ``seq`` is in the collection, at a time
below ``upper``.
A dataflow that starts over on the same source (its spec changed) reads the collection up
to there, and the upstream only after it: files released before are never needed again.

Below ``since`` the collection is **consolidated** into ``snapshot-<seq>.parquet``
(:meth:`ChangelogStore.compact`): times advanced to ``since``, equal updates merged, those
that cancel removed. Its size follows the live contents, not the history; the snapshot is
rewritten only once what waits after it is a share of it
(:meth:`ChangelogStore.compaction_pays`), so a collection that only grows (a table) is
not rewritten whole at every compaction: its rewrites add up to about five times its size.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import pyarrow as pa

from dataflow_operator.core.changelog import DIFF, TIME
from dataflow_operator.runtime.changelog_store import ChangelogStore, part_batch, snapshot_batch
from dataflow_operator.runtime.storage import Location

__all__ = ["IngestedCollection", "IngestedSize", "IngestedUpper", "resume_base", "updates_table"]

COMPACT_AFTER = 16
"""Parts a compaction waits for: fewer small files, and few rewrites of the snapshot."""


@dataclass(frozen=True, slots=True)
class IngestedUpper:
    """How far the collection is complete: offsets below ``seq``, times below ``upper``."""

    seq: int
    upper: int


@dataclass(frozen=True, slots=True)
class IngestedSize:
    """The collection's size on storage."""

    rows: int
    bytes: int
    files: int


class IngestedCollection:
    """One source's ingested collection: a :class:`ChangelogStore` whose parts are keyed
    by the source's offset instead of the batch."""

    def __init__(self, where: Location) -> None:
        self.store = ChangelogStore(where)

    @property
    def location(self) -> Location:
        """Where the collection is."""
        return self.store.location

    def read_upper(self) -> IngestedUpper | None:
        """The recorded upper (``None``: nothing committed yet)."""
        recorded = self.store.read_upper()
        return None if recorded is None else IngestedUpper(recorded.batch, recorded.upper)

    def write_upper(self, upper: IngestedUpper) -> None:
        """Record that the batch that read up to ``upper.seq`` is committed."""
        self.store.write_upper(upper.seq, upper.upper)

    def truncate(self) -> bool:
        """Keep only what the recorded upper covers (a dataflow starting over reads that,
        then the upstream again); False, with nothing kept, when nothing was recorded."""
        recorded = self.read_upper()
        for name in self.location.list():
            seq = part_batch(name)
            seq = snapshot_batch(name) if seq is None else seq
            if seq is not None and (recorded is None or seq > recorded.seq):
                self.location.child(name).delete()
        return recorded is not None

    def part(self, seq: int, task: int) -> Location:
        """The part one task writes in the batch that ends at offset ``seq``."""
        return self.store.part(seq, task)

    def files(self, upto: int) -> list[Location]:
        """The files holding every update read below offset ``upto``: the newest snapshot
        at or below it, then the parts after the snapshot."""
        return [file for _, file in self.store.parts(-1, upto)]

    def read(self, upto: int) -> pa.Table | None:
        """Every update read below offset ``upto``, or ``None`` when there is none."""
        return self.store.read(-1, upto)

    def compact(self, upto: int, since: int, *, after: int = COMPACT_AFTER) -> bool:
        """Consolidate everything below offset ``upto`` at time ``since``, once at least
        ``after`` parts wait and rewriting the snapshot pays
        (:meth:`ChangelogStore.compaction_pays`); True when it did.

        ``upto`` must be committed (its parts durable) and ``since`` at or below every
        later watermark (the time of the batch that ended at ``upto``, or earlier).
        """
        return self.store.compaction_pays(upto, parts=after) and self.store.compact(upto, since)

    def size(self) -> IngestedSize:
        """Rows and bytes of the collection's files (snapshots and parts alike)."""
        files = [
            self.location.child(name)
            for name in self.location.list()
            if part_batch(name) is not None or snapshot_batch(name) is not None
        ]
        rows = sum(file.parquet_rows() for file in files)
        return IngestedSize(rows=rows, bytes=sum(f.size() for f in files), files=len(files))


def updates_table(
    fields: Sequence[tuple[str, Any]], updates: Sequence[tuple[Any, ...]]
) -> pa.Table:
    """Updates ``(*values, time, diff)`` as an Arrow table with the fields' Spark types."""
    from pyspark.sql.pandas.types import to_arrow_type

    columns: dict[str, pa.Array] = {}
    for index, (name, spark_type) in enumerate(fields):
        values = [update[index] for update in updates]
        try:
            columns[name] = pa.array(values, type=to_arrow_type(spark_type, timezone="UTC"))
        except (TypeError, AssertionError, pa.ArrowException):
            columns[name] = pa.array(values)  # a type Arrow maps otherwise: as it comes
    width = len(fields)
    columns[TIME] = pa.array([update[width] for update in updates], pa.int64())
    columns[DIFF] = pa.array([update[width + 1] for update in updates], pa.int64())
    return pa.table(columns)


def resume_base(start: Mapping[str, Any], ingested: IngestedCollection) -> int:
    """Where reading a source's upstream starts after offset ``start``: its ``seq``, or,
    for a new checkpoint (``seq`` and ``upper`` 0) on a source whose ingested collection
    survived (a changed spec), where that collection ends."""
    if int(start["seq"]) != 0 or int(start["upper"]) != 0:
        return int(start["seq"])
    recorded = ingested.read_upper()
    return 0 if recorded is None else recorded.seq
