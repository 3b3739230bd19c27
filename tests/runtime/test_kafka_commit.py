"""A kafka source's consumer group, committed after release steps: on state written by
hand (Spark's offset and commit logs), against a real broker (Tansu, ``kafka_broker``)
and, for the releaser's bookkeeping (which positions, when, how failures are counted),
an admin client in memory that can be told to fail."""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path

import pytest
from tests.kafka_broker import TansuBroker, committed, create_topic, fresh_topic

from dataflow_operator.api.dataflow import Source
from dataflow_operator.runtime.engine.kafka_commit import GroupCommitter
from dataflow_operator.runtime.engine.release import Releaser, SourceReader
from dataflow_operator.runtime.sources.ingested import IngestedCollection
from dataflow_operator.runtime.sources.kafka import POSITIONS_FILE, READ_ERROR_FILE
from dataflow_operator.runtime.storage import Location


class FakeAdmin:
    """Consumer groups in memory; ``fail`` makes the next calls raise."""

    def __init__(self) -> None:
        self.groups: dict[tuple[str, str], dict[int, int]] = {}
        self.commits: list[tuple[str, dict[int, int]]] = []
        self.fail: str | None = None
        self.closed = 0

    def committed(self, group: str, topic: str) -> dict[int, int]:
        if self.fail:
            raise ConnectionError(self.fail)
        return dict(self.groups.get((group, topic), {}))

    def commit(self, group: str, topic: str, offsets: Mapping[int, int]) -> None:
        if self.fail:
            raise ConnectionError(self.fail)
        self.groups.setdefault((group, topic), {}).update(offsets)
        self.commits.append((group, dict(offsets)))

    def close(self) -> None:
        self.closed += 1


def _source(group: str | None = None) -> Source:
    kafka = {"bootstrapServers": "k:9092", "topic": "clicks", "schema": "url STRING"}
    if group is not None:
        kafka["groupId"] = group
    return Source.model_validate({"name": "clicks", "kafka": kafka})


def _reader(root: Path, source: Source, batches: list[dict[int, int]]) -> SourceReader:
    """A reader whose checkpoint committed one batch per entry of ``batches`` (the
    positions it reached; the high watermarks are 10 past them)."""
    logs = root / "d" / "sources" / "clicks"
    logs.mkdir(parents=True)
    checkpoint = root / "d" / "checkpoint"
    (checkpoint / "offsets").mkdir(parents=True)
    (checkpoint / "commits").mkdir()
    _commit(checkpoint, batches)
    return SourceReader("d", source, 0, Location.of(logs), Location.of(checkpoint), cluster="c")


def _commit(checkpoint: Path, batches: list[dict[int, int]]) -> None:
    for batch, positions in enumerate(batches):
        offset = {
            "upper": 1000 + batch,
            "seq": sum(positions.values()),
            "until": -1,
            "source": 0,
            "partitions": {str(p): o for p, o in positions.items()},
            "highs": {str(p): o + 10 for p, o in positions.items()},
        }
        (checkpoint / "offsets" / str(batch)).write_text(f"v1\n{{}}\n{json.dumps(offset)}\n")
        (checkpoint / "commits" / str(batch)).write_text("v1\n{}\n")


def _releaser(admin: FakeAdmin, *, own_cluster: bool = True) -> Releaser:
    releaser = Releaser(own_cluster=own_cluster)
    releaser.groups = GroupCommitter(lambda servers, config: admin, synchronous=True)
    return releaser


def test_the_group_is_committed_at_the_offset_resumption_frontier(tmp_path: Path) -> None:
    admin = FakeAdmin()
    reader = _reader(tmp_path, _source(), [{0: 3, 1: 1}, {0: 5, 1: 2}])
    releaser = _releaser(admin)
    releaser.step([reader], force=True)
    assert admin.groups == {("dataflow.c.d.clicks", "clicks"): {0: 5, 1: 2}}
    (report,) = releaser.reports("d")
    assert report.offsets == {"0": 5, "1": 2}
    assert report.committed_offsets == {"0": 5, "1": 2}
    assert report.upstream_lag == 20
    assert report.resumption_frontier == [1001]
    # where a new checkpoint on the collection resumes, recorded with its upper
    recorded = json.loads(reader.logs.child(POSITIONS_FILE).read_text())
    assert recorded == {"seq": 7, "partitions": {"0": 5, "1": 2}}
    upper = IngestedCollection(reader.logs.child("ingested")).read_upper()
    assert upper is not None and (upper.seq, upper.upper) == (7, 1001)
    releaser.step([reader], force=True)
    assert len(admin.commits) == 1  # nothing new: nothing committed again


def test_the_configured_group_is_used(tmp_path: Path) -> None:
    admin = FakeAdmin()
    releaser = _releaser(admin)
    releaser.step([_reader(tmp_path, _source("analytics"), [{0: 4}])], force=True)
    assert admin.groups == {("analytics", "clicks"): {0: 4}}


