"""The Kafka client a kafka source reads with: what it needs (:class:`KafkaReader`), and
that on confluent-kafka (librdkafka; :class:`ConfluentReader`). Tests give fakes."""

from __future__ import annotations

import importlib
import os
import time as wall
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any, NamedTuple, Protocol

__all__ = [
    "CLIENT_ENV",
    "ConfluentReader",
    "KafkaFailure",
    "KafkaReader",
    "KafkaRecord",
    "KafkaUnavailable",
    "client_factory",
    "consumer_settings",
    "refused_config",
]

CLIENT_ENV = "DATAFLOW_KAFKA_CLIENT"
"""A module that makes the Kafka clients instead of confluent-kafka: its ``reader(options)``
and ``admin(servers, config)`` (another client library, or a test's topic in files)."""

REQUEST_SECONDS = 2.0
"""How long a metadata or watermark request may take: a step waits for it, and a broker
out of reach must not hold every dataflow of the replica for long."""


QUIET_DEFAULTS: dict[str, str | bool] = {"log_level": "2"}
"""The Kafka clients' defaults (a source's ``properties`` override them): librdkafka's own
lines (one per failed connection attempt, several a second while a broker is down) are
left out; the source reports an outage itself (one warning, ``lastReadError``, a metric)."""

PROBE_MESSAGES = 10_000
"""How many records one call takes while probing: a probed record may open a batch of
many (Tansu's answer is a batch's first offset), all of them before the next partition's."""

PROBE_WAIT = 0.01
"""How long one call waits while probing (seconds): it takes what has come, and the probe
goes on until every partition has answered."""

FETCH_DEFAULTS: dict[str, str | bool] = {"fetch.wait.max.ms": "100", **QUIET_DEFAULTS}
"""The reader's defaults (a source's ``properties`` override them): a fetch the broker
holds open for want of data delays the next assignment's (a batch re-assigns whenever
its positions are not where the last fetch left off) by up to this long."""

OUT_OF_RANGE = (-140, 1)
"""librdkafka's codes for a fetch position the partition does not hold (``_AUTO_OFFSET_RESET``
with ``auto.offset.reset=error``, ``OFFSET_OUT_OF_RANGE``): not a broker out of reach."""


class KafkaFailure(RuntimeError):
    """Reading the topic cannot go on (one line, naming the topic)."""


class KafkaUnavailable(KafkaFailure):
    """Kafka could not be reached or refused a request: retried at the next step."""


class KafkaRecord(NamedTuple):
    """One record: where it is, its timestamp (epoch ms) and its value's bytes (a tuple:
    a batch makes one per record)."""

    partition: int
    offset: int
    timestamp: int
    value: bytes | None


class KafkaReader(Protocol):
    """What the source needs of a Kafka client: one topic's partitions, their
    watermarks, and records from given positions."""

    def partitions(self) -> list[int]:
        """The topic's partitions."""
        ...

    def watermarks(self, partitions: Sequence[int]) -> dict[int, tuple[int, int]]:
        """Each partition's low watermark (oldest offset kept) and high watermark (the
        offset the next record gets)."""
        ...

    def fetch(
        self, starts: Mapping[int, int], max_records: int, timeout: float
    ) -> tuple[list[KafkaRecord], dict[int, int]]:
        """Records at or after ``starts`` (partition → offset), at most ``max_records``,
        waiting at most ``timeout`` seconds, in offset order within a partition; and the
        positions they leave each partition at (past offsets that hold no record: a
        transaction's markers, a compacted topic's gaps)."""
        ...

    def close(self) -> None:
        """Release the connection."""
        ...


def consumer_settings(bootstrap_servers: str, group_id: str) -> dict[str, str | bool]:
    """What :class:`ConfluentReader`'s consumer sets itself, whatever the source's
    properties say (the api refuses these names in them)."""
    return {
        "bootstrap.servers": bootstrap_servers,
        "group.id": group_id,
        "enable.auto.commit": False,
        "enable.auto.offset.store": False,
        "auto.offset.reset": "error",
    }


@contextmanager
def refused_config(where: str, client: str) -> Iterator[None]:
    """A configuration the Kafka client refuses (an unknown property, a bad value) as
    :class:`KafkaFailure` saying ``where`` (the topic): retrying would not help."""
    from confluent_kafka import KafkaException

    try:
        yield
    except KafkaException as error:
        reason = error.args[0].str() if error.args else str(error)
        raise KafkaFailure(
            f"{where}: the Kafka {client} refused its configuration: {reason}"
        ) from None


