"""The top-N processor's ranking and changes, without Spark: how rows sort, tie, repeat
and move in and out of the ranks kept."""

from __future__ import annotations

import json
from decimal import Decimal
from typing import Any

import pandas as pd
from tests.runtime.test_aggregate_state import Expired, TimedHandle
from tests.runtime.test_join_state import FakeTimerValues

from dataflow_operator.runtime.strategies.top_n_rows import (
    OrderKey,
    SortedPartition,
    TopNRows,
    entry,
    sort_key,
)

ASCENDING = OrderKey(descending=False, nulls_first=True, floating=False)
DESCENDING_FLOAT = OrderKey(descending=True, nulls_first=False, floating=True)


def _entry(value: Any, row: str) -> str:
    """The entry of ``row`` ordered by one value (``None``: NULL, left out of the JSON)."""
    return entry(json.dumps({} if value is None else {"0": value}), row)


def _rows(*rows: tuple[Any, str, int]) -> dict[str, int]:
    """Entries of (ordering value, row, multiplicity)."""
    return {_entry(v, row): n for v, row, n in rows}


def _ranks(rows: dict[str, int], order: OrderKey, first: int = 1, last: int = 10) -> list[Any]:
    return SortedPartition(rows, [order]).ranked(first, last)


def test_descending_floats_put_nan_first_nulls_last_and_equal_zeros_tie_by_row() -> None:
    rows = _rows(
        ("NaN", "nan", 1),
        ("Infinity", "inf", 1),
        ("-Infinity", "-inf", 1),
        (None, "null", 1),
        (-0.0, "b-zero", 1),
        (0.0, "a-zero", 1),
        (2.5, "two", 1),
    )
    order = [row for row, _ in _ranks(rows, DESCENDING_FLOAT)]
    assert order == ["nan", "inf", "two", "a-zero", "b-zero", "-inf", "null"]


def test_a_row_of_multiplicity_n_takes_n_ranks_and_the_range_cuts_them() -> None:
    rows = _rows((1, "x", 2), (2, "y", 3), (3, "z", 1), (5, "owed", -1))
    assert _ranks(rows, ASCENDING) == [("x", 1), ("x", 2), ("y", 3), ("y", 4), ("y", 5), ("z", 6)]
    assert _ranks(rows, ASCENDING, first=2, last=4) == [("x", 2), ("y", 3), ("y", 4)]


def test_the_same_row_with_other_ordering_values_is_another_entry() -> None:
    # SELECT a … ORDER BY b: two rows "a" of different b rank apart.
    rows = _rows((5, "a", 1), (1, "a", 1), (3, "b", 1))
    assert _ranks(rows, ASCENDING) == [("a", 1), ("b", 2), ("a", 3)]


def test_decimals_and_large_integers_sort_exactly() -> None:
    item = entry('{"0":12345678901234567890.123}', "r")
    assert sort_key(item, [ASCENDING]) == ((1, Decimal("12345678901234567890.123")), "r", item)
    assert sort_key(entry('{"0":9007199254740993}', "r"), [ASCENDING]) < sort_key(
        entry('{"0":9007199254740994}', "r"), [ASCENDING]
    )


def test_rows_that_come_and_go_keep_the_partition_in_rank_order() -> None:
    partition = SortedPartition(_rows((3, "c", 1), (1, "a", 1)), [ASCENDING])
    partition.change(_entry(2, "b"), 2)
    partition.change(_entry(1, "a"), -1)  # gone
    partition.change(_entry(3, "c"), 1)
    partition.change(_entry(None, "null"), 1)  # NULL first
    assert partition.ranked(1, 10) == [("null", 1), ("b", 2), ("b", 3), ("c", 4), ("c", 5)]
    assert partition.rows == _rows((None, "null", 1), (2, "b", 2), (3, "c", 2))
    fresh = SortedPartition(dict(partition.rows), [ASCENDING])
    assert fresh.keys == partition.keys


def _top_two() -> tuple[TopNRows, TimedHandle]:
    handle = TimedHandle()
    top = TopNRows([ASCENDING], first=1, last=2)
    top.init(handle)
    return top, handle


def _batch(top: TopNRows, rows: list[tuple[Any, str, int, int]], watermark: int) -> list[Any]:
    """The changes (row, rank, time, diff) of a batch's rows (value, row, time, diff) of
    partition "p", as Spark hands them (with the bucket last)."""
    frame = pd.DataFrame(
        [("p", row, json.dumps({"0": value}), time, diff, 0) for value, row, time, diff in rows]
    )
    out = top.handleInputRows((0,), iter([frame]), FakeTimerValues(watermark))
    return [tuple(r) for f in out for r in f.itertuples(index=False)]


def test_a_top_n_holds_a_time_until_the_watermark_and_then_ranks_in_time_order() -> None:
    top, handle = _top_two()
    assert _batch(top, [(5, "five", 10, 1), (3, "three", 20, 1)], watermark=15) == [
        ("five", 1, 10, 1)
    ]
    assert handle.timers == {20}  # time 20 waits for the watermark
    fired = [
        tuple(r)
        for f in top.handleExpiredTimer((0,), FakeTimerValues(20), Expired(20))
        for r in f.itertuples(index=False)
    ]
    assert sorted(fired) == [("five", 1, 20, -1), ("five", 2, 20, 1), ("three", 1, 20, 1)]
    # A retraction of the first lets the next move up; a row below the ranks kept is kept
    # in state all the same.
    changes = _batch(top, [(9, "nine", 30, 1), (3, "three", 31, -1)], watermark=40)
    assert sorted(changes) == [
        ("five", 1, 31, 1),
        ("five", 2, 31, -1),
        ("nine", 2, 31, 1),
        ("three", 1, 31, -1),
    ]


def test_a_batch_splits_into_its_times_in_order_each_with_its_rows_in_order() -> None:
    top, _ = _top_two()
    frame = pd.DataFrame(
        [
            ("p", "late", '{"0": 1}', 30, 1, 0),
            ("q", "early", '{"0": 2}', 10, -1, 0),
            ("p", "late-too", '{"0": 3}', 30, 2, 0),
            ("p", "middle", '{"0": 4}', 20, 1, 0),
        ]
    )
    assert list(top.by_time(frame)) == [
        (10, [("q", "early", '{"0": 2}', -1)]),
        (20, [("p", "middle", '{"0": 4}', 1)]),
        (30, [("p", "late", '{"0": 1}', 1), ("p", "late-too", '{"0": 3}', 2)]),
    ]
