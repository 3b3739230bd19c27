"""Reading a Kafka topic as a source: each batch is written durably, then Spark reads it.

A ``kafka`` source is read by the same Python data source as every other kind
(:class:`~.reader.ChangelogReader`); this module is its Kafka part. Usually the
executors have read the batch already, in offset ranges (:mod:`.kafka_stage`), and
:meth:`KafkaIngest.latest` takes it up (:meth:`KafkaIngest.adopt`); otherwise, and as the
reference for what a batch is, :meth:`KafkaIngest.latest` (in the driver, where Spark asks
for the latest offset)

1. fetches the records after the last batch's positions, at most
   ``maxRecordsPerBatch``, with a :class:`KafkaReader` (the one client this module
   talks to; :class:`ConfluentReader` on the wire, fakes in tests);
2. stops each partition before its first record at or past the dataflow's expiration
   (recorded as held input, so the replica restarts rather than run past it);
3. writes the records — values parsed into the source's columns, each at its Kafka
   timestamp (advanced to the frontier if late) with diff +1 — as the batch's part of
   the source's **ingested collection**, before the offset is returned;
4. returns the offset: the new positions per partition (``partitions``), the high
   watermarks seen (``highs``: the upstream lag), ``seq`` (:func:`sequence_of` the
   positions: the collection's key) and ``upper``, the frontier
   :func:`~dataflow_operator.core.kafka.kafka_upper` derives from the records' times and
   the partitions' progress.

Kafka being unreachable (a broker down, a topic not created yet) stops nothing: the batch
reads nothing, the frontier stays where it was, the reason is written to
:data:`READ_ERROR_FILE` (the source's report shows it as ``lastReadError``, its metric
``dataflow_source_upstream_unreachable``), one warning is logged per outage and the next
step tries again.
Input lost upstream before it was read (retention), a topic that ends before the
positions read (deleted and made again) and a value that does not parse are errors of
the dataflow, each naming the topic, partitions and offsets.

Spark logs the offset, then its tasks read the part like any stored changelog. A batch
redone after a crash reads the same part (it was written before its offset was logged);
a part past the last logged offset is left from a batch that never ran and is removed.
So a Kafka source's updates are in its ingested collection exactly like a file source's,
and an expiration restart regenerates dropped retractions from there, not from Kafka.

The consumer group's offsets are committed elsewhere, once batches are committed (see
:mod:`dataflow_operator.runtime.engine.kafka_commit`); reading never uses the group.
"""

from __future__ import annotations

import csv
import json
import time as wall
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from dataflow_operator.core.kafka import (
    DRIVER_RECORDS,
    PartitionRead,
    admitted,
    kafka_upper,
    sequence_of,
)
from dataflow_operator.logs import get_logger
from dataflow_operator.runtime.changelog_store import part_batch
from dataflow_operator.runtime.sources.ingested import IngestedCollection, updates_table
from dataflow_operator.runtime.sources.kafka_client import (
    ConfluentReader,
    KafkaFailure,
    KafkaReader,
    KafkaRecord,
    KafkaUnavailable,
    client_factory,
    consumer_settings,
)
from dataflow_operator.runtime.sources.kafka_config import client_config
from dataflow_operator.runtime.sources.kafka_staged import StagedBatch
from dataflow_operator.runtime.sources.logs import HELD_FILE, HeldInput
from dataflow_operator.runtime.sources.options import NO_UNTIL, SourceOptions
from dataflow_operator.runtime.values import BadValue, convert_row

__all__ = [
    "POSITIONS_FILE",
    "READ_ERROR_FILE",
    "KafkaIngest",
    "default_group_id",
    "discard_unlogged",
    "open_reader",
    "parse_positions",
    "read_positions",
    "record_values",
]

POSITIONS_FILE = "kafka.json"
"""In a kafka source's logs: the positions at the ingested collection's recorded offset
(``{"seq": n, "partitions": {...}}``), so that a dataflow starting over on the collection
(a changed spec) reads Kafka only after it."""
READ_ERROR_FILE = "read_error.txt"
"""In a kafka source's logs: why the last batch could not reach Kafka (absent once one
could)."""
PARTITIONS_SECONDS = 30.0
"""How long the topic's list of partitions is used before it is asked again (partitions
are added rarely; a new one is read from its oldest record once it is seen)."""
FETCH_SECONDS = 0.5
"""How long one batch waits for records at most (a caught-up topic answers at once)."""


log = get_logger(__name__)


def default_group_id(cluster: str, dataflow: str, source: str) -> str:
    """The consumer group of a kafka source without ``groupId``."""
    return f"dataflow.{cluster}.{dataflow}.{source}"


