"""Kafka sources on Spark: read by the project's own data source, so no connector jar is
needed; a broker out of reach holds the dataflow, it does not fail it. (No broker runs on
the development machines: a topic in files stands for one here, through the client
module the runtime takes, ``tests/runtime/fake_kafka.py``; reading a topic for real is
the kind e2e suite's, ``e2e/test_kafka_on_kind.py``.)"""

from __future__ import annotations

import socket
from pathlib import Path

import pytest
from pyspark.sql import SparkSession
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
from dataflow_operator.runtime.sources.kafka_client import CLIENT_ENV

pytestmark = pytest.mark.spark


def _closed_port() -> int:
    """A local port nothing listens on (bound, then released)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


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


def test_a_topic_hydrates_commits_its_group_and_regenerates_the_dropped_retraction(
    spark: SparkSession, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The README's example on a kafka source: the retraction the first run dropped at
    its expiration comes back at the restart from the ingested collection, exactly once,
    although the record is gone from the topic by then."""
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


def test_a_changed_dataflow_reads_its_kept_collection_then_kafka_after_it(
    spark: SparkSession, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A changed spec starts over on a new checkpoint but keeps the source's ingested
    collection: what was read before comes from there, and Kafka is read only after it
    (the record still in the topic is not read twice)."""
    monkeypatch.setenv(CLIENT_ENV, "tests.runtime.fake_kafka")
    servers = tmp_path / "kafka"
    fake_kafka.produce(servers, "clicks", 0, T, {"url": "/a"})
    kafka = {"bootstrapServers": str(servers), "topic": "clicks", "schema": "url STRING"}
    sources = [{"name": "clicks", "kafka": kafka}]

    def run(sql: str, start: int, until: int) -> list[list[str]]:
        manifest = write_manifests(tmp_path / "df.yaml", [dataflow_manifest("feed", sql, sources)])
        argv = [str(manifest), "--clock", "simulated", "--tick", "1d", "--reset", "feed"]
        argv += ["--state-dir", str(tmp_path / "state"), "--start-time", str(start)]
        result = run_replica(spark, tmp_path, [*argv, "--until", str(until)])
        assert result.code == EXIT_OK, result.err
        return result.lines

    assert run("SELECT url FROM clicks", T, T + 2 * DAY) == [[str(T), "1", "/a"]]
    fake_kafka.produce(servers, "clicks", 0, T + 3 * DAY, {"url": "/b"})
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
