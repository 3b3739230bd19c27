"""A join key's rows in the join's state: few kept inline, many in fragments.

The join (:mod:`.arrangement`) keeps one ``MapState``, keyed by (join key JSON, side,
number):

- ``(key, -1, 0)``, the key's *meta*: per side, either the side's rows themselves
  (*inline*: a side of at most :data:`INLINE_ROWS` rows, such as a dimension's one row)
  or, for a side with more, the row counts of the fragments holding them, the rows
  added since the last fragment (its *tail*, at most :data:`INLINE_ROWS` rows) and its
  total multiplicity per time (:class:`StoredSide`);
- ``(key, side, 1…n)``: a side's rows in *fragments*, each a :data:`History`; the side's
  rows are their sum and the tail's.

A batch that only inserts into a side held in fragments adds its rows to the tail
without reading the fragments: it reads the meta, which holds the other side if that
side is small (a dimension's row), and the other side's fragments otherwise, whose rows
the new ones join with. So an insert costs what the other side holds for its key, not
what its own side holds (the many facts of that dimension): the cost of a batch follows
what changed, not the history. A full tail becomes a fragment; once the side has
:data:`UNMERGED` fragments (a few more for some keys, so that keys growing alike do not
all merge in the same batch: :data:`MERGE_PHASES`), it takes in the newest ones while
they are not :data:`MERGE_RATIO` times larger (the meta keeps each fragment's row count,
so the batch knows which to read): fragments shrink geometrically from the oldest to the
newest, a side of n rows has about log2(n / 16) of them, and a row is rewritten about
that many times in its life (rewritten whole every :data:`FRAGMENT_LIMIT` fragments
instead, a row is rewritten once per 16 fragments added: a cost that grows with the
side). A side is read whole, and written back as one fragment or inline, when the other
side changes (its rows join the change), when a batch retracts from it (so that a side
whose rows are all retracted leaves nothing behind), and when it has
:data:`FRAGMENT_LIMIT` fragments.

While its side is not read, the rows a batch does not change stand in as one row,
:data:`ALL_ROWS`, with the side's total multiplicity per time: that is all the join needs
of them then (whether the side has a row for the key at a time, for an outer join's
null-extended rows), and the join's algebra runs on it unchanged.
"""

from __future__ import annotations

import pickle
import zlib
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

__all__ = [
    "ALL_ROWS",
    "FRAGMENT_LIMIT",
    "INLINE_ROWS",
    "MERGE_PHASES",
    "MERGE_RATIO",
    "META",
    "UNMERGED",
    "History",
    "StateKey",
    "StoredSide",
    "add_history",
    "add_row",
    "compact",
    "dump_meta",
    "load_meta",
    "merge_phase",
    "merged",
    "totals",
]

History = dict[str, dict[int, int]]
"""A side's rows for one key: row JSON → {time: diff} (no zero diffs, no empty rows).

Times at or below the one the inputs are complete through (the watermark, or the batch's
own input frontier: :func:`~.held.complete_through`) are merged into one: every update
still to come is at a later time, so they are all "before" it alike.
"""

META = -1
"""The side number of a key's meta entry."""

StateKey = tuple[str, int, int]
"""A key of the arrangement's state: join key JSON, side (:data:`META` for the meta),
number."""

INLINE_ROWS = 16
"""A side with at most this many rows for a key is kept in the key's meta."""

FRAGMENT_LIMIT = 16
"""A side with this many fragments is read whole and written back as one."""

MERGE_RATIO = 2
"""A new fragment takes in the side's newest fragments while each holds fewer than this
many times the rows taken in so far."""

UNMERGED = 8
"""A side with fewer fragments than this gets a new one as it is: while a side is small,
merging rewrites more rows than a few more fragments cost to read; a large side merged
geometrically rewrites each row about log2 of its rows times, against a cost that grows
with the side when merged whole at :data:`FRAGMENT_LIMIT` (simulated and measured:
``bench/RESULTS.md``)."""

MERGE_PHASES = 4
"""A side starts merging at :data:`UNMERGED` fragments plus its key's phase (0 to this,
exclusive: :func:`merge_phase`). Keys that grow alike (a fact stream spread evenly over a
dimension's keys) would otherwise all merge in the same batches, each then much longer
than the others (``bench/RESULTS.md``); spread over phases, those merges fall in
different batches."""

ALL_ROWS = ""
"""The row that stands in for a side's rows while they are not read (no row's JSON is
empty: a row is a JSON object)."""


def merge_phase(join_key: str) -> int:
    """The key's phase among :data:`MERGE_PHASES` (its CRC-32: the same in every process)."""
    return zlib.crc32(join_key.encode()) % MERGE_PHASES


