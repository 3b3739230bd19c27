"""A kafka batch's offset ranges (read by the executors' tasks) and their reads put together."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from dataflow_operator.core.kafka import OffsetRange, RangeRead, merge_ranges, plan_ranges

waiting = st.dictionaries(
    st.integers(0, 5), st.tuples(st.integers(0, 50), st.integers(0, 200)), max_size=6
)


@given(waiting, st.integers(1, 400), st.integers(1, 8), st.integers(1, 500))
def test_ranges_cover_the_budget_contiguously_from_each_position(
    parts: dict[int, tuple[int, int]], max_records: int, slots: int, range_records: int
) -> None:
    positions = {p: start for p, (start, _) in parts.items()}
    highs = {p: start + more for p, (start, more) in parts.items()}
    ranges = plan_ranges(positions, highs, max_records, slots, range_records)
    total = sum(r.end - r.start for r in ranges)
    assert total == min(max_records, sum(highs[p] - positions[p] for p in parts))
    assert [r.index for r in ranges] == list(range(len(ranges)))
    for p in parts:
        mine = [r for r in ranges if r.partition == p]
        ends = [positions[p]] + [r.end for r in mine]
        assert [r.start for r in mine] == ends[:-1]  # contiguous from the position
        assert ends[-1] <= highs[p]
    if ranges:  # every slot gets work when there is enough of it, no task too much
        size = min(range_records, max(1, total // slots))
        assert all(0 < r.end - r.start <= size for r in ranges)
        assert len(ranges) >= min(slots, total)


def test_a_large_batch_is_cut_into_ranges_a_task_can_hold() -> None:
    ranges = plan_ranges({0: 0, 1: 0}, {0: 600_000, 1: 400_000}, 1_000_000, 2)
    assert [(r.partition, r.start, r.end) for r in ranges] == [
        (0, 0, 250_000),
        (0, 250_000, 500_000),
        (0, 500_000, 600_000),
        (1, 0, 250_000),
        (1, 250_000, 400_000),
    ]


def test_the_budget_is_shared_fairly_and_what_one_cannot_take_goes_to_the_others() -> None:
    ranges = plan_ranges({0: 0, 1: 0, 2: 10}, {0: 100, 1: 3, 2: 110}, 60, 1)
    taken = {r.partition: r.end - r.start for r in ranges}
    assert taken == {0: 29, 1: 3, 2: 28}


def test_nothing_waiting_plans_no_range() -> None:
    assert plan_ranges({0: 5}, {0: 5}, 100, 2) == []


def test_a_partition_stops_at_its_first_range_cut_short_and_later_ranges_are_not_kept() -> None:
    ranges = [
        OffsetRange(0, 0, 0, 10),
        OffsetRange(1, 0, 10, 20),
        OffsetRange(2, 0, 20, 30),
        OffsetRange(3, 1, 5, 15),
    ]
    reads = [
        RangeRead(0, 10, newest=100),
        RangeRead(1, 14, newest=140),  # cut short: a slow broker
        RangeRead(2, 30, newest=300),  # read, but after the gap
        RangeRead(3, 15, newest=50),
    ]
    merged = merge_ranges({0: 0, 1: 5}, {0: 30, 1: 15}, ranges, reads)
    assert merged.positions == {0: 14, 1: 15}
    assert merged.kept == {0, 1, 3}
    assert [(r.partition, r.end, r.high, r.newest) for r in merged.reads] == [
        (0, 14, 30, 140),
        (1, 15, 15, 50),
    ]
    assert merged.held is None


def test_a_record_held_at_the_expiration_ends_its_partition_there() -> None:
    ranges = [OffsetRange(0, 0, 0, 10), OffsetRange(1, 0, 10, 20)]
    reads = [RangeRead(0, 4, newest=90, held=(4, 1000)), RangeRead(1, 20, newest=2000)]
    merged = merge_ranges({0: 0}, {0: 20}, ranges, reads)
    assert merged.positions == {0: 4}
    assert merged.held == (0, 4, 1000)
    assert merged.kept == {0}


def test_a_range_whose_task_returned_nothing_stops_its_partition() -> None:
    ranges = [OffsetRange(0, 0, 0, 10), OffsetRange(1, 0, 10, 20)]
    merged = merge_ranges({0: 0}, {0: 20}, ranges, [RangeRead(1, 20)])
    assert merged.positions == {0: 0} and merged.kept == frozenset()