def test_a_failed_commit_is_reported_and_retried_never_raised(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    admin = FakeAdmin()
    admin.fail = "broker unreachable"
    reader = _reader(tmp_path, _source(), [{0: 4}])
    releaser = _releaser(admin)
    releaser.step([reader], force=True)
    (report,) = releaser.reports("d")
    assert report.release_failures == 1
    assert report.last_release_error is not None
    assert "consumer group 'dataflow.c.d.clicks'" in report.last_release_error
    assert "broker unreachable" in report.last_release_error
    assert report.committed_offsets is None
    assert admin.closed == 1  # a client whose request failed is destroyed at once
    admin.fail = None
    releaser.step([reader], force=True)  # the retry
    (report,) = releaser.reports("d")
    assert (report.release_failures, report.last_release_error) == (1, None)
    assert report.committed_offsets == {"0": 4}


def test_a_group_ahead_is_never_moved_back(tmp_path: Path) -> None:
    admin = FakeAdmin()
    admin.groups[("dataflow.c.d.clicks", "clicks")] = {0: 9, 1: 0}
    releaser = _releaser(admin)
    releaser.step([_reader(tmp_path, _source(), [{0: 4, 1: 2}])], force=True)
    assert admin.commits == [("dataflow.c.d.clicks", {1: 2})]
    (report,) = releaser.reports("d")
    assert report.committed_offsets == {"0": 9, "1": 2}


def test_on_a_cluster_only_the_operator_s_meet_is_committed(tmp_path: Path) -> None:
    admin = FakeAdmin()
    reader = _reader(tmp_path, _source(), [{0: 6, 1: 3}])
    releaser = _releaser(admin, own_cluster=False)
    releaser.step([reader], force=True)
    assert admin.commits == []  # the other replicas' progress is not known yet
    (report,) = releaser.reports("d")
    assert report.offsets == {"0": 6, "1": 3}  # what the operator's meet is made of
    releaser.cluster_offsets = {("d", "clicks"): {0: 2, 1: 5}}
    releaser.step([reader], force=True)
    assert admin.groups == {("dataflow.c.d.clicks", "clicks"): {0: 2, 1: 3}}


def test_nothing_is_committed_before_a_batch_is(tmp_path: Path) -> None:
    admin = FakeAdmin()
    releaser = _releaser(admin)
    releaser.step([_reader(tmp_path, _source(), [])], force=True)
    assert admin.commits == []
    (report,) = releaser.reports("d")
    assert report.offsets is None and report.upstream_lag is None


def test_why_kafka_could_not_be_read_is_in_the_report(tmp_path: Path) -> None:
    reader = _reader(tmp_path, _source(), [])
    reader.logs.child(READ_ERROR_FILE).write_text("topic 'clicks': not found")
    releaser = _releaser(FakeAdmin())
    releaser.step([reader], force=True)
    (report,) = releaser.reports("d")
    assert report.last_read_error == "topic 'clicks': not found"
    reader.logs.child(READ_ERROR_FILE).delete()
    releaser.step([reader], force=True)
    assert releaser.reports("d")[0].last_read_error is None


def test_commits_run_in_the_background_and_their_failure_comes_back(tmp_path: Path) -> None:
    admin = FakeAdmin()
    committer = GroupCommitter(lambda servers, config: admin)
    source, key = _source(), ("d", "clicks")
    committer.commit_source(source, "c", key, {0: 3}, {0: 3})  # handed over
    committer.close()  # waits for the commit under way
    assert admin.groups == {("dataflow.c.d.clicks", "clicks"): {0: 3}}
    assert committer.commit_source(source, "c", key, {0: 3}, {0: 3}) == {0: 3}
    admin.fail = "broker unreachable"
    committer.commit_source(source, "c", key, {0: 5}, {0: 5})
    committer.close()
    with pytest.raises(Exception, match=r"consumer group 'dataflow\.c\.d\.clicks'.*unreachable"):
        committer.commit_source(source, "c", key, {0: 5}, {0: 5})
    admin.fail = None
    committer.commit_source(source, "c", key, {0: 5}, {0: 5})  # retried
    committer.close()
    assert admin.groups[("dataflow.c.d.clicks", "clicks")] == {0: 5}


@pytest.mark.kafka_broker
def test_the_group_is_committed_on_a_real_broker_and_never_moved_back(
    tmp_path: Path, kafka_broker: TansuBroker
) -> None:
    """The admin client on confluent-kafka against Tansu: the group's offsets are set
    without a member joining, read back, and a meet behind them commits nothing."""
    servers, topic = kafka_broker.servers, fresh_topic("clicks")
    create_topic(servers, topic, 2)
    kafka = {"bootstrapServers": servers, "topic": topic, "schema": "url STRING"}
    source = Source.model_validate({"name": "clicks", "kafka": kafka})
    committer = GroupCommitter(synchronous=True)
    try:
        assert committer.commit_source(source, "c", ("d", "clicks"), {0: 3, 1: 1}, None) == {}
        done = committer.commit_source(source, "c", ("d", "clicks"), {0: 3, 1: 1}, {0: 3, 1: 1})
        assert done == {0: 3, 1: 1}
        assert committed(servers, "dataflow.c.d.clicks", topic) == {0: 3, 1: 1}
        committer.commit_source(source, "c", ("d", "clicks"), {0: 2, 1: 4}, {0: 2, 1: 4})
    finally:
        committer.close()
    assert committed(servers, "dataflow.c.d.clicks", topic) == {0: 3, 1: 4}


@pytest.mark.kafka_broker
@pytest.mark.slow
def test_a_commit_to_a_stopped_broker_fails_and_is_retried(
    tmp_path: Path, own_kafka_broker: TansuBroker
) -> None:
    servers, topic = own_kafka_broker.servers, fresh_topic("clicks")
    kafka = {"bootstrapServers": servers, "topic": topic, "schema": "url STRING"}
    source = Source.model_validate({"name": "clicks", "kafka": kafka})
    own_kafka_broker.stop()
    committer = GroupCommitter(synchronous=True)
    try:
        with pytest.raises(Exception, match=r"consumer group 'dataflow\.c\.d\.clicks'"):
            committer.commit_source(source, "c", ("d", "clicks"), {0: 2}, {0: 2})
        own_kafka_broker.start()
        create_topic(servers, topic, 1)
        assert committer.commit_source(source, "c", ("d", "clicks"), {0: 2}, {0: 2}) == {0: 2}
    finally:
        committer.close()
    assert committed(servers, "dataflow.c.d.clicks", topic) == {0: 2}
