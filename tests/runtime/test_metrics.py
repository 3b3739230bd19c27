"""Prometheus text rendered from a replica report."""

from __future__ import annotations

import math

import pytest

from dataflow_operator.api.dataflow import NodeStatus, SourceStatus
from dataflow_operator.api.protocol import (
    DataflowReport,
    ReplicaPhase,
    ReplicaReport,
)
from dataflow_operator.runtime.engine.shutdowns import ShutdownHistogram
from dataflow_operator.runtime.serve.metrics import render_metrics

parser = pytest.importorskip("prometheus_client.parser", reason="prometheus_client parses")


def _samples(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    return {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in parser.text_string_to_metric_families(text)
        for sample in family.samples
    }


def test_report_renders_per_dataflow_gauges() -> None:
    now = 1_700_000_000_000
    report = ReplicaReport(
        start_time=now - 60_000,
        expiration=now + 3_600_000,
        phase=ReplicaPhase.RUNNING,
        dataflows=[
            DataflowReport(
                name='we"ird\\name',
                frontier=[now - 1500],
                expiration=now + 7_200_000,
                hydrated=True,
                hydration_time_ms=2500,
                nodes=[
                    NodeStatus(id=1, operator="Scan", hydrated=True),
                    NodeStatus(id=2, operator="Agg", hydrated=True),
                ],
                state_rows=42,
                state_bytes=4096,
            ),
            DataflowReport(name="closed", frontier=[], last_error="boom"),
        ],
    )
    samples = _samples(render_metrics(report, now, {"replica": "r1"}))
    flow = (("dataflow", 'we"ird\\name'), ("replica", "r1"))
    assert samples[("dataflow_write_frontier_seconds", flow)] == (now - 1500) / 1000
    assert samples[("dataflow_expiration_remaining_seconds", flow)] == 7200
    assert samples[("dataflow_hydrated", flow)] == 1
    assert samples[("dataflow_hydration_time_seconds", flow)] == 2.5
    assert samples[("dataflow_plan_nodes_hydrated", flow)] == 2
    assert samples[("dataflow_state_rows", flow)] == 42
    assert samples[("dataflow_state_bytes", flow)] == 4096
    closed = (("dataflow", "closed"), ("replica", "r1"))
    assert math.isinf(samples[("dataflow_write_frontier_seconds", closed)])
    assert samples[("dataflow_hydrated", closed)] == 0
    assert samples[("dataflow_failing", closed)] == 1
    assert ("dataflow_expiration_remaining_seconds", closed) not in samples
    assert samples[("dataflow_replica_expiration_remaining_seconds", (("replica", "r1"),))] == 3600
    assert samples[("dataflow_replica_phase", (("phase", "Running"), ("replica", "r1")))] == 1
    assert samples[("dataflow_replica_phase", (("phase", "Expired"), ("replica", "r1")))] == 0
    assert samples[("dataflow_replica_dataflows", (("replica", "r1"),))] == 2


def test_an_empty_replica_still_renders() -> None:
    text = render_metrics(ReplicaReport(start_time=0, phase=ReplicaPhase.STARTING), 0)
    samples = _samples(text)
    assert samples[("dataflow_replica_dataflows", ())] == 0
    assert text.endswith("\n")


def test_shutdown_durations_render_as_a_prometheus_histogram() -> None:
    histogram = ShutdownHistogram()
    for seconds in (0.05, 0.3, 0.3, 1.5, 120.0):
        histogram.observe(seconds)
    report = ReplicaReport(
        start_time=0,
        phase=ReplicaPhase.RUNNING,
        dataflows=[DataflowReport(name="going", dropping=True)],
        shutdowns=histogram.model(),
    )
    samples = _samples(render_metrics(report, 1000, {"replica": "r1"}))
    name = "dataflow_shutdown_duration_seconds"
    bucket = {
        le: samples[(f"{name}_bucket", (("le", le), ("replica", "r1")))]
        for le in ("0.1", "0.5", "1.0", "2.0", "60.0", "+Inf")
    }
    assert bucket == {"0.1": 1, "0.5": 3, "1.0": 3, "2.0": 4, "60.0": 4, "+Inf": 5}
    assert samples[(f"{name}_count", (("replica", "r1"),))] == 5
    assert samples[(f"{name}_sum", (("replica", "r1"),))] == pytest.approx(122.15)
    assert samples[("dataflow_dropping", (("dataflow", "going"), ("replica", "r1")))] == 1


def test_sources_render_their_ingestion_and_release() -> None:
    source = SourceStatus(
        name="events",
        resumption_frontier=[1_700_000_000_000],
        offset=3,
        released_files=2,
        ingested_rows=10,
        ingested_bytes=2048,
        release_failures=1,
    )
    report = ReplicaReport(
        start_time=0,
        phase=ReplicaPhase.RUNNING,
        dataflows=[DataflowReport(name="d", sources=[source])],
    )
    samples = _samples(render_metrics(report, 0, {"replica": "r1"}))
    labels = (("dataflow", "d"), ("replica", "r1"), ("source", "events"))
    assert samples[("dataflow_source_resumption_frontier_seconds", labels)] == 1_700_000_000
    assert samples[("dataflow_source_ingested_rows", labels)] == 10
    assert samples[("dataflow_source_ingested_bytes", labels)] == 2048
    assert samples[("dataflow_source_released_files", labels)] == 2
    assert samples[("dataflow_source_release_failures", labels)] == 1


def test_a_kafka_source_renders_its_lag_and_committed_offsets() -> None:
    kafka = SourceStatus(name="clicks", committed_offsets={"0": 12, "1": 7}, upstream_lag=5)
    files = SourceStatus(name="events")
    report = ReplicaReport(
        start_time=0,
        phase=ReplicaPhase.RUNNING,
        dataflows=[DataflowReport(name="d", sources=[kafka, files])],
    )
    samples = _samples(render_metrics(report, 0, {"replica": "r1"}))
    labels = (("dataflow", "d"), ("replica", "r1"), ("source", "clicks"))
    assert samples[("dataflow_source_upstream_lag", labels)] == 5
    for partition, offset in (("0", 12), ("1", 7)):
        by_partition = tuple(sorted((*labels, ("partition", partition))))
        assert samples[("dataflow_source_committed_offset", by_partition)] == offset
    unknown = (("dataflow", "d"), ("replica", "r1"), ("source", "events"))
    assert ("dataflow_source_upstream_lag", unknown) not in samples  # not known: absent
    assert samples[("dataflow_source_upstream_unreachable", labels)] == 0


def test_a_kafka_source_out_of_reach_renders_it() -> None:
    kafka = SourceStatus(name="clicks", last_read_error="topic 'clicks': transport failure")
    report = ReplicaReport(
        start_time=0,
        phase=ReplicaPhase.RUNNING,
        dataflows=[DataflowReport(name="d", sources=[kafka])],
    )
    samples = _samples(render_metrics(report, 0, {"replica": "r1"}))
    labels = (("dataflow", "d"), ("replica", "r1"), ("source", "clicks"))
    assert samples[("dataflow_source_upstream_unreachable", labels)] == 1
