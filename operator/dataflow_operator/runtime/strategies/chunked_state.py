"""Many values per grouping key, kept in a few state entries: :class:`ChunkedMap`.

Every call to Spark's state store from a ``transformWithStateInPandas`` processor is a
round trip to the JVM (``bench/RESULTS.md``). An operator that keeps one entry per
group, row or join key makes two such calls for each one a batch changes (read, write),
so a batch's task time grows with the groups it changes.
A :class:`ChunkedMap` keeps the entries of a grouping key (a bucket of groups) in
``2**depth`` chunks instead, each one pickled dictionary, and a batch reads and writes
each chunk it touches once.

A chunk holds about :data:`ENTRIES_PER_CHUNK` entries, or :data:`BYTES_PER_CHUNK` bytes
pickled, whichever is fewer: when a bucket grows past that, its depth grows, and its
entries are dealt into twice (or more) as many chunks, once, which costs a write of each
entry, as a hash table's resize does. So a batch that changes few entries of a large
bucket still reads and writes few small chunks, and an entry larger than a chunk (a
``min`` over many values) ends up about alone in its chunk. An entry's chunk is its
key's CRC-32 (stable across processes, unlike Python's ``hash``) modulo the number of
chunks.

It suits small entries (a group's totals, a row's counts), whose cost is the calls. A
join lays its keys' rows out its own way instead (:mod:`.join_rows`): a key's rows are
large, and chunked they cost about what they cost alone, since what a call costs then
grows with the bytes it carries; its keys' metas chunked cost more than alone (both
measured: ``bench/RESULTS.md``).
"""

from __future__ import annotations

import itertools
import pickle
import zlib
from collections.abc import Callable, Iterable
from typing import Any

from dataflow_operator.runtime.strategies.state_calls import get_values, remove_keys, update_values

__all__ = ["BYTES_PER_CHUNK", "ENTRIES_PER_CHUNK", "ChunkedMap"]

ENTRIES_PER_CHUNK = 32
"""The entries a chunk holds on average, at most, before its bucket's chunks double."""
BYTES_PER_CHUNK = 16 * 1024
"""The pickled bytes a chunk holds on average, at most, before its bucket's chunks double:
a batch that touches one entry reads and writes about this much."""


class ChunkedMap:
    """A map of ``bytes`` keys to picklable values for the current grouping key, read with
    :meth:`load`, changed with :meth:`set` and :meth:`delete`, and written with
    :meth:`store` (once per batch of the grouping key)."""

    def __init__(self, handle: Any, name: str) -> None:
        self.chunks = handle.getMapState(name, "c INT", "entries BINARY")
        self.meta = handle.getValueState(f"{name}_meta", "depth INT, entries BIGINT, size BIGINT")
        self._depth = 0
        self._entries = 0
        self._size = 0
        """The chunks' pickled bytes, all together."""
        self._stored = 0
        """Entries stored when :meth:`load` ran (0: no chunk to read)."""
        self._loaded: dict[int, dict[bytes, Any]] = {}
        self._sizes: dict[int, int] = {}
        """Each loaded chunk's pickled size as stored (0: a new one)."""
        self._changed: set[int] = set()

    def load(self, keys: Iterable[bytes]) -> dict[bytes, Any]:
        """The stored values of ``keys`` (those stored), reading each of their chunks once;
        forgets what an earlier :meth:`load` read without :meth:`store`."""
        stored = self.meta.get()
        self._depth, self._entries, self._size = (int(v) for v in stored) if stored else (0, 0, 0)
        self._stored = self._entries
        self._loaded, self._sizes, self._changed = {}, {}, set()
        wanted = list(keys)
        self._read(sorted({self._index(key) for key in wanted}))
        found: dict[bytes, Any] = {}
        for key in wanted:
            chunk = self._chunk(key)
            if key in chunk:
                found[key] = chunk[key]
        return found

    def _read(self, indices: list[int]) -> None:
        """Read the chunks ``indices`` (all their requests written at once)."""
        stored = get_values(self.chunks, [(i,) for i in indices]) if self._stored else []
        for index, value in itertools.zip_longest(indices, stored):
            self._sizes[index] = len(value[0]) if value else 0
            self._loaded[index] = pickle.loads(value[0]) if value else {}

    def set(self, key: bytes, value: Any) -> None:
        """``key``'s value from now on (a key :meth:`load` was given)."""
        chunk = self._chunk(key)
        self._entries += key not in chunk
        chunk[key] = value
        self._changed.add(self._index(key))

    def delete(self, key: bytes) -> None:
        """Forget ``key`` (a key :meth:`load` was given), if it is stored."""
        chunk = self._chunk(key)
        if key in chunk:
            del chunk[key]
            self._entries -= 1
            self._changed.add(self._index(key))

    def store(self) -> None:
        """Write the chunks changed since :meth:`load`, dealt into more chunks first if the
        bucket has grown past :data:`ENTRIES_PER_CHUNK` or :data:`BYTES_PER_CHUNK` a chunk."""
        if not self._changed:
            return
        self._grow_past(lambda depth: self._entries > ENTRIES_PER_CHUNK << depth)
        pickled = self._pickled()
        if self._grow_past(lambda depth: self._size > BYTES_PER_CHUNK << depth):
            pickled = self._pickled()
        update_values(
            self.chunks, [((i,), (value,)) for i, value in pickled.items() if value is not None]
        )
        remove_keys(self.chunks, [(i,) for i, value in pickled.items() if value is None])
        self.meta.update((self._depth, self._entries, self._size))
        self._changed = set()

    def _grow_past(self, too_full: Callable[[int], bool]) -> bool:
        """Deal the bucket into more chunks while ``too_full(depth)``; whether it did."""
        depth = self._depth
        while too_full(depth):
            depth += 1
        if depth == self._depth:
            return False
        self._grow(depth)
        return True

    def _pickled(self) -> dict[int, bytes | None]:
        """The changed chunks pickled (``None``: now empty); the size accounted."""
        pickled: dict[int, bytes | None] = {}
        for index in self._changed:
            entries = self._loaded[index]
            value = pickle.dumps(entries, protocol=pickle.HIGHEST_PROTOCOL) if entries else None
            self._size += len(value or b"") - self._sizes.get(index, 0)
            self._sizes[index] = len(value or b"")
            pickled[index] = value
        return pickled

    def _grow(self, depth: int) -> None:
        """Deal every entry of the bucket into ``2**depth`` chunks."""
        everything: dict[bytes, Any] = {}
        if self._stored:
            for (index,), (value,) in self.chunks.iterator():
                if index not in self._loaded:
                    everything.update(pickle.loads(value))
            self.chunks.clear()
        for entries in self._loaded.values():
            everything.update(entries)
        self._depth, self._size = depth, 0
        self._loaded, self._sizes = {}, {}
        for key, value in everything.items():
            index = self._index(key)
            self._loaded.setdefault(index, {})[key] = value
        self._changed = set(self._loaded)

    def _index(self, key: bytes) -> int:
        return zlib.crc32(key) & ((1 << self._depth) - 1)

    def _chunk(self, key: bytes) -> dict[bytes, Any]:
        index = self._index(key)
        if index not in self._loaded:
            self._read([index])
        return self._loaded[index]