class ConfluentReader:
    """:class:`KafkaReader` on confluent-kafka (librdkafka): positions are assigned, never
    subscribed, so the replica never joins the consumer group nor commits to it here.

    ``config`` is the consumer's whole configuration (see
    :func:`~.kafka_config.client_config` and :func:`consumer_settings`)."""

    def __init__(self, topic: str, config: Mapping[str, str | bool]) -> None:
        from confluent_kafka import Consumer

        self.topic = topic
        with refused_config(f"topic {topic!r}", "consumer"):
            self.consumer = Consumer(FETCH_DEFAULTS | dict(config))
        self._next: dict[int, int] = {}
        self._highs: dict[int, tuple[int, int]] = {}
        """Partition → (the high watermark ListOffsets last answered, the one used)."""

    def partitions(self) -> list[int]:
        """The topic's partitions (an error names the topic)."""
        with self._unavailable():
            metadata = self.consumer.list_topics(self.topic, timeout=REQUEST_SECONDS)
        found = metadata.topics.get(self.topic)
        if found is None or found.error is not None:
            reason = "not found" if found is None else str(found.error)
            raise KafkaUnavailable(f"topic {self.topic!r}: {reason}")
        return sorted(found.partitions)

    @contextmanager
    def _unavailable(self) -> Iterator[None]:
        """The client's errors as :class:`KafkaUnavailable`, naming the topic."""
        from confluent_kafka import KafkaException

        try:
            yield
        except KafkaException as error:
            raise KafkaUnavailable(f"topic {self.topic!r}: {error}") from None

    def watermarks(self, partitions: Sequence[int]) -> dict[int, tuple[int, int]]:
        """Low and high watermark of each partition, asked of the broker (ListOffsets).

        Some Kafka-compatible brokers (Tansu) answer ListOffsets with the last *batch's*
        base offset + 1, which would leave a batch's other records unread until another
        is produced; their fetch responses carry the right high watermark. So the record
        below each answer is fetched (:meth:`_probe`, all partitions in one fetch) and
        the high watermark is the larger of the two answers: on Kafka they agree, and a
        partition is probed again only when its answer moves; where they differ, at
        every call (a topic made again under the same answer must not be taken for the
        old one)."""
        from confluent_kafka import TopicPartition

        listed: dict[int, tuple[int, int]] = {}
        for partition in partitions:
            where = TopicPartition(self.topic, partition)
            with self._unavailable():
                found = self.consumer.get_watermark_offsets(
                    where, timeout=REQUEST_SECONDS, cached=False
                )
            if found is None:
                raise KafkaUnavailable(f"topic {self.topic!r} partition {partition}: no watermarks")
            listed[partition] = (int(found[0]), int(found[1]))
        probe = {
            partition: high - 1
            for partition, (low, high) in listed.items()
            if high > low and self._highs.get(partition) != (high, high)
        }
        fetched = self._probe(probe) if probe else {}
        answers = {}
        for partition, (low, high) in listed.items():
            answer = max(high, fetched.get(partition, -1))
            self._highs[partition] = (high, answer)
            answers[partition] = (low, answer)
        return answers

    def _probe(self, offsets: Mapping[int, int]) -> dict[int, int]:
        """The high watermark a fetch of the record at each partition's offset answers
        (-1: none): one assignment of them all, consumed until each has given a record
        or :data:`REQUEST_SECONDS` have passed, then given up, so that no fetch the broker
        holds open delays the next ListOffsets (by up to ``fetch.wait.max.ms`` each)."""
        from confluent_kafka import TopicPartition

        waiting = set(offsets)
        deadline = wall.monotonic() + REQUEST_SECONDS
        with self._unavailable():
            self.consumer.assign([TopicPartition(self.topic, p, o) for p, o in offsets.items()])
            while waiting and (left := deadline - wall.monotonic()) > 0:
                got = self.consumer.consume(PROBE_MESSAGES, timeout=min(left, PROBE_WAIT))
                waiting.difference_update(int(message.partition() or 0) for message in got)
            cached = {
                p: self.consumer.get_watermark_offsets(TopicPartition(self.topic, p), cached=True)
                for p in offsets
            }
            self.consumer.unassign()
        self._next = {}
        return {p: int(found[1]) if found is not None else -1 for p, found in cached.items()}

    def fetch(
        self, starts: Mapping[int, int], max_records: int, timeout: float
    ) -> tuple[list[KafkaRecord], dict[int, int]]:
        """Records from ``starts`` and the consumer's positions after them; the consumer
        is re-assigned only when ``starts`` differ from where the last fetch left off."""
        from confluent_kafka import KafkaError, TopicPartition

        if dict(starts) != self._next:
            assignment = [TopicPartition(self.topic, p, o) for p, o in starts.items()]
            with self._unavailable():
                self.consumer.assign(assignment)
            self._next = dict(starts)
        records = []
        with self._unavailable():
            messages = self.consumer.consume(num_messages=max_records, timeout=timeout)
        for message in messages:
            error = message.error()
            if error is not None:
                if error.code() == KafkaError._PARTITION_EOF:
                    continue
                if error.code() in OUT_OF_RANGE:
                    raise KafkaFailure(
                        f"topic {self.topic!r} partition {message.partition()}: offset "
                        f"{message.offset()} is out of the partition's range: {error.str()}"
                    )
                raise KafkaUnavailable(f"topic {self.topic!r}: {error.str()}")
            partition, offset = int(message.partition() or 0), int(message.offset() or 0)
            records.append(KafkaRecord(partition, offset, message.timestamp()[1], message.value()))
            self._next[partition] = offset + 1
        assigned = [TopicPartition(self.topic, p) for p in starts]
        with self._unavailable():
            positions = self.consumer.position(assigned)
        for found in positions:
            if found.offset >= 0:  # past transaction markers and compacted gaps too
                self._next[found.partition] = max(self._next.get(found.partition, 0), found.offset)
        return records, {p: self._next[p] for p in starts if p in self._next}

    def close(self) -> None:
        """Close the consumer (it never joined the group: nothing to leave)."""
        self.consumer.close()


def client_factory(kind: str, default: Any, module: str | None = None) -> Any:
    """The factory of ``kind`` (``reader`` or ``admin``) in ``module`` (default: the one
    :data:`CLIENT_ENV` names), or ``default`` without one."""
    name = module if module is not None else os.environ.get(CLIENT_ENV, "")
    return getattr(importlib.import_module(name), kind) if name else default
