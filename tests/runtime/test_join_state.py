"""The join's state machine (:class:`ArrangedJoin`) without Spark: a fake state handle,
batches of random updates, and a nested-loop join of the consolidated inputs as oracle."""

from __future__ import annotations

import json
import math
import pickle
import random
from collections import Counter
from collections.abc import Iterator
from itertools import pairwise
from typing import Any

import pandas as pd
import pyarrow as pa
import pytest

from dataflow_operator.core.changelog import DIFF, TIME
from dataflow_operator.runtime.strategies import output_slices
from dataflow_operator.runtime.strategies.arrangement import ArrangedJoin
from dataflow_operator.runtime.strategies.columns import BUCKET, KEY, ROW, SIDE
from dataflow_operator.runtime.strategies.join_rows import (
    FRAGMENT_LIMIT,
    INLINE_ROWS,
    MERGE_RATIO,
    META,
    UNMERGED,
    load_meta,
    merge_phase,
)
from dataflow_operator.runtime.strategies.packed_rows import pack

Row = tuple[Any, ...]


class FakeMapState:
    """What ``handle.getMapState`` returns, in memory (values pickled by the processor)."""

    def __init__(self) -> None:
        self.values: dict[tuple[Any, ...], tuple[Any, ...]] = {}

    def exists(self) -> bool:
        return bool(self.values)  # any entry: at least what Spark's per-key answer says

    def getValue(self, key: tuple[Any, ...]) -> tuple[Any, ...] | None:
        return self.values.get(key)

    def updateValue(self, key: tuple[Any, ...], value: tuple[Any, ...]) -> None:
        self.values[key] = value

    def removeKey(self, key: tuple[Any, ...]) -> None:
        self.values.pop(key, None)

    def iterator(self) -> Iterator[tuple[tuple[Any, ...], tuple[Any, ...]]]:
        return iter(list(self.values.items()))

    def keys(self) -> Iterator[tuple[Any, ...]]:
        return iter(list(self.values))

    def clear(self) -> None:
        self.values.clear()


class FakeValueState:
    """What ``handle.getValueState`` returns, in memory."""

    def __init__(self) -> None:
        self.value: tuple[Any, ...] | None = None

    def exists(self) -> bool:
        return self.value is not None

    def get(self) -> tuple[Any, ...] | None:
        return self.value

    def update(self, value: tuple[Any, ...]) -> None:
        self.value = value

    def clear(self) -> None:
        self.value = None


class FakeHandle:
    """A processor's state handle for one grouping key: each state by its name."""

    def __init__(self) -> None:
        self.maps: dict[str, FakeMapState] = {}
        self.values: dict[str, FakeValueState] = {}

    def getMapState(self, name: str, *_: Any) -> FakeMapState:
        return self.maps.setdefault(name, FakeMapState())

    def getValueState(self, name: str, *_: Any) -> FakeValueState:
        return self.values.setdefault(name, FakeValueState())


def _key(row: dict[str, Any]) -> str | None:
    key = (row["k"], row["s"])
    return None if None in key else json.dumps(key)


class FakeTimerValues:
    def __init__(self, watermark: int) -> None:
        self.watermark = watermark

    def getCurrentWatermarkInMs(self) -> int:
        return self.watermark


SPARK_SCHEMA = pa.schema(
    [
        (SIDE, pa.int32()),
        (KEY, pa.string()),
        (ROW, pa.string()),
        (TIME, pa.int64()),
        (DIFF, pa.int64()),
        (BUCKET, pa.int32()),
    ]
)
"""The join's input as Spark hands it to :func:`pack`."""


def _run(
    processor: ArrangedJoin,
    updates: list[tuple[int, dict[str, Any], int, int]],
    watermark: int,
) -> list[Any]:
    """The processor's output rows for ``updates`` (see :func:`_frames`)."""
    out = _frames(processor, updates, watermark)
    return [tuple(r) for f in out for r in f.itertuples(index=False)]