def parse_positions(raw: object) -> dict[int, int]:
    """An offset's ``partitions`` (JSON keys are strings) as partition → position."""
    if not isinstance(raw, Mapping):
        return {}
    return {int(partition): int(position) for partition, position in raw.items()}


def read_positions(options: SourceOptions, seq: int) -> dict[int, int] | None:
    """The positions recorded for the ingested collection's offset ``seq``, if those are."""
    text = options.log_dir.child(POSITIONS_FILE).read_text_or_none()
    if not text:
        return None
    recorded = json.loads(text)
    return parse_positions(recorded["partitions"]) if recorded.get("seq") == seq else None


class KafkaIngest:
    """The driver's side of a kafka source; see the module docstring."""

    def __init__(
        self,
        options: SourceOptions,
        fields: Sequence[tuple[str, Any]],
        connect: Callable[[SourceOptions], KafkaReader] | None = None,
    ) -> None:
        self.options = options
        self.fields = list(fields)
        self.connect = connect or open_reader
        self._client: KafkaReader | None = None
        self._partitions: tuple[float, list[int]] | None = None
        self._down_since: float | None = None
        """When Kafka was last found out of reach (``None``: it was read since)."""

    @property
    def client(self) -> KafkaReader:
        """The connection, opened on first use."""
        if self._client is None:
            self._client = self.connect(self.options)
        return self._client

    def latest(
        self, start: dict[str, Any], base: int, now: int | None, *, step: int | None = None
    ) -> dict[str, Any]:
        """The offset after the next batch from ``start`` (``start`` itself when there is
        nothing new); writes the batch's part of the ingested collection first.

        ``base`` is where the collection ends when ``start`` is a new checkpoint's (a
        changed spec: its positions are read back), ``now`` the clock on a wall-clock
        timeline (``None``: the frontier follows the records' times only), ``step`` the
        clock time the batch is for: when the executors read the batch after ``start``
        for it (:mod:`.kafka_staged`), that batch is taken up; otherwise the driver
        fetches it here, and parts the executors wrote for another are removed.
        """
        try:
            staged = StagedBatch.read(self.options.log_dir) if step is not None else None
            expiration = self.options.expiration
            if (
                staged is not None
                and step is not None
                and staged.follows(start, base, step, expiration)
            ):
                end = self.adopt(staged, start, base, now)
            else:
                if staged is not None:
                    discard_unlogged(self.options.ingested, max(int(start["seq"]), base))
                    StagedBatch.clear(self.options.log_dir)
                end = self._latest(start, base, now)
        except KafkaUnavailable as error:
            if self._down_since is None:  # one line per outage, not one per step
                self._down_since = wall.monotonic()
                log.warning(
                    "kafka source not read; retrying every step",
                    topic=self.options.topic,
                    error=str(error),
                )
            self.options.log_dir.child(READ_ERROR_FILE).write_text(str(error))
            self.close()
            return start
        if self._down_since is not None:
            down = round(wall.monotonic() - self._down_since, 1)
            log.info("kafka source read again", topic=self.options.topic, down_seconds=down)
            self._down_since = None
        if self.options.log_dir.child(READ_ERROR_FILE).exists():
            self.options.log_dir.child(READ_ERROR_FILE).delete()
        return end

    def _latest(self, start: dict[str, Any], base: int, now: int | None) -> dict[str, Any]:
        positions, upper, highs = self.plan(start, base)
        fetched, reached = self._fetch(positions, highs)
        taken, held = self._take(fetched, positions)
        reads, rows = [], []
        for partition, records in taken.items():
            times = [record.timestamp for record in records]
            positions[partition] = held.get(partition, reached.get(partition, positions[partition]))
            reads.append(
                PartitionRead(
                    partition, positions[partition], highs[partition], max(times, default=None)
                )
            )
            rows += [
                (*record_values(self.options, self.fields, record), max(record.timestamp, upper), 1)
                for record in records
            ]
        end = self._end(start, upper, positions, highs, reads, now=now)
        if end is not start:
            self._write_part(max(int(start["seq"]), base), int(end["seq"]), rows)
        return end

    def plan(self, start: dict[str, Any], base: int) -> tuple[dict[int, int], int, dict[int, int]]:
        """Where the batch after ``start`` reads from: every partition's position (a new
        one from its oldest record), the floor its records' times are advanced to (the
        upper so far), and the high watermarks (never below a position).

        Raises :class:`KafkaFailure` when the topic no longer holds what comes next
        (retention deleted it unread, or the topic was made again) and
        :class:`KafkaUnavailable` when Kafka cannot be asked.
        """
        positions = parse_positions(start.get("partitions"))
        upper = int(start["upper"])
        if base > int(start["seq"]):
            positions = read_positions(self.options, base) or positions
            recorded = self.options.ingested.read_upper()
            upper = max(upper, 0 if recorded is None else recorded.upper)
        highs: dict[int, int] = {}
        past: dict[int, int] = {}
        for partition, (low, high) in self.client.watermarks(self._topic_partitions()).items():
            position = positions.setdefault(partition, low)
            if position < low:
                raise KafkaFailure(
                    f"topic {self.options.topic!r} partition {partition}: offsets "
                    f"{position}..{low - 1} were deleted upstream before they were read "
                    "(retention): the source cannot be read without losing them"
                )
            if position > high and not self._holds_record(partition, position - 1):
                past[partition] = high
            highs[partition] = max(high, position)
        if past:
            self._topic_behind(positions, past)
        return positions, upper, highs

    def _end(
        self,
        start: dict[str, Any],
        upper: int,
        positions: Mapping[int, int],
        highs: Mapping[int, int],
        reads: Sequence[PartitionRead],
        *,
        now: int | None,
    ) -> dict[str, Any]:
        """The offset after a batch that read ``reads`` from ``start`` (``start`` itself
        when it moved nothing)."""
        now_upper = kafka_upper(upper, reads, now=now, expiration=self._expiration())
        seq = sequence_of(positions)
        if seq == int(start["seq"]) and now_upper == int(start["upper"]):
            return start
        return {
            "upper": now_upper,
            "seq": seq,
            "until": self.options.until,
            "partitions": {str(p): o for p, o in sorted(positions.items())},
            "highs": {str(p): h for p, h in sorted(highs.items())},
        }

    def adopt(
        self, staged: StagedBatch, start: dict[str, Any], base: int, now: int | None
    ) -> dict[str, Any]:
        """The offset after ``start`` of a batch the executors read (:mod:`.kafka_stage`:
        its parts are written already); the held record, if any, is recorded as
        :meth:`_take` records it."""
        if staged.held is not None:
            partition, offset, time = staged.held
            self._hold(partition, offset, time)
        return self._end(start, staged.floor, staged.positions, staged.highs, staged.reads, now=now)

    def _hold(self, partition: int, offset: int, time: int) -> None:
        """Record the record at ``offset`` as held back at the expiration."""
        expiration = self._expiration()
        assert expiration is not None
        where = f"{self.options.topic}/{partition}@{offset}"
        note = HeldInput(file=where, time=time, expiration=expiration)
        self.options.log_dir.child(HELD_FILE).write_text(note.to_json())

    def _holds_record(self, partition: int, offset: int) -> bool:
        """Whether the partition still has the record at ``offset`` (the last one read:
        a broker may answer a high watermark below it, see
        :meth:`~.kafka_client.ConfluentReader.watermarks`)."""
        try:
            got, _ = self.client.fetch({partition: offset}, 1, FETCH_SECONDS)
        except KafkaUnavailable:
            raise
        except KafkaFailure:
            return False
        return any(r.partition == partition and r.offset == offset for r in got)

    def _topic_behind(self, positions: Mapping[int, int], ends: Mapping[int, int]) -> None:
        """Raise the error of a topic that ends before the positions read (deleted and
        made again, or truncated): reading on would skip the records below them, or read
        again those that were read."""
        names = ", ".join(str(p) for p in sorted(ends))
        read = ", ".join(str(positions[p]) for p in sorted(ends))
        end = ", ".join(str(ends[p]) for p in sorted(ends))
        noun = "partition" if len(ends) == 1 else "partitions"
        raise KafkaFailure(
            f"topic {self.options.topic!r} {noun} {names}: the source read up to offsets "
            f"{read} but the topic ends at {end}: it was deleted and made again (or "
            "truncated) upstream; the source cannot go on without skipping records or "
            "reading some twice (recreate the dataflow to read the topic from its start)"
        )

    def _topic_partitions(self) -> list[int]:
        """The topic's partitions, asked at most every :data:`PARTITIONS_SECONDS`."""
        now = wall.monotonic()
        if self._partitions is None or now - self._partitions[0] > PARTITIONS_SECONDS:
            self._partitions = (now, self.client.partitions())
        return self._partitions[1]

    def close(self) -> None:
        """Close the connection, if open."""
        self._partitions = None
        if self._client is not None:
            self._client.close()
            self._client = None

    # --- one batch ----------------------------------------------------------------

    def _fetch(
        self, positions: dict[int, int], highs: dict[int, int]
    ) -> tuple[list[KafkaRecord], dict[int, int]]:
        """Records from ``positions`` up to the high watermarks seen, within the batch's
        limits (its record count, at most
        :data:`~dataflow_operator.core.kafka.DRIVER_RECORDS`, and :data:`FETCH_SECONDS`),
        and the positions reached."""
        wanted = {p: o for p, o in positions.items() if o < highs.get(p, 0)}
        reached: dict[int, int] = {}
        limit = min(self.options.max_records, DRIVER_RECORDS)
        fetched: list[KafkaRecord] = []
        deadline = wall.monotonic() + FETCH_SECONDS
        while wanted and len(fetched) < limit:
            left = deadline - wall.monotonic()
            if left <= 0:
                break
            # as many as wait below the high watermarks: a client waits for the count
            waiting = sum(highs[p] - o for p, o in wanted.items())
            got, at = self.client.fetch(wanted, min(limit - len(fetched), waiting), left)
            for record in got:
                if wanted.get(record.partition, highs[record.partition]) <= record.offset:
                    fetched.append(record)
                    wanted[record.partition] = record.offset + 1
            for partition, position in at.items():
                if partition in wanted and position > wanted[partition]:
                    wanted[partition] = position
            reached |= {p: o for p, o in wanted.items()}
            wanted = {p: o for p, o in wanted.items() if o < highs[p]}
        return fetched, reached

    def _take(
        self, fetched: list[KafkaRecord], positions: dict[int, int]
    ) -> tuple[dict[int, list[KafkaRecord]], dict[int, int]]:
        """Per partition, the records the batch reads (in offset order from its
        position), up to the first at or past the expiration (held back and recorded:
        its partition stops there, at the offset returned for it)."""
        taken: dict[int, list[KafkaRecord]] = {p: [] for p in positions}
        held: dict[int, int] = {}
        for record in fetched:
            taken.setdefault(record.partition, []).append(record)
        expiration = self._expiration()
        for partition, records in taken.items():
            count = admitted([r.timestamp for r in records], expiration)
            if count < len(records):
                first = records[count]
                self._hold(partition, first.offset, first.timestamp)
                held[partition] = first.offset
                del records[count:]
        return taken, held

    def _expiration(self) -> int | None:
        expiration = self.options.expiration
        return None if expiration == NO_UNTIL else expiration

    def _write_part(self, start_seq: int, seq: int, rows: list[tuple[Any, ...]]) -> None:
        """The batch's records as the collection's part for ``seq``; parts past
        ``start_seq`` left by a batch that was never logged are removed first."""
        discard_unlogged(self.options.ingested, start_seq)
        if rows:
            self.options.ingested.part(seq, 0).write_parquet(updates_table(self.fields, rows))


