"""The aggregate's group totals (:class:`GroupTotals`) without Spark."""

from __future__ import annotations

import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from tests.runtime.test_join_state import FakeHandle, FakeTimerValues

from dataflow_operator.runtime.strategies import output_slices
from dataflow_operator.runtime.strategies.aggregate import GroupTotals


def _rows(frames: list[pd.DataFrame]) -> list[tuple[object, ...]]:
    return [
        tuple(None if pd.isna(v) else v for v in r)
        for f in frames
        for r in f.itertuples(index=False)
    ]


def _transitions(
    totals: GroupTotals, rows: list[tuple[object, ...]], watermark: int = 0
) -> list[tuple[object, ...]]:
    # keys…, __time, sums…, __count, __bucket — as Spark hands them to pandas
    frames = totals.handleInputRows((0,), iter([pd.DataFrame(rows)]), FakeTimerValues(watermark))
    return _rows(list(frames))


class TimedHandle(FakeHandle):
    """A state handle that records the event-time timers registered."""

    def __init__(self) -> None:
        super().__init__()
        self.timers: set[int] = set()

    def registerTimer(self, time: int) -> None:
        self.timers.add(time)

    def deleteTimer(self, time: int) -> None:
        self.timers.discard(time)


class Expired:
    def __init__(self, time: int) -> None:
        self.time = time

    def getExpiryTimeInMs(self) -> int:
        return self.time


def _fire(totals: GroupTotals, handle: TimedHandle, watermark: int) -> list[tuple[object, ...]]:
    """The transitions of the timers the watermark passes, in time order (as Spark fires)."""
    due = sorted(t for t in handle.timers if t <= watermark)
    handle.timers -= set(due)
    timer_values = FakeTimerValues(watermark)
    return _rows(
        [f for t in due for f in totals.handleExpiredTimer((0,), timer_values, Expired(t))]
    )


def test_an_integer_group_is_one_group_whether_or_not_its_batch_has_a_null() -> None:
    totals = GroupTotals(keys=1, sums=0, integral_keys=(True,))
    totals.init(FakeHandle())
    # With a NULL key in the batch, pandas makes the integer column floats (1.0, NaN).
    first = _transitions(totals, [(1.0, 5, 1, 0), (float("nan"), 5, 1, 0), (float("nan"), 6, 1, 0)])
    assert first == [(1, 1, 5, 1), (None, 1, 5, 1), (None, 1, 6, -1), (None, 2, 6, 1)]
    # The next batch has no NULL: plain integers, the same group as before.
    assert _transitions(totals, [(1, 7, 1, 0)]) == [(1, 1, 7, -1), (1, 2, 7, 1)]


def test_retracting_the_minimum_reveals_the_next_one() -> None:
    # keys: 1; columns: key, __time, min(x), max(x), __count (per row: x, x, diff)
    totals = GroupTotals(keys=1, sums=2, kinds=("min", "max"))
    totals.init(FakeHandle())
    assert _transitions(totals, [("a", 1, 5, 5, 1, 0), ("a", 1, 3, 3, 1, 0)]) == [
        ("a", 3, 5, 2, 1, 1)
    ]
    # The minimum 3 goes, a NULL value comes: the next minimum is 5, the count 2.
    assert _transitions(totals, [("a", 2, 3, 3, -1, 0), ("a", 2, None, None, 1, 0)]) == [
        ("a", 3, 5, 2, 2, -1),
        ("a", 5, 5, 2, 2, 1),
    ]
    # Only the NULL is left: no value to be the minimum.
    assert _transitions(totals, [("a", 3, 5, 5, -1, 0)]) == [
        ("a", 5, 5, 2, 3, -1),
        ("a", None, None, 1, 3, 1),
    ]


def test_count_distinct_counts_the_values_present() -> None:
    # columns: key, __time, count(DISTINCT x) carrier (x), __count (per row: x, diff)
    totals = GroupTotals(keys=1, sums=1, kinds=("count_distinct",))
    totals.init(FakeHandle())
    rows = [("a", 1, "x", 1, 0), ("a", 1, "x", 1, 0), ("a", 1, "y", 1, 0), ("a", 1, None, 1, 0)]
    assert _transitions(totals, rows) == [("a", 2, 4, 1, 1)]
    # One "x" of two goes: still two values; then the "y" goes: one.
    assert _transitions(totals, [("a", 2, "x", -1, 0)]) == [("a", 2, 4, 2, -1), ("a", 2, 3, 2, 1)]
    assert _transitions(totals, [("a", 3, "y", -1, 0)]) == [("a", 2, 3, 3, -1), ("a", 1, 2, 3, 1)]


