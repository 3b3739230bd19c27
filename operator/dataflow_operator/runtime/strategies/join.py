"""Equi-joins maintained in Spark state (``transformWithStateInPandas``): the running half.

The core plans the join (:class:`dataflow_operator.core.join.JoinPlan`). Here
:func:`joined_changelog` turns the two sides' changelogs into the changelog of joined
rows (the relation :data:`~dataflow_operator.core.join.JOINED`):

- both sides' updates become one stream: the side (0 left, 1 right), the join key as
  JSON (NULL when a key component is NULL: such rows match nothing), the row as JSON,
  ``__time``, ``__diff``, grouped into :data:`~dataflow_operator.runtime.strategies.build.BUCKETS`
  state keys by the key's hash, so that work is partitioned by key;
- :class:`ArrangedJoin` keeps, per join key, each side's rows with their multiplicities
  (the *arrangement*, a ``MapState`` keyed by the key's JSON) and joins each update with
  the other side's rows (``ΔL ⋈ R_old + L_new ⋈ ΔR``: the same batch's changes of both
  sides join once), at the later of the two times, and for an outer join emits the
  null-extended rows of a side when the other side's total multiplicity for the key
  goes from or to zero;
- the joined rows are parsed back into typed columns, left then right.

Rows travel as JSON (with microsecond timestamps) so that equal rows are equal strings
in Python whatever pandas makes of their types (an integer column with a NULL becomes
floats there). Keys are compared after Spark widens the two sides' key types to one
(a union does that); keys of different kinds (a number and a string) are not joined
here: :func:`joined_changelog` returns ``None`` and the engine recomputes.
"""

from __future__ import annotations

import itertools
import pickle
from collections.abc import Iterator
from typing import Any

import pandas as pd
from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F  # noqa: N812 - Spark's convention
from pyspark.sql import types as T  # noqa: N812 - Spark's convention
from pyspark.sql.streaming.stateful_processor import StatefulProcessor

from dataflow_operator.core.join import JoinPlan, joined_column
from dataflow_operator.runtime.changelog_store import DIFF, TIME
from dataflow_operator.runtime.strategies.held import HeldUpdates

__all__ = ["ArrangedJoin", "joined_changelog"]

SIDE = "__side"
KEY = "__key"
ROW = "__row"
BUCKET = "__bucket"
LEFT_ROW = "__lrow"
RIGHT_ROW = "__rrow"

JSON_OPTIONS = {
    "timestampFormat": "yyyy-MM-dd'T'HH:mm:ss.SSSSSSXXX",
    "timestampNTZFormat": "yyyy-MM-dd'T'HH:mm:ss.SSSSSS",
}
"""Rows as JSON keep every microsecond of their timestamps (Spark's default drops them)."""

Joined = tuple[str | None, str | None, int, int]
"""One output update: left row, right row (either NULL when null-extended), time, diff."""


def _data_columns(frame: DataFrame) -> list[str]:
    return [c for c in frame.columns if c not in (TIME, DIFF)]


def _quoted(name: str) -> Column:
    return F.col(f"`{name.replace('`', '``')}`")


def _tagged(side: int, frame: DataFrame, keys: tuple[str, ...]) -> DataFrame:
    """A side's updates as (side, keys…, row JSON, time, diff)."""
    row = F.to_json(F.struct(*[_quoted(c) for c in _data_columns(frame)]), JSON_OPTIONS)
    return frame.select(
        F.lit(side).alias(SIDE),
        *[F.expr(key).alias(f"__k{i}") for i, key in enumerate(keys)],
        row.alias(ROW),
        F.col(TIME),
        F.col(DIFF),
    )


def _comparable(left: T.DataType, right: T.DataType) -> bool:
    """Whether keys of these types can be matched after Spark widens them to one."""
    if left == right:
        return True
    return isinstance(left, T.NumericType) and isinstance(right, T.NumericType)


def _normalized(column: Column, data_type: T.DataType) -> Column:
    """``column`` with -0.0 as 0.0 (equal in SQL, different in JSON)."""
    if isinstance(data_type, T.FloatType | T.DoubleType):
        return F.when(column == 0, F.lit(0).cast(data_type)).otherwise(column)
    return column


