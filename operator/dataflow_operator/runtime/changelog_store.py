"""A dataflow's output changelog: Parquet parts and the upper beside them.

It lives in a :class:`~dataflow_operator.runtime.storage.Location` (the replica's state
location, or a MaterializedView's ``sink.path``), so executors write it and plain Spark or
pandas read it: the parts of batches up to ``_upper.json``'s ``batch`` hold every update
at a time below its ``upper`` (a later batch's parts may be in progress).

Layout of a store directory (owned by the runtime):

- ``part-<batch>.parquet`` (written by the driver) or ``part-<batch>-<task>.parquet``
  (written by the executors, one per task that had updates): the updates one batch
  emitted (data columns, ``__time``, ``__diff``); each part is whole or absent;
- ``_upper.json``: ``{"upper": ms, "batch": n}``, replaced atomically after the part:
  every update at a time ``< upper`` is in the parts of batches ``<= batch``;
- ``snapshot-<batch>.parquet``: the consolidation of every part up to ``batch`` (times
  advanced to a ``since``), once :meth:`ChangelogStore.compact` has run: it stands for
  those parts, so the store's size follows the output's contents, not its history. Only
  a reader positioned at or past ``batch`` reads on exactly; one behind it must start
  over (the engine compacts only below every reader it knows of).

Downstream dataflows read it as a stream (a ``dataflow`` source), MaterializedViews use it
as their sink, and an Index's contents are its consolidation.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from dataflow_operator.core.changelog import DIFF, TIME
from dataflow_operator.runtime.storage import Location

__all__ = [
    "DIFF",
    "TIME",
    "ChangelogStore",
    "StoreUpper",
    "consolidate",
    "part_batch",
    "part_name",
    "snapshot_batch",
]

UPPER_FILE = "_upper.json"


def consolidate(table: pa.Table) -> pa.Table:
    """Sum the diffs of equal ``(row, time)`` updates and drop those that cancel out."""
    if table.num_rows < 2:
        return table
    keys = [c for c in table.column_names if c != DIFF]
    try:
        summed = table.group_by(keys, use_threads=False).aggregate([(DIFF, "sum")])
    except (pa.ArrowNotImplementedError, pa.ArrowInvalid, pa.ArrowTypeError):
        return table  # a column type Arrow cannot group by: keep the updates as they are
    summed = summed.rename_columns([*keys, DIFF]).select(table.column_names)
    return summed.filter(pc.not_equal(summed[DIFF], 0))


@dataclass(frozen=True, slots=True)
class StoreUpper:
    """How far a store is complete: ``upper`` (ms) and the last batch written."""

    upper: int
    batch: int


PART_PREFIX = "part-"
PART_SUFFIX = ".parquet"
SNAPSHOT_PREFIX = "snapshot-"
SNAPSHOT_SHARE = 4
"""A snapshot is rewritten once what waits after it is at least 1/this of its bytes."""
MAX_WAITING_PARTS = 256
"""Parts after a snapshot that are compacted whatever their size."""


def part_name(batch: int, task: int | None = None) -> str:
    """The file name of one batch's updates (``task``: one of several writers' share)."""
    suffix = "" if task is None else f"-{task:05d}"
    return f"{PART_PREFIX}{batch:012d}{suffix}{PART_SUFFIX}"


def _snapshot_name(batch: int) -> str:
    return f"{SNAPSHOT_PREFIX}{batch:012d}{PART_SUFFIX}"


def snapshot_batch(name: str) -> int | None:
    """The batch a snapshot file covers up to, or ``None`` for another file."""
    if not (name.startswith(SNAPSHOT_PREFIX) and name.endswith(PART_SUFFIX)):
        return None
    digits = name[len(SNAPSHOT_PREFIX) : -len(PART_SUFFIX)]
    return int(digits) if digits.isdigit() else None


def part_batch(name: str) -> int | None:
    """The batch a part file belongs to, or ``None`` for another file."""
    if not (name.startswith(PART_PREFIX) and name.endswith(PART_SUFFIX)):
        return None
    digits = name[len(PART_PREFIX) : -len(PART_SUFFIX)].split("-", 1)[0]
    return int(digits) if digits.isdigit() else None


class ChangelogStore:
    """One changelog directory (a :class:`~dataflow_operator.runtime.storage.Location`)."""

    def __init__(self, where: Location | str | Path) -> None:
        self.location = Location.of(where)

    @property
    def path(self) -> Location:
        """Where the store is."""
        return self.location

    def part(self, batch: int, task: int | None = None) -> Location:
        """The file of one batch's updates (or of one task's share of them)."""
        return self.location.child(part_name(batch, task))

    def read_upper(self) -> StoreUpper | None:
        """The recorded upper, or ``None`` when nothing was written yet."""
        try:
            data = json.loads(self.location.child(UPPER_FILE).read_text())
            return StoreUpper(int(data["upper"]), int(data["batch"]))
        except (OSError, ValueError, KeyError, TypeError):
            return None

    def write(self, batch: int, table: pa.Table | None, upper: int) -> None:
        """Record one batch: its updates (if any), then the new upper, atomically each."""
        if table is not None and table.num_rows:
            self.part(batch).write_parquet(table)
        self.write_upper(batch, upper)

    def clear(self, batch: int) -> None:
        """Remove what an interrupted attempt at ``batch`` may have left (before redoing it)."""
        for name in self.location.list():
            if part_batch(name) == batch:
                self.location.child(name).delete()

    def write_upper(self, batch: int, upper: int) -> None:
        """Record that every update at a time below ``upper`` is in parts ``<= batch``."""
        previous = self.read_upper()
        upper = max(upper, previous.upper) if previous else upper
        self.location.child(UPPER_FILE).write_text(json.dumps({"upper": upper, "batch": batch}))

    def parts(self, after: int = -1, upto: int | None = None) -> list[tuple[int, Location]]:
        """``(batch, file)`` of the parts with ``after < batch <= upto``, in batch order;
        a snapshot in that range stands for the parts up to its batch."""
        if upto is None:
            recorded = self.read_upper()
            if recorded is None:
                return []
            upto = recorded.batch
        names = self.location.list()
        snapshots = [b for n in names if (b := snapshot_batch(n)) is not None and b <= upto]
        base = max(snapshots, default=-1)
        found = []
        if base > after:
            found.append((base, self.location.child(_snapshot_name(base))))
        for name in names:
            batch = part_batch(name)
            if batch is not None and max(after, base) < batch <= upto:
                found.append((batch, self.location.child(name)))
        return sorted(found, key=lambda item: (item[0], item[1].uri))

    def compaction_pays(self, upto: int, *, parts: int = 1) -> bool:
        """Whether compacting up to batch ``upto`` is worth rewriting the snapshot: at
        least ``parts`` parts wait after it, and they hold at least 1/:data:`SNAPSHOT_SHARE`
        of its bytes, or :data:`MAX_WAITING_PARTS` of them wait (one listing).

        So a store whose contents keep growing (inserts) rewrites its snapshot only when it
        has grown by a quarter: its rewrites add up to about five times its size, not its
        size at every compaction. One whose contents stay small (updates that retract)
        compacts as soon as asked.
        """
        sizes = self.location.sizes()
        base = max(
            (b for name in sizes if (b := snapshot_batch(name)) is not None and b <= upto),
            default=None,
        )
        waiting = [
            size
            for name, size in sizes.items()
            if (b := part_batch(name)) is not None and b <= upto and (base is None or b > base)
        ]
        if len(waiting) < parts:
            return False
        if base is None or len(waiting) >= MAX_WAITING_PARTS:
            return True
        return sum(waiting) * SNAPSHOT_SHARE >= sizes[_snapshot_name(base)]

    def compact(self, upto: int, since: int | None = None) -> bool:
        """Consolidate the parts up to batch ``upto`` into a snapshot at time ``since``
        (default: the newest time they hold); True when there was more than one file.

        ``since`` must be at or below every time a reader still distinguishes (each
        subscriber's last complete time, each restart's watermark); the snapshot is
        written before the files it replaces are removed, and :meth:`parts` prefers it.
        """
        files = self.parts(-1, upto)
        if len(files) < 2:
            return False
        table = self.read(-1, upto)
        if table is None:
            return False
        if since is None:
            since = int(pc.max(table[TIME]).as_py() or 0)
        advanced = pc.max_element_wise(table[TIME], pa.scalar(since, table.schema.field(TIME).type))
        merged = consolidate(table.set_column(table.column_names.index(TIME), TIME, advanced))
        self.location.child(_snapshot_name(upto)).write_parquet(merged)
        for _, file in files:
            if file.name != _snapshot_name(upto):
                file.delete()
        return True

    def read(self, after: int = -1, upto: int | None = None) -> pa.Table | None:
        """All updates of the parts with ``after < batch <= upto``, or ``None`` if none."""
        tables = [part.read_parquet() for _, part in self.parts(after, upto)]
        if not tables:
            return None
        return pa.concat_tables(tables, promote_options="default")

    def consolidated(self, at: int | None = None) -> tuple[list[str], list[list[Any]]]:
        """The contents at time ``at`` (default: everything written): rows with their count."""
        table = self.read()
        if table is None:
            return [], []
        frame = table.to_pandas()
        if at is not None:
            frame = frame[frame[TIME] <= at]
        columns = [c for c in table.column_names if c not in (TIME, DIFF)]
        if frame.empty:
            return columns, []
        keys = frame[columns].astype(str).agg("\x1f".join, axis=1) if columns else None
        frame = frame.assign(__key=keys if keys is not None else "")
        totals = frame.groupby("__key", sort=True)[DIFF].sum()
        firsts = frame.drop_duplicates("__key").set_index("__key")
        rows = []
        for key, count in totals.items():
            if count:
                values = [_plain(v) for v in firsts.loc[key, columns].tolist()] if columns else []
                rows.append([*values, int(count)])
        return columns, rows


def _plain(value: Any) -> Any:
    """A JSON-friendly Python value."""
    if hasattr(value, "isoformat"):
        return value.isoformat()
    if hasattr(value, "item"):
        return value.item()
    return value
