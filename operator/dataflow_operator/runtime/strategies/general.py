"""GENERAL queries (joins, DISTINCT, min/max, windows, recursion…): recompute and diff.

The streaming query carries every input's updates as one changelog (``__input``, the row
as JSON in ``__row``, ``__time``, ``__diff``), so Spark's offsets, checkpoint and
watermark govern it like any other dataflow. Its sink hands each batch to
:class:`Recompute`, which appends the updates to the dataflow's input history, and for
every time the batch changed runs the query (a Spark batch query under the dataflow's
token) over the inputs consolidated at that time, and emits the difference from the
previous result: ``(row, t, new count - old count)``.

Dropping stops it promptly: the per-time loop checks the token; the query runs with a
fuse after each join that can multiply rows and after each input of a nested-loop join
(:mod:`dataflow_operator.runtime.strategies.fuse`), which fails the task once its job is cancelled,
so a cartesian or nested-loop join whose own loops never check for a cancel
(SPARK-33409) ends too; a recursion's iterations are jobs (see the engine's
``RECURSION_LOCAL_RELATION``) that the token's cancel of future jobs ends.

Files (runtime-owned, idempotent per batch id so a replayed batch gives the same
answer): ``inputs/part-<batch>.parquet`` and ``results/result-<batch>.parquet``.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from typing import Any

import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F  # noqa: N812 - Spark's convention
from pyspark.sql import types as T  # noqa: N812 - Spark's convention

from dataflow_operator.runtime.changelog_store import DIFF, TIME
from dataflow_operator.runtime.storage import Location
from dataflow_operator.runtime.strategies.columns import KEY, ROW
from dataflow_operator.runtime.strategies.fuse import fused
from dataflow_operator.runtime.token import Token

__all__ = ["INPUT", "Recompute", "inputs_changelog"]

INPUT = "__input"
COUNT = "__count"


def inputs_changelog(views: Mapping[str, DataFrame]) -> DataFrame:
    """All inputs' updates as one stream: input name, row as JSON, time and diff."""
    frames = []
    for name, frame in views.items():
        data = [F.col(f"`{c}`") for c in frame.columns if c not in (TIME, DIFF)]
        frames.append(
            frame.select(
                F.lit(name).alias(INPUT),
                F.to_json(F.struct(*data)).alias(ROW),
                F.col(TIME),
                F.col(DIFF),
            )
        )
    union = frames[0]
    for frame in frames[1:]:
        union = union.unionByName(frame)
    return union


def _batches(directory: Location, prefix: str) -> list[tuple[int, Location]]:
    found = []
    for name in directory.list():
        if name.startswith(prefix) and name.endswith(".parquet"):
            found.append((int(name[len(prefix) : -8]), directory.child(name)))
    return sorted(found, key=lambda item: item[0])


class Recompute:
    """The sink's transform for a GENERAL dataflow: input updates in, output updates out."""

    def __init__(
        self,
        spark: SparkSession,
        snapshot_sql: str,
        schemas: Mapping[str, T.StructType],
        output: T.StructType,
        *,
        work_dir: Location,
        views_lock: threading.Lock,
    ) -> None:
        self.spark = spark
        self.snapshot_sql = snapshot_sql
        self.schemas = dict(schemas)
        self.output = output
        self.work_dir = work_dir
        self.views_lock = views_lock
        self.token: Token | None = None
        """The dataflow's token (set by its runner): its jobs' scope, checked per time."""

    def __call__(self, updates: pa.Table, batch: int) -> pa.Table:
        """Record ``updates`` (batch ``batch``); the output updates they cause."""
        if self.token is None:
            return self._recompute(updates, batch)
        self.token.check()
        with self.token.scope(self.spark, f"{self.token.tag} batch {batch}"):
            return self._recompute(updates, batch)

    def _recompute(self, updates: pa.Table, batch: int) -> pa.Table:
        columns = [f.name for f in self.output.fields]
        if updates.num_rows:
            self.work_dir.child("inputs", f"part-{batch:012d}.parquet").write_parquet(updates)
        previous = self._previous_result(batch)
        if not updates.num_rows:
            return pa.table({**{c: pa.array([], pa.null()) for c in columns}, TIME: [], DIFF: []})
        history = pa.concat_tables(
            [
                p.read_parquet()
                for b, p in _batches(self.work_dir.child("inputs"), "part-")
                if b <= batch
            ]
        ).to_pandas()
        emitted: list[dict[str, Any]] = []
        for time in sorted(set(pc.unique(updates[TIME]).to_pylist())):
            if self.token is not None:
                self.token.check()
            current = self._evaluate(history[history[TIME] <= time])
            emitted += _difference(previous, current, columns, int(time))
            previous = current
        self._save(previous, batch)
        frame = pd.DataFrame(emitted, columns=[*columns, TIME, DIFF])
        return pa.Table.from_pandas(frame, preserve_index=False)

    def _evaluate(self, history: pd.DataFrame) -> pd.DataFrame:
        """The query's result over the inputs consolidated at the history's end."""
        views: dict[str, DataFrame] = {}
        for name, schema in self.schemas.items():
            mine = history[history[INPUT] == name]
            counts = mine.groupby(ROW, sort=True)[DIFF].sum()
            lines = [row for row, count in counts.items() for _ in range(max(int(count), 0))]
            if lines:
                rdd = self.spark.sparkContext.parallelize(lines, 1)
                views[name] = self.spark.read.schema(schema).json(rdd)
            else:
                views[name] = self.spark.createDataFrame([], schema)
        # The views are session-wide: hold the lock while the query is analysed (which
        # resolves them), not while it runs, so that other dataflows install meanwhile.
        with self.views_lock:
            for name, frame in views.items():
                frame.createOrReplaceTempView(name)
            try:
                result = fused(self.spark.sql(self.snapshot_sql))
                keyed = result.select(
                    "*", F.to_json(F.struct(*[F.col(f"`{c}`") for c in result.columns])).alias(KEY)
                )
            finally:
                for name in views:
                    self.spark.catalog.dropTempView(name)
        table = keyed.toArrow()
        frame = table.to_pandas()
        frame.columns = [f.name for f in self.output.fields] + [KEY]
        counts = frame.groupby(KEY, sort=True).size().rename(COUNT)
        return frame.drop_duplicates(KEY).set_index(KEY).join(counts)

    def _previous_result(self, batch: int) -> pd.DataFrame:
        earlier = [p for b, p in _batches(self.work_dir.child("results"), "result-") if b < batch]
        if not earlier:
            names = [f.name for f in self.output.fields]
            return pd.DataFrame(columns=[*names, COUNT], index=pd.Index([], name=KEY))
        return earlier[-1].read_parquet().to_pandas().set_index(KEY)

    def _save(self, result: pd.DataFrame, batch: int) -> None:
        table = pa.Table.from_pandas(result.reset_index(), preserve_index=False)
        results = self.work_dir.child("results")
        results.child(f"result-{batch:012d}.parquet").write_parquet(table)
        for old, path in _batches(results, "result-"):
            if old < batch - 1:
                path.delete()


def _difference(
    old: pd.DataFrame, new: pd.DataFrame, columns: list[str], time: int
) -> list[dict[str, Any]]:
    """``(row, time, new count - old count)`` for every row whose count changed."""
    changes = []
    for key in sorted(set(old.index) | set(new.index)):
        before = int(old.at[key, COUNT]) if key in old.index else 0
        after = int(new.at[key, COUNT]) if key in new.index else 0
        if before != after:
            source = new if key in new.index else old
            values = {c: source.at[key, c] for c in columns}
            changes.append({**values, TIME: time, DIFF: after - before})
    return changes
