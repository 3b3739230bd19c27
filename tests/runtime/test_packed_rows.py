"""Rows packed per bucket for a stateful operator (:mod:`.packed_rows`), without Spark."""

from __future__ import annotations

import pandas as pd
import pyarrow as pa

from dataflow_operator.runtime.strategies.columns import BUCKET
from dataflow_operator.runtime.strategies.packed_rows import PACK, pack, unpacked

SCHEMA = pa.schema([("k", pa.string()), ("n", pa.int64()), (BUCKET, pa.int32())])


def _batch(rows: list[tuple[str | None, int, int]]) -> pa.RecordBatch:
    return pa.RecordBatch.from_pylist(
        [{"k": k, "n": n, BUCKET: b} for k, n, b in rows], schema=SCHEMA
    )


def test_each_batch_packs_one_row_per_bucket_holding_exactly_its_rows() -> None:
    batches = [
        _batch([("a", 1, 2), ("b", 2, 0), ("c", 3, 2), (None, 4, 1)]),
        _batch([]),
        _batch([("d", 5, 0)]),
    ]

    packed = pa.Table.from_batches(list(pack(batches))).to_pandas()

    assert list(packed.columns) == [PACK, BUCKET]
    assert sorted(packed[BUCKET]) == [0, 0, 1, 2]  # (batch, bucket) pairs; none for the empty one
    for bucket in (0, 1, 2):
        frame = unpacked([packed[packed[BUCKET] == bucket]])
        assert frame is not None
        assert list(frame.columns) == ["k", "n"]  # the bucket column is the packed row's own
        expected = [
            (row["k"], row["n"]) for b in batches for row in b.to_pylist() if row[BUCKET] == bucket
        ]
        assert sorted(frame.itertuples(index=False, name=None), key=str) == sorted(
            expected, key=str
        )


def test_packs_of_several_frames_read_back_as_one_frame() -> None:
    packed = [
        pa.Table.from_batches(list(pack([_batch([("a", n, 0)])]))).to_pandas() for n in (1, 2)
    ]

    frame = unpacked(packed)

    assert frame is not None
    assert frame.to_dict("list") == {"k": ["a", "a"], "n": [1, 2]}


def test_no_packs_is_no_frame() -> None:
    assert unpacked([]) is None
    assert unpacked([pd.DataFrame({PACK: [], BUCKET: []})]) is None
