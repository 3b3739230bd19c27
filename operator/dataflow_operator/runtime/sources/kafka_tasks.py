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

from dataflow_operator.core.kafka import OffsetRange, RangeRead
from dataflow_operator.runtime.sources.ingested import updates_table
from dataflow_operator.runtime.sources.kafka import open_reader, record_values
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
    reader = open_reader(source)
    partition, position = offsets.partition, offsets.start
    rows: list[tuple[Any, ...]] = []
    newest: int | None = None
    held: tuple[int, int] | None = None
    deadline = wall.monotonic() + RANGE_SECONDS
    try:
        while position < offsets.end and held is None:
            left = deadline - wall.monotonic()
            if left <= 0:
                break
            got, at = reader.fetch({partition: position}, offsets.end - position, left)
            for record in got:
                if record.partition != partition or not position <= record.offset < offsets.end:
                    continue
                if expiration is not None and record.timestamp >= expiration:
                    held = (record.offset, record.timestamp)
                    break
                values = record_values(source, fields, record)
                rows.append((*values, max(record.timestamp, floor), 1))
                newest = record.timestamp if newest is None else max(newest, record.timestamp)
                position = record.offset + 1
            if held is None:  # past offsets that hold no record (markers, compaction)
                position = max(position, min(at.get(partition, position), offsets.end))
    finally:
        reader.close()
    if rows:
        source.ingested.part(key, offsets.index).write_parquet(updates_table(fields, rows))
    reached = held[0] if held is not None else position
    return RangeRead(offsets.index, reached, newest, held), executor_process()


def executor_process() -> int:
    """The process id of the task's executor's Python daemon: Spark forks every Python
    worker of an executor from its one daemon, so tasks of two executors give two ids
    (and all tasks of a ``local`` application, whose one executor is the driver, one)."""
    return os.getppid()
