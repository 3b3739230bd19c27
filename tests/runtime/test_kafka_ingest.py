"""A kafka source's batches, as the driver fetches them: against a real broker (Tansu, the
``kafka_broker`` tests), and against an in-memory topic for what a broker cannot be made
to show on demand (retention deleting records below the source's position: Tansu does
not implement DeleteRecords; a read failing on one request only)."""

from __future__ import annotations

import json
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from time import sleep
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pyspark.sql.types import LongType, StringType
from tests.kafka_broker import TansuBroker, create_topic, fresh_topic, produce

from dataflow_operator.runtime.sources import kafka as kafka_module
from dataflow_operator.runtime.sources.ingested import IngestedCollection, IngestedUpper
from dataflow_operator.runtime.sources.kafka import (
    POSITIONS_FILE,
    READ_ERROR_FILE,
    KafkaIngest,
    parse_positions,
)
from dataflow_operator.runtime.sources.kafka_client import (
    KafkaFailure,
    KafkaRecord,
    KafkaUnavailable,
)
from dataflow_operator.runtime.sources.logs import HELD_FILE, HeldInput
from dataflow_operator.runtime.sources.options import SourceOptions
from dataflow_operator.runtime.storage import Location
from dataflow_operator.runtime.values import BadValue

FIELDS = [("url", StringType()), ("n", LongType())]


class FakeTopic:
    """A topic in memory: partitions of (timestamp, value) records from offset ``low``."""

    def __init__(self, partitions: int, low: int = 0) -> None:
        self.logs: dict[int, list[tuple[int, bytes | None]]] = {p: [] for p in range(partitions)}
        self.low = low
        self.fetches = 0
        self.asked: list[int] = []
        self.listed = 0
        self.closed = False

    def produce(self, partition: int, timestamp: int, value: dict[str, Any] | bytes) -> None:
        raw = value if isinstance(value, bytes) else json.dumps(value).encode()
        self.logs[partition].append((timestamp, raw))

    def partitions(self) -> list[int]:
        self.listed += 1
        return sorted(self.logs)

    def watermarks(self, partitions: Sequence[int]) -> dict[int, tuple[int, int]]:
        return {p: (self.low, self.low + len(self.logs[p])) for p in partitions}

    def fetch(
        self, starts: Mapping[int, int], max_records: int, timeout: float
    ) -> tuple[list[KafkaRecord], dict[int, int]]:
        self.fetches += 1
        self.asked.append(max_records)
        found: list[KafkaRecord] = []
        reached: dict[int, int] = {}
        for partition, start in sorted(starts.items()):
            for index in range(start - self.low, len(self.logs[partition])):
                if len(found) == max_records:
                    break
                timestamp, value = self.logs[partition][index]
                found.append(KafkaRecord(partition, self.low + index, timestamp, value))
                reached[partition] = self.low + index + 1
        return found, reached

    def close(self) -> None:
        self.closed = True


def _ingest(
    tmp_path: Path, topic: FakeTopic, *, max_records: int = 100, expiration: int = -1
) -> KafkaIngest:
    options = SourceOptions(
        {
            "kind": "kafka",
            "log_dir": str(tmp_path / "logs"),
            "topic": "clicks",
            "bootstrap_servers": "unused:9092",
            "max_records": str(max_records),
            "expiration": str(expiration),
            "until": str(expiration),
        }
    )
    return KafkaIngest(options, FIELDS, connect=lambda _: topic)


START = {"upper": 0, "seq": 0, "until": -1, "source": 0}


def _part_rows(ingest: KafkaIngest, seq: int) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = ingest.options.ingested.part(seq, 0).read_parquet().to_pylist()
    return rows


