"""A dataflow's output changelog on disk: Parquet parts and the upper beside them.

Layout of a store directory (owned by the runtime):

- ``part-<batch>.parquet``: the updates one batch emitted (data columns, ``__time``,
  ``__diff``); written to a temporary name and renamed, so a part is whole or absent;
- ``_upper.json``: ``{"upper": ms, "batch": n}``, replaced atomically after the part:
  every update at a time ``< upper`` is in the parts of batches ``<= batch``.

Downstream dataflows read it as a stream (a ``dataflow`` source), MaterializedViews use it
as their sink, and an Index's contents are its consolidation.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from dataflow_operator.runtime.clock import atomic_write_text

__all__ = ["DIFF", "TIME", "ChangelogStore", "StoreUpper", "consolidate"]

TIME = "__time"
DIFF = "__diff"
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


class ChangelogStore:
    """One changelog directory."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def part(self, batch: int) -> Path:
        """The file of one batch's updates."""
        return self.path / f"part-{batch:012d}.parquet"

    def read_upper(self) -> StoreUpper | None:
        """The recorded upper, or ``None`` when nothing was written yet."""
        try:
            data = json.loads((self.path / UPPER_FILE).read_text(encoding="utf-8"))
            return StoreUpper(int(data["upper"]), int(data["batch"]))
        except (OSError, ValueError, KeyError, TypeError):
            return None

    def write(self, batch: int, table: pa.Table | None, upper: int) -> None:
        """Record one batch: its updates (if any), then the new upper, atomically each."""
        self.path.mkdir(parents=True, exist_ok=True)
        if table is not None and table.num_rows:
            target = self.part(batch)
            temporary = target.with_name(f".{target.name}.{os.getpid()}.tmp")
            pq.write_table(table, temporary)
            os.replace(temporary, target)
        previous = self.read_upper()
        upper = max(upper, previous.upper) if previous else upper
        atomic_write_text(self.path / UPPER_FILE, json.dumps({"upper": upper, "batch": batch}))

    def parts(self, after: int = -1, upto: int | None = None) -> list[tuple[int, Path]]:
        """``(batch, file)`` of the parts with ``after < batch <= upto``, in batch order."""
        if upto is None:
            recorded = self.read_upper()
            if recorded is None:
                return []
            upto = recorded.batch
        found = []
        if not self.path.is_dir():
            return []
        for entry in self.path.iterdir():
            name = entry.name
            if name.startswith("part-") and name.endswith(".parquet"):
                batch = int(name[5:-8])
                if after < batch <= upto:
                    found.append((batch, entry))
        return sorted(found)

    def read(self, after: int = -1, upto: int | None = None) -> pa.Table | None:
        """All updates of the parts with ``after < batch <= upto``, or ``None`` if none."""
        tables = [pq.read_table(path) for _, path in self.parts(after, upto)]
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