def _frames(
    processor: ArrangedJoin,
    updates: list[tuple[int, dict[str, Any], int, int]],
    watermark: int,
) -> list[pd.DataFrame]:
    """Hand ``updates`` to the processor as Spark does: packed (two Arrow batches, so
    that the processor reads more than one pack); the frames it yields."""
    frame = pd.DataFrame(
        [
            (side, _key(row), json.dumps(row, sort_keys=True), time, diff, 0)
            for side, row, time, diff in updates
        ],
        columns=[SIDE, KEY, ROW, TIME, DIFF, BUCKET],
    )
    half = len(frame) // 2
    batches = [
        pa.RecordBatch.from_pandas(part, SPARK_SCHEMA, preserve_index=False)
        for part in (frame[:half], frame[half:])
    ]
    frames: Iterator[pd.DataFrame] = (packed.to_pandas() for packed in pack(batches))
    return list(processor.handleInputRows((0,), frames, FakeTimerValues(watermark)))


def _expected(
    inputs: list[tuple[int, dict[str, Any], int, int]], time: int, preserves: tuple[bool, bool]
) -> Counter[tuple[str | None, str | None]]:
    sides: list[Counter[str]] = [Counter(), Counter()]
    for side, row, at, diff in inputs:
        if at <= time:
            sides[side][json.dumps(row, sort_keys=True)] += diff
    result: Counter[tuple[str | None, str | None]] = Counter()
    matched: list[set[str]] = [set(), set()]
    for left, m in (+sides[0]).items():
        for right, n in (+sides[1]).items():
            lk, rk = _key(json.loads(left)), _key(json.loads(right))
            if lk is not None and lk == rk:
                result[(left, right)] += m * n
                matched[0].add(left)
                matched[1].add(right)
    for side in (0, 1):
        if preserves[side]:
            for row, m in (+sides[side]).items():
                if row not in matched[side]:
                    result[(row, None) if side == 0 else (None, row)] += m
    return _nonzero(result)


LAYOUTS = {
    "inline": {},
    "fragments": {"inline_rows": 0, "fragment_limit": 3},
    "mixed": {"inline_rows": 1, "fragment_limit": 2},
    "tails": {"inline_rows": 2, "fragment_limit": 3},
}
"""How the processor lays a key's rows out (:mod:`~dataflow_operator.runtime.strategies.join_rows`):
as in production (these tests' keys have few rows: inline), every side in fragments (no
tail), and sides moving between inline and fragments with tails of one or two rows."""


@pytest.mark.parametrize("layout", sorted(LAYOUTS))
@pytest.mark.parametrize("seed", range(40))
@pytest.mark.parametrize("preserves", [(False, False), (True, False), (False, True), (True, True)])
def test_join_state_matches_a_nested_loop_join(
    seed: int, preserves: tuple[bool, bool], layout: str
) -> None:
    """Each side advances on its own: one side's update may come after the other side's
    updates at later times, as when two sources are read in different batches."""
    rng = random.Random(seed)
    processor = ArrangedJoin(preserves, **LAYOUTS[layout])
    handle = FakeHandle()
    processor.init(handle)
    present: list[list[tuple[dict[str, Any], int]]] = [[], []]
    uppers = [0, 0]
    inputs: list[tuple[int, dict[str, Any], int, int]] = []
    emitted: list[Any] = []
    checked = 0  # every time below it was checked against the oracle after a batch
    for _ in range(6):
        watermark = min(uppers) - 1
        updates = []
        for side in (0, 1):
            if rng.random() < 0.3:
                continue  # this side has nothing new in this batch
            last = uppers[side]
            for _ in range(rng.randint(1, 6)):
                time = uppers[side] + rng.randint(0, 15)
                last = max(last, time + 1)
                if present[side] and rng.random() < 0.4:
                    row, since = present[side].pop(rng.randrange(len(present[side])))
                    updates.append((side, row, max(time, since), -1))
                    last = max(last, since + 1)
                else:
                    row = {
                        "k": rng.choice([None, 1, 2]),
                        "s": rng.choice([None, "x", "y"]),
                        "v": rng.randrange(3),
                        "side": side,
                    }
                    present[side].append((row, time))
                    updates.append((side, row, time, 1))
            uppers[side] = last
        # Each side's updates come at or after its upper, so the oracle's answer below
        # ``checked`` stays as it was checked: the new output must not change it there
        # (it consolidates to nothing at each earlier time), and only the times the
        # frontier newly passed are compared.
        assert all(at >= checked for _, _, at, _ in updates)
        inputs += updates
        new = _run(processor, updates, watermark)
        emitted += new
        earlier: Counter[tuple[Any, ...]] = Counter()
        for left, right, at, diff in new:
            if at < checked:
                earlier[(left, right, at)] += diff
        assert not _nonzero(earlier), (seed, checked)
        for time in range(checked, min(uppers)):
            got: Counter[tuple[str | None, str | None]] = Counter()
            for left, right, at, diff in emitted:
                if at <= time:
                    got[(left, right)] += diff
            assert _nonzero(got) == _expected(inputs, time, preserves), (seed, time)
        checked = min(uppers)
    assert uppers != [0, 0]
    if not any(r for r, _ in present[0] if _key(r)) and not any(
        r for r, _ in present[1] if _key(r)
    ):
        return
    assert handle.maps["arrangement"].values  # the arrangement holds the keyed rows