def test_in_time_order_a_time_is_applied_once_the_watermark_reaches_it() -> None:
    # Over a join: updates come as soon as they are known, an earlier time after a later.
    # columns: key, __time, sum(x), __count
    handle = TimedHandle()
    totals = GroupTotals(keys=1, sums=1, in_time_order=True)
    totals.init(handle)
    # Complete through 4: time 3 applies at once, time 7 waits.
    assert _transitions(totals, [("a", 3, 1, 1, 0), ("a", 7, 10, 1, 0)], watermark=4) == [
        ("a", 1, 1, 3, 1)
    ]
    assert handle.timers == {7}
    # Then time 6 arrives, after 7; the watermark reaches 7: 6 applies first, then 7.
    assert _transitions(totals, [("a", 6, 100, 1, 0)], watermark=5) == []
    assert _fire(totals, handle, watermark=7) == [
        ("a", 1, 1, 6, -1),
        ("a", 101, 2, 6, 1),
        ("a", 101, 2, 7, -1),
        ("a", 111, 3, 7, 1),
    ]
    assert handle.timers == set()
    assert _fire(totals, handle, watermark=9) == []


def test_in_time_order_a_late_row_is_applied_after_what_is_held_before_it() -> None:
    # A row that comes late reaches the totals at a time already complete, in the batch
    # whose timers release a held time before it: both apply together, the earlier first.
    handle = TimedHandle()
    totals = GroupTotals(keys=1, sums=1, in_time_order=True)
    totals.init(handle)
    assert _transitions(totals, [("a", 6, 100, 1, 0)], watermark=5) == []
    assert _transitions(totals, [("a", 8, 5, 1, 0)], watermark=9) == [
        ("a", 100, 1, 6, 1),
        ("a", 100, 1, 8, -1),
        ("a", 105, 2, 8, 1),
    ]
    assert handle.timers == set()  # time 6's timer deleted: nothing applies twice


def _recounted(updates: list[tuple[int, int, int]], kind: str) -> list[tuple[object, ...]]:
    """The transitions by the definition: every time's totals counted from all the values
    present then (value ``x`` present while its count is positive)."""
    counts: dict[int, int] = {}
    rows = 0
    out: list[tuple[object, ...]] = []

    def answer() -> object:
        present = [value for value, count in counts.items() if count > 0]
        if kind == "count_distinct":
            return len(present)
        return (min if kind == "min" else max)(present) if present else None

    for time in sorted({time for time, _, _ in updates}):
        before = (answer(), rows) if rows else None
        for at, value, diff in updates:
            if at == time:
                counts[value] = counts.get(value, 0) + diff
                rows += diff
        if before is not None:
            out.append(("g", *before, time, -1))
        if rows:
            out.append(("g", answer(), rows, time, 1))
    return out


@settings(max_examples=200, deadline=None)
@given(
    kind=st.sampled_from(["min", "max", "count_distinct"]),
    batches=st.lists(
        st.lists(
            st.tuples(st.integers(0, 6), st.integers(0, 4), st.sampled_from([1, 1, 1, -1])),
            max_size=12,
        ),
        min_size=1,
        max_size=4,
    ),
)
def test_a_multiset_columns_running_answer_is_the_recounted_one(
    kind: str, batches: list[list[tuple[int, int, int]]]
) -> None:
    """Values come and go over times and batches (a changelog retracts only what it
    inserted: a retraction drawn for a value not present is an insertion); every emitted
    answer is the one counted afresh from the values present."""
    totals = GroupTotals(keys=1, sums=1, kinds=(kind,))
    totals.init(FakeHandle())
    offset, seen, emitted = 0, [], []
    present: dict[int, int] = {}
    for batch in batches:
        updates = []
        for time, value, diff in sorted(batch):
            change = diff if present.get(value, 0) + diff >= 0 else 1
            present[value] = present.get(value, 0) + change
            updates.append((offset + time, value, change))
        offset += 10  # each batch's times after the last one's
        emitted += _transitions(totals, [("g", t, v, d, 0) for t, v, d in updates])
        seen += updates
    assert emitted == _recounted(seen, kind)


def test_a_calls_transitions_are_handed_over_in_frames_of_bounded_size(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(output_slices, "FRAME_ROWS", 4)
    totals = GroupTotals(keys=1, sums=0)
    totals.init(FakeHandle())
    frames = list(
        totals.handleInputRows(
            (0,), iter([pd.DataFrame([(g, 1, 1, 0) for g in range(9)])]), FakeTimerValues(0)
        )
    )
    assert [len(frame) for frame in frames] == [4, 4, 1]
    assert sorted(row[0] for row in _rows(frames)) == list(range(9))