def test_a_batch_is_written_to_the_ingested_collection_before_its_offset(tmp_path: Path) -> None:
    topic = FakeTopic(2)
    topic.produce(0, 1000, {"url": "/a", "n": 1})
    topic.produce(0, 1005, {"url": "/b", "n": 2})
    topic.produce(1, 1003, {"url": "/c"})
    ingest = _ingest(tmp_path, topic)
    end = ingest.latest(START, 0, now=2000)
    assert end["partitions"] == {"0": 2, "1": 1}
    assert end["highs"] == {"0": 2, "1": 1}
    assert end["seq"] == 3
    assert end["upper"] == 2001  # every partition caught up: the clock
    rows = _part_rows(ingest, 3)
    assert sorted((r["url"], r["n"], r["__time"], r["__diff"]) for r in rows) == [
        ("/a", 1, 1000, 1),
        ("/b", 2, 1005, 1),
        ("/c", None, 1003, 1),
    ]


def test_off_the_wall_clock_the_frontier_follows_the_records_times(tmp_path: Path) -> None:
    topic = FakeTopic(1)
    topic.produce(0, 7, {"url": "/a"})
    topic.produce(0, 9, {"url": "/b"})
    end = _ingest(tmp_path, topic).latest(START, 0, now=None)
    assert end["upper"] == 10


def test_a_partition_with_records_waiting_holds_the_frontier(tmp_path: Path) -> None:
    topic = FakeTopic(2)
    for t in (100, 200, 300):
        topic.produce(0, t, {"url": "/a"})
    topic.produce(1, 150, {"url": "/b"})
    ingest = _ingest(tmp_path, topic, max_records=2)
    first = ingest.latest(START, 0, now=5000)
    assert first["partitions"] == {"0": 2, "1": 0}  # the limit stopped the batch
    assert first["upper"] == 0  # partition 1 has records but has not given a time yet
    second = ingest.latest(first, 0, now=5000)
    assert second["partitions"] == {"0": 3, "1": 1}
    assert second["upper"] == 5001  # both caught up: the clock
    assert {r["__time"] for r in _part_rows(ingest, 4)} == {150, 300}


def test_late_records_are_advanced_to_the_frontier(tmp_path: Path) -> None:
    topic = FakeTopic(1)
    topic.produce(0, 900, {"url": "/late"})
    start = {**START, "upper": 1200, "partitions": {"0": 0}}
    end = _ingest(tmp_path, topic).latest(start, 0, now=None)
    assert [r["__time"] for r in _part_rows(_ingest(tmp_path, topic), end["seq"])] == [1200]
    assert end["upper"] == 1200


def test_nothing_new_is_the_same_offset(tmp_path: Path) -> None:
    topic = FakeTopic(1)
    topic.produce(0, 10, {"url": "/a"})
    ingest = _ingest(tmp_path, topic)
    end = ingest.latest(START, 0, now=None)
    assert ingest.latest(end, 0, now=None) is end
    later = ingest.latest(end, 0, now=500)  # the clock moved: the frontier does
    assert later["upper"] == 501 and later["seq"] == end["seq"]


def test_a_record_at_the_expiration_is_held_back(tmp_path: Path) -> None:
    topic = FakeTopic(1)
    topic.produce(0, 100, {"url": "/in"})
    topic.produce(0, 2000, {"url": "/past"})
    topic.produce(0, 150, {"url": "/after"})
    ingest = _ingest(tmp_path, topic, expiration=1000)
    end = ingest.latest(START, 0, now=None)
    assert end["partitions"] == {"0": 1}
    assert end["upper"] <= 1000
    held = HeldInput.read(ingest.options.log_dir)
    assert held == HeldInput(file="clicks/0@1", time=2000, expiration=1000)
    assert [r["url"] for r in _part_rows(ingest, 1)] == ["/in"]
    assert ingest.options.log_dir.child(HELD_FILE).exists()


def test_offsets_deleted_before_they_were_read_are_one_clear_error(tmp_path: Path) -> None:
    topic = FakeTopic(1, low=50)
    topic.produce(0, 10, {"url": "/a"})
    start = {**START, "partitions": {"0": 20}}
    with pytest.raises(KafkaFailure, match=r"'clicks' partition 0: offsets 20\.\.49 were deleted"):
        _ingest(tmp_path, topic).latest(start, 0, now=None)


