"""Every source of a dataflow as a Spark streaming source: a Python data source.

Each source (``table``, ``files``, ``changelog``, ``kafka`` or another dataflow's output)
is read by :class:`ChangelogSource`, a ``pyspark.sql.datasource`` streaming source whose offsets
carry the source's **upper** (every update at a time below it has been read), its
position (files or upstream batches consumed), the ``until`` the dataflow ran with, the
clock's ``round`` (a new round is a batch with nothing new but the heartbeat) and, for
sources of files, ``listed``: the wall-clock time of the directory listing they reflect
(every file there at that time is below the position).
Spark records them in the query's offset log, so the logical time of each batch lives
in the checkpoint, and a restarted query resumes exactly where the last one committed.

Rows come out as a changelog: the data columns, ``__time`` and ``__diff``, plus a
heartbeat row per batch (``__hb``) and the batch's time as a TIMESTAMP (``__bt``), which
the engine's event-time watermark follows: the watermark is the inputs' frontier.

The tasks that read a ``table``, ``files`` or ``changelog`` source's new files also
write what they emitted to the source's ingested collection (:mod:`.ingested`). When a
restart raises ``until`` (a later expiration), the first batch also *replays* the input
consumed before — from that collection, never from the upstream, whose files may be
released by then — so that the updates the previous run dropped at its expiration are
regenerated (see :mod:`dataflow_operator.runtime.strategies.temporal_filter`). A
``kafka`` source's batch is fetched by the driver and written to that collection before
its offset is logged (:mod:`.kafka`); its tasks read it from there. Offsets
also carry the source's index in the spec (``source``), so that the engine finds each
source's committed offset in the offset log.

A ``changelog`` source carries its own times, so new input could move the upper past the
dataflow's expiration. The reader never reads a file with a time at or past it: it holds
the file (and those after it) back and records it in :data:`HELD_FILE`; the engine then
stops the replica with the expired code, and the next run, whose expiration covers the
held time, reads it.
"""

from __future__ import annotations

import datetime as dt
import time as wall
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from pyspark.sql.datasource import DataSource, DataSourceStreamReader, InputPartition

from dataflow_operator.runtime.changelog_store import DIFF, TIME, ChangelogStore
from dataflow_operator.runtime.sources.ingested import IngestedCollection, updates_table
from dataflow_operator.runtime.sources.logs import (
    FILES_LOG,
    HELD_FILE,
    HeldInput,
    list_data_files,
    read_listing,
    records,
)
from dataflow_operator.runtime.sources.options import (
    BATCH_TIME,
    HEARTBEAT,
    NO_UNTIL,
    SOURCE_FORMAT,
    SourceOptions,
)
from dataflow_operator.runtime.storage import Location
from dataflow_operator.runtime.values import BadValue, convert, convert_row

if TYPE_CHECKING:
    from dataflow_operator.runtime.sources.kafka import KafkaIngest

__all__ = ["ChangelogReader", "ChangelogSource"]


def _now_ms() -> int:
    return int(wall.time() * 1000)


def _await_cancel() -> None:
    """Stop emitting and wait for the drop's cancel to kill the task (no error logged)."""
    wall.sleep(30)
    raise RuntimeError("dataflow dropped, and its task was not cancelled")


@dataclass(frozen=True, slots=True)
class _Item:
    """One file a task reads.

    ``time`` is the time of all its rows (``None``: rows carry their own, as in
    changelogs, dataflow outputs and the ingested collection); own times below ``floor``
    are advanced to it (late updates). ``stored``: a Parquet changelog written by the
    runtime (``__time``/``__diff`` columns), not a user's file.
    """

    uri: str
    time: int | None
    floor: int
    stored: bool = False


class _Chunk(InputPartition):
    """Files for one task, whether it also emits the heartbeat, and where it records what
    it read in the ingested collection (``None``: nothing to record, a replay)."""

    def __init__(
        self, items: list[_Item], batch_time: int, heartbeat: bool, ingest: str | None
    ) -> None:
        self.items = items
        self.batch_time = batch_time
        self.heartbeat = heartbeat
        self.ingest = ingest


