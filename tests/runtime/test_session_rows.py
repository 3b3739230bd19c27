"""The session processor's sessions and changes, without Spark: rows join sessions into
one and split them again, and only the sessions a change reaches are re-read."""

from __future__ import annotations

from collections import Counter
from typing import Any

import pandas as pd
from hypothesis import given
from hypothesis import strategies as st
from tests.runtime.test_aggregate_state import Expired, TimedHandle
from tests.runtime.test_join_state import FakeTimerValues

from dataflow_operator.runtime.strategies.session_rows import (
    PartitionSessions,
    Sessioned,
    SessionRows,
)

GAP = 10


def _sessioned(rows: Counter[tuple[int, str]], gap: int) -> Counter[Sessioned]:
    """Every row with its session's bounds, the plain way: sort, cut where rows are more
    than the gap apart (the oracle)."""
    present = sorted((time, row) for (time, row), n in rows.items() if n > 0)
    sessions: list[list[tuple[int, str]]] = []
    for entry in present:
        if sessions and entry[0] - sessions[-1][-1][0] <= gap:
            sessions[-1].append(entry)
        else:
            sessions.append([entry])
    out: Counter[Sessioned] = Counter()
    for session in sessions:
        start, end = session[0][0], session[-1][0] + gap
        for time, row in session:
            out[(row, start, end)] += rows[(time, row)]
    return out


def test_a_row_between_two_sessions_joins_them_and_its_retraction_splits_them() -> None:
    sessions = PartitionSessions({}, GAP)
    sessions.change(0, "a", 1)
    sessions.change(20, "c", 1)
    sessions.change(100, "far", 1)
    assert sessions.around([10]) == Counter({("a", 0, 10): 1, ("c", 20, 30): 1})
    sessions.change(10, "b", 2)  # 10 - 0 and 20 - 10 are at most the gap: one session
    assert sessions.around([10]) == Counter({("a", 0, 30): 1, ("b", 0, 30): 2, ("c", 0, 30): 1})
    sessions.change(10, "b", -2)
    assert sessions.around([10]) == Counter({("a", 0, 10): 1, ("c", 20, 30): 1})
    # the session at 100 is not within the gap of 50: a change there does not read it
    assert sessions.around([50]) == Counter()


def test_rows_exactly_the_gap_apart_are_one_session_as_in_spark() -> None:
    sessions = PartitionSessions({}, GAP)
    for time in (0, 10, 21):
        sessions.change(time, str(time), 1)
    assert sessions.around([10]) == Counter({("0", 0, 20): 1, ("10", 0, 20): 1})
    assert sessions.around([21]) == Counter({("21", 21, 31): 1})


def test_state_read_back_gives_the_same_sessions() -> None:
    sessions = PartitionSessions({}, GAP)
    for time, row, diff in [(5, "x", 1), (9, "y", 3), (40, "z", 1), (9, "y", -1), (7, "w", -1)]:
        sessions.change(time, row, diff)
    fresh = PartitionSessions(dict(sessions.rows), GAP)
    assert fresh.entries == sessions.entries
    assert fresh.around([0, 40]) == sessions.around([0, 40])
    assert sessions.rows == {"5\x1fx": 1, "9\x1fy": 2, "40\x1fz": 1, "7\x1fw": -1}


changes = st.lists(
    st.tuples(st.integers(-30, 60), st.sampled_from("abc"), st.sampled_from([1, 1, -1, 2])),
    max_size=40,
)


@given(batches=st.lists(changes, max_size=6), gap=st.integers(1, 15))
def test_the_changes_add_up_to_the_sessions_of_the_rows(
    batches: list[list[tuple[int, str, int]]], gap: int
) -> None:
    # Multiplicities may go below zero on the way (a retraction before its insert): such a
    # row is in no session until it is back above zero, as in a consolidated input.
    sessions = PartitionSessions({}, gap)
    rows: Counter[tuple[int, str]] = Counter()
    emitted: Counter[Sessioned] = Counter()
    for batch in batches:
        times = [time for time, _, _ in batch]
        before = sessions.around(times)
        for time, row, diff in batch:
            sessions.change(time, row, diff)
            rows[(time, row)] += diff
        after = sessions.around(times)
        emitted.update(after)
        emitted.subtract(before)
        assert +emitted == _sessioned(rows, gap)
        assert -emitted == Counter()


def _processor() -> tuple[SessionRows, TimedHandle]:
    handle = TimedHandle()
    processor = SessionRows(GAP)
    processor.init(handle)
    return processor, handle


def _batch(processor: SessionRows, rows: list[tuple[str, int, int, int]], watermark: int) -> Any:
    """The changes (row, start, end, time, diff) of a batch's rows (row, event, time, diff)
    of partition "p", as Spark hands them (with the bucket last)."""
    frame = pd.DataFrame([("p", row, event, time, diff, 0) for row, event, time, diff in rows])
    out = processor.handleInputRows((0,), iter([frame]), FakeTimerValues(watermark))
    return sorted(tuple(r) for f in out for r in f.itertuples(index=False))


def test_the_processor_holds_a_time_until_the_watermark_and_then_applies_it() -> None:
    processor, handle = _processor()
    assert _batch(processor, [("a", 0, 10, 1), ("c", 8, 20, 1)], watermark=15) == [
        ("a", 0, 10, 10, 1)
    ]
    assert handle.timers == {20}  # time 20 waits for the watermark
    fired = sorted(
        tuple(r)
        for f in processor.handleExpiredTimer((0,), FakeTimerValues(20), Expired(20))
        for r in f.itertuples(index=False)
    )
    assert fired == [("a", 0, 10, 20, -1), ("a", 0, 18, 20, 1), ("c", 0, 18, 20, 1)]
    # The first row retracted: the session starts at the next.
    assert _batch(processor, [("a", 0, 30, -1)], watermark=40) == [
        ("a", 0, 18, 30, -1),
        ("c", 0, 18, 30, -1),
        ("c", 8, 18, 30, 1),
    ]