def test_a_new_topic_is_read_from_its_oldest_record(tmp_path: Path) -> None:
    topic = FakeTopic(1, low=50)
    topic.produce(0, 10, {"url": "/a"})
    end = _ingest(tmp_path, topic).latest(START, 0, now=None)
    assert end["partitions"] == {"0": 51}


def test_a_value_that_is_not_json_names_where_it_is(tmp_path: Path) -> None:
    topic = FakeTopic(1)
    topic.produce(0, 10, b"{not json")
    with pytest.raises(
        BadValue, match=r"topic 'clicks' partition 0 offset 0: the value is not JSON"
    ):
        _ingest(tmp_path, topic).latest(START, 0, now=None)
    topic.logs[0][0] = (10, b'{"n": "many"}')
    with pytest.raises(BadValue, match=r"partition 0 offset 0: column n"):
        _ingest(tmp_path, topic).latest(START, 0, now=None)


def test_a_part_left_by_a_batch_never_logged_is_replaced(tmp_path: Path) -> None:
    topic = FakeTopic(1)
    topic.produce(0, 10, {"url": "/a"})
    ingest = _ingest(tmp_path, topic)
    orphan = ingest.options.ingested.part(7, 0)
    ingest.latest(START, 0, now=None)  # wrote part 1
    orphan.write_text("left by a batch that never ran")
    topic.produce(0, 20, {"url": "/b"})
    ingest.latest({**START, "seq": 1, "partitions": {"0": 1}, "upper": 11}, 1, now=None)
    assert not orphan.exists()
    assert ingest.options.ingested.part(2, 0).exists()


def test_a_new_checkpoint_on_a_kept_collection_resumes_after_it(tmp_path: Path) -> None:
    topic = FakeTopic(1)
    for t in (10, 20, 30):
        topic.produce(0, t, {"url": f"/{t}"})
    ingest = _ingest(tmp_path, topic)
    logs = ingest.options.log_dir
    collection = IngestedCollection(logs.child("ingested"))
    kept = collection.part(2, 0)
    kept.write_text("the updates read before the spec changed")
    collection.write_upper(IngestedUpper(seq=2, upper=21))
    logs.child(POSITIONS_FILE).write_text(json.dumps({"seq": 2, "partitions": {"0": 2}}))
    end = ingest.latest(START, 2, now=None)
    assert end["partitions"] == {"0": 3}
    assert [r["url"] for r in _part_rows(ingest, 3)] == ["/30"]  # never /10 or /20 again
    assert end["upper"] == 31
    assert kept.exists()  # read again by the new checkpoint's first batch


def test_close_closes_the_client(tmp_path: Path) -> None:
    topic = FakeTopic(1)
    ingest = _ingest(tmp_path, topic)
    ingest.latest(START, 0, now=None)
    ingest.close()
    assert topic.closed


def test_location_of_a_part_is_under_the_source_logs(tmp_path: Path) -> None:
    ingest = _ingest(tmp_path, FakeTopic(1))
    assert ingest.options.ingested.location == Location.of(str(tmp_path / "logs" / "ingested"))


def test_kafka_out_of_reach_holds_the_source_and_says_why(tmp_path: Path) -> None:
    topic = FakeTopic(1)
    topic.produce(0, 10, {"url": "/a"})
    down = "topic 'clicks': broker transport failure"

    def unreachable() -> list[int]:
        raise KafkaUnavailable(down)

    ingest = _ingest(tmp_path, topic)
    topic.partitions = unreachable  # type: ignore[method-assign]
    start = {**START, "upper": 5}
    assert ingest.latest(start, 0, now=900) is start  # nothing read, the frontier held
    assert ingest.options.log_dir.child(READ_ERROR_FILE).read_text() == down
    assert topic.closed  # a new connection next time
    del topic.partitions
    end = ingest.latest(start, 0, now=900)
    assert end["partitions"] == {"0": 1}
    assert not ingest.options.log_dir.child(READ_ERROR_FILE).exists()


