"""A source's ingested collection: what it read, with times and diffs, durably (design 3).

Every batch, the tasks that read a ``table``, ``files`` or ``changelog`` source's new
files also write what they emitted (data columns, ``__time``, ``__diff``) as one Parquet
part per task, ``part-<seq>-<task>.parquet``, where ``seq`` is the source's offset at the
end of the batch (files consumed). A part is whole or absent, and a retried task writes
the same part again. Once Spark has committed the batch, its parts are durable, and the
source's files below that offset are never needed from the upstream again: a restart
that must regenerate what an earlier run dropped at its expiration reads this collection.

Once a batch is committed the engine records it in ``_upper.json``: ``{"seq", "upper"}``,
every update read below offset ``seq`` is in the collection, at a time below ``upper``.
A dataflow that starts over on the same source (its spec changed) reads the collection up
to there, and the upstream only after it: files released before are never needed again.

Below ``since`` the collection is **consolidated** into ``snapshot-<seq>.parquet``: times
advanced to ``since``, equal updates merged, those that cancel removed. Its size follows
the live contents, not the history. A snapshot covers every part up to its ``seq``; a
compaction interrupted between writing the new snapshot and removing what it replaced
leaves files that :meth:`IngestedCollection.files` ignores.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from dataflow_operator.core.changelog import DIFF, TIME
from dataflow_operator.runtime.changelog_store import consolidate
from dataflow_operator.runtime.storage import Location

__all__ = ["IngestedCollection", "IngestedSize", "IngestedUpper", "updates_table"]

PART = "part-"
SNAPSHOT = "snapshot-"
SUFFIX = ".parquet"
COMPACT_AFTER = 16
"""Parts a compaction waits for: fewer small files, and few rewrites of the snapshot."""


UPPER_FILE = "_upper.json"


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


def _seq(name: str) -> tuple[str, int] | None:
    """``("part"|"snapshot", seq)`` of a collection file name, else ``None``."""
    for prefix in (PART, SNAPSHOT):
        if name.startswith(prefix) and name.endswith(SUFFIX):
            digits = name[len(prefix) : -len(SUFFIX)].split("-", 1)[0]
            if digits.isdigit():
                return prefix.rstrip("-"), int(digits)
    return None


class IngestedCollection:
    """One source's ingested collection (a directory of the replica's state location)."""

    def __init__(self, where: Location) -> None:
        self.location = where

    def read_upper(self) -> IngestedUpper | None:
        """The recorded upper (``None``: nothing committed yet)."""
        text = self.location.child(UPPER_FILE).read_text_or_none()
        if not text:
            return None
        record = json.loads(text)
        return IngestedUpper(int(record["seq"]), int(record["upper"]))

    def write_upper(self, upper: IngestedUpper) -> None:
        """Record that the batch that read up to ``upper.seq`` is committed."""
        self.location.child(UPPER_FILE).write_text(
            json.dumps({"seq": upper.seq, "upper": upper.upper})
        )

    def truncate(self) -> bool:
        """Keep only what the recorded upper covers (a dataflow starting over reads that,
        then the upstream again); False, with nothing kept, when nothing was recorded."""
        recorded = self.read_upper()
        for _, seq, file in self._entries():
            if recorded is None or seq > recorded.seq:
                file.delete()
        return recorded is not None

    def part(self, seq: int, task: int) -> Location:
        """The part one task writes in the batch that ends at offset ``seq``."""
        return self.location.child(f"{PART}{seq:012d}-{task:05d}{SUFFIX}")

    def _entries(self) -> list[tuple[str, int, Location]]:
        found = []
        for name in self.location.list():
            parsed = _seq(name)
            if parsed is not None:
                found.append((parsed[0], parsed[1], self.location.child(name)))
        return sorted(found, key=lambda entry: (entry[1], entry[0] == "part", entry[2].uri))

    def files(self, upto: int) -> list[Location]:
        """The files holding every update read below offset ``upto``: the newest snapshot
        at or below it, then the parts after the snapshot."""
        entries = [e for e in self._entries() if e[1] <= upto]
        snapshots = [e for e in entries if e[0] == "snapshot"]
        base = snapshots[-1][1] if snapshots else -1
        chosen = [snapshots[-1][2]] if snapshots else []
        return chosen + [loc for kind, seq, loc in entries if kind == "part" and seq > base]

    def read(self, upto: int) -> pa.Table | None:
        """Every update read below offset ``upto``, or ``None`` when there is none."""
        tables = [f.read_parquet() for f in self.files(upto)]
        tables = [t for t in tables if t.num_rows]
        return pa.concat_tables(tables, promote_options="default") if tables else None

    def compact(self, upto: int, since: int, *, after: int = COMPACT_AFTER) -> bool:
        """Consolidate everything below offset ``upto`` at time ``since``, once at least
        ``after`` parts wait; True when it did.

        ``upto`` must be committed (its parts durable) and ``since`` at or below every
        later watermark (the time of the batch that ended at ``upto``, or earlier).
        """
        files = self.files(upto)
        waiting = [f for f in files if f.name.startswith(PART)]
        if len(waiting) < after:
            return False
        table = self.read(upto)
        if table is None:
            snapshot = pa.table({TIME: pa.array([], pa.int64()), DIFF: pa.array([], pa.int64())})
        else:
            advanced = pc.max_element_wise(table[TIME], pa.scalar(since, pa.int64()))
            snapshot = consolidate(
                table.set_column(table.schema.get_field_index(TIME), TIME, advanced)
            )
        self.location.child(f"{SNAPSHOT}{upto:012d}{SUFFIX}").write_parquet(snapshot)
        for file in files:
            if file.name != f"{SNAPSHOT}{upto:012d}{SUFFIX}":
                file.delete()
        return True

    def size(self) -> IngestedSize:
        """Rows and bytes of the collection's files (snapshots and parts alike)."""
        rows = size = count = 0
        for _, _, file in self._entries():
            rows += file.parquet_rows()
            size += file.size()
            count += 1
        return IngestedSize(rows=rows, bytes=size, files=count)


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
