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
``kafka`` source's batch is read (by the executors' tasks, or by the driver) and written to
that collection before its offset is logged (:mod:`.kafka`); its tasks read it from there. Offsets
also carry the source's index in the spec (``source``), so that the engine finds each
source's committed offset in the offset log.

A ``changelog`` source carries its own times, so new input could move the upper past the
dataflow's expiration. The reader never reads a file with a time at or past it: it holds
the file (and those after it) back and records it in :data:`HELD_FILE`; the engine then
stops the replica with the expired code, and the next run, whose expiration covers the
held time, reads it.
"""

from __future__ import annotations

import time as wall
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql.datasource import DataSource, DataSourceStreamReader, InputPartition

from dataflow_operator.runtime.changelog_store import DIFF, TIME, ChangelogStore
from dataflow_operator.runtime.sources.batches import UpdateColumns
from dataflow_operator.runtime.sources.changelog_times import newest_time, progress_upper
from dataflow_operator.runtime.sources.ingested import resume_base
from dataflow_operator.runtime.sources.item_updates import item_batches
from dataflow_operator.runtime.sources.logs import (
    FILES_LOG,
    HELD_FILE,
    HeldInput,
    list_data_files,
    read_listing,
    table_rows_files,
)
from dataflow_operator.runtime.sources.options import (
    BATCH_TIME,
    HEARTBEAT,
    NO_UNTIL,
    SOURCE_FORMAT,
    SourceOptions,
)
from dataflow_operator.runtime.sources.read_tasks import ReadItem, ReadTask, read_tasks
from dataflow_operator.runtime.sources.table_folds import (
    latest_fold,
    table_files,
)
from dataflow_operator.runtime.storage import Location

if TYPE_CHECKING:
    from dataflow_operator.runtime.sources.kafka import KafkaIngest

__all__ = ["ChangelogReader", "ChangelogSource"]


IDLE_WAIT = 10.0
"""How long (s) ``latestOffset`` may wait for the clock when nothing is new (see
:meth:`ChangelogReader.latestOffset`). Each answer costs an idle query a round of Spark's
loop in the JVM; a clock change or a drop ends the wait at once, so a longer one delays
nothing."""
IDLE_CHECK = 0.05
"""How often (s) a waiting ``latestOffset`` looks at the clock and the drop marker while
its query ran a batch in the last :data:`IDLE_SLOWER_AFTER` seconds (as often as Spark
polls a query that is not waiting); :data:`IDLE_CHECK_SLOW` after that."""
IDLE_SLOWER_AFTER = 3.0
IDLE_CHECK_SLOW = 0.25


def _now_ms() -> int:
    return int(wall.time() * 1000)


def _await_cancel() -> None:
    """Stop emitting and wait for the drop's cancel to kill the task (no error logged)."""
    wall.sleep(30)
    raise RuntimeError("dataflow dropped, and its task was not cancelled")