@settings(max_examples=40, deadline=None)
@given(
    batches=st.lists(
        st.lists(st.tuples(st.integers(0, 2), st.integers(0, 50)), max_size=6),
        min_size=1,
        max_size=5,
    ),
    max_records=st.integers(1, 4),
    wall_clock=st.booleans(),
)
def test_batches_ingest_every_record_once_in_order(
    batches: list[list[tuple[int, int]]], max_records: int, wall_clock: bool
) -> None:
    """Records produced between batches, read a few at a time: the collection's parts hold
    each record exactly once, the positions and the frontier only grow, and no record is
    given a time below the frontier it was read after."""
    with tempfile.TemporaryDirectory() as scratch:
        topic = FakeTopic(3)
        ingest = _ingest(Path(scratch), topic, max_records=max_records)
        offset: dict[str, Any] = dict(START)
        produced: list[str] = []
        now = 0
        for batch in [*batches, []]:
            for partition, time in batch:
                url = f"/{len(produced)}"
                topic.produce(partition, time, {"url": url})
                produced.append(url)
            for _ in range(len(produced) + 2):  # enough steps to catch up
                now += 10
                end = ingest.latest(offset, int(offset["seq"]), now if wall_clock else None)
                assert end["upper"] >= offset["upper"]
                before = parse_positions(offset.get("partitions"))
                after = parse_positions(end.get("partitions"))
                assert all(after[p] >= o for p, o in before.items())
                if end["seq"] != offset["seq"]:
                    rows = _part_rows(ingest, end["seq"])
                    assert all(r["__time"] >= offset["upper"] for r in rows)
                offset = end
        read = [
            r["url"]
            for seq in sorted(
                {
                    int(n.split("-")[1])
                    for n in ingest.options.ingested.location.list()
                    if n.startswith("part-")
                }
            )
            for r in _part_rows(ingest, seq)
        ]
        assert sorted(read) == sorted(produced)
        reached = parse_positions(offset.get("partitions"))
        assert {p: o for p, o in reached.items() if o} == {
            p: len(records) for p, records in topic.logs.items() if records
        }


def test_a_fetch_asks_for_what_waits_below_the_high_watermarks(tmp_path: Path) -> None:
    """A client waits until it has the count asked for: asking for more than there is
    would hold every step for the whole fetch timeout."""
    topic = FakeTopic(2)
    for time in (1, 2, 3):
        topic.produce(0, time, {"url": "/a"})
    topic.produce(1, 4, {"url": "/b"})
    _ingest(tmp_path, topic, max_records=100).latest(START, 0, now=None)
    assert topic.asked == [4]
    small = FakeTopic(1)
    for time in (1, 2, 3):
        small.produce(0, time, {"url": "/a"})
    _ingest(tmp_path / "small", small, max_records=2).latest(START, 0, now=None)
    assert small.asked == [2]


