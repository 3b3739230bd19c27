"""What a source's batch reads: its files (items), grouped into Spark tasks.

Built in the driver when Spark plans a batch (:meth:`.reader.ChangelogReader.partitions`)
and shipped to the executors, which read them (:meth:`.reader.ChangelogReader.read`).
"""

from __future__ import annotations

from dataclasses import dataclass

from pyspark.sql.datasource import InputPartition

from dataflow_operator.runtime.sources.ingested import IngestedCollection

__all__ = ["FILES_PER_TASK", "ReadItem", "ReadTask", "read_tasks"]


@dataclass(frozen=True, slots=True)
class ReadItem:
    """One file a task reads.

    ``time`` is the time of all its rows (``None``: rows carry their own, as in
    changelogs, dataflow outputs and the ingested collection); own times below ``floor``
    are advanced to it (late updates). ``stored``: a Parquet changelog written by the
    runtime (``__time``/``__diff`` columns), not a user's file. ``members``: a table's
    files read from its latest fold (``uri`` is then the table; :mod:`.table_folds`).
    """

    uri: str
    time: int | None
    floor: int
    stored: bool = False
    members: tuple[str, ...] = ()


class ReadTask(InputPartition):
    """Files for one task, whether it also emits the heartbeat, and where it records what
    it read in the ingested collection (``None``: nothing to record, a replay)."""

    def __init__(
        self, items: list[ReadItem], batch_time: int, heartbeat: bool, ingest: str | None
    ) -> None:
        self.items = items
        self.batch_time = batch_time
        self.heartbeat = heartbeat
        self.ingest = ingest


FILES_PER_TASK = 8
"""Items a task reads (a table's fold is one item)."""


def _groups(items: list[ReadItem]) -> list[list[ReadItem]]:
    return [items[i : i + FILES_PER_TASK] for i in range(0, len(items), FILES_PER_TASK)]


def read_tasks(
    new: list[ReadItem],
    batch_time: int,
    ingested: IngestedCollection | None = None,
    seq: int = 0,
    replay: list[ReadItem] | None = None,
) -> list[ReadTask]:
    """Tasks for the new items (each recording into ``ingested`` at offset ``seq``), then
    for the replayed ones; the first task also emits the batch's heartbeat."""
    chunks = [
        ReadTask(group, batch_time, False, ingested.part(seq, n).uri if ingested else None)
        for n, group in enumerate(_groups(new))
    ]
    chunks += [ReadTask(group, batch_time, False, None) for group in _groups(replay or [])]
    if not chunks:
        return [ReadTask([], batch_time, True, None)]
    chunks[0].heartbeat = True
    return chunks
