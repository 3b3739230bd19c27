"""Kafka sources on Spark: read by the project's own data source, so no connector jar is
needed; a broker out of reach holds the dataflow, it does not fail it.

The topics are on a real broker (Tansu, ``tests/kafka_broker.py``). What Tansu cannot be
made to do stays on a topic in files (``tests/runtime/fake_kafka.py``, the client module
the runtime takes): records deleted below the positions read (it has no DeleteRecords).
The kind e2e suite reads Apache Kafka (``e2e/test_kafka_on_kind.py``)."""

from __future__ import annotations

import json
import socket
import time
from pathlib import Path
from typing import Any

import pytest
import yaml
from pyspark.sql import SparkSession
from tests.kafka_broker import TansuBroker, committed, create_topic, fresh_topic, produce
from tests.runtime import fake_kafka
from tests.runtime.runs import (
    DAY,
    LAST_30_DAYS_SQL,
    T,
    dataflow_manifest,
    run_replica,
    write_manifests,
)

from dataflow_operator.api.dataflow import DataflowSpec
from dataflow_operator.api.injection import EXIT_EXPIRED, EXIT_OK
from dataflow_operator.cli import main
from dataflow_operator.runtime.engine.config import EngineConfig
from dataflow_operator.runtime.engine.engine import Engine, dataflows_from
from dataflow_operator.runtime.engine.running import BatchOutput
from dataflow_operator.runtime.sources.kafka_client import CLIENT_ENV

EXAMPLE = Path(__file__).parents[2] / "examples" / "last-30-days.yaml"

pytestmark = pytest.mark.spark


def _closed_port() -> int:
    """A local port nothing listens on (bound, then released)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@pytest.mark.slow
def test_a_broker_out_of_reach_holds_the_dataflow_and_says_why(
    spark: SparkSession, tmp_path: Path
) -> None:
    spec = DataflowSpec.model_validate(
        {
            "cluster": "c",
            "kind": "Subscribe",
            "sources": [
                {
                    "name": "clicks",
                    "kafka": {
                        "bootstrapServers": f"127.0.0.1:{_closed_port()}",
                        "topic": "clicks",
                        "schema": "url STRING",
                    },
                }
            ],
            "sql": "SELECT url FROM clicks",
        }
    )
    engine = Engine(spark, EngineConfig(tmp_path / "state", T))
    try:
        result = engine.apply(dataflows_from([("clicks", spec)]))
        assert result.failed == {}  # no connector needed: the source is the project's own
        engine.step(T + 1000)
        engine.release_inputs(force=True)
        (report,) = engine.report().dataflows
        assert report.last_error is None  # held, not failed: retried every step
        assert not report.hydrated
        (source,) = report.sources
        assert source.last_read_error is not None
        assert source.last_read_error.startswith("topic 'clicks'")
        assert source.committed_offsets is None
    finally:
        engine.close()


@pytest.mark.slow
def test_the_dropped_retraction_comes_back_although_retention_deleted_the_record(
    spark: SparkSession, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The example on a kafka source: the retraction the first run dropped at its
    expiration comes back at the restart from the ingested collection, exactly once,
    although the record is gone from the topic by then (a topic in files: Tansu does not
    implement DeleteRecords; on a real broker, the acceptance test below)."""
    monkeypatch.setenv(CLIENT_ENV, "tests.runtime.fake_kafka")
    servers = tmp_path / "kafka"
    row = {"content": "hello", "event_ts": "2026-01-01T00:00:00Z"}
    fake_kafka.produce(servers, "events", 0, T, row)
    kafka = {"bootstrapServers": str(servers), "topic": "events"}
    kafka |= {"schema": "content STRING, event_ts TIMESTAMP"}
    manifest = write_manifests(
        tmp_path / "df.yaml",
        [dataflow_manifest("last-30-days", LAST_30_DAYS_SQL, [{"name": "events", "kafka": kafka}])],
    )
    common = [str(manifest), "--clock", "simulated", "--tick", "1d"]
    common += ["--state-dir", str(tmp_path / "state"), "--expiration-offset", "21d"]

    first = run_replica(spark, tmp_path, [*common, "--start-time", str(T)])
    assert first.code == EXIT_EXPIRED, first.err
    assert first.lines == [[str(T), "1", "2026-01-01T00:00:00.000Z", "hello"]]
    flow = first.dataflow("last-30-days")
    assert flow["hydrated"]
    (source,) = flow["sources"]
    assert source["offsets"] == {"0": 1}
    assert source["upstreamLag"] == 0
    group = "dataflow.default.last-30-days.events"
    assert fake_kafka.committed(servers, group) == {"events": {"0": 1}}

    fake_kafka.delete_records(servers, "events", {0: 1})  # retention: gone upstream
    second = run_replica(
        spark,
        tmp_path,
        [*common, "--start-time", str(T + 21 * DAY), "--until", str(T + 32 * DAY)],
    )
    assert second.code == EXIT_OK, second.err
    retraction = [str(T + 30 * DAY + 1), "-1", "2026-01-01T00:00:00.000Z", "hello"]
    assert second.lines == [retraction]


