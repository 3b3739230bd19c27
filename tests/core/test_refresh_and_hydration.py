"""Refresh schedules round up and down; hydration is the output frontier strictly beyond as_of."""

from hypothesis import given
from hypothesis import strategies as st

from dataflow_operator.core.durations import Duration
from dataflow_operator.core.hydration import is_hydrated
from dataflow_operator.core.refresh import RefreshSchedule
from dataflow_operator.core.time import Frontier


def test_round_up_to_the_period() -> None:
    schedule = RefreshSchedule(every=Duration(10), aligned_to=3)
    assert schedule.round_up(3) == 3
    assert schedule.round_up(4) == 13
    assert schedule.round_up(0) == 3


def test_round_up_uses_the_earliest_of_period_and_at() -> None:
    schedule = RefreshSchedule(every=Duration(100), at=(150,))
    assert schedule.round_up(120) == 150
    assert schedule.round_up(160) == 200


@given(st.integers(1, 10**9), st.integers(0, 10**12), st.integers(0, 10**12))
def test_round_up_is_the_first_refresh_at_or_after(step: int, aligned: int, time: int) -> None:
    got = RefreshSchedule(every=Duration(step), aligned_to=aligned).round_up(time)
    assert got is not None and got >= time
    assert got == aligned or (got - aligned) % step == 0
    assert got - step < time or got == aligned


def test_hydrated_only_strictly_beyond_as_of() -> None:
    assert not is_hydrated(Frontier.at(10), Frontier.at(10))
    assert is_hydrated(Frontier.at(11), Frontier.at(10))
    assert not is_hydrated(Frontier.at(3), Frontier.at(10))


def test_empty_as_of_counts_as_hydrated() -> None:
    assert is_hydrated(Frontier.at(0), Frontier.empty())


def test_empty_output_frontier_is_beyond_any_as_of() -> None:
    assert is_hydrated(Frontier.empty(), Frontier.at(10))


def test_round_down_to_the_last_refresh() -> None:
    daily = RefreshSchedule(every=Duration(10), aligned_to=5)
    assert daily.round_down(4) is None
    assert daily.round_down(5) == 5
    assert daily.round_down(24) == 15
    assert RefreshSchedule(at=(3, 30)).round_down(29) == 3
    assert RefreshSchedule(every=Duration(10), aligned_to=5, at=(17,)).round_down(19) == 17