def test_a_batch_the_driver_fetches_holds_at_most_driver_records(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``maxRecordsPerBatch`` sizes the executors' batches; one the driver reads itself,
    in its one thread and its memory, stops at ``DRIVER_RECORDS``."""
    monkeypatch.setattr(kafka_module, "DRIVER_RECORDS", 3)
    topic = FakeTopic(1)
    for time in range(1, 6):
        topic.produce(0, time, {"url": "/a"})
    end = _ingest(tmp_path, topic, max_records=1_000_000).latest(START, 0, now=None)
    assert topic.asked == [3]
    assert end["partitions"] == {"0": 3}


def test_the_partitions_are_listed_again_only_after_a_while(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    topic = FakeTopic(1)
    topic.produce(0, 5, {"url": "/a"})
    ingest = _ingest(tmp_path, topic)
    end = ingest.latest(START, 0, now=10)
    end = ingest.latest(end, 0, now=20)
    assert topic.listed == 1
    topic.logs[1] = [(7, b'{"url": "/new"}')]  # a partition added to the topic
    monkeypatch.setattr(kafka_module, "PARTITIONS_SECONDS", 0.0)
    end = ingest.latest(end, 0, now=30)
    assert topic.listed == 2
    assert end["partitions"] == {"0": 1, "1": 1}


# --- against a real broker (Tansu: tests/kafka_broker.py) ------------------------------


def _broker_ingest(
    tmp_path: Path, servers: str, topic: str, *, max_records: int = 100, expiration: int = -1
) -> KafkaIngest:
    """The source's ingest on confluent-kafka, as a replica makes it."""
    options = SourceOptions(
        {
            "kind": "kafka",
            "log_dir": str(tmp_path / "logs"),
            "topic": topic,
            "bootstrap_servers": servers,
            "group_id": f"g-{topic}",
            "max_records": str(max_records),
            "expiration": str(expiration),
            "until": str(expiration),
        }
    )
    return KafkaIngest(options, FIELDS)


def _collection_urls(ingest: KafkaIngest) -> list[str]:
    seqs = sorted(
        int(n.split("-")[1])
        for n in ingest.options.ingested.location.list()
        if n.startswith("part-")
    )
    return [r["url"] for seq in seqs for r in _part_rows(ingest, seq)]


@pytest.mark.kafka_broker
@pytest.mark.slow
def test_a_broker_s_batched_records_are_all_read_once(
    tmp_path: Path, kafka_broker: TansuBroker
) -> None:
    """Records a producer sent in batches (one request per partition), read a few per
    batch: each once, the positions at the partitions' ends, the frontier from their
    times (every partition caught up, no clock)."""
    servers, topic = kafka_broker.servers, fresh_topic("clicks")
    create_topic(servers, topic, 2)
    produce(servers, topic, [(i % 2, 1000 + i, json.dumps({"url": f"/{i}"})) for i in range(10)])
    ingest = _broker_ingest(tmp_path, servers, topic, max_records=3)
    offset: dict[str, Any] = dict(START)
    try:
        for _ in range(8):
            offset = ingest.latest(offset, int(offset["seq"]), now=None)
    finally:
        ingest.close()
    assert sorted(_collection_urls(ingest)) == sorted(f"/{i}" for i in range(10))
    assert offset["partitions"] == {"0": 5, "1": 5}
    assert offset["highs"] == {"0": 5, "1": 5}
    assert offset["upper"] >= 1009  # the newest time of the last batch + 1


@pytest.mark.kafka_broker
def test_a_broker_s_record_at_the_expiration_is_held_back(
    tmp_path: Path, kafka_broker: TansuBroker
) -> None:
    servers, topic = kafka_broker.servers, fresh_topic("clicks")
    create_topic(servers, topic, 1)
    values = [(0, 100, '{"url": "/in"}'), (0, 2000, '{"url": "/past"}')]
    produce(servers, topic, values)
    ingest = _broker_ingest(tmp_path, servers, topic, expiration=1000)
    try:
        end = ingest.latest(START, 0, now=None)
    finally:
        ingest.close()
    assert end["partitions"] == {"0": 1}
    assert HeldInput.read(ingest.options.log_dir) == HeldInput(
        file=f"{topic}/0@1", time=2000, expiration=1000
    )
    assert _collection_urls(ingest) == ["/in"]


@pytest.mark.kafka_broker
def test_a_broker_s_value_that_does_not_parse_names_topic_partition_offset_and_field(
    tmp_path: Path, kafka_broker: TansuBroker
) -> None:
    servers, topic = kafka_broker.servers, fresh_topic("clicks")
    create_topic(servers, topic, 2)
    produce(servers, topic, [(1, 10, '{"url": "/a"}'), (1, 11, '{"url": "/b", "n": "many"}')])
    ingest = _broker_ingest(tmp_path, servers, topic)
    try:
        with pytest.raises(BadValue, match=rf"topic '{topic}' partition 1 offset 1: column n"):
            ingest.latest(START, 0, now=None)
    finally:
        ingest.close()
    assert _collection_urls(ingest) == []  # nothing of the batch is written


@pytest.mark.kafka_broker
def test_a_stopped_broker_holds_the_source_which_resumes_by_itself(
    tmp_path: Path, own_kafka_broker: TansuBroker, caplog: pytest.LogCaptureFixture
) -> None:
    """Down: the batch reads nothing, the frontier holds, the reason is recorded; back
    with the same log (Tansu keeps topics in memory: the test produces them again, at
    the same offsets), the source goes on from where it was, nothing lost or repeated."""
    servers, topic = own_kafka_broker.servers, fresh_topic("clicks")
    first = [(p, 100 + i, json.dumps({"url": f"/{i}"})) for i, p in enumerate([0, 1, 0, 1])]
    create_topic(servers, topic, 2)
    produce(servers, topic, first)
    ingest = _broker_ingest(tmp_path, servers, topic)
    try:
        offset = ingest.latest(START, 0, now=None)
        assert offset["partitions"] == {"0": 2, "1": 2}
        own_kafka_broker.stop()
        held = ingest.latest(offset, int(offset["seq"]), now=None)
        assert held is offset
        error = ingest.options.log_dir.child(READ_ERROR_FILE).read_text()
        assert error.startswith(f"topic {topic!r}")
        own_kafka_broker.start()
        create_topic(servers, topic, 2)
        produce(servers, topic, first)  # the same log, as a durable broker keeps it
        produce(servers, topic, [(1, 300, '{"url": "/after"}')])
        end = ingest.latest(offset, int(offset["seq"]), now=None)
    finally:
        ingest.close()
    assert end["partitions"] == {"0": 2, "1": 3}
    assert sorted(_collection_urls(ingest)) == ["/0", "/1", "/2", "/3", "/after"]
    assert not ingest.options.log_dir.child(READ_ERROR_FILE).exists()


@pytest.mark.kafka_broker
@pytest.mark.slow
def test_a_topic_recreated_behind_the_source_is_one_clear_error(
    tmp_path: Path, own_kafka_broker: TansuBroker
) -> None:
    """A broker restarted without its log (Tansu's memory storage: the topic is gone and
    made again, shorter): the source's positions are past the topic's end. Reading on
    would silently skip the new records below them; it is an error naming the topic,
    the partitions and the offsets."""
    servers, topic = own_kafka_broker.servers, fresh_topic("clicks")
    create_topic(servers, topic, 2)
    produce(servers, topic, [(p, 100 + p, '{"url": "/x"}') for p in (0, 1, 0, 1, 0)])
    ingest = _broker_ingest(tmp_path, servers, topic)
    try:
        offset = ingest.latest(START, 0, now=None)
        assert offset["partitions"] == {"0": 3, "1": 2}
        own_kafka_broker.restart()
        create_topic(servers, topic, 2)
        produce(servers, topic, [(0, 500, '{"url": "/new"}')])
        with pytest.raises(
            KafkaFailure,
            match=rf"topic '{topic}' partitions 0, 1: the source read up to offsets 3, 2 but "
            r"the topic ends at 1, 0",
        ):
            for _ in range(10):  # the client may first find its metadata stale: retried
                assert ingest.latest(offset, int(offset["seq"]), now=None) is offset
                sleep(0.2)
    finally:
        ingest.close()


def test_a_topic_shorter_than_the_positions_is_an_error_an_under_reported_end_is_not(
    tmp_path: Path,
) -> None:
    """Positions past a partition's end: a topic made again is an error naming the
    topic, partition and offsets; a broker that answers a smaller high watermark while
    it still holds the last record read (Tansu's ListOffsets) is not."""
    topic = FakeTopic(1)
    for t in (10, 20, 30):
        topic.produce(0, t, {"url": "/a"})
    start = {**START, "seq": 3, "partitions": {"0": 3}, "upper": 31}
    topic.watermarks = lambda partitions: {p: (0, 1) for p in partitions}  # type: ignore[method-assign]
    assert _ingest(tmp_path, topic).latest(start, 3, now=None) is start
    topic.logs[0] = topic.logs[0][:1]  # made again, shorter
    with pytest.raises(
        KafkaFailure,
        match=r"'clicks' partition 0: the source read up to offsets 3 but the topic ends at 1",
    ):
        _ingest(tmp_path, topic).latest(start, 3, now=None)
