"""The executors' side of a kafka source: one task reads one offset range.

:func:`read_range` runs in a Spark task (an executor's Python worker). It fetches its
range of one partition with a client of its own, parses the values into the source's
columns, stops before the first record at or past the dataflow's expiration, and writes
its records as its part of the ingested collection (``part(key, index)``) before it
returns what it reached. The driver puts the tasks' reads together
(:mod:`.kafka_stage`). The same range read again (a batch redone) gives the same part:
a partition's records never change under their offsets.
"""

from __future__ import annotations

import os
import time as wall
from collections.abc import Mapping, Sequence
from typing import Any

import pyarrow as pa

from dataflow_operator.core.changelog import DIFF, TIME
from dataflow_operator.core.kafka import OffsetRange, RangeRead
from dataflow_operator.runtime.sources.ingested import updates_table
from dataflow_operator.runtime.sources.kafka import open_reader, record_values
from dataflow_operator.runtime.sources.kafka_client import KafkaRecord
from dataflow_operator.runtime.sources.kafka_values import arrow_values
from dataflow_operator.runtime.sources.options import NO_UNTIL, SourceOptions

__all__ = ["RANGE_SECONDS", "executor_process", "read_range"]

RANGE_SECONDS = 10.0
"""How long a task fetches its range at most (the records are below the high watermark
the driver saw, so a reachable broker serves them at once); a range cut short ends its
partition's batch there (see :func:`~dataflow_operator.core.kafka.merge_ranges`)."""


def read_range(
    options: Mapping[str, str],
    fields: Sequence[tuple[str, Any]],
    key: int,
    floor: int,
    offsets: OffsetRange,
) -> tuple[RangeRead, int]:
    """Read ``offsets``, write its records as part ``(key, offsets.index)`` (each at its
    Kafka timestamp advanced to ``floor``, diff +1), and return what was read with the
    id of the executor that read it (:func:`executor_process`). Errors (Kafka out of
    reach, a value that does not parse) are raised: the batch is then fetched by the
    driver, which reports them."""
    source = SourceOptions(dict(options))
    expiration = None if source.expiration == NO_UNTIL else source.expiration
    records, reached, held = _fetch(source, offsets, expiration)
    if records:
        source.ingested.part(key, offsets.index).write_parquet(
            _updates(source, fields, records, floor)
        )
    newest = max((record.timestamp for record in records), default=None)
    return RangeRead(offsets.index, reached, newest, held), executor_process()


def _fetch(
    source: SourceOptions, offsets: OffsetRange, expiration: int | None
) -> tuple[list[KafkaRecord], int, tuple[int, int] | None]:
    """The range's records before the first at or past ``expiration``, the position
    reached, and the held record (offset, time) if one stopped it."""
    reader = open_reader(source)
    partition, position = offsets.partition, offsets.start
    records: list[KafkaRecord] = []
    deadline = wall.monotonic() + RANGE_SECONDS
    try:
        while position < offsets.end:
            left = deadline - wall.monotonic()
            if left <= 0:
                break
            got, at = reader.fetch({partition: position}, offsets.end - position, left)
            for record in got:
                if record.partition != partition or not position <= record.offset < offsets.end:
                    continue
                if expiration is not None and record.timestamp >= expiration:
                    return records, record.offset, (record.offset, record.timestamp)
                records.append(record)
                position = record.offset + 1
            # past offsets that hold no record (transaction markers, compaction)
            position = max(position, min(at.get(partition, position), offsets.end))
    finally:
        reader.close()
    return records, position, None


def _updates(
    source: SourceOptions,
    fields: Sequence[tuple[str, Any]],
    records: Sequence[KafkaRecord],
    floor: int,
) -> pa.Table:
    """The records as updates: their values parsed (by Arrow at once where it reads them
    exactly, else one by one), each at its timestamp advanced to ``floor``, diff +1."""
    parsed = arrow_values(fields, [record.value for record in records], source.format)
    if parsed is None:
        rows = [
            (*record_values(source, fields, record), max(record.timestamp, floor), 1)
            for record in records
        ]
        return updates_table(fields, rows)
    times = pa.array([max(record.timestamp, floor) for record in records], pa.int64())
    diffs = pa.repeat(pa.scalar(1, pa.int64()), len(records))
    return parsed.append_column(TIME, times).append_column(DIFF, diffs)


def executor_process() -> int:
    """The process id of the task's executor's Python daemon: Spark forks every Python
    worker of an executor from its one daemon, so tasks of two executors give two ids
    (and all tasks of a ``local`` application, whose one executor is the driver, one)."""
    return os.getppid()
