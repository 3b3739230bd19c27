"""The reader's high watermarks against a real broker (Tansu, whose ListOffsets answers a
batch's first offset + 1): every partition's true end, found in one probe, and nothing
left assigned that would hold the next request up."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pytest
from tests.kafka_broker import TansuBroker, create_topic, fresh_topic, produce

from dataflow_operator.runtime.sources.kafka_client import ConfluentReader, consumer_settings

pytestmark = pytest.mark.kafka_broker

PARTITIONS = 4


class CountingConsumer:
    """The reader's consumer, counting its assignments."""

    def __init__(self, consumer: Any) -> None:
        self.consumer = consumer
        self.assigned: list[list[int]] = []

    def assign(self, partitions: list[Any]) -> None:
        self.assigned.append(sorted(p.partition for p in partitions))
        self.consumer.assign(partitions)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.consumer, name)


def _produce_batched(servers: str, topic: str, per_partition: int, first: int) -> None:
    """``per_partition`` records into each partition, sent in batches (as producers do)."""
    records = [
        (i % PARTITIONS, 1_000 + first + i, f"v{first + i}")
        for i in range(per_partition * PARTITIONS)
    ]
    produce(servers, topic, records, **{"linger.ms": 50})


def _fetch_all(
    reader: ConfluentReader, starts: Mapping[int, int], ends: Mapping[int, int]
) -> dict[int, list[int]]:
    """The offsets fetched from ``starts`` up to ``ends``, per partition."""
    offsets: dict[int, list[int]] = {p: [] for p in starts}
    positions = dict(starts)
    for _ in range(50):
        if positions == dict(ends):
            break
        records, positions = reader.fetch(positions, 1_000, 2.0)
        for record in records:
            offsets[record.partition].append(record.offset)
    return offsets


def test_every_partition_s_end_comes_from_one_probe_and_nothing_stays_assigned(
    kafka_broker: TansuBroker,
) -> None:
    servers, topic = kafka_broker.servers, fresh_topic()
    create_topic(servers, topic, PARTITIONS)
    _produce_batched(servers, topic, 100, 0)
    reader = ConfluentReader(topic, consumer_settings(servers, fresh_topic("group")))
    counting = CountingConsumer(reader.consumer)
    reader.consumer = counting
    try:
        everyone = list(range(PARTITIONS))
        assert reader.watermarks(everyone) == {p: (0, 100) for p in everyone}
        assert counting.assigned == [everyone]  # all the partitions probed at once
        assert counting.assignment() == []  # no fetch left open to delay the next request

        _produce_batched(servers, topic, 40, 400)
        assert reader.watermarks(everyone) == {p: (0, 140) for p in everyone}
        assert counting.assigned == [everyone, everyone]
        assert counting.assignment() == []

        # after a probe, a fetch reads from where it is asked: nothing skipped or repeated
        got = _fetch_all(reader, {0: 90, 3: 130}, {0: 140, 3: 140})
        assert got == {0: list(range(90, 140)), 3: list(range(130, 140))}
    finally:
        reader.close()
