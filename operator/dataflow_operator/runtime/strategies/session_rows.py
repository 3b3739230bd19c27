"""A session window's stateful processor: each partition's rows by time, and the change of
their sessions when rows come and go.

Light to import, as :mod:`.top_n_rows` is (Spark's pre-init runner unpickles the
processor in a new Python process at every query start): pandas only where rows are
handled. See :mod:`.sessions` for the query around it and
:mod:`dataflow_operator.core.session` for the shape.

Rows whose times are at most the gap apart are in one session, which runs from its first
time to its last time plus the gap. A row's change at time ``t`` can only change the
sessions that have a row within the gap of ``t`` (it joins them into one, or its
retraction splits one); every other session keeps its rows and its bounds. So a change
re-reads only those sessions, before and after it, and emits the difference.
"""

from __future__ import annotations

import bisect
from collections import Counter
from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING

from dataflow_operator.runtime.strategies.partition_rows import PartitionRows

if TYPE_CHECKING:
    pass

__all__ = ["PartitionSessions", "SessionRows", "Sessioned"]

Update = tuple[str, str, int, int]
"""One held input update: partition JSON, row JSON, the row's time (µs), diff."""

Sessioned = tuple[str, int, int]
"""A row in its session: row JSON, the session's start and end (µs)."""

_SEPARATOR = "\x1f"
"""Between a stored entry's time and its row: JSON text escapes it in strings."""


class PartitionSessions:
    """One partition's rows: ``rows`` maps ``"<time>\\x1f<row JSON>"`` to its multiplicity
    (as stored), ``entries`` holds the rows of positive multiplicity as ``(time, row)``
    in time order, which is what sessions are made of."""

    def __init__(self, rows: dict[str, int], gap: int) -> None:
        self.rows = rows
        self.gap = gap
        self.entries: list[tuple[int, str]] = sorted(
            _parsed(item) for item, count in rows.items() if count > 0
        )

    def change(self, time: int, row: str, diff: int) -> None:
        """Add ``diff`` to the multiplicity of ``row`` at ``time``."""
        item = f"{time}{_SEPARATOR}{row}"
        before = self.rows.get(item, 0)
        after = before + diff
        if after:
            self.rows[item] = after
        else:
            self.rows.pop(item, None)
        if before <= 0 < after:
            bisect.insort(self.entries, (time, row))
        elif after <= 0 < before:
            del self.entries[bisect.bisect_left(self.entries, (time, row))]

    def around(self, times: Iterable[int]) -> Counter[Sessioned]:
        """The rows, with their sessions' bounds, of every session that has a row within
        the gap of one of ``times`` (a row of multiplicity ``n`` counted ``n`` times)."""
        spans: list[tuple[int, int]] = []
        for time in sorted(set(times)):
            low = bisect.bisect_left(self.entries, time - self.gap, key=_time)
            high = bisect.bisect_right(self.entries, time + self.gap, key=_time)
            if low < high:
                spans.append((self._first_of_session(low), self._last_of_session(high - 1)))
        out: Counter[Sessioned] = Counter()
        reached = -1  # spans are whole sessions: one already read is not read again
        for first, last in spans:
            for start, end in self._sessions(max(first, reached + 1), last):
                bounds = (self.entries[start][0], self.entries[end][0] + self.gap)
                for time, row in self.entries[start : end + 1]:
                    out[(row, *bounds)] += self.rows[f"{time}{_SEPARATOR}{row}"]
            reached = max(reached, last)
        return out

    def _first_of_session(self, index: int) -> int:
        while index > 0 and self.entries[index][0] - self.entries[index - 1][0] <= self.gap:
            index -= 1
        return index

    def _last_of_session(self, index: int) -> int:
        last = len(self.entries) - 1
        while index < last and self.entries[index + 1][0] - self.entries[index][0] <= self.gap:
            index += 1
        return index

    def _sessions(self, first: int, last: int) -> Iterator[tuple[int, int]]:
        """The sessions from entry ``first`` to entry ``last`` (both a session's bound), as
        index ranges."""
        start = first
        while start <= last:
            end = self._last_of_session(start)
            yield start, end
            start = end + 1


class SessionRows(PartitionRows):
    """Each partition's rows by time; the change of their sessions once the frontier
    passes a time.

    Input (by position): ``__key, __row, __event, __time, __diff, __bucket`` (``__event``:
    the row's time in its session, µs). Output: ``__row, __start, __end, __time,
    __diff``.
    """

    value_type = int
    output_width = 5

    def __init__(self, gap: int) -> None:
        self.gap = gap

    def apply(self, due: list[tuple[int, list[Update]]]) -> list[tuple[str, int, int, int, int]]:
        """Apply each due time's updates in time order (each partition read and written
        once); the changes of the sessioned rows they cause, as ``(row, start, end, time,
        diff)``."""
        keys = {partition.encode() for _, updates in due for partition, _, _, _ in updates}
        stored = self.partitions.load(keys)
        partitions = {key: PartitionSessions(stored.get(key, {}), self.gap) for key in keys}
        out: list[tuple[str, int, int, int, int]] = []
        for time, updates in due:
            touched: dict[bytes, list[Update]] = {}
            for update in updates:
                touched.setdefault(update[0].encode(), []).append(update)
            for key, changes in touched.items():
                sessions = partitions[key]
                times = [event for _, _, event, _ in changes]
                before = sessions.around(times)
                for _, row, event, diff in changes:
                    sessions.change(event, row, diff)
                after = sessions.around(times)
                after.subtract(before)
                out += [(row, start, end, time, n) for (row, start, end), n in after.items() if n]
        for key, sessions in partitions.items():
            if sessions.rows:
                self.partitions.set(key, sessions.rows)
            else:
                self.partitions.delete(key)
        self.partitions.store()
        return out


def _parsed(item: str) -> tuple[int, str]:
    time, row = item.split(_SEPARATOR, 1)
    return int(time), row


def _time(entry: tuple[int, str]) -> int:
    return entry[0]
