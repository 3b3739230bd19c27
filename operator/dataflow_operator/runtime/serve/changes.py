"""A changelog store read as a time-ordered stream of changelog lines (pure of HTTP).

:class:`ChangeReader` turns a dataflow's :class:`ChangelogStore` into :class:`Chunk` s of
``TIME<TAB>DIFF<TAB>col…`` lines, formatted by
:func:`~dataflow_operator.runtime.values.format_update` exactly as ``run`` prints them:

1. :meth:`ChangeReader.snapshot`: the contents at ``as_of`` (every update at a time
   ``<= as_of``, consolidated) as lines at time ``as_of`` whose DIFF is the row's count;
2. :meth:`ChangeReader.advance`: then every update at a time ``> as_of``, in time order,
   released only once the store's upper has passed its time (an update the dataflow
   emitted early, at a future time, waits in the reader until then).

Each chunk ends at a time boundary and carries ``complete``: every update at a time
``<= complete`` has been put in this chunk or an earlier one. That is what makes
resumption exact: a client that saw everything up to ``complete = T`` asks again with
``asOf=T&snapshot=false`` and gets the updates at times ``> T``, nothing lost or repeated.
The reader blocks on file reads: call it from a worker thread.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from itertools import groupby

import pyarrow as pa
import pyarrow.compute as pc

from dataflow_operator.runtime.changelog_store import DIFF, TIME, ChangelogStore, consolidate
from dataflow_operator.runtime.values import format_update

__all__ = ["CHUNK_BYTES", "ChangeReader", "Chunk"]

CHUNK_BYTES = 64 * 1024
"""A chunk is cut at the first time boundary past this many bytes."""


@dataclass(frozen=True, slots=True)
class Chunk:
    """Lines (each ending in a newline) and the last time they complete."""

    text: str
    complete: int


class ChangeReader:
    """Reads one store from ``as_of`` on; see the module docstring."""

    def __init__(self, store: ChangelogStore, as_of: int | None, *, snapshot: bool = True) -> None:
        self.store = store
        self.as_of = as_of
        self.with_snapshot = snapshot
        self.sent: int | None = None
        """The last complete time handed out (``None`` until :meth:`snapshot` succeeded)."""
        self._batch = -1
        self._pending: pa.Table | None = None

    def snapshot(self) -> list[Chunk] | None:
        """The contents at ``as_of`` (default: the latest complete time, upper − 1) and the
        updates already complete after it; ``None`` while the store's upper has not passed
        ``as_of`` yet (ask again after the next batch)."""
        upper = self.store.read_upper()
        if upper is None:
            return None
        as_of = upper.upper - 1 if self.as_of is None else self.as_of
        if upper.upper <= as_of:
            return None
        table = self.store.read(-1, upper.batch)
        self.as_of, self.sent, self._batch = as_of, as_of, upper.batch
        chunks: list[Chunk] = []
        if table is not None:
            times = table[TIME]
            if self.with_snapshot:
                contents = table.filter(pc.less_equal(times, as_of))
                contents = contents.set_column(
                    contents.column_names.index(TIME),
                    TIME,
                    pa.array([as_of] * contents.num_rows, contents.schema.field(TIME).type),
                )
                rows = _lines(consolidate(contents))
                lines = sorted(rows, key=lambda line: line.split("\t")[2:])  # by row
                chunks.extend(_chunks(((as_of, line) for line in lines), as_of))
            self._pending = table.filter(pc.greater(times, as_of))
        if not chunks:
            chunks.append(Chunk("", as_of))
        return chunks + self._release(upper.upper)

    def advance(self) -> list[Chunk]:
        """The updates completed since the last call, in time order (maybe none)."""
        upper = self.store.read_upper()
        if upper is None or self.sent is None:
            return []
        if upper.batch > self._batch:
            new = self.store.read(self._batch, upper.batch)
            self._batch = upper.batch
            if new is not None:
                new = new.filter(pc.greater(new[TIME], self.sent))
                self._pending = (
                    new
                    if self._pending is None
                    else pa.concat_tables([self._pending, new], promote_options="default")
                )
        return self._release(upper.upper)

    def _release(self, upper: int) -> list[Chunk]:
        """Hand out the pending updates at times ``< upper``; the rest keep waiting."""
        assert self.sent is not None
        if upper - 1 <= self.sent:
            return []
        chunks: list[Chunk] = []
        if self._pending is not None and self._pending.num_rows:
            ready = self._pending.filter(pc.less(self._pending[TIME], upper))
            self._pending = self._pending.filter(pc.greater_equal(self._pending[TIME], upper))
            updates = sorted(_updates(ready), key=lambda u: (u[0], u[1]))
            lines = ((time, format_update(time, diff, values)) for time, diff, values in updates)
            chunks.extend(_chunks(lines, upper - 1))
        self.sent = upper - 1
        return chunks or [Chunk("", upper - 1)]


def _updates(table: pa.Table) -> Iterator[tuple[int, int, tuple[object, ...]]]:
    columns = [c for c in table.column_names if c not in (TIME, DIFF)]
    for row in table.to_pylist():
        yield int(row[TIME]), int(row[DIFF]), tuple(row[c] for c in columns)


def _lines(table: pa.Table) -> Iterator[str]:
    for time, diff, values in _updates(table):
        yield format_update(time, diff, values)


def _chunks(lines: Iterator[tuple[int, str]], last: int) -> Iterator[Chunk]:
    """Lines grouped by time into chunks of about :data:`CHUNK_BYTES`; the last chunk
    completes ``last``."""
    text: list[str] = []
    size = 0
    previous: int | None = None
    for time, group in groupby(lines, key=lambda item: item[0]):
        if size >= CHUNK_BYTES and previous is not None:
            yield Chunk("".join(text), previous)
            text, size = [], 0
        for _, line in group:
            text.append(line + "\n")
            size += len(line) + 1
        previous = time
    if text:
        yield Chunk("".join(text), last)
