"""The resumption frontier, its offsets, and which files may be released."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from dataflow_operator.core.resumption import (
    RemapEntry,
    offset_resumption,
    releasable,
    resumption_frontier,
)
from dataflow_operator.core.time import Frontier

frontiers = st.one_of(st.just(Frontier.empty()), st.integers(0, 10**6).map(Frontier.at))


@given(st.lists(frontiers, min_size=1, max_size=6))
def test_resumption_frontier_is_at_or_below_every_durable_upper(uppers: list[Frontier]) -> None:
    frontier = resumption_frontier(uppers)
    assert all(frontier <= upper for upper in uppers)
    assert frontier in uppers  # the meet of a total order is one of them


def test_nothing_durable_keeps_everything() -> None:
    assert resumption_frontier([]) == Frontier.minimum()


@st.composite
def remap_logs(draw: st.DrawFn) -> list[RemapEntry]:
    steps = draw(st.lists(st.tuples(st.integers(0, 3), st.integers(0, 50)), max_size=12))
    offset, upper, log = 0, 0, []
    for more_offsets, more_time in steps:
        offset, upper = offset + more_offsets, upper + more_time
        log.append(RemapEntry(offset, upper))
    return log


@given(remap_logs(), st.integers(0, 700))
def test_offset_resumption_never_releases_input_above_the_frontier(
    remap: list[RemapEntry], time: int
) -> None:
    offset = offset_resumption(remap, Frontier.at(time))
    # Every entry that reaches this offset says its updates are below an upper <= time...
    assert any(e.offset == offset and e.upper <= time for e in remap) or offset == 0
    # ...and no entry at or below the frontier reaches further.
    assert all(e.offset <= offset for e in remap if e.upper <= time)


def test_offset_resumption_of_a_closed_frontier_is_everything() -> None:
    log = [RemapEntry(2, 10), RemapEntry(5, 20)]
    assert offset_resumption(log, Frontier.empty()) == 5
    assert offset_resumption(log, Frontier.at(19)) == 2
    assert offset_resumption(log, Frontier.at(9)) == 0


names = st.sets(st.sampled_from([f"f{i}.json" for i in range(8)]))


@given(st.lists(names, min_size=1, max_size=4))
def test_a_shared_directory_is_released_only_past_the_slowest_reader(
    consumed: list[set[str]],
) -> None:
    released = releasable(consumed)
    assert all(released <= files for files in consumed)
    assert released == set.intersection(*consumed)


def test_no_reader_releases_nothing() -> None:
    assert releasable([]) == set()
