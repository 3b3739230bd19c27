"""The temporal filter as a Spark stateful operator (``transformWithStateInPandas``).

Input: a changelog (data columns, ``__time``, ``__diff``) with each row's validity
interval ``[__lower, __upper)`` in epoch ms (NULL: unbounded) and a ``__bucket`` to
group by. A row at time ``t`` with diff ``d`` yields ``(row, max(t, lower), +d)`` and,
when ``upper`` is finite, ``(row, max(t, upper), -d)``; nothing when the interval is
empty.

Updates due now are emitted at once; future ones wait in Spark's state store (a
``MapState`` per bucket keyed by the update's time, holding the rows due then) with an
event-time timer at that time. The watermark is the inputs' frontier (see
:mod:`dataflow_operator.runtime.sources`), so a timer fires exactly when the frontier
reaches its time.

Expiration: an update at a time ``>= until`` is dropped **before** it enters state. A
later run with a larger ``until`` gets the consumed input replayed in its first batch:
rows at times at or below the watermark, which new input never has (a source's new rows
are at or past its upper, and the watermark is below every upper). For those only the
updates in ``[previous until, until)`` — exactly the ones dropped before — are produced,
so nothing is lost or doubled.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F  # noqa: N812 - Spark's convention
from pyspark.sql import types as T  # noqa: N812 - Spark's convention
from pyspark.sql.streaming.stateful_processor import StatefulProcessor

from dataflow_operator.core.changelog import DIFF, TIME
from dataflow_operator.core.errors import InvalidSql
from dataflow_operator.runtime.strategies.buckets import bucket_of
from dataflow_operator.runtime.strategies.columns import BUCKET
from dataflow_operator.runtime.strategies.held import HeldUpdates, complete_through

if TYPE_CHECKING:
    import pandas as pd

    from dataflow_operator.core.temporal import TemporalBound

__all__ = ["LOWER", "UPPER", "TemporalFilter", "apply_bounds"]

LOWER = "__lower"
UPPER = "__upper"


class TemporalFilter(StatefulProcessor):
    """Holds the future updates of a temporal filter until the frontier reaches them.

    Spark's pre-init runner unpickles it in a new Python process for every query start,
    to call :meth:`init` only: this module imports pandas and numpy where rows are
    handled, not at its top (a part of the runner's life worth saving, in the first
    batch's planning; ``bench/RESULTS.md``).
    """

    def __init__(
        self, columns: Sequence[str], until: int | None, previous_until: int | None
    ) -> None:
        self.columns = list(columns)
        self.until = until
        self.previous_until = previous_until

    def init(self, handle: Any) -> None:
        """Declare the state: the pending updates, by time."""
        self.pending = HeldUpdates(handle)

    def _frame(self, records: list[tuple[Any, ...]]) -> pd.DataFrame:
        import pandas as pd  # here, not at the top: see the class docstring

        # Positional columns: Spark matches them to the output schema by position.
        return pd.DataFrame(records, columns=range(len(self.columns) + 2))

    def handleInputRows(  # noqa: N802 - Spark's name
        self,
        key: Any,
        rows: Iterator[pd.DataFrame],
        timerValues: Any,  # noqa: N803
    ) -> Iterator[pd.DataFrame]:
        """Split each row into its updates; emit the due ones, keep the rest."""
        import numpy as np
        import pandas as pd  # here, not at the top: see the class docstring

        frames = [frame for frame in rows if not frame.empty]
        if not frames:
            return
        # Spark renames columns that start with "__" on the way to pandas: go by position
        # (data columns, __time, __diff, __lower, __upper, __bucket).
        frame = pd.concat(frames, ignore_index=True)
        width = len(self.columns)
        watermark = int(timerValues.getCurrentWatermarkInMs())
        complete = complete_through(timerValues)
        time = frame.iloc[:, width].astype("int64").to_numpy()
        diff = frame.iloc[:, width + 1].astype("int64").to_numpy()
        lower = frame.iloc[:, width + 2].to_numpy(dtype="float64", na_value=np.nan)
        upper = frame.iloc[:, width + 3].to_numpy(dtype="float64", na_value=np.nan)
        start = np.where(np.isnan(lower), time, np.maximum(time, np.nan_to_num(lower)))
        bounded = ~np.isnan(upper)
        end = np.where(bounded, np.maximum(time, np.nan_to_num(upper)), 0).astype("int64")
        start = start.astype("int64")
        alive = ~bounded | (start < end)
        replay = time <= watermark
        values = frame.iloc[:, :width]
        updates = [(start, diff, alive), (end, -diff, alive & bounded)]
        due: list[tuple[Any, ...]] = []
        later: dict[int, list[tuple[tuple[Any, ...], int]]] = {}
        records = list(values.itertuples(index=False, name=None))
        for at, signed, alive_here in updates:
            keep = alive_here.copy()
            if self.until is not None:
                keep &= at < self.until
            if self.previous_until is not None:
                keep &= ~replay | (at >= self.previous_until)
            else:
                keep &= ~replay
            for index in np.flatnonzero(keep):
                when = int(at[index])
                if when <= complete or (when == time[index] and not replay[index]):
                    due.append((*records[index], when, int(signed[index])))
                else:
                    later.setdefault(when, []).append((records[index], int(signed[index])))
        for when, entries in later.items():
            self.pending.hold(when, entries)
        if due:
            yield self._frame(due)

    def handleExpiredTimer(  # noqa: N802 - Spark's name
        self,
        key: Any,
        timerValues: Any,  # noqa: N803 - Spark passes these by name
        expiredTimerInfo: Any,  # noqa: N803
    ) -> Iterator[pd.DataFrame]:
        """The frontier reached a pending time: emit its updates and forget them."""
        when = int(expiredTimerInfo.getExpiryTimeInMs())
        held = self.pending.take(when)
        if held:
            yield self._frame([(*values, when, signed) for values, signed in held])

    def close(self) -> None:
        """Nothing to release."""


def _bound_millis(frame: DataFrame, bound: TemporalBound) -> Column:
    column = F.col(f"`{bound.column}`")
    data_type = frame.schema[bound.column].dataType
    if isinstance(data_type, T.TimestampType):
        millis = F.unix_millis(column)
    elif isinstance(data_type, T.TimestampNTZType | T.DateType):
        millis = F.unix_millis(column.cast("timestamp"))
    elif isinstance(data_type, T.IntegralType):
        millis = column.cast("bigint")
    else:
        raise InvalidSql(
            f"the bound {bound.column} compared with mz_now() is a {data_type.simpleString()}; "
            "it must be a timestamp, a date or a number of epoch milliseconds",
            field="spec.sql",
        )
    return millis + F.lit(bound.shift_ms) if bound.shift_ms else millis


def _combine(columns: list[Column], pick: Any) -> Column:
    if not columns:
        return F.lit(None).cast("bigint")
    return columns[0] if len(columns) == 1 else pick(*columns)


def apply_bounds(
    frame: DataFrame,
    bounds: tuple[TemporalBound, ...],
    until: int | None,
    previous_until: int | None,
) -> DataFrame:
    """The temporal filter over a changelog carrying the bound columns, its state grouped
    into buckets (:mod:`.buckets`)."""
    lowers = [_bound_millis(frame, b) for b in bounds if b.kind == "lower"]
    uppers = [_bound_millis(frame, b) for b in bounds if b.kind == "upper"]
    bound_columns = sorted({b.column for b in bounds})
    data = [c for c in frame.columns if c not in (TIME, DIFF, *bound_columns)]
    framed = frame.select(
        *[F.col(f"`{c}`") for c in data],
        F.col(TIME),
        F.col(DIFF),
        _combine(lowers, F.greatest).alias(LOWER),
        _combine(uppers, F.least).alias(UPPER),
        bucket_of([F.col(f"`{c}`") for c in data]).alias(BUCKET),
    )
    output = T.StructType(
        [
            *[frame.schema[c] for c in data],
            T.StructField(TIME, T.LongType()),
            T.StructField(DIFF, T.LongType()),
        ]
    )
    return framed.groupBy(BUCKET).transformWithStateInPandas(
        statefulProcessor=TemporalFilter(data, until, previous_until),
        outputStructType=output,
        outputMode="Append",
        timeMode="EventTime",
    )
