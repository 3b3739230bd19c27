"""A Kafka source's frontier, resumption offsets and consumer-group commits."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from dataflow_operator.core.kafka import (
    PartitionRead,
    admitted,
    kafka_upper,
    partition_resumption,
    positions_meet,
    sequence_of,
    times_read,
    to_commit,
    upstream_lag,
)
from dataflow_operator.core.sql import parse_sql
from dataflow_operator.core.time import Frontier

times = st.integers(0, 10**6)


@st.composite
def partition_reads(draw: st.DrawFn) -> list[PartitionRead]:
    count = draw(st.integers(0, 5))
    reads = []
    for partition in range(count):
        end = draw(st.integers(0, 100))
        high = draw(st.integers(end, end + 5))
        newest = draw(st.one_of(st.none(), times))
        reads.append(PartitionRead(partition, end, high, newest))
    return reads


@given(times, partition_reads(), st.one_of(st.none(), times), st.one_of(st.none(), times))
def test_upper_never_goes_back_nor_past_the_expiration(
    previous: int, reads: list[PartitionRead], now: int | None, expiration: int | None
) -> None:
    upper = kafka_upper(previous, reads, now=now, expiration=expiration)
    assert upper >= previous
    if expiration is not None:
        assert upper <= max(previous, expiration)


@given(times, partition_reads(), st.one_of(st.none(), times))
def test_a_partition_with_records_waiting_holds_the_upper_at_its_newest_time(
    previous: int, reads: list[PartitionRead], now: int | None
) -> None:
    upper = kafka_upper(previous, reads, now=now)
    for read in reads:
        if not read.caught_up:
            held = previous if read.newest is None else read.newest + 1
            assert upper <= max(previous, held)


@given(times, partition_reads(), times)
def test_caught_up_partitions_on_the_wall_clock_follow_the_clock(
    previous: int, reads: list[PartitionRead], now: int
) -> None:
    caught_up = [PartitionRead(r.partition, r.high, r.high, r.newest) for r in reads]
    upper = kafka_upper(previous, caught_up, now=now)
    assert upper == max(previous, now + 1)


@given(times, partition_reads())
def test_caught_up_partitions_on_another_timeline_follow_the_newest_record(
    previous: int, reads: list[PartitionRead]
) -> None:
    caught_up = [PartitionRead(r.partition, r.high, r.high, r.newest) for r in reads]
    upper = kafka_upper(previous, caught_up)
    newest = [r.newest for r in reads if r.newest is not None]
    assert upper == max(previous, max(newest) + 1 if newest else previous)


def test_an_idle_lagging_partition_holds_the_frontier_where_it_was() -> None:
    reads = [PartitionRead(0, 10, 10, 500), PartitionRead(1, 3, 7, None)]
    assert kafka_upper(100, reads, now=900) == 100
    reads = [PartitionRead(0, 10, 10, 500), PartitionRead(1, 5, 7, 300)]
    assert kafka_upper(100, reads, now=900) == 301


@given(st.lists(times, max_size=20), st.one_of(st.none(), times))
def test_admitted_records_stop_before_the_first_at_the_expiration(
    record_times: list[int], expiration: int | None
) -> None:
    count = admitted(record_times, expiration)
    assert 0 <= count <= len(record_times)
    if expiration is None:
        assert count == len(record_times)
    else:
        assert all(time < expiration for time in record_times[:count])
        assert count == len(record_times) or record_times[count] >= expiration


positions = st.dictionaries(st.integers(0, 4), st.integers(0, 1000), max_size=5)


@st.composite
def remap_logs(draw: st.DrawFn) -> list[tuple[dict[int, int], int]]:
    steps = draw(st.lists(st.tuples(positions, st.integers(0, 50)), max_size=10))
    current: dict[int, int] = {}
    upper, log = 0, []
    for more, more_time in steps:
        current = {p: current.get(p, 0) + more.get(p, 0) for p in {*current, *more}}
        upper += more_time
        log.append((dict(current), upper))
    return log


@given(remap_logs(), st.integers(0, 600))
def test_partition_resumption_is_the_last_entry_at_or_below_the_frontier(
    log: list[tuple[dict[int, int], int]], at: int
) -> None:
    resumed = partition_resumption(log, Frontier.at(at))
    below = [entry for entry in log if entry[1] <= at]
    assert resumed == ({p: o for p, o in below[-1][0].items()} if below else {})
    # never past what an entry above the frontier had read before it
    for entry_positions, upper in log:
        if upper > at:
            assert all(resumed.get(p, 0) <= o for p, o in entry_positions.items())
            break


def test_a_closed_frontier_resumes_after_everything() -> None:
    log = [({0: 3}, 10), ({0: 5, 1: 2}, 20)]
    assert partition_resumption(log, Frontier.empty()) == {0: 5, 1: 2}


@given(st.lists(positions, min_size=1, max_size=4))
def test_meet_is_at_or_below_every_reader(reports: list[dict[int, int]]) -> None:
    meet = positions_meet(reports)
    assert meet is not None
    for report in reports:
        assert all(p in report and meet[p] <= report[p] for p in meet)
    common = set.intersection(*(set(r) for r in reports))
    assert set(meet) == common
    assert all(any(meet[p] == r[p] for r in reports) for p in meet)


def test_a_reader_without_a_report_holds_everything_back() -> None:
    assert positions_meet([{0: 5}, None]) is None
    assert positions_meet([]) is None


@given(positions, positions)
def test_commits_only_move_the_group_forward(
    meet: dict[int, int], committed: dict[int, int]
) -> None:
    commit = to_commit(meet, committed)
    assert all(offset > committed.get(p, -1) and meet[p] == offset for p, offset in commit.items())
    after = {**committed, **commit}
    assert to_commit(meet, after) == {}  # committing again changes nothing
    assert all(after[p] >= committed[p] for p in committed)


@given(positions, positions)
def test_lag_counts_the_records_not_read(read: dict[int, int], highs: dict[int, int]) -> None:
    lag = upstream_lag(read, highs)
    assert lag >= 0
    caught_up = {p: max(h, read.get(p, 0)) for p, h in highs.items()}
    assert upstream_lag(caught_up, highs) == 0
    assert lag == sum(max(0, h - read.get(p, 0)) for p, h in highs.items())


@given(positions, positions)
def test_the_sequence_grows_with_any_position(before: dict[int, int], more: dict[int, int]) -> None:
    after = {p: before.get(p, 0) + more.get(p, 0) for p in {*before, *more}}
    assert sequence_of(after) >= sequence_of(before)
    if any(more.values()):
        assert sequence_of(after) > sequence_of(before)


def _times(sql: str, source: str = "clicks") -> int:
    return times_read(parse_sql(sql, ["clicks", "users"]).tree, source)


def test_times_read_counts_references_and_ctes_per_use() -> None:
    assert _times("SELECT url FROM clicks") == 1
    assert _times("SELECT c.url FROM clicks c JOIN users u ON c.uid = u.id") == 1
    assert _times("SELECT a.url FROM clicks a JOIN Clicks b ON a.url = b.url") == 2
    assert _times("SELECT url FROM clicks UNION ALL SELECT url FROM clicks") == 2
    assert _times("WITH x AS (SELECT url FROM clicks) SELECT url FROM x") == 1
    assert (
        _times("WITH x AS (SELECT url FROM clicks) SELECT a.url FROM x a JOIN x b ON a.url = b.url")
        == 2
    )
    assert _times("SELECT id FROM users") == 0
    recursive = (
        "WITH RECURSIVE r AS (SELECT url FROM clicks UNION ALL SELECT url FROM r) SELECT url FROM r"
    )
    assert _times(recursive) == 1
