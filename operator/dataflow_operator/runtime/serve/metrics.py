"""``GET /metrics``: a replica's report as Prometheus metrics, through ``prometheus_client``.

:func:`render_metrics` turns a :class:`ReplicaReport` and the current time into the text
exposition format (a one-shot collector over the report, rendered by
``prometheus_client``); the control API serves it. Times are in seconds, as Prometheus
prefers. How long drops took comes in the report
(:class:`~dataflow_operator.runtime.engine.shutdowns.ShutdownHistogram` counts it).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import GaugeMetricFamily, HistogramMetricFamily, Metric
from prometheus_client.registry import Collector

from dataflow_operator.api.dataflow import SourceStatus
from dataflow_operator.api.protocol import (
    DataflowReport,
    ReplicaPhase,
    ReplicaReport,
    ShutdownDurations,
)

__all__ = ["CONTENT_TYPE", "METRICS", "render_metrics"]

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
"""What ``generate_latest`` writes for these names, as every Prometheus version reads it."""


@dataclass(frozen=True, slots=True)
class _Metric:
    name: str
    help: str


METRICS = {
    "phase": _Metric("dataflow_replica_phase", "1 for the replica's current phase."),
    "start": _Metric("dataflow_replica_start_time_seconds", "Replica start time (epoch s)."),
    "replica_remaining": _Metric(
        "dataflow_replica_expiration_remaining_seconds", "Seconds until the replica expires."
    ),
    "dataflows": _Metric("dataflow_replica_dataflows", "Dataflows installed on the replica."),
    "frontier": _Metric(
        "dataflow_write_frontier_seconds",
        "Write frontier (epoch s): output is complete before it; +Inf when closed.",
    ),
    "remaining": _Metric(
        "dataflow_expiration_remaining_seconds",
        "Seconds until the dataflow's expiration (negative once past it).",
    ),
    "hydrated": _Metric("dataflow_hydrated", "1 once the dataflow has processed its snapshot."),
    "hydration_time": _Metric(
        "dataflow_hydration_time_seconds", "How long the dataflow took to hydrate."
    ),
    "nodes_hydrated": _Metric(
        "dataflow_plan_nodes_hydrated", "Plan nodes that have processed their snapshot."
    ),
    "nodes": _Metric("dataflow_plan_nodes", "Plan nodes of the dataflow."),
    "state_rows": _Metric("dataflow_state_rows", "Rows held in Spark state."),
    "state_bytes": _Metric("dataflow_state_bytes", "Bytes of Spark state."),
    "expired": _Metric("dataflow_expired", "1 once the dataflow stopped at its expiration."),
    "failing": _Metric("dataflow_failing", "1 while the dataflow reports an error."),
    "dropping": _Metric("dataflow_dropping", "1 while a dropped dataflow's work is stopping."),
    "source_frontier": _Metric(
        "dataflow_source_resumption_frontier_seconds",
        "A source's resumption frontier (epoch s): a restart reads nothing below it upstream.",
    ),
    "source_rows": _Metric(
        "dataflow_source_ingested_rows", "Rows in a source's ingested collection."
    ),
    "source_bytes": _Metric(
        "dataflow_source_ingested_bytes", "Bytes of a source's ingested collection."
    ),
    "source_released": _Metric(
        "dataflow_source_released_files",
        "Files of a source archived or deleted upstream (a table's: folded).",
    ),
    "source_failures": _Metric(
        "dataflow_source_release_failures",
        "Failed releases of a source's files or commits of its consumer group (retried).",
    ),
    "source_lag": _Metric(
        "dataflow_source_upstream_lag",
        "Records the upstream has that the source has not read (a kafka source).",
    ),
    "source_unreachable": _Metric(
        "dataflow_source_upstream_unreachable",
        "1 while a source's upstream cannot be read (a kafka broker out of reach; retried).",
    ),
    "source_committed": _Metric(
        "dataflow_source_committed_offset",
        "A kafka source's consumer group offset committed by this replica, per partition.",
    ),
    "shutdown": _Metric(
        "dataflow_shutdown_duration_seconds",
        "Time from a dataflow's drop to its last Spark task ending.",
    ),
}
"""Every metric served, by key: name and help text."""


def _dataflow_samples(flow: DataflowReport, now_ms: int) -> Iterable[tuple[str, float]]:
    frontier = min(flow.frontier) / 1000 if flow.frontier else math.inf
    yield "frontier", frontier
    if flow.expiration is not None:
        yield "remaining", (flow.expiration - now_ms) / 1000
    yield "hydrated", float(flow.hydrated)
    if flow.hydration_time_ms is not None:
        yield "hydration_time", flow.hydration_time_ms / 1000
    if flow.nodes:
        yield "nodes", float(len(flow.nodes))
        yield "nodes_hydrated", float(sum(node.hydrated for node in flow.nodes))
    yield "state_rows", float(flow.state_rows)
    yield "state_bytes", float(flow.state_bytes)
    yield "expired", float(flow.expired)
    yield "failing", float(flow.last_error is not None)
    yield "dropping", float(flow.dropping)


def _source_samples(source: SourceStatus) -> Iterable[tuple[str, float]]:
    frontier = min(source.resumption_frontier) / 1000 if source.resumption_frontier else math.inf
    yield "source_frontier", frontier
    yield "source_rows", float(source.ingested_rows)
    yield "source_bytes", float(source.ingested_bytes)
    yield "source_released", float(source.released_files)
    yield "source_failures", float(source.release_failures)
    if source.upstream_lag is not None:
        yield "source_lag", float(source.upstream_lag)
    yield "source_unreachable", float(source.last_read_error is not None)


class _ReportCollector(Collector):
    """The metrics of one report, as ``prometheus_client`` metric families."""

    def __init__(self, report: ReplicaReport, now_ms: int, labels: dict[str, str]) -> None:
        self.report = report
        self.now_ms = now_ms
        self.labels = labels

    def _gauge(self, key: str, extra: tuple[str, ...] = ()) -> GaugeMetricFamily:
        metric = METRICS[key]
        return GaugeMetricFamily(metric.name, metric.help, labels=[*self.labels, *extra])

    def collect(self) -> Iterator[Metric]:
        """Every gauge with at least one sample, in :data:`METRICS` order, then the
        shutdown histogram."""
        report, common = self.report, list(self.labels.values())
        families = {key: self._gauge(key) for key in ("start", "replica_remaining", "dataflows")}
        families["phase"] = self._gauge("phase", ("phase",))
        for phase in ReplicaPhase:
            families["phase"].add_metric([*common, phase.value], float(phase == report.phase))
        families["start"].add_metric(common, report.start_time / 1000)
        if report.expiration is not None:
            remaining = (report.expiration - self.now_ms) / 1000
            families["replica_remaining"].add_metric(common, remaining)
        families["dataflows"].add_metric(common, len(report.dataflows))
        for flow in sorted(report.dataflows, key=lambda f: f.name):
            for key, value in _dataflow_samples(flow, self.now_ms):
                if key not in families:
                    families[key] = self._gauge(key, ("dataflow",))
                families[key].add_metric([*common, flow.name], value)
            for source in flow.sources:
                for key, value in _source_samples(source):
                    if key not in families:
                        families[key] = self._gauge(key, ("dataflow", "source"))
                    families[key].add_metric([*common, flow.name, source.name], value)
                for partition, offset in sorted((source.committed_offsets or {}).items()):
                    if "source_committed" not in families:
                        extra = ("dataflow", "source", "partition")
                        families["source_committed"] = self._gauge("source_committed", extra)
                    labels = [*common, flow.name, source.name, partition]
                    families["source_committed"].add_metric(labels, float(offset))
        for key in METRICS:
            if key in families and families[key].samples:
                yield families[key]
        if report.shutdowns is not None:
            yield _histogram(self.labels, report.shutdowns)


def _histogram(labels: dict[str, str], durations: ShutdownDurations) -> HistogramMetricFamily:
    metric = METRICS["shutdown"]
    family = HistogramMetricFamily(metric.name, metric.help, labels=list(labels))
    buckets = [
        (repr(float(bound)), float(count))
        for bound, count in zip(durations.bounds, durations.counts, strict=True)
    ]
    buckets.append(("+Inf", float(durations.total)))
    family.add_metric(list(labels.values()), buckets, durations.sum_seconds)
    return family


def render_metrics(report: ReplicaReport, now_ms: int, labels: dict[str, str] | None = None) -> str:
    """The report as Prometheus text; ``labels`` (e.g. replica, namespace) go on every sample."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(_ReportCollector(report, now_ms, dict(labels or {})))
    return generate_latest(registry).decode()
