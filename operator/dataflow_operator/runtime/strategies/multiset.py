"""DISTINCT and set operations in Spark state (``transformWithStateInPandas``): running.

The core plans the query (:class:`dataflow_operator.core.multiset.MultisetPlan`). Here
:func:`multiset_changelog` matches the inputs by position (a positional union, so Spark
widens their types as the set operation would), turns each row into JSON, and groups the
updates into a few state keys by the row's hash; :class:`RowCounts` keeps each row's
multiplicity per input and emits the change of the output multiplicity
(:func:`~dataflow_operator.core.multiset.output_multiplicity`) whenever it changes.

The inputs are not in step (one may deliver a time after the other delivered a later
one), so updates are held until the watermark (the inputs' frontier) reaches their time
and then applied in time order; the output is complete up to the watermark.
"""

from __future__ import annotations

import itertools
import pickle
from collections.abc import Iterator
from typing import Any

import pandas as pd
from pyspark.sql import DataFrame
from pyspark.sql import functions as F  # noqa: N812 - Spark's convention
from pyspark.sql import types as T  # noqa: N812 - Spark's convention
from pyspark.sql.streaming.stateful_processor import StatefulProcessor

from dataflow_operator.core.multiset import MultisetPlan, SetOperation, output_multiplicity
from dataflow_operator.runtime.changelog_store import DIFF, TIME
from dataflow_operator.runtime.strategies.held import HeldUpdates
from dataflow_operator.runtime.strategies.join import JSON_OPTIONS

__all__ = ["RowCounts", "multiset_changelog"]

SIDE = "__side"
ROW = "__row"
BUCKET = "__bucket"

Update = tuple[int, str, int]
"""One held input update: side, row JSON, diff."""


def multiset_changelog(
    plan: MultisetPlan, inputs: list[DataFrame], *, buckets: int, until: int | None
) -> DataFrame:
    """The output changelog (the first input's column names, widened types, ``__time``,
    ``__diff``). Updates at or past ``until`` never enter the state."""
    width = len([c for c in inputs[0].columns if c not in (TIME, DIFF)])
    tagged = []
    for side, frame in enumerate(inputs):
        data = [c for c in frame.columns if c not in (TIME, DIFF)]
        tagged.append(
            frame.select(
                F.lit(side).alias(SIDE),
                *[F.col(f"`{c}`").alias(f"__c{i}") for i, c in enumerate(data)],
                F.col(TIME),
                F.col(DIFF),
            )
        )
    union = tagged[0]
    for frame in tagged[1:]:
        union = union.union(frame)  # by position: Spark widens the types
    if until is not None:
        union = union.filter(F.col(TIME) < F.lit(until))
    columns = [F.col(f"__c{i}") for i in range(width)]
    schema = T.StructType([union.schema[f"__c{i}"] for i in range(width)])
    row = F.to_json(F.struct(*columns), JSON_OPTIONS)
    arranged = union.select(
        F.col(SIDE),
        row.alias(ROW),
        F.col(TIME),
        F.col(DIFF),
        F.pmod(F.hash(row), F.lit(buckets)).cast("int").alias(BUCKET),
    )
    output = T.StructType(
        [
            T.StructField(ROW, T.StringType()),
            T.StructField(TIME, T.LongType()),
            T.StructField(DIFF, T.LongType()),
        ]
    )
    counted = arranged.groupBy(BUCKET).transformWithStateInPandas(
        statefulProcessor=RowCounts(plan.operation),
        outputStructType=output,
        outputMode="Append",
        timeMode="EventTime",
    )
    names = [c for c in inputs[0].columns if c not in (TIME, DIFF)]
    parsed = counted.select(
        F.from_json(F.col(ROW), schema, JSON_OPTIONS).alias(ROW), F.col(TIME), F.col(DIFF)
    )
    return parsed.select(
        *[F.col(ROW).getField(f"__c{i}").alias(name) for i, name in enumerate(names)],
        F.col(TIME),
        F.col(DIFF),
    )


class RowCounts(StatefulProcessor):
    """Each row's multiplicity per input; output changes once the frontier passes.

    Input (by position): ``__side, __row, __time, __diff, __bucket``. Output: ``__row,
    __time, __diff``.
    """

    def __init__(self, operation: SetOperation) -> None:
        self.operation = operation

    def init(self, handle: Any) -> None:
        """Declare the state: counts per row, and the updates held per time."""
        self.counts = handle.getMapState("counts", "r STRING", "counts BINARY")
        self.pending = HeldUpdates(handle)

    def handleInputRows(  # noqa: N802 - Spark's name
        self,
        key: Any,
        rows: Iterator[pd.DataFrame],
        timerValues: Any,  # noqa: N803 - Spark passes these by name
    ) -> Iterator[pd.DataFrame]:
        """Hold the updates by time until the watermark reaches it (apply those it has)."""
        watermark = int(timerValues.getCurrentWatermarkInMs())
        frames = [frame for frame in rows if not frame.empty]
        if not frames:
            return
        frame = pd.concat(frames, ignore_index=True).iloc[:, :4]
        frame.columns = [SIDE, ROW, TIME, DIFF]
        sums = frame.groupby([TIME, SIDE, ROW], sort=True)[DIFF].sum()
        sums = sums[sums != 0]
        entries = zip(sums.index.tolist(), sums.to_numpy().tolist(), strict=True)
        out: list[tuple[str, int, int]] = []
        for time, at_time in itertools.groupby(entries, key=lambda e: int(e[0][0])):
            updates = [(int(side), row, int(diff)) for (_, side, row), diff in at_time]
            if time <= watermark:
                out += self._apply(time, updates)
                continue
            self.pending.hold(time, updates)
        if out:
            yield pd.DataFrame(out, columns=range(3))

    def handleExpiredTimer(  # noqa: N802 - Spark's name
        self,
        key: Any,
        timerValues: Any,  # noqa: N803 - Spark passes these by name
        expiredTimerInfo: Any,  # noqa: N803
    ) -> Iterator[pd.DataFrame]:
        """The frontier reached a held time: apply its updates, emit the changes."""
        time = int(expiredTimerInfo.getExpiryTimeInMs())
        held = self.pending.take(time)
        if not held:
            return
        out = self._apply(time, held)
        if out:
            yield pd.DataFrame(out, columns=range(3))

    def _apply(self, time: int, updates: list[Update]) -> list[tuple[str, int, int]]:
        """Apply one time's updates; the output changes they cause."""
        changes: dict[str, list[int]] = {}
        for side, row, diff in updates:
            changes.setdefault(row, [0, 0])[side] += diff
        out: list[tuple[str, int, int]] = []
        for row, (da, db) in changes.items():
            current = self.counts.getValue((row,))
            a, b = pickle.loads(current[0]) if current else (0, 0)
            before = output_multiplicity(self.operation, a, b)
            a, b = a + da, b + db
            change = output_multiplicity(self.operation, a, b) - before
            if change:
                out.append((row, time, change))
            if a or b:
                self.counts.updateValue((row,), (pickle.dumps((a, b)),))
            else:
                self.counts.removeKey((row,))
        return out

    def close(self) -> None:
        """Nothing to release."""