class ChangelogReader(DataSourceStreamReader):
    """Reads one source; see the module docstring for the offsets."""

    def __init__(self, options: dict[str, str], schema: Any) -> None:
        self.options = SourceOptions(options)
        runtime = {TIME, DIFF, HEARTBEAT, BATCH_TIME}
        self.fields = [(f.name, f.dataType) for f in schema.fields if f.name not in runtime]
        self.schema = schema
        self._update_columns: UpdateColumns | None = None
        self.kafka: KafkaIngest | None = None
        self._fold: tuple[int, list[str]] | None = None
        """A table's latest fold seen: its number and its members."""
        self._idle_clock: tuple[int, ...] | None = None
        """The clock's stamp when ``latestOffset`` last found nothing new (``None``: it
        did not)."""
        self._busy_at = wall.monotonic()
        """When ``latestOffset`` last found something new."""
        if self.options.kind == "kafka":
            # Imported here: Spark starts this reader's runner in a new Python process for
            # every query, and the Kafka ingest's imports (sqlglot, structlog) are heavy.
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
        :meth:`~dataflow_operator.runtime.clock.ClockFile.next_round`).

        Spark asks every 50 ms while a query is idle, each time across the JVM and this
        process: found nothing new twice at the same clock, it waits here instead, up to
        :data:`IDLE_WAIT`, until the clock changes (the engine wants a batch) or the
        dataflow is dropped, then looks once more (a query idle for long notices the
        change up to :data:`IDLE_CHECK_SLOW` later). The first answer with nothing new
        after a change comes at once, so the engine's wait for the query to have read
        everything (``processAllAvailable``) ends with the batch.
        """
        start = start or self.initialOffset()
        end = self._offset(start)
        clock = self._clock_stamp()
        if end == start and clock is not None and clock == self._idle_clock:
            clock = self._await_clock(clock)
            end = self._offset(start)
        self._idle_clock = clock if end == start else None
        if end != start:
            self._busy_at = wall.monotonic()
        return end

    def _offset(self, start: dict[str, Any]) -> dict[str, Any]:
        return {**self._latest(start), **self._round(start), "source": self.options.index}

    def _clock_stamp(self) -> tuple[int, ...] | None:
        """The clock file's stamp (``()`` before it is written; ``None`` without a clock)."""
        if self.options.clock is None:
            return None
        return self.options.clock.location.stamp() or ()

    def _await_clock(self, seen: tuple[int, ...]) -> tuple[int, ...]:
        """Wait until the clock's stamp is no longer ``seen``, the dataflow is dropped or
        :data:`IDLE_WAIT` passed; the stamp then."""
        deadline = wall.monotonic() + IDLE_WAIT
        current = seen
        while current == seen and wall.monotonic() < deadline and not self.options.dropped():
            idle_for = wall.monotonic() - self._busy_at
            wall.sleep(IDLE_CHECK if idle_for < IDLE_SLOWER_AFTER else IDLE_CHECK_SLOW)
            current = self._clock_stamp() or ()
        return current

    def _latest(self, start: dict[str, Any]) -> dict[str, Any]:
        kind = self.options.kind
        if self.kafka is not None:  # fetched once per clock time (a step ends)
            now = self.options.clock.read() if self.options.clock else None
            if now is None or start.get("fetched") == now:
                return start
            wall_now = now if self.options.wall_clock else None
            end = self.kafka.latest(start, self._base(start), wall_now, step=now)
            return {**end, "fetched": now}
        if kind == "dataflow":
            recorded = ChangelogStore(self.options.path).read_upper()
            if recorded is None or recorded.upper <= start["upper"]:
                return start
            return {"upper": recorded.upper, "seq": recorded.batch, "until": self.options.until}
        if kind == "changelog":
            progress = self._progress_upper()  # before the listing: its files are in it
            listed = _now_ms()
            files = self._sync_files(listed)
            base = self._base(start)
            admitted, newest = self._admit(files[base:])
            upper = start["upper"] if newest is None else max(start["upper"], newest + 1)
            if base > start["seq"]:
                upper = max(upper, self._ingested_upper())
            if base + admitted < len(files):  # some are held back: the listing is not read
                listed = int(start.get("listed", 0))
            elif progress is not None:  # every file listed is read: complete to its upper
                upper = max(upper, progress)
            if not admitted and base == start["seq"] and upper == start["upper"]:
                return start
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
        """Where reading the upstream starts (see :func:`~.ingested.resume_base`)."""
        return resume_base(start, self.options.ingested)

    def _progress_upper(self) -> int | None:
        now = self.options.clock.read() if self.options.clock else None
        return progress_upper(self.options, now)

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
            items = [ReadItem(p.uri, None, 0, True) for _, p in old]
            items += [ReadItem(p.uri, None, start["upper"], True) for _, p in new]
            return read_tasks(items, batch_time)
        ingested = self.options.ingested
        base = self._base(start)
        own = kind in ("changelog", "kafka")
        replayed = (
            [ReadItem(f.uri, None, 0, True) for f in ingested.files(start["seq"])] if replay else []
        )
        if base > start["seq"]:
            # Read before, by the dataflow's earlier spec: as if read now from the upstream
            # (rows of a table or files at this batch's time, a changelog's at their own).
            time = None if own else batch_time
            replayed = [ReadItem(f.uri, time, 0, True) for f in ingested.files(base)]
        if kind == "kafka":  # the batch's parts are written (.kafka)
            parts = ingested.store.parts(base, end["seq"])
            items = [ReadItem(f.uri, None, start["upper"], True) for at, f in parts if at > base]
            return read_tasks(items, batch_time, None, 0, replayed)
        files = self._read_files_log()[base : end["seq"]]
        if kind == "table":
            new_items = self._table_items(files, batch_time, start["upper"])
        else:
            new_items = [
                ReadItem(self._full(name), None if own else batch_time, start["upper"])
                for name in files
            ]
        return read_tasks(new_items, batch_time, ingested, end["seq"], replayed)

    def _table_items(self, names: list[str], batch_time: int, floor: int) -> list[ReadItem]:
        """A table's files in its directory, then one item for those only in its fold."""
        present = set(list_data_files(self.options.path))
        items = [ReadItem(self._full(name), batch_time, floor) for name in names if name in present]
        folded = tuple(name for name in names if name not in present)
        if folded:
            items.append(ReadItem(self.options.path.uri, batch_time, floor, members=folded))
        return items

    # --- reading --------------------------------------------------------------------

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        """The updates of one chunk (or its heartbeat) as Arrow batches; new input is also
        recorded in the ingested collection before the task ends."""
        assert isinstance(partition, ReadTask)
        columns = self._columns()
        if partition.heartbeat:
            yield columns.heartbeat(partition.batch_time)
        recorded: list[pa.RecordBatch] = []
        for item in partition.items:
            for updates in item_batches(item, self.options, self.fields, columns):
                if self.options.dropped():
                    _await_cancel()  # emit nothing more; the batch is never committed
                floored = _at_least(updates, item.floor, len(columns.fields))
                if partition.ingest is not None:
                    recorded.append(floored)
                yield columns.spark_batch(floored, partition.batch_time)
        if partition.ingest is not None and recorded:
            Location(partition.ingest).write_parquet(pa.Table.from_batches(recorded))

    def _columns(self) -> UpdateColumns:
        if self._update_columns is None:
            self._update_columns = UpdateColumns.of(self.schema, [name for name, _ in self.fields])
        return self._update_columns

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
            last = newest_time(Location(self._full(name)), self.options)
            if last is not None and expiration != NO_UNTIL and last >= expiration:
                held = HeldInput(file=name, time=last, expiration=expiration)
                self.options.log_dir.child(HELD_FILE).write_text(held.to_json())
                return count, newest
            if last is not None:
                newest = last if newest is None else max(newest, last)
        return len(names), newest

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
        new = [name for name in self._upstream_files() if name not in known]
        if new:
            lines = "".join(f"{name}\t{listed}\n" for name in new)
            self.options.log_dir.child(FILES_LOG).append_text(lines)
        return logged + new

    def _upstream_files(self) -> list[str]:
        """The source directory's files; a table's include those only in its latest fold."""
        visible = list_data_files(self.options.path)
        if self.options.kind != "table":
            return visible
        visible = table_rows_files(visible, self.options.log_dir)
        fold = latest_fold(self.options.path)
        if fold is None:
            return visible
        if self._fold is None or self._fold[0] != fold.number:
            self._fold = (fold.number, fold.members())
        return table_files(visible, self._fold[1])


def _at_least(updates: pa.RecordBatch, floor: int, time_index: int) -> pa.RecordBatch:
    """``updates`` with their times below ``floor`` advanced to it (late updates)."""
    if not floor:
        return updates
    times = pc.max_element_wise(updates.column(time_index), floor)
    return updates.set_column(time_index, TIME, times)


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