@pytest.mark.kafka_broker
@pytest.mark.slow
def test_a_changed_dataflow_reads_its_kept_collection_then_kafka_after_it(
    spark: SparkSession, tmp_path: Path, kafka_broker: TansuBroker
) -> None:
    """A changed spec starts over on a new checkpoint but keeps the source's ingested
    collection: what was read before comes from there, and Kafka is read only after it
    (the record still in the topic is not read twice)."""
    servers, topic = kafka_broker.servers, fresh_topic("clicks")
    create_topic(servers, topic, 1)
    produce(servers, topic, [(0, T, json.dumps({"url": "/a"}))])
    kafka = {"bootstrapServers": servers, "topic": topic, "schema": "url STRING"}
    sources = [{"name": "clicks", "kafka": kafka}]

    def run(sql: str, start: int, until: int) -> list[list[str]]:
        manifest = write_manifests(tmp_path / "df.yaml", [dataflow_manifest("feed", sql, sources)])
        argv = [str(manifest), "--clock", "simulated", "--tick", "1d", "--reset", "feed"]
        argv += ["--state-dir", str(tmp_path / "state"), "--start-time", str(start)]
        result = run_replica(spark, tmp_path, [*argv, "--until", str(until)])
        assert result.code == EXIT_OK, result.err
        return result.lines

    assert run("SELECT url FROM clicks", T, T + 2 * DAY) == [[str(T), "1", "/a"]]
    produce(servers, topic, [(0, T + 3 * DAY, json.dumps({"url": "/b"}))])
    changed = run("SELECT upper(url) AS u FROM clicks", T + 2 * DAY, T + 5 * DAY)
    assert changed == [[str(T), "1", "/A"], [str(T + 3 * DAY), "1", "/B"]]


def test_a_kafka_source_read_twice_by_one_dataflow_is_refused(
    spark: SparkSession, tmp_path: Path
) -> None:
    kafka = {"bootstrapServers": "k:9092", "topic": "clicks", "schema": "url STRING"}
    spec = DataflowSpec.model_validate(
        {
            "cluster": "c",
            "kind": "Subscribe",
            "sources": [{"name": "clicks", "kafka": kafka}],
            "sql": "SELECT a.url FROM clicks a JOIN clicks b ON a.url = b.url",
        }
    )
    engine = Engine(spark, EngineConfig(tmp_path / "state", T))
    try:
        result = engine.apply(dataflows_from([("pairs", spec)]))
        assert result.failed["pairs"] == (
            'source "clicks": a kafka source may be read once by a dataflow, this SQL reads '
            "it 2 times; read it in a dataflow of its own and use that dataflow as the source"
        )
    finally:
        engine.close()