@dataclass(slots=True)
class StoredSide:
    """What a key's meta says of one side: its rows (``inline``), or fragments of them
    (``sizes``: each one's row count, the oldest first), the rows added since the last
    one (``tail``) and their ``totals`` (multiplicity per time)."""

    inline: History | None = field(default_factory=dict)
    sizes: tuple[int, ...] = ()
    totals: dict[int, int] = field(default_factory=dict)
    tail: History = field(default_factory=dict)

    @property
    def empty(self) -> bool:
        """Whether the side has no rows for the key."""
        return self.inline == {}

    def fragment_keys(self, join_key: str, side: int, first: int = 1) -> list[StateKey]:
        """The state keys of the side's fragments, from number ``first`` on."""
        return [(join_key, side, n) for n in range(first, len(self.sizes) + 1)]

    def merged_from(self, rows: int, phase: int = 0) -> int:
        """The number of the first fragment a new one of ``rows`` rows takes in (one past
        the last: none), by :data:`MERGE_RATIO` once the side has :data:`UNMERGED` plus
        ``phase`` (its key's :func:`merge_phase`)."""
        first = len(self.sizes)
        if first < UNMERGED + phase:
            return first + 1
        while first > 0 and self.sizes[first - 1] < MERGE_RATIO * rows:
            rows += self.sizes[first - 1]
            first -= 1
        return first + 1

    def rows(self, join_key: str, side: int, fetched: Mapping[StateKey, Any] | None) -> History:
        """The side's rows: inline, or its fragments (from ``fetched``, the state's values
        read by key) and the tail merged, or when not read (``None``) the stand-in: one
        row with the side's totals (see :data:`ALL_ROWS`)."""
        if self.inline is not None:
            return self.inline
        if fetched is not None:
            keys = self.fragment_keys(join_key, side)
            return merged([fetched[key] for key in keys], self.tail)
        return {ALL_ROWS: dict(self.totals)} if self.totals else {}


def load_meta(value: tuple[bytes] | None) -> tuple[StoredSide, StoredSide]:
    """A key's meta as stored (``None``: the key has no rows)."""
    if value is None:
        return StoredSide(), StoredSide()
    left, right = pickle.loads(value[0])
    return StoredSide(*left), StoredSide(*right)


def dump_meta(sides: tuple[StoredSide, StoredSide]) -> tuple[bytes]:
    """A key's meta to store (plain tuples: nothing to import to read it back)."""
    return (pickle.dumps(tuple((s.inline, s.sizes, s.totals, s.tail) for s in sides)),)


def merged(fragments: list[tuple[bytes] | None], tail: History) -> History:
    """The rows a side's fragments and its tail hold together: a new history (the
    fragments' rows are unpickled afresh and taken over as they are; ``tail``'s copied)."""
    rows: History = {}
    for fragment in fragments:
        if fragment is None:
            raise RuntimeError("the join's state lacks a fragment its key's meta counts")
        part: History = pickle.loads(fragment[0])
        if rows:
            add_history(rows, part, take_over=True)
        else:
            rows = part
    add_history(rows, tail, take_over=False)
    return rows


def add_history(rows: History, part: History, *, take_over: bool) -> None:
    """Add ``part``'s rows to ``rows``; a row ``rows`` lacks is taken over as it is (its
    times dictionary) with ``take_over``, else copied."""
    for row, times in part.items():
        if row not in rows:
            rows[row] = times if take_over else dict(times)
            continue
        for time, diff in times.items():
            add_row(rows, row, time, diff)


def totals(history: History, watermark: int) -> dict[int, int]:
    """The total multiplicity per time of ``history``'s rows, times at or below
    ``watermark`` merged (no zeros)."""
    sums: dict[int, int] = {}
    for times in history.values():
        for time, diff in times.items():
            sums[time] = sums.get(time, 0) + diff
    single: History = {ALL_ROWS: {t: d for t, d in sums.items() if d}}
    compact(single, watermark)
    return single.get(ALL_ROWS, {})


def add_row(history: History, row: str, time: int, diff: int) -> None:
    """Add ``diff`` copies of ``row`` at ``time`` (negative: remove)."""
    times = history.setdefault(row, {})
    total = times.get(time, 0) + diff
    if total:
        times[time] = total
    else:
        times.pop(time, None)
        if not times:
            del history[row]


def compact(history: History, watermark: int) -> None:
    """Merge each row's times at or below ``watermark`` into one, at ``watermark``.

    A row with one time is left as it is, whatever the time: all times at or below the
    watermark are alike (see :data:`History`), so only a row with more than one needs
    merging. Most rows have one, so this looks at each row once and rewrites few.
    """
    for row in [row for row, times in history.items() if len(times) > 1]:
        times = history[row]
        old = [t for t in times if t <= watermark]
        if len(old) > 1:
            total = sum(times.pop(t) for t in old)
            if total:
                times[watermark] = total
            if not times:
                del history[row]