def _nonzero(counts: Counter[Any]) -> dict[Any, int]:
    return {k: v for k, v in counts.items() if v}


class CountingMapState(FakeMapState):
    """A fake ``MapState`` that records the keys read and written."""

    def __init__(self) -> None:
        super().__init__()
        self.read: list[tuple[Any, ...]] = []
        self.written: list[tuple[Any, ...]] = []

    def getValue(self, key: tuple[Any, ...]) -> tuple[Any, ...] | None:
        self.read.append(key)
        return super().getValue(key)

    def updateValue(self, key: tuple[Any, ...], value: tuple[Any, ...]) -> None:
        self.written.append(key)
        super().updateValue(key, value)


def _fact(i: int, key: int) -> dict[str, Any]:
    return {"k": key, "s": "x", "v": i, "side": 0}


def test_an_insert_reads_the_other_sides_rows_not_its_own() -> None:
    """Many facts of one key, then one more a batch: each batch reads the key's meta (which
    holds the dimension's one row) alone, not the facts already stored, and writes the
    meta (the new fact in its side's tail) until the tail is full, then one fragment."""
    processor = ArrangedJoin((False, False))
    handle = FakeHandle()
    state = handle.maps["arrangement"] = CountingMapState()
    processor.init(handle)
    dimension = {"k": 1, "s": "x", "v": 0, "side": 1}
    facts = [(0, _fact(i, 1), 1, 1) for i in range(100)]
    assert len(_run(processor, [*facts, (1, dimension, 1, 1)], 1)) == 100
    written: list[list[int]] = []
    for batch in range(1, INLINE_ROWS + 3):
        state.read.clear()
        state.written.clear()
        joined = _run(processor, [(0, _fact(100 + batch, 1), 2 + batch, 1)], 2 + batch)
        assert [(json.loads(left)["v"], t, d) for left, _, t, d in joined] == [
            (100 + batch, 2 + batch, 1)
        ]
        assert [key[1] for key in state.read] == [-1]  # the meta alone
        written.append(sorted(key[2] for key in state.written))
    # The meta alone, but once: the tail's 17th row makes it the second fragment.
    assert written == [[0]] * INLINE_ROWS + [[0, 2], [0]]
    state.read.clear()
    # The dimension changes: every fact joins the change, so the facts are read.
    retracted = _run(processor, [(1, dimension, 30, -1)], 30)
    assert sum(d for *_, d in retracted) == -(100 + INLINE_ROWS + 2)
    assert {key[1] for key in state.read} == {-1, 0}


@pytest.mark.slow
def test_a_growing_side_is_merged_geometrically_not_rewritten_whole() -> None:
    """A key's facts arrive a few a batch for hundreds of batches: each full tail becomes a
    fragment that, once there are UNMERGED, takes in the newer fragments, so their sizes
    fall by MERGE_RATIO or more from the oldest to the newest (but for the newest few),
    there are about log2 of the rows of them (never FRAGMENT_LIMIT: the side is never read
    whole), and a fact is rewritten about that many times, where merging all fragments at
    FRAGMENT_LIMIT rewrote it once per 16 added."""
    processor = ArrangedJoin((False, False), inline_rows=2, fragment_limit=FRAGMENT_LIMIT)
    handle = FakeHandle()
    state = handle.maps["arrangement"] = CountingMapState()
    processor.init(handle)
    _run(processor, [(1, {"k": 1, "s": "x", "v": 0, "side": 1}, 1, 1)], 1)
    batches, per_batch = 600, 3
    rewritten = most = 0
    for batch in range(batches):
        state.written.clear()
        state.read.clear()
        facts = [(0, _fact(batch * per_batch + i, 1), 2 + batch, 1) for i in range(per_batch)]
        assert len(_run(processor, facts, 2 + batch)) == per_batch
        assert {key[1] for key in state.read} <= {-1, 0}  # the meta, its own newest fragments
        fragments = [key for key in state.written if key[1] == 0]
        rewritten += sum(len(pickle.loads(state.values[key][0])) for key in fragments)
        meta = next(value for key, value in state.values.items() if key[1] == META)
        sizes = load_meta(meta)[0].sizes
        most = max(most, len(sizes))
    rows = batches * per_batch
    assert sum(sizes) + len(load_meta(meta)[0].tail) == rows
    unmerged = UNMERGED + merge_phase(_key(_fact(0, 1)) or "")
    merged = sizes[: len(sizes) - (unmerged - 1)]
    assert all(older >= MERGE_RATIO * newer for older, newer in pairwise(merged))
    assert most <= unmerged + math.log2(rows) / 2
    assert most < FRAGMENT_LIMIT
    assert rewritten <= rows * (math.log2(batches) + 2)