def test_explain_plans_a_kafka_dataflow_without_reaching_a_broker(
    spark: SparkSession, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    kafka = {"bootstrapServers": f"127.0.0.1:{_closed_port()}", "topic": "clicks"}
    kafka |= {"schema": "url STRING"}
    manifest = write_manifests(
        tmp_path / "feed.yaml",
        [
            dataflow_manifest(
                "feed", "SELECT upper(url) AS u FROM clicks", [{"name": "clicks", "kafka": kafka}]
            )
        ],
    )
    assert main(["explain", str(manifest), "--node-ids"]) == 0
    out = capsys.readouterr().out
    assert "node_id" in out and "error" not in out, out


def _example_on_kafka(path: Path, servers: str, topic: str) -> Path:
    """The repository's example, its source a kafka topic instead of a table."""
    documents = list(yaml.safe_load_all(EXAMPLE.read_text()))
    for document in documents:
        if document["kind"] == "Dataflow":
            (source,) = document["spec"]["sources"]
            schema = source["table"]["schema"]
            kafka = {"bootstrapServers": servers, "topic": topic, "schema": schema}
            document["spec"]["sources"] = [{"name": source["name"], "kafka": kafka}]
    return write_manifests(path, documents)


@pytest.mark.kafka_broker
@pytest.mark.slow
def test_the_example_on_a_two_partition_topic_as_a_user_runs_it(
    spark: SparkSession, tmp_path: Path, kafka_broker: TansuBroker
) -> None:
    """The acceptance scenario: records produced at their event times; ``run`` prints the
    inserts and stops at the replica's expiration (21 days: exit 75) with the consumer
    group at the end of both partitions; run again from there on the same state, it
    prints the retractions 30 days + 1 ms later exactly once (from the ingested
    collection); a record produced afterwards is printed once, the group follows it."""
    servers, topic = kafka_broker.servers, fresh_topic("events")
    create_topic(servers, topic, 2)
    produce(
        servers,
        topic,
        [
            (0, T, json.dumps({"content": "hello", "event_ts": "2026-01-01T00:00:00Z"})),
            (1, T, json.dumps({"content": "world", "event_ts": "2026-01-01T00:00:00Z"})),
        ],
    )
    manifest = _example_on_kafka(tmp_path / "last-30-days.yaml", servers, topic)
    common = [str(manifest), "--clock", "simulated", "--tick", "1d"]
    common += ["--state-dir", str(tmp_path / "state")]
    group = "dataflow.default.last-30-days.events"
    ts = "2026-01-01T00:00:00.000Z"

    first = run_replica(spark, tmp_path, [*common, "--start-time", str(T)])
    assert first.code == EXIT_EXPIRED, first.err
    assert sorted(first.lines) == [[str(T), "1", ts, "hello"], [str(T), "1", ts, "world"]]
    (source,) = first.dataflow("last-30-days")["sources"]
    assert source["offsets"] == {"0": 1, "1": 1}
    assert source["upstreamLag"] == 0
    assert committed(servers, group, topic) == {0: 1, 1: 1}

    second = run_replica(
        spark, tmp_path, [*common, "--start-time", str(T + 21 * DAY), "--until", str(T + 32 * DAY)]
    )
    assert second.code == EXIT_OK, second.err
    retracted = str(T + 30 * DAY + 1)
    assert sorted(second.lines) == [[retracted, "-1", ts, "hello"], [retracted, "-1", ts, "world"]]

    later = {"content": "later", "event_ts": "2026-02-03T00:00:00Z"}
    produce(servers, topic, [(1, T + 33 * DAY, json.dumps(later))])
    third = run_replica(
        spark, tmp_path, [*common, "--start-time", str(T + 32 * DAY), "--until", str(T + 35 * DAY)]
    )
    assert third.code == EXIT_OK, third.err
    assert third.lines == [[str(T + 33 * DAY), "1", "2026-02-03T00:00:00.000Z", "later"]]
    assert committed(servers, group, topic) == {0: 1, 1: 2}


def _consolidated(outputs: list[BatchOutput]) -> dict[tuple[Any, ...], int]:
    """Each row's multiplicity over every batch printed (retractions cancel inserts)."""
    total: dict[tuple[Any, ...], int] = {}
    for output in outputs:
        for _time, diff, row in output.updates:
            total[row] = total.get(row, 0) + diff
    return {row: n for row, n in total.items() if n}


@pytest.mark.kafka_broker
@pytest.mark.slow
def test_a_broker_down_for_10s_is_reported_once_and_the_dataflow_resumes_by_itself(
    spark: SparkSession,
    tmp_path: Path,
    own_kafka_broker: TansuBroker,
    capfd: pytest.CaptureFixture[str],
) -> None:
    """The broker stopped mid-run for 10 s and started again on the same port (with its
    log: Tansu keeps topics in memory, so the test produces them again at the same
    offsets, as a durable broker would have them). Meanwhile the dataflow is held, not
    failed: its source reports why (lastReadError, one warning line, no traceback);
    then it goes on by itself, every record printed exactly once."""
    servers, topic = own_kafka_broker.servers, fresh_topic("clicks")
    before = [(i % 2, T + i, json.dumps({"url": f"/{i}"})) for i in range(6)]
    create_topic(servers, topic, 2)
    produce(servers, topic, before)
    kafka = {"bootstrapServers": servers, "topic": topic, "schema": "url STRING"}
    spec = DataflowSpec.model_validate(
        {
            "cluster": "c",
            "kind": "Subscribe",
            "sources": [{"name": "clicks", "kafka": kafka}],
            "sql": "SELECT url FROM clicks",
        }
    )
    outputs: list[BatchOutput] = []
    engine = Engine(spark, EngineConfig(tmp_path / "state", T), on_output=outputs.append)
    try:
        assert engine.apply(dataflows_from([("clicks", spec)])).failed == {}
        engine.step(T + 1000)
        assert len(_consolidated(outputs)) == 6
        own_kafka_broker.stop()
        down_until = time.monotonic() + 10
        now = T + 2000
        while time.monotonic() < down_until:
            now += 1000
            engine.step(now)
            engine.release_inputs(force=True)
        (report,) = engine.report().dataflows
        assert report.last_error is None
        (source,) = report.sources
        assert source.last_read_error is not None
        assert source.last_read_error.startswith(f"topic {topic!r}")
        own_kafka_broker.start()
        create_topic(servers, topic, 2)
        produce(servers, topic, before)  # the log the broker kept
        produce(servers, topic, [(1, now, json.dumps({"url": "/after"}))])
        for _ in range(5):
            now += 1000
            engine.step(now)
            engine.release_inputs(force=True)
            if len(_consolidated(outputs)) == 7:
                break
        (report,) = engine.report().dataflows
        assert report.last_error is None
        assert report.sources[0].last_read_error is None
    finally:
        engine.close()
    assert _consolidated(outputs) == {(f"/{i}",): 1 for i in range(6)} | {("/after",): 1}
    err = capfd.readouterr().err  # the source runs in Spark's Python workers: their stderr
    lines = [line for line in err.splitlines() if topic in line or "rdkafka" in line]
    assert len([line for line in lines if "kafka source not read" in line]) == 1, lines
    assert not [line for line in lines if "rdkafka" in line], lines[:3]
    assert "Traceback" not in err


@pytest.mark.kafka_broker
def test_a_value_that_does_not_parse_fails_the_dataflow_naming_where_and_the_field(
    spark: SparkSession, tmp_path: Path, kafka_broker: TansuBroker
) -> None:
    servers, topic = kafka_broker.servers, fresh_topic("clicks")
    create_topic(servers, topic, 2)
    produce(servers, topic, [(0, T, '{"url": "/a", "n": 1}'), (0, T, '{"url": "/b", "n": "x"}')])
    kafka = {"bootstrapServers": servers, "topic": topic, "schema": "url STRING, n BIGINT"}
    spec = DataflowSpec.model_validate(
        {
            "cluster": "c",
            "kind": "Subscribe",
            "sources": [{"name": "clicks", "kafka": kafka}],
            "sql": "SELECT url, n FROM clicks",
        }
    )
    engine = Engine(spark, EngineConfig(tmp_path / "state", T))
    try:
        assert engine.apply(dataflows_from([("clicks", spec)])).failed == {}
        engine.step(T + 1000)
        failures = engine.failures()
    finally:
        engine.close()
    assert f"topic '{topic}' partition 0 offset 1: column n" in failures["clicks"], failures