def discard_unlogged(ingested: IngestedCollection, logged: int) -> None:
    """Remove the collection's parts past ``logged`` (the last offset logged): left by a
    batch whose offset never was (a crash, or executors' reads not taken up)."""
    for name in ingested.location.list():
        at = part_batch(name)
        if at is not None and at > logged:
            ingested.location.child(name).delete()


def record_values(
    options: SourceOptions, fields: Sequence[tuple[str, Any]], record: KafkaRecord
) -> tuple[Any, ...]:
    """A record's value parsed into the source's columns (:class:`BadValue` names the
    topic, partition, offset and field)."""
    where = f"topic {options.topic!r} partition {record.partition} offset {record.offset}"
    text = (record.value or b"").decode("utf-8", errors="replace")
    try:
        if options.format == "csv":
            cells = next(csv.reader([text]), [])
            parsed: object = dict(zip((name for name, _ in fields), cells, strict=False))
        else:
            parsed = json.loads(text) if text.strip() else {}
    except json.JSONDecodeError as error:
        raise BadValue(f"{where}: the value is not JSON: {error.msg}") from None
    if not isinstance(parsed, dict):
        raise BadValue(f"{where}: the value is not a JSON object: {text[:80]!r}")
    try:
        return convert_row(parsed, fields)
    except BadValue as error:
        raise BadValue(f"{where}: {error}") from None


def open_reader(options: SourceOptions) -> KafkaReader:
    """The reader of a source's topic: on confluent-kafka, or from the module the engine
    was told of (:data:`~.kafka_client.CLIENT_ENV`, passed on as the option)."""
    if options.kafka_client:
        reader: KafkaReader = client_factory("reader", None, options.kafka_client)(options)
        return reader
    config = client_config(
        options.topic,
        consumer_settings(options.bootstrap_servers, options.group_id),
        options.kafka_properties,
        options.kafka_properties_from_env,
    )
    return ConfluentReader(options.topic, config)
