"""Frontiers: timely dataflow's antichain semantics over a total order, and the lattice laws."""

from hypothesis import given
from hypothesis import strategies as st

from dataflow_operator.core.time import Frontier, format_timestamp, parse_timestamp

frontiers = st.one_of(st.just(Frontier.empty()), st.integers(0, 2**40).map(Frontier.at))
times = st.integers(0, 2**40)


def test_empty_frontier_admits_no_time() -> None:
    assert not Frontier.empty().less_equal(0)
    assert not Frontier.empty().less_equal(2**62)
    assert Frontier.empty().elements() == []


def test_less_equal_is_inclusive_at_the_lower_bound() -> None:
    frontier = Frontier.at(10)
    assert frontier.less_equal(10)
    assert frontier.less_equal(11)
    assert not frontier.less_equal(9)
    assert not frontier.less_than(10)


def test_meet_and_join_with_empty() -> None:
    assert Frontier.at(5).meet(Frontier.empty()) == Frontier.at(5)
    assert Frontier.at(5).join(Frontier.empty()) == Frontier.empty()
    assert Frontier.at(5).meet(Frontier.at(7)) == Frontier.at(5)
    assert Frontier.at(5).join(Frontier.at(7)) == Frontier.at(7)


def test_empty_is_the_greatest_frontier() -> None:
    assert Frontier.at(2**62) < Frontier.empty()
    assert Frontier.minimum() <= Frontier.at(0)


def test_from_elements_takes_the_minimum_or_empty() -> None:
    assert Frontier.from_elements([]) == Frontier.empty()
    assert Frontier.from_elements([7, 3]) == Frontier.at(3)


@given(frontiers, frontiers)
def test_meet_and_join_are_commutative(a: Frontier, b: Frontier) -> None:
    assert a.meet(b) == b.meet(a)
    assert a.join(b) == b.join(a)


@given(frontiers, frontiers, frontiers)
def test_meet_and_join_are_associative(a: Frontier, b: Frontier, c: Frontier) -> None:
    assert a.meet(b).meet(c) == a.meet(b.meet(c))
    assert a.join(b).join(c) == a.join(b.join(c))


@given(frontiers, frontiers)
def test_absorption(a: Frontier, b: Frontier) -> None:
    assert a.meet(a.join(b)) == a
    assert a.join(a.meet(b)) == a


@given(frontiers)
def test_idempotence(a: Frontier) -> None:
    assert a.meet(a) == a
    assert a.join(a) == a


@given(frontiers, frontiers)
def test_meet_is_the_greatest_lower_bound_of_the_order(a: Frontier, b: Frontier) -> None:
    assert a.meet(b) <= a and a.meet(b) <= b
    assert a <= a.join(b) and b <= a.join(b)
    assert (a <= b) == (a.meet(b) == a)


@given(frontiers, frontiers, times)
def test_less_equal_agrees_with_meet(a: Frontier, b: Frontier, t: int) -> None:
    # A time may still change in the meet iff it may still change in either input.
    assert a.meet(b).less_equal(t) == (a.less_equal(t) or b.less_equal(t))
    assert a.join(b).less_equal(t) == (a.less_equal(t) and b.less_equal(t))


@given(st.integers(0, 2**44))
def test_timestamps_round_trip_through_rfc3339(t: int) -> None:
    assert parse_timestamp(format_timestamp(t)) == t


def test_parse_timestamp_forms() -> None:
    assert parse_timestamp("1700000000000") == 1_700_000_000_000
    assert parse_timestamp("1970-01-02T00:00:00Z") == 86_400_000
    assert parse_timestamp("1970-01-02") == 86_400_000
