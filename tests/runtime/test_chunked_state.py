"""A bucket's many small entries in a few state chunks (:class:`ChunkedMap`), without Spark."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pyspark import cloudpickle
from pyspark.sql import SparkSession
from pyspark.sql.streaming.stateful_processor import StatefulProcessor
from tests.runtime.test_join_state import FakeHandle, FakeMapState

from dataflow_operator.runtime.strategies.chunked_state import (
    BYTES_PER_CHUNK,
    ENTRIES_PER_CHUNK,
    ChunkedMap,
)


class CountingMapState(FakeMapState):
    """A map state that counts the calls a processor makes (each a JVM round trip)."""

    def __init__(self) -> None:
        super().__init__()
        self.calls = 0

    def getValue(self, key: tuple[Any, ...]) -> tuple[Any, ...] | None:
        self.calls += 1
        return super().getValue(key)

    def updateValue(self, key: tuple[Any, ...], value: tuple[Any, ...]) -> None:
        self.calls += 1
        super().updateValue(key, value)


def _handle() -> tuple[FakeHandle, CountingMapState]:
    handle = FakeHandle()
    chunks = handle.maps["m"] = CountingMapState()
    return handle, chunks


VALUES = st.none() | st.integers() | st.integers(0, 3000).map(lambda n: "x" * n)
BATCHES = st.lists(
    st.dictionaries(st.integers(0, 400).map(lambda k: b"k%d" % k), VALUES),
    min_size=1,
    max_size=8,
)


@settings(max_examples=60, deadline=None)
@given(batches=BATCHES)
def test_what_is_stored_is_what_a_dictionary_holds(batches: list[dict[bytes, Any]]) -> None:
    handle, _ = _handle()
    model: dict[bytes, Any] = {}
    for changes in batches:  # each batch: a new processor, as each Spark task has
        stored = ChunkedMap(handle, "m")
        found = stored.load(changes)
        assert found == {k: model[k] for k in changes if k in model}
        for key, value in changes.items():
            if value is None:
                stored.delete(key)
                model.pop(key, None)
            else:
                stored.set(key, value)
                model[key] = value
        stored.store()
        everything = ChunkedMap(handle, "m").load(b"k%d" % k for k in range(401))
        assert everything == model
        depth, entries, size = handle.values["m_meta"].get() or (0, 0, 0)
        assert entries == len(model)
        assert size == sum(len(value) for (value,) in handle.maps["m"].values.values())
        # The chunks grew with the entries and their size.
        assert len(model) <= ENTRIES_PER_CHUNK << depth
        assert size <= BYTES_PER_CHUNK << depth


def test_a_batch_reads_and_writes_each_chunk_it_touches_once() -> None:
    handle, chunks = _handle()
    first = ChunkedMap(handle, "m")
    keys = [b"group %d" % n for n in range(10_000)]
    assert first.load(keys) == {}
    for key in keys:
        first.set(key, 1)
    first.store()
    assert chunks.calls == len(chunks.values) <= 2 * 10_000 // ENTRIES_PER_CHUNK  # no reads
    assert max(len(v[0]) for v in chunks.values.values()) < 4096  # small pickles

    chunks.calls = 0
    later = ChunkedMap(handle, "m")
    changed = keys[:1000]  # more keys than chunks
    assert later.load(changed) == dict.fromkeys(changed, 1)
    for key in changed:
        later.set(key, 2)
    later.store()
    touched = len({first._index(key) for key in changed})
    assert chunks.calls == 2 * touched < len(changed)


def test_a_large_entry_is_about_alone_in_its_chunk() -> None:
    handle, chunks = _handle()
    first = ChunkedMap(handle, "m")
    keys = [b"join key %d" % n for n in range(200)]
    first.load(keys)
    for key in keys:
        first.set(key, "row" * 10_000)  # 30 kB: more than a chunk holds
    first.store()
    assert len(chunks.values) > 100  # not 200 / ENTRIES_PER_CHUNK
    chunks.calls = 0
    later = ChunkedMap(handle, "m")
    assert later.load(keys[:1]) == {keys[0]: "row" * 10_000}
    later.set(keys[0], "row")
    later.store()
    assert chunks.calls == 2  # one read, one write


class GrowingMap(StatefulProcessor):
    """Sets the keys its input rows name (``n`` keys ``k0``…) in a ChunkedMap, then yields
    how many of all keys so far it reads back with their values, and the chunks' depth."""

    def init(self, handle: Any) -> None:
        self.map = ChunkedMap(handle, "m")

    def handleInputRows(self, key: Any, rows: Any, timerValues: Any) -> Any:  # noqa: N803
        import pandas as pd

        count = max(int(n) for frame in rows for n in frame["n"])
        keys = [b"k%d" % i for i in range(count)]
        self.map.load(keys)
        for i, k in enumerate(keys):
            self.map.set(k, i)
        self.map.store()
        everything = self.map.load(b"k%d" % i for i in range(count + 10))  # read anew
        intact = everything == {b"k%d" % i: i for i in range(count)}
        depth, entries, _ = self.map.meta.get()
        yield pd.DataFrame(
            {"n": [count], "intact": [intact], "depth": [depth], "entries": [entries]}
        )

    def close(self) -> None:
        """Nothing to release."""


@pytest.mark.spark
@pytest.mark.slow
def test_a_bucket_that_grows_in_spark_keeps_every_entry(
    spark: SparkSession, tmp_path: Path
) -> None:
    cloudpickle.register_pickle_by_value(sys.modules[__name__])  # the workers cannot import tests
    seen: list[tuple[int, bool, int, int]] = []
    for count in (10, 2_000, 2_100):  # 2,000 entries: chunks dealt anew over stored ones
        spark.createDataFrame([(count, 0)], "n BIGINT, g INT").write.mode("append").parquet(
            str(tmp_path / "in")
        )
        frame = spark.readStream.schema("n BIGINT, g INT").parquet(str(tmp_path / "in"))
        output = "n BIGINT, intact BOOLEAN, depth INT, entries BIGINT"
        grown = frame.groupBy("g").transformWithStateInPandas(
            GrowingMap(), output, "Update", "None"
        )
        query = (
            grown.writeStream.foreachBatch(
                lambda batch, _: seen.extend(tuple(r) for r in batch.collect())
            )
            .option("checkpointLocation", str(tmp_path / "checkpoint"))
            .trigger(availableNow=True)
            .start()
        )
        query.awaitTermination(120)
    assert [(n, intact, entries) for n, intact, _, entries in seen] == [
        (10, True, 10),
        (2_000, True, 2_000),
        (2_100, True, 2_100),
    ]
    depths = [depth for _, _, depth, _ in seen]
    assert depths[0] == 0 < depths[1] <= depths[2]  # it grew over what was stored
