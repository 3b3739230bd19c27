"""Many small values per grouping key, kept in a few state entries: :class:`ChunkedMap`.

Every call to Spark's state store from a ``transformWithStateInPandas`` processor is a
round trip to the JVM, about 0.15-0.25 ms on this machine whatever the value's size. An
aggregate that keeps one entry per group makes two such calls for every group a batch
changes (read, write): 10,000 groups cost about 4 s of a batch's task time. A
:class:`ChunkedMap` keeps the entries of a grouping key (a bucket of groups) in
``2**depth`` chunks instead, each one pickled dictionary, and a batch reads and writes
each chunk it touches once.

A chunk holds about :data:`ENTRIES_PER_CHUNK` entries: when a bucket grows past that, its
depth grows, and its entries are dealt into twice (or more) as many chunks, once, which
costs a write of each entry, as a hash table's resize does. So a batch that changes few
groups of a large bucket still reads and writes only a few small chunks. An entry's chunk
is its key's CRC-32 (stable across processes, unlike Python's ``hash``) modulo the
number of chunks.
"""

from __future__ import annotations

import pickle
import zlib
from collections.abc import Iterable
from typing import Any

__all__ = ["ENTRIES_PER_CHUNK", "ChunkedMap"]

ENTRIES_PER_CHUNK = 32
"""The entries a chunk holds on average, at most, before its bucket's chunks double."""


class ChunkedMap:
    """A map of ``bytes`` keys to picklable values for the current grouping key, read with
    :meth:`load`, changed with :meth:`set` and :meth:`delete`, and written with
    :meth:`store` (once per batch of the grouping key)."""

    def __init__(self, handle: Any, name: str) -> None:
        self.chunks = handle.getMapState(name, "c INT", "entries BINARY")
        self.meta = handle.getValueState(f"{name}_meta", "depth INT, entries BIGINT")
        self._depth = 0
        self._entries = 0
        self._stored = 0
        """Entries stored when :meth:`load` ran (0: no chunk to read)."""
        self._loaded: dict[int, dict[bytes, Any]] = {}
        self._changed: set[int] = set()

    def load(self, keys: Iterable[bytes]) -> dict[bytes, Any]:
        """The stored values of ``keys`` (those stored), reading each of their chunks once;
        forgets what an earlier :meth:`load` read without :meth:`store`."""
        stored = self.meta.get()
        self._depth, self._entries = (int(stored[0]), int(stored[1])) if stored else (0, 0)
        self._stored = self._entries
        self._loaded, self._changed = {}, set()
        found: dict[bytes, Any] = {}
        for key in keys:
            chunk = self._chunk(key)
            if key in chunk:
                found[key] = chunk[key]
        return found

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
        bucket has grown past :data:`ENTRIES_PER_CHUNK` a chunk."""
        if not self._changed:
            return
        depth = self._depth
        while self._entries > ENTRIES_PER_CHUNK << depth:
            depth += 1
        if depth != self._depth:
            self._grow(depth)
        for index in self._changed:
            entries = self._loaded[index]
            if entries:
                self.chunks.updateValue((index,), (pickle.dumps(entries),))
            else:
                self.chunks.removeKey((index,))
        self.meta.update((self._depth, self._entries))
        self._changed = set()

    def _grow(self, depth: int) -> None:
        """Deal every entry of the bucket into ``2**depth`` chunks."""
        everything: dict[bytes, Any] = {}
        if self._stored:
            for (index,), (pickled,) in self.chunks.iterator():
                if index not in self._loaded:
                    everything.update(pickle.loads(pickled))
            self.chunks.clear()
        for entries in self._loaded.values():
            everything.update(entries)
        self._depth = depth
        self._loaded = {}
        for key, value in everything.items():
            self._chunk(key)[key] = value
        self._changed = set(self._loaded)

    def _index(self, key: bytes) -> int:
        return zlib.crc32(key) & ((1 << self._depth) - 1)

    def _chunk(self, key: bytes) -> dict[bytes, Any]:
        index = self._index(key)
        chunk = self._loaded.get(index)
        if chunk is None:
            stored = self.chunks.getValue((index,)) if self._stored else None
            chunk = self._loaded[index] = pickle.loads(stored[0]) if stored else {}
        return chunk
