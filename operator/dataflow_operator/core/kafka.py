"""A Kafka source's progress: its frontier, its resumption offsets, what to commit upstream.

A Kafka topic is a set of partitions, each a log of records in offset order. A record's
time is its Kafka timestamp, on the source's timeline. A partition's **position** is the
next offset to read (everything below it is read); positions are what a source's offsets
carry, one per partition (``Positions``: partition → position).

The **frontier** (upper) a batch reaches comes from two things:

- the records' times: a partition that still has records waiting (its position is below
  the high watermark seen when it was fetched) may yet hold any time after the newest it
  gave, so it holds the frontier at that newest time + 1 (or where it was, if it gave
  nothing this batch);
- the partitions' progress: a partition read up to its high watermark holds nothing
  back on a wall-clock timeline beyond the clock (a record produced later is stamped
  later), and nothing at all on another timeline (the frontier then follows the newest
  time read anywhere).

A record whose time is below the frontier when it is read (a late record, e.g. a
producer's clock behind) is advanced to it, as a changelog file's late updates are. A
record at or past the dataflow's expiration is never read (:func:`admitted`): its
partition stops before it, so the frontier never passes the expiration.

Upstream, a consumer group's offsets are the **offset resumption frontier**
(:func:`partition_resumption`): the positions a restart never reads below. Several
replicas read one topic each on its own, so what is committed is their meet
(:func:`positions_meet`), and never less than what was committed before
(:func:`to_commit`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from sqlglot import exp

from dataflow_operator.core.errors import InvalidSpec
from dataflow_operator.core.sql import parse_sql
from dataflow_operator.core.time import Frontier, Timestamp

__all__ = [
    "DRIVER_RECORDS",
    "RANGE_RECORDS",
    "OffsetRange",
    "PartitionRead",
    "Positions",
    "RangeRead",
    "RangesRead",
    "admitted",
    "check_read_once",
    "kafka_upper",
    "merge_ranges",
    "partition_resumption",
    "plan_ranges",
    "positions_meet",
    "sequence_of",
    "times_read",
    "to_commit",
    "upstream_lag",
]

Positions = Mapping[int, int]
"""Partition → the next offset to read (every record below it is read)."""


@dataclass(frozen=True, slots=True)
class PartitionRead:
    """What one batch read of one partition.

    ``end`` is the position after the batch, ``high`` the partition's high watermark
    (the offset the next record produced will get) when it was fetched, ``newest`` the
    newest time among the records read (``None``: none was read).
    """

    partition: int
    end: int
    high: int
    newest: Timestamp | None = None

    @property
    def caught_up(self) -> bool:
        """Whether every record the partition had when it was fetched is read."""
        return self.end >= self.high


def kafka_upper(
    previous: Timestamp,
    reads: Iterable[PartitionRead],
    *,
    now: Timestamp | None = None,
    expiration: Timestamp | None = None,
) -> Timestamp:
    """The frontier after a batch that read ``reads``, from ``previous``.

    ``now`` is the clock's time on a wall-clock timeline (``None`` on another timeline):
    caught-up partitions allow the frontier up to ``now + 1``, and nothing past it. A
    partition with records waiting holds it at its newest time read + 1 (``previous`` if
    it read none). The result never goes below ``previous`` and never past
    ``expiration``.
    """
    reads = list(reads)
    bounds = [
        previous if read.newest is None else read.newest + 1 for read in reads if not read.caught_up
    ]
    if now is not None:  # on the wall clock, never past it
        bounds.append(now + 1)
    if bounds:
        upper = min(bounds)
    else:  # every partition caught up, no clock: the newest time read anywhere
        newest = [read.newest for read in reads if read.newest is not None]
        upper = max(newest) + 1 if newest else previous
    upper = max(previous, upper)
    if expiration is not None:
        upper = min(upper, max(previous, expiration))
    return upper


def admitted(times: Sequence[Timestamp], expiration: Timestamp | None) -> int:
    """How many of a partition's records (their times, in offset order) a batch may read:
    all those before the first at or past ``expiration`` (``None``: all)."""
    if expiration is None:
        return len(times)
    for count, time in enumerate(times):
        if time >= expiration:
            return count
    return len(times)


def sequence_of(positions: Positions) -> int:
    """One number that grows whenever any partition's position does: the sum of the
    positions. The ingested collection keys its parts by it, as it keys a file source's
    by the files read."""
    return sum(positions.values())


def partition_resumption(
    remap: Sequence[tuple[Positions, Timestamp]], frontier: Frontier
) -> dict[int, int]:
    """The positions a restart at ``frontier`` never reads below: those of the last remap
    entry (positions after a batch, and the upper it reached) whose upper is at or below
    the frontier; empty when none is.

    The remap log is monotone: positions and uppers only grow from one entry to the next.
    """
    best: dict[int, int] = {}
    for positions, upper in remap:
        if frontier.lower is None or upper <= frontier.lower:
            for partition, position in positions.items():
                best[partition] = max(best.get(partition, 0), position)
    return best


def positions_meet(reports: Sequence[Positions | None]) -> dict[int, int] | None:
    """The positions every reader has reached: per partition, the least; a partition one
    of them has not read yet is left out. ``None`` when there is no reader or one of them
    has reported nothing (it may still need everything)."""
    if not reports or any(report is None for report in reports):
        return None
    known = [report for report in reports if report is not None]
    partitions = set(known[0])
    for report in known[1:]:
        partitions &= set(report)
    return {p: min(report[p] for report in known) for p in sorted(partitions)}


def to_commit(meet: Positions, committed: Positions) -> dict[int, int]:
    """The offsets to commit to the consumer group: the partitions whose meet is past
    what is committed (a group's offsets never move back; one never committed is
    absent from ``committed``)."""
    return {
        partition: position
        for partition, position in sorted(meet.items())
        if position > committed.get(partition, -1)
    }


def upstream_lag(positions: Positions, highs: Positions) -> int:
    """Records the topic has that are not read yet: per partition its high watermark less
    its position (a partition never read counts from offset 0), summed."""
    return sum(max(0, high - positions.get(partition, 0)) for partition, high in highs.items())


def times_read(tree: exp.Query, source: str) -> int:
    """How many times a query reads relation ``source``: each reference, one inside a CTE
    once per use of the CTE (a recursive CTE's reference to itself is no use).

    A kafka source is fetched by one reader per reference, each writing the source's one
    ingested collection: a dataflow may read it once (a second reader may then read it
    through the first dataflow's output).
    """

    def uses(relation: str, inside: frozenset[str]) -> int:
        count = 0
        for table in tree.find_all(exp.Table):
            if table.name.lower() != relation or isinstance(table.parent, exp.CTE):
                continue
            cte = table.find_ancestor(exp.CTE)
            if cte is None:
                count += 1
            elif (name := cte.alias_or_name.lower()) in inside:
                continue  # a recursive CTE's reference to itself: its anchor reads once
            else:
                count += uses(name, inside | {name})
        return count

    return uses(source.lower(), frozenset())


def check_read_once(sql: str, sources: Sequence[str], kafka: Sequence[str]) -> None:
    """Raise :class:`~dataflow_operator.core.errors.InvalidSpec` (field ``spec.sql``) when
    the query over ``sources`` reads one of the ``kafka`` sources more than once; a query
    that does not parse is left to the SQL checks."""
    if not kafka:
        return
    try:
        tree = parse_sql(sql, sources).tree
    except InvalidSpec:
        return
    for name in kafka:
        if (count := times_read(tree, name)) > 1:
            raise InvalidSpec(
                f'source "{name}": a kafka source may be read once by a dataflow, this SQL '
                f"reads it {count} times; read it in a dataflow of its own and use that "
                "dataflow as the source",
                field="spec.sql",
            )


@dataclass(frozen=True, slots=True)
class OffsetRange:
    """A slice of one partition a task reads: offsets ``start`` up to ``end`` (excluded);
    ``index`` is its task's number in the batch (its part of the ingested collection)."""

    index: int
    partition: int
    start: int
    end: int


@dataclass(frozen=True, slots=True)
class RangeRead:
    """What a task read of its :class:`OffsetRange`: the position it ``reached`` (the
    range's end when it read it all), the newest time among its records (``None``: it
    read none) and, when it stopped before a record at or past the expiration, that
    record's offset and time (``held``)."""

    index: int
    reached: int
    newest: Timestamp | None = None
    held: tuple[int, Timestamp] | None = None


@dataclass(frozen=True, slots=True)
class RangesRead:
    """A batch's ranges put together, per partition in offset order: the positions after
    it, the partitions' reads (for :func:`kafka_upper`), the first record held back at
    the expiration (partition, offset, time), and the ranges whose records the batch
    keeps (those after a gap — a range cut short or held — are left for the next batch)."""

    positions: dict[int, int]
    reads: list[PartitionRead]
    held: tuple[int, int, Timestamp] | None
    kept: frozenset[int]


RANGE_RECORDS = 250_000
"""Records one task reads at most: a task holds its range's records in memory while it
parses them, so a large batch is cut into more ranges than there are task slots."""
DRIVER_RECORDS = 100_000
"""Records a batch the driver fetches itself holds at most (``maxRecordsPerBatch`` may
allow more): it holds them all in the driver's memory and reads them in one thread."""


def plan_ranges(
    positions: Positions,
    highs: Positions,
    max_records: int,
    slots: int,
    range_records: int = RANGE_RECORDS,
) -> list[OffsetRange]:
    """The offset ranges of one batch: from each partition's position towards its high
    watermark, at most ``max_records`` in all, shared fairly between the partitions that
    have records waiting (none gets more than it has; what one cannot take goes to the
    others), then cut into ranges of at most ⌊taken / ``slots``⌋ records (at least one)
    so that every one of ``slots`` task slots gets work, and at most ``range_records``.
    Deterministic: the same arguments give the same ranges."""
    waiting = {
        p: highs[p] - positions.get(p, 0) for p in sorted(highs) if highs[p] > positions.get(p, 0)
    }
    taken = dict.fromkeys(waiting, 0)
    budget = max(0, max_records)
    while budget > 0:
        hungry = [p for p in waiting if taken[p] < waiting[p]]
        if not hungry:
            break
        share = max(1, budget // len(hungry))
        for p in hungry:
            more = min(share, waiting[p] - taken[p], budget)
            taken[p] += more
            budget -= more
            if budget == 0:
                break
    total = sum(taken.values())
    if total == 0:
        return []
    size = min(max(1, range_records), max(1, total // max(1, slots)))
    ranges: list[OffsetRange] = []
    for p, count in taken.items():
        start, end = positions.get(p, 0), positions.get(p, 0) + count
        for at in range(start, end, size):
            ranges.append(OffsetRange(len(ranges), p, at, min(at + size, end)))
    return ranges


def merge_ranges(
    positions: Positions,
    highs: Positions,
    ranges: Sequence[OffsetRange],
    reads: Iterable[RangeRead],
) -> RangesRead:
    """Put a batch's range reads together (see :class:`RangesRead`).

    A partition advances through its ranges in offset order while each was read to its
    end; the first one cut short (a slow broker) or held (a record at or past the
    expiration) ends it there, and the ranges after it are not kept: their records are
    read again by a later batch, so nothing is read twice or skipped.
    """
    by_index = {read.index: read for read in reads}
    after = {p: positions.get(p, 0) for p in highs}
    newest: dict[int, Timestamp] = {}
    stopped: set[int] = set()
    held: tuple[int, int, Timestamp] | None = None
    kept: set[int] = set()
    for slice_ in sorted(ranges, key=lambda r: (r.partition, r.start)):
        p = slice_.partition
        read = by_index.get(slice_.index)
        if p in stopped or read is None or slice_.start != after[p]:
            stopped.add(p)
            continue
        kept.add(slice_.index)
        after[p] = read.reached
        if read.newest is not None:
            newest[p] = max(newest.get(p, read.newest), read.newest)
        if read.held is not None and held is None:
            held = (p, *read.held)
        if read.held is not None or read.reached < slice_.end:
            stopped.add(p)
    partition_reads = [
        PartitionRead(p, after[p], max(highs[p], after[p]), newest.get(p)) for p in sorted(after)
    ]
    return RangesRead(after, partition_reads, held, frozenset(kept))