def joined_changelog(
    plan: JoinPlan,
    left: DataFrame,
    right: DataFrame,
    *,
    buckets: int,
    until: int | None,
    in_time_order: bool = False,
) -> DataFrame | None:
    """The changelog of joined rows, or ``None`` if the keys' types cannot be matched.

    ``left`` and ``right`` are the sides' changelogs (data columns, ``__time``,
    ``__diff``). Updates at or past ``until`` never enter the join's state. The result
    has the left side's columns named ``joined_column(0, i)``, the right side's
    ``joined_column(1, i)``, then ``__time`` and ``__diff``.

    With ``in_time_order`` each joined update is held until the watermark (the inputs'
    frontier) reaches its time, so that no batch carries an update at a time before one
    already emitted: what a downstream operator that applies updates in time order
    (the aggregate's totals) needs. Without it updates come as soon as they are known.
    """
    tagged = [_tagged(0, left, plan.keys[0]), _tagged(1, right, plan.keys[1])]
    count = len(plan.keys[0])
    key_names = [f"__k{i}" for i in range(count)]
    for name in key_names:
        if not _comparable(tagged[0].schema[name].dataType, tagged[1].schema[name].dataType):
            return None
    if until is not None:
        tagged = [frame.filter(F.col(TIME) < F.lit(until)) for frame in tagged]
    union = tagged[0].unionByName(tagged[1])
    keys = [_normalized(F.col(n), union.schema[n].dataType) for n in key_names]
    any_null = F.lit(False)
    for name in key_names:
        any_null = any_null | F.col(name).isNull()
    arranged = union.select(
        F.col(SIDE),
        F.when(any_null, F.lit(None).cast("string"))
        .otherwise(F.to_json(F.struct(*keys), JSON_OPTIONS))
        .alias(KEY),
        F.col(ROW),
        F.col(TIME),
        F.col(DIFF),
        F.pmod(F.hash(*[F.col(n) for n in key_names]), F.lit(buckets)).cast("int").alias(BUCKET),
    )
    output = T.StructType(
        [
            T.StructField(LEFT_ROW, T.StringType()),
            T.StructField(RIGHT_ROW, T.StringType()),
            T.StructField(TIME, T.LongType()),
            T.StructField(DIFF, T.LongType()),
        ]
    )
    joined = arranged.groupBy(BUCKET).transformWithStateInPandas(
        statefulProcessor=ArrangedJoin(plan.preserves, in_time_order=in_time_order),
        outputStructType=output,
        outputMode="Append",
        timeMode="EventTime",
    )
    schemas = [
        T.StructType([f for f in side.schema.fields if f.name not in (TIME, DIFF)])
        for side in (left, right)
    ]
    parsed = joined.select(
        F.from_json(F.col(LEFT_ROW), schemas[0], JSON_OPTIONS).alias(LEFT_ROW),
        F.from_json(F.col(RIGHT_ROW), schemas[1], JSON_OPTIONS).alias(RIGHT_ROW),
        F.col(TIME),
        F.col(DIFF),
    )
    return parsed.select(
        *[
            F.col(LEFT_ROW).getField(f.name).alias(joined_column(0, i))
            for i, f in enumerate(schemas[0].fields)
        ],
        *[
            F.col(RIGHT_ROW).getField(f.name).alias(joined_column(1, i))
            for i, f in enumerate(schemas[1].fields)
        ],
        F.col(TIME),
        F.col(DIFF),
    )


History = dict[str, dict[int, int]]
"""A side's rows for one key: row JSON → {time: diff} (no zero diffs, no empty rows).

Times at or below the watermark (the inputs' frontier) are merged into one: every update
still to come is at a later time, so they are all "before" it alike.
"""


