"""DISTINCT's and the set operations' row counts (:class:`RowCounts`) without Spark."""

from __future__ import annotations

import pandas as pd
from tests.runtime.test_aggregate_state import Expired, TimedHandle
from tests.runtime.test_join_state import FakeTimerValues

from dataflow_operator.core.multiplicity import SetOperation
from dataflow_operator.runtime.strategies.row_counts import RowCounts

Change = tuple[str, int, int]  # row, time, diff


def _counts(operation: SetOperation) -> tuple[RowCounts, TimedHandle]:
    handle = TimedHandle()
    counts = RowCounts(operation)
    counts.init(handle)
    return counts, handle


def _changes(
    counts: RowCounts, rows: list[tuple[int, str, int, int]], watermark: int
) -> list[Change]:
    """The output changes of a batch's rows (side, row, time, diff) for one bucket."""
    frame = pd.DataFrame([(*row, 0) for row in rows])  # … __bucket, as Spark hands them
    out = counts.handleInputRows((0,), iter([frame]), FakeTimerValues(watermark))
    return [(str(r), int(t), int(d)) for f in out for r, t, d in f.itertuples(index=False)]


def _fire(counts: RowCounts, handle: TimedHandle, watermark: int) -> list[Change]:
    """The changes of the timers the watermark passes, in time order (as Spark fires)."""
    due = sorted(t for t in handle.timers if t <= watermark)
    handle.timers -= set(due)
    frames = [
        f
        for t in due
        for f in counts.handleExpiredTimer((0,), FakeTimerValues(watermark), Expired(t))
    ]
    return [(str(r), int(t), int(d)) for f in frames for r, t, d in f.itertuples(index=False)]


def test_a_time_is_held_until_the_watermark_reaches_it() -> None:
    counts, handle = _counts("except")
    assert _changes(counts, [(0, "x", 6, 1), (1, "x", 7, 1)], watermark=5) == []
    assert handle.timers == {6, 7}
    assert _fire(counts, handle, watermark=7) == [("x", 6, 1), ("x", 7, -1)]
    assert _fire(counts, handle, watermark=9) == []


def test_rows_at_complete_times_apply_after_what_is_held_before_them() -> None:
    # A batch told its inputs' frontier (or a late row) hands over rows at times already
    # complete before the timers of what is held through them fire: the held time applies
    # first, whichever comes first.
    counts, handle = _counts("except")
    assert _changes(counts, [(0, "x", 6, 1)], watermark=5) == []
    assert _changes(counts, [(1, "x", 8, 1)], watermark=9) == [("x", 6, 1), ("x", 8, -1)]
    assert handle.timers == set()  # time 6's timer deleted: nothing applies twice
    assert _fire(counts, handle, watermark=9) == []
    # The counts went on from there: the row leaves the second input, back in the output.
    assert _changes(counts, [(1, "x", 10, -1)], watermark=12) == [("x", 10, 1)]