def test_keys_growing_alike_merge_in_different_batches() -> None:
    """Facts spread evenly over many keys: each key's side gets a fragment a batch, and
    its merges come in batches its phase sets, not all keys' in the same batch."""
    processor = ArrangedJoin((False, False), inline_rows=2, fragment_limit=FRAGMENT_LIMIT)
    handle = FakeHandle()
    state = handle.maps["arrangement"] = CountingMapState()
    processor.init(handle)
    keys = range(16)
    _run(processor, [(1, {"k": k, "s": "x", "v": 0, "side": 1}, 1, 1) for k in keys], 1)
    fragments = dict.fromkeys(keys, 0)
    merging: dict[int, set[int]] = {}  # batch → the keys whose side merged in it
    for batch in range(24):
        facts = [(0, _fact(batch * 3 + i, k), 2 + batch, 1) for k in keys for i in range(3)]
        _run(processor, facts, 2 + batch)
        for k in keys:
            meta = state.values[(_key(_fact(0, k)), META, 0)]
            count = len(load_meta(meta)[0].sizes)
            if count <= fragments[k]:  # the new fragment took older ones in
                merging.setdefault(batch, set()).add(k)
            fragments[k] = count
    phases = {merge_phase(_key(_fact(0, k)) or "") for k in keys}
    assert len(phases) > 1
    assert all(merging.get(batch, set()) != set(keys) for batch in range(24))
    first = {k: min(b for b, merged in merging.items() if k in merged) for k in keys}
    assert len(set(first.values())) == len(phases)  # one batch per phase


@pytest.mark.parametrize("layout", sorted(LAYOUTS))
def test_retracting_every_row_leaves_no_state(layout: str) -> None:
    """Rows inserted over many batches, many of one key (held in fragments), then all
    retracted, one side at a time: the arrangement is empty again."""
    processor = ArrangedJoin((True, True), **LAYOUTS[layout])
    handle = FakeHandle()
    processor.init(handle)
    rng = random.Random(7)
    inserted: list[tuple[int, dict[str, Any]]] = []
    for batch in range(8):
        updates = []
        for i in range(rng.randint(1, 12)):
            side = rng.randrange(2)
            row = {"k": rng.choice([1, 1, 1, 2, 3]), "s": "x", "v": batch * 100 + i, "side": side}
            inserted.append((side, row))
            updates.append((side, row, batch, 1))
        _run(processor, updates, batch)
    assert handle.maps["arrangement"].values
    for side in (0, 1):
        _run(processor, [(s, row, 20 + side, -1) for s, row in inserted if s == side], 20 + side)
    assert handle.maps["arrangement"].values == {}


def test_a_calls_output_is_handed_over_in_frames_of_bounded_size(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """One dimension row joins 25 facts at once: 25 joined updates, in frames of at most
    :data:`~.output_slices.FRAME_ROWS` (10 here), in order."""
    monkeypatch.setattr(output_slices, "FRAME_ROWS", 10)
    processor = ArrangedJoin((False, False))
    processor.init(FakeHandle())
    facts = [(0, _fact(i, 1), 1, 1) for i in range(25)]
    assert _run(processor, facts, 1) == []
    frames = _frames(processor, [(1, {"k": 1, "s": "x", "v": 0, "side": 1}, 2, 1)], 2)
    assert [len(frame) for frame in frames] == [10, 10, 5]
    joined = [json.loads(left)["v"] for frame in frames for left in frame[0]]
    assert sorted(joined) == list(range(25))