class ArrangedJoin(StatefulProcessor):
    """Both sides' rows per join key; joined updates as either side changes.

    Input (by position): ``__side, __key, __row, __time, __diff, __bucket``. Output:
    ``__lrow, __rrow, __time, __diff`` (a missing side is NULL: a null-extended row).

    The two inputs are not in step: one side's update at time ``t`` may arrive after the
    other side's updates at later times. So each row keeps its times until the watermark
    passes them, a pair joins at the later of its two times, and an outer join's
    null-extended rows are recomputed per key at each time from the first one a batch
    changes (only the times not yet complete: those above the watermark).
    """

    def __init__(self, preserves: tuple[bool, bool], *, in_time_order: bool = False) -> None:
        self.preserves = preserves
        self.in_time_order = in_time_order

    def init(self, handle: Any) -> None:
        """Declare the state: per join key, the left and the right rows; the held output."""
        self.arrangement = handle.getMapState("arrangement", "k STRING", "rows BINARY")
        self.pending = HeldUpdates(handle)

    def _emit(self, out: list[Joined], watermark: int) -> Iterator[pd.DataFrame]:
        """``out`` now, or (``in_time_order``) once the watermark reaches each time."""
        if self.in_time_order:
            later: dict[int, list[Joined]] = {}
            for update in out:
                if update[2] > watermark:
                    later.setdefault(update[2], []).append(update)
            for time, updates in later.items():
                self.pending.hold(time, updates)
            out = [update for update in out if update[2] <= watermark]
        if out:
            yield pd.DataFrame(out, columns=range(4))

    def handleExpiredTimer(  # noqa: N802 - Spark's name
        self,
        key: Any,
        timerValues: Any,  # noqa: N803 - Spark passes these by name
        expiredTimerInfo: Any,  # noqa: N803
    ) -> Iterator[pd.DataFrame]:
        """The watermark reached a held time: emit its joined updates."""
        held = self.pending.take(int(expiredTimerInfo.getExpiryTimeInMs()))
        if held:
            yield pd.DataFrame(held, columns=range(4))

    def handleInputRows(  # noqa: N802 - Spark's name
        self,
        key: Any,
        rows: Iterator[pd.DataFrame],
        timerValues: Any,  # noqa: N803 - Spark passes these by name
    ) -> Iterator[pd.DataFrame]:
        """Apply the bucket's updates key by key; emit the joined changes."""
        frames = [frame for frame in rows if not frame.empty]
        if not frames:
            return
        watermark = int(timerValues.getCurrentWatermarkInMs())
        frame = pd.concat(frames, ignore_index=True).iloc[:, :5]
        frame.columns = [SIDE, KEY, ROW, TIME, DIFF]
        out: list[Joined] = []
        unmatched = frame[frame[KEY].isna()]
        for side in (0, 1):
            if self.preserves[side]:
                mine = unmatched[unmatched[SIDE] == side]
                out += [_extended(side, row, t, d) for row, t, d in _consolidated(mine)]
        keyed = frame[frame[KEY].notna()]
        if not keyed.empty:
            changes = keyed.groupby([KEY, SIDE, ROW, TIME], sort=True)[DIFF].sum()
            changes = changes[changes != 0]
            entries = zip(changes.index.tolist(), changes.to_numpy().tolist(), strict=True)
            for join_key, per_key in itertools.groupby(entries, key=lambda e: e[0][0]):
                updates = [(int(s), row, int(t), int(d)) for (_, s, row, t), d in per_key]
                self._apply_key(join_key, updates, watermark, out)
        yield from self._emit(out, watermark)

    def _apply_key(
        self,
        join_key: str,
        updates: list[tuple[int, str, int, int]],
        watermark: int,
        out: list[Joined],
    ) -> None:
        stored = self.arrangement.getValue((join_key,))
        sides: tuple[History, History] = pickle.loads(stored[0]) if stored else ({}, {})
        outer = [side for side in (0, 1) if self.preserves[side]]
        times: list[int] = []
        before: dict[int, list[dict[str, int]]] = {}
        if outer:
            first = min(t for _, _, t, _ in updates)
            times = sorted(
                {t for _, _, t, _ in updates}
                | {t for h in sides for row in h.values() for t in row if t >= first}
            )
            before = {side: _extended_at(sides, side, times) for side in outer}
        for side, row, time, diff in updates:
            for other, history in sides[1 - side].items():
                pair = (row, other) if side == 0 else (other, row)
                out += [(*pair, max(time, at), diff * d) for at, d in history.items()]
            _add(sides[side], row, time, diff)
        for side in outer:
            after = _extended_at(sides, side, times)
            previous: dict[str, int] = {}
            for index, time in enumerate(times):
                change = _difference(after[index], before[side][index])
                for row, diff in _difference(change, previous).items():
                    out.append(_extended(side, row, time, diff))
                previous = change
        for arranged in sides:
            _compact(arranged, watermark)
        if sides[0] or sides[1]:
            self.arrangement.updateValue((join_key,), (pickle.dumps(sides),))
        else:
            self.arrangement.removeKey((join_key,))

    def close(self) -> None:
        """Nothing to release."""


def _add(history: History, row: str, time: int, diff: int) -> None:
    times = history.setdefault(row, {})
    total = times.get(time, 0) + diff
    if total:
        times[time] = total
    else:
        times.pop(time, None)
        if not times:
            del history[row]


def _compact(history: History, watermark: int) -> None:
    """Merge each row's times at or below ``watermark`` into one, at ``watermark``."""
    for row in list(history):
        times = history[row]
        old = [t for t in times if t <= watermark]
        if len(old) > 1 or (old and old[0] != watermark):
            total = sum(times.pop(t) for t in old)
            if total:
                times[watermark] = total
            if not times:
                del history[row]


def _extended_at(
    sides: tuple[History, History], side: int, times: list[int]
) -> list[dict[str, int]]:
    """At each of ``times``: ``side``'s rows (with counts) if the other side has no row
    for the key then (its total multiplicity is 0), else none."""
    result: list[dict[str, int]] = []
    for time in times:
        other = sum(d for h in sides[1 - side].values() for t, d in h.items() if t <= time)
        if other:
            result.append({})
            continue
        counts = {row: sum(d for t, d in h.items() if t <= time) for row, h in sides[side].items()}
        result.append({row: n for row, n in counts.items() if n})
    return result


def _difference(a: dict[str, int], b: dict[str, int]) -> dict[str, int]:
    """``a − b`` per row, without zeros (negative counts kept)."""
    result = dict(a)
    for row, n in b.items():
        total = result.get(row, 0) - n
        if total:
            result[row] = total
        else:
            result.pop(row, None)
    return result


def _extended(side: int, row: str, time: int, diff: int) -> Joined:
    """``row`` of ``side`` with NULLs for the other side's columns."""
    return (row, None, time, diff) if side == 0 else (None, row, time, diff)


def _consolidated(frame: pd.DataFrame) -> list[tuple[str, int, int]]:
    """(row, time, summed diff) of ``frame``'s updates, without zero sums."""
    if frame.empty:
        return []
    sums = frame.groupby([ROW, TIME], sort=True)[DIFF].sum()
    return [(row, int(t), int(d)) for (row, t), d in sums.items() if d != 0]