FILES_PER_TASK = 8


def _groups(items: list[_Item]) -> list[list[_Item]]:
    return [items[i : i + FILES_PER_TASK] for i in range(0, len(items), FILES_PER_TASK)]


def _chunks(
    new: list[_Item],
    batch_time: int,
    ingested: IngestedCollection | None = None,
    seq: int = 0,
    replay: list[_Item] | None = None,
) -> list[_Chunk]:
    """Tasks for the new items (each recording into ``ingested`` at offset ``seq``), then
    for the replayed ones; the first task also emits the batch's heartbeat."""
    chunks = [
        _Chunk(group, batch_time, False, ingested.part(seq, n).uri if ingested else None)
        for n, group in enumerate(_groups(new))
    ]
    chunks += [_Chunk(group, batch_time, False, None) for group in _groups(replay or [])]
    if not chunks:
        return [_Chunk([], batch_time, True, None)]
    chunks[0].heartbeat = True
    return chunks


class ChangelogReader(DataSourceStreamReader):
    """Reads one source; see the module docstring for the offsets."""

    def __init__(self, options: dict[str, str], schema: Any) -> None:
        self.options = SourceOptions(options)
        runtime = {TIME, DIFF, HEARTBEAT, BATCH_TIME}
        self.fields = [(f.name, f.dataType) for f in schema.fields if f.name not in runtime]
        self.kafka: KafkaIngest | None = None
        if self.options.kind == "kafka":
            # Imported here: Spark starts this reader's runner in a new Python process for
            # every query, and the Kafka ingest costs 0.15 s of imports (sqlglot, structlog).
            from dataflow_operator.runtime.sources.kafka import KafkaIngest

            self.kafka = KafkaIngest(self.options, self.fields)

    # --- offsets --------------------------------------------------------------------

    def initialOffset(self) -> dict[str, Any]:  # noqa: N802 - Spark's name
        """Nothing read yet."""
        seq = -1 if self.options.kind == "dataflow" else 0
        return {
            "upper": 0,
            "seq": seq,
            "until": self.options.until,
            **self._round({}),
            "source": self.options.index,
        }

    def latestOffset(  # noqa: N802 - Spark's name
        self, start: dict[str, Any] | None = None, limit: Any = None
    ) -> dict[str, Any]:
        """How far the source can be read now (and the clock's round: see
        :meth:`~dataflow_operator.runtime.engine.clock.ClockFile.next_round`)."""
        start = start or self.initialOffset()
        return {**self._latest(start), **self._round(start), "source": self.options.index}

    def _latest(self, start: dict[str, Any]) -> dict[str, Any]:
        kind = self.options.kind
        if self.kafka is not None:  # fetched once per clock time (a step ends)
            now = self.options.clock.read() if self.options.clock else None
            if now is None or start.get("fetched") == now:
                return start
            wall_now = now if self.options.wall_clock else None
            return {**self.kafka.latest(start, self._base(start), wall_now), "fetched": now}
        if kind == "dataflow":
            recorded = ChangelogStore(self.options.path).read_upper()
            if recorded is None or recorded.upper <= start["upper"]:
                return start
            return {"upper": recorded.upper, "seq": recorded.batch, "until": self.options.until}
        if kind == "changelog":
            listed = _now_ms()
            files = self._sync_files(listed)
            base = self._base(start)
            admitted, newest = self._admit(files[base:])
            if not admitted and base == start["seq"]:
                return start
            upper = start["upper"] if newest is None else max(start["upper"], newest + 1)
            if base > start["seq"]:
                upper = max(upper, self._ingested_upper())
            if base + admitted < len(files):  # some are held back: the listing is not read
                listed = int(start.get("listed", 0))
            return {
                "upper": upper,
                "seq": base + admitted,
                "until": self.options.until,
                "listed": listed,
            }
        now = self.options.clock.read() if self.options.clock else None
        if now is None or now + 1 <= start["upper"]:
            return start
        listed = _now_ms()
        return {
            "upper": now + 1,
            "seq": len(self._sync_files(listed)),
            "until": self.options.until,
            "listed": listed,
        }

    def stop(self) -> None:
        """Close the Kafka connection, if any."""
        if self.kafka is not None:
            self.kafka.close()

    def _base(self, start: dict[str, int]) -> int:
        """Where reading the upstream starts: ``start``'s offset, or, for a new checkpoint
        on a source whose ingested collection survived (a changed spec), its end."""
        if start["seq"] != 0 or start["upper"] != 0:
            return start["seq"]
        recorded = self.options.ingested.read_upper()
        return 0 if recorded is None else recorded.seq

    def _ingested_upper(self) -> int:
        recorded = self.options.ingested.read_upper()
        return 0 if recorded is None else recorded.upper

    def _round(self, start: dict[str, int]) -> dict[str, int]:
        """``{"round": n}``: a new round is a new offset, so one more batch (none without
        a clock)."""
        if self.options.clock is None:
            return {}
        return {"round": max(self.options.clock.round(), int(start.get("round", 0)))}

    # --- planning -------------------------------------------------------------------

    def partitions(self, start: dict[str, int], end: dict[str, int]) -> Sequence[InputPartition]:
        """The new input between the offsets, the replay if ``until`` grew, a heartbeat."""
        if start == end:
            return []
        batch_time = end["upper"] - 1
        kind = self.options.kind
        replay = start["until"] != NO_UNTIL and (
            end["until"] == NO_UNTIL or end["until"] > start["until"]
        )
        if kind == "dataflow":
            store = ChangelogStore(self.options.path)
            old = store.parts(-1, start["seq"]) if replay else []
            new = store.parts(start["seq"], end["seq"])
            items = [_Item(p.uri, None, 0, True) for _, p in old]
            items += [_Item(p.uri, None, start["upper"], True) for _, p in new]
            return _chunks(items, batch_time)
        ingested = self.options.ingested
        base = self._base(start)
        own = kind in ("changelog", "kafka")
        replayed = (
            [_Item(f.uri, None, 0, True) for f in ingested.files(start["seq"])] if replay else []
        )
        if base > start["seq"]:
            # Read before, by the dataflow's earlier spec: as if read now from the upstream
            # (rows of a table or files at this batch's time, a changelog's at their own).
            time = None if own else batch_time
            replayed = [_Item(f.uri, time, 0, True) for f in ingested.files(base)]
        if kind == "kafka":  # the driver wrote the batch's part (.kafka)
            parts = ingested.store.parts(base, end["seq"])
            items = [_Item(f.uri, None, start["upper"], True) for at, f in parts if at > base]
            return _chunks(items, batch_time, None, 0, replayed)
        files = self._read_files_log()[base : end["seq"]]
        new_items = [
            _Item(self._full(name), None if own else batch_time, start["upper"]) for name in files
        ]
        return _chunks(new_items, batch_time, ingested, end["seq"], replayed)

    # --- reading --------------------------------------------------------------------

    def read(self, partition: InputPartition) -> Iterator[tuple[Any, ...]]:
        """The rows of one chunk (or its heartbeat); new input is also recorded in the
        ingested collection before the task ends."""
        assert isinstance(partition, _Chunk)
        batch_ts = dt.datetime.fromtimestamp(partition.batch_time / 1000, tz=dt.UTC)
        if partition.heartbeat:
            yield (*([None] * len(self.fields)), partition.batch_time, 0, True, batch_ts)
        recorded: list[tuple[Any, ...]] = []
        for item in partition.items:
            for count, (values, own_time, diff) in enumerate(self._updates(item)):
                if count % 4096 == 0 and self.options.dropped():
                    _await_cancel()  # emit nothing more; the batch is never committed
                update = (*values, max(own_time, item.floor), diff)
                if partition.ingest is not None:
                    recorded.append(update)
                yield (*update, False, batch_ts)
        if partition.ingest is not None and recorded:
            Location(partition.ingest).write_parquet(updates_table(self.fields, recorded))

    def _updates(self, item: _Item) -> Iterator[tuple[tuple[Any, ...], int, int]]:
        if item.stored:
            for record in records(Location(item.uri), "parquet"):
                time = int(record[TIME]) if item.time is None else item.time
                yield convert_row(record, self.fields), time, int(record[DIFF])
            return
        kind = self.options.kind
        name = Location(item.uri).name
        for number, record in enumerate(records(Location(item.uri), self.options.format), 1):
            where = f"{name}: row {number}"
            try:
                values = convert_row(record, self.fields)
            except BadValue as error:
                raise BadValue(f"{where}: {error}") from None
            if kind == "changelog":
                yield values, *self._time_and_diff(record, where)
            else:
                yield values, item.time if item.time is not None else 0, 1

    def _time_and_diff(self, record: dict[str, Any], where: str) -> tuple[int, int]:
        time_column, diff_column = self.options.time_column, self.options.diff_column
        try:
            time = convert(record.get(time_column), "long")
        except BadValue:
            raise BadValue(
                f"{where}: time column {time_column!r} is not an integer: "
                f"{record.get(time_column)!r}"
            ) from None
        raw = record.get(diff_column)
        if isinstance(raw, str) and raw.strip().lstrip("+-").isdigit():
            raw = int(raw)
        if not isinstance(raw, int) or isinstance(raw, bool):
            raise BadValue(f"{where}: diff column {diff_column!r} is not an integer: {raw!r}")
        if time is None:
            raise BadValue(f"{where}: time column {time_column!r} is missing")
        return int(time), raw

    def _admit(self, names: list[str]) -> tuple[int, int | None]:
        """How many of the new changelog files ``names`` (in order) may be read, and the
        newest time in them.

        A file with a time at or past the dataflow's expiration is held back with every
        file after it, and recorded in :data:`HELD_FILE`: reading it would move the upper
        past the expiration, so the replica restarts instead (the engine reads the record).
        """
        expiration = self.options.expiration
        newest: int | None = None
        for count, name in enumerate(names):
            last = max(self._own_times(name), default=None)
            if last is not None and expiration != NO_UNTIL and last >= expiration:
                held = HeldInput(file=name, time=last, expiration=expiration)
                self.options.log_dir.child(HELD_FILE).write_text(held.to_json())
                return count, newest
            if last is not None:
                newest = last if newest is None else max(newest, last)
        return len(names), newest

    def _own_times(self, name: str) -> Iterator[int]:
        for number, record in enumerate(
            records(Location(self._full(name)), self.options.format), start=1
        ):
            yield self._time_and_diff(record, f"{name}: row {number}")[0]

    # --- the source's own logs (runtime-owned, beside the checkpoint) --------------

    def _full(self, name: str) -> str:
        return self.options.path.child(name).uri

    def _read_files_log(self) -> list[str]:
        """The files seen, in the order they are read (the offsets count them)."""
        return [name for name, _ in read_listing(self.options.log_dir)]

    def _sync_files(self, listed: int) -> list[str]:
        """The files in the order they are consumed: the log, then any new ones, logged
        with ``listed``, the wall-clock time taken just before the directory was listed
        (every file there at that time is in this listing)."""
        logged = self._read_files_log()
        known = set(logged)
        new = [name for name in list_data_files(self.options.path) if name not in known]
        if new:
            lines = "".join(f"{name}\t{listed}\n" for name in new)
            self.options.log_dir.child(FILES_LOG).append_text(lines)
        return logged + new


class ChangelogSource(DataSource):
    """The Python data source behind every dataflow input (format ``dataflow_changelog``)."""

    @classmethod
    def name(cls) -> str:
        """The format name used in ``readStream.format``."""
        return SOURCE_FORMAT

    def schema(self) -> str:
        """The DDL the engine passed: data columns, then the runtime's columns."""
        return str(self.options["schema"])

    def streamReader(self, schema: Any) -> ChangelogReader:  # noqa: N802 - Spark's name
        """A reader for one query's use of this source."""
        return ChangelogReader(dict(self.options), schema)
