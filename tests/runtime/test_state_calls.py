"""Many state calls per round trip (:mod:`.state_calls`) against Spark's real state server:
what they write is what Spark reads back, with more calls than one window and values
larger than a socket's buffer (a read's answers pile up while its requests are written)."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from pyspark import cloudpickle
from pyspark.sql import SparkSession
from pyspark.sql.streaming.stateful_processor import StatefulProcessor

from dataflow_operator.runtime.strategies.state_calls import (
    WINDOW,
    _client,
    get_values,
    remove_keys,
    update_values,
)

pytestmark = pytest.mark.spark

KEYS = 3 * WINDOW + 7


def _value(n: int) -> bytes:
    return bytes([n % 251]) * (300_000 if n % 50 == 0 else 10 + n)  # some over 256 KiB


class ManyCalls(StatefulProcessor):
    """Writes, reads, removes and reads again KEYS keys; yields what each step saw."""

    def init(self, handle: Any) -> None:
        self.state = handle.getMapState("m", "k STRING", "v BINARY")

    def handleInputRows(
        self,
        key: Any,
        rows: Iterator[pd.DataFrame],
        timerValues: Any,  # noqa: N803 - Spark passes these by name
    ) -> Iterator[pd.DataFrame]:
        for _ in rows:
            pass
        keys = [(f"k{n}",) for n in range(KEYS)]
        update_values(self.state, [(k, (_value(n),)) for n, k in enumerate(keys)])
        read = get_values(self.state, keys)
        written = all(v == (_value(n),) for n, v in enumerate(read))
        one_by_one = all(self.state.getValue(k) == (_value(n),) for n, k in enumerate(keys))
        remove_keys(self.state, keys[::2])
        after = get_values(self.state, [*keys, ("never written",)])
        removed = all(v is None for v in after[::2]) and after[-1] is None
        kept = all(v == (_value(n),) for n, v in enumerate(after[:-1]) if n % 2)
        pipelined = _client(self.state) is not None  # not the calls one by one
        checks = ["pipelined", "written", "one by one", "removed", "kept"]
        yield pd.DataFrame({"check": checks, "ok": [pipelined, written, one_by_one, removed, kept]})

    def close(self) -> None:
        """Nothing to release."""


def test_calls_written_many_at_a_time_do_what_calls_one_at_a_time_do(
    spark: SparkSession, tmp_path: Path
) -> None:
    cloudpickle.register_pickle_by_value(sys.modules[__name__])  # the workers cannot import tests
    spark.range(1).selectExpr("id", "0 AS g").write.parquet(str(tmp_path / "in"))
    frame = spark.readStream.schema("id BIGINT, g INT").parquet(str(tmp_path / "in"))
    checked = frame.groupBy("g").transformWithStateInPandas(
        ManyCalls(), "check STRING, ok BOOLEAN", "Update", "None"
    )
    seen: list[tuple[str, bool]] = []
    query = (
        checked.writeStream.foreachBatch(
            lambda batch, _: seen.extend((r.check, r.ok) for r in batch.collect())
        )
        .option("checkpointLocation", str(tmp_path / "checkpoint"))
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination(120)
    assert sorted(seen) == [
        ("kept", True),
        ("one by one", True),
        ("pipelined", True),
        ("removed", True),
        ("written", True),
    ]
