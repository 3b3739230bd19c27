"""The cluster's release meet: the minimum over its replicas, held back by any that lags."""

from __future__ import annotations

from typing import Any

from dataflow_operator.api.dataflow import DataflowSpec, SourceStatus
from dataflow_operator.api.protocol import (
    DataflowReport,
    DesiredDataflow,
    DesiredDataflows,
    ReplicaPhase,
    ReplicaReport,
    SourceRelease,
)
from dataflow_operator.controller.shared.release_meet import release_meet


def _desired(clean: str = "Delete") -> DesiredDataflows:
    files: dict[str, Any] = {"path": "/in", "format": "json", "schema": "a INT"}
    spec = DataflowSpec.model_validate(
        {
            "cluster": "c",
            "kind": "Index",
            "sources": [
                {"name": "kept", "files": {**files, "path": "/kept"}},
                {"name": "drops", "files": {**files, "cleanSource": clean}},
            ],
            "sql": "SELECT a FROM kept UNION ALL SELECT a FROM drops",
        }
    )
    return DesiredDataflows(dataflows=[DesiredDataflow(name="d", spec=spec)])


def _report(listed: int | None) -> ReplicaReport:
    sources = [SourceStatus(name="kept", listed=listed), SourceStatus(name="drops", listed=listed)]
    return ReplicaReport(
        start_time=0,
        phase=ReplicaPhase.RUNNING,
        dataflows=[DataflowReport(name="d", sources=sources)],
    )


def test_the_meet_is_the_slowest_replica_s_listing_of_each_releasing_source() -> None:
    meet = release_meet([("r1", [_report(500)]), ("r2", [_report(300)])], _desired())
    assert meet.frontiers.sources == [SourceRelease(dataflow="d", source="drops", listed=300)]
    assert meet.held_by == {}  # "kept" does not release: it is not in the meet at all


def test_a_successor_reads_on_its_own_and_counts_too() -> None:
    meet = release_meet([("r1", [_report(500), _report(200)])], _desired())
    assert meet.frontiers.sources[0].listed == 200


def test_a_replica_without_a_report_holds_the_meet_back_and_is_named() -> None:
    for lagging in (
        [None],
        [_report(None)],
        [ReplicaReport(start_time=0, phase=ReplicaPhase.STARTING)],
    ):
        meet = release_meet([("r1", [_report(500)]), ("r2", lagging)], _desired())
        assert meet.frontiers.sources == []
        assert meet.held_by == {("d", "drops"): "r2"}


def test_sources_that_keep_their_files_send_nothing() -> None:
    meet = release_meet([("r1", [_report(500)])], _desired(clean="Off"))
    assert meet.frontiers.sources == []
    assert meet.held_by == {}


def _kafka_desired() -> DesiredDataflows:
    kafka = {"bootstrapServers": "k:9092", "topic": "t", "schema": "a INT"}
    spec = DataflowSpec.model_validate(
        {
            "cluster": "c",
            "kind": "Index",
            "sources": [{"name": "k", "kafka": kafka}],
            "sql": "SELECT a FROM k",
        }
    )
    return DesiredDataflows(dataflows=[DesiredDataflow(name="d", spec=spec)])


def _kafka_report(offsets: dict[str, int]) -> ReplicaReport:
    return ReplicaReport(
        start_time=0,
        phase=ReplicaPhase.RUNNING,
        dataflows=[DataflowReport(name="d", sources=[SourceStatus(name="k", offsets=offsets)])],
    )


def test_a_kafka_source_s_meet_is_per_partition_over_every_replica_and_attempt() -> None:
    meet = release_meet(
        [
            ("r1", [_kafka_report({"0": 9, "1": 4})]),
            ("r2", [_kafka_report({"0": 5, "1": 7, "2": 1}), _kafka_report({"0": 6, "1": 6})]),
        ],
        _kafka_desired(),
    )
    assert meet.frontiers.sources == [
        SourceRelease(dataflow="d", source="k", listed=0, offsets={"0": 5, "1": 4})
    ]
    assert meet.held_by == {}


def test_a_replica_that_has_committed_no_kafka_batch_holds_the_group_back() -> None:
    meet = release_meet(
        [("r1", [_kafka_report({"0": 9})]), ("r2", [_kafka_report({})])], _kafka_desired()
    )
    assert meet.frontiers.sources == []
    assert meet.held_by == {("d", "k"): "r2"}
