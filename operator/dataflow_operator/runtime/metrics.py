"""``GET /metrics``: a replica's report in the Prometheus text exposition format (0.0.4).

Pure: :func:`render_metrics` turns a :class:`ReplicaReport` and the current time into
text; the control API serves it. Times are in seconds, as Prometheus prefers.
:class:`ShutdownHistogram` counts how long drops took (the report carries it).
"""

from __future__ import annotations

import bisect
import math
import threading
from collections.abc import Iterable
from dataclasses import dataclass

from dataflow_operator.api.protocol import (
    DataflowReport,
    ReplicaPhase,
    ReplicaReport,
    ShutdownDurations,
)

__all__ = ["CONTENT_TYPE", "METRICS", "SHUTDOWN_BUCKETS", "ShutdownHistogram", "render_metrics"]

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"


@dataclass(frozen=True, slots=True)
class _Metric:
    name: str
    help: str
    type: str = "gauge"


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
    "shutdown": _Metric(
        "dataflow_shutdown_duration_seconds",
        "Time from a dataflow's drop to its last Spark task ending.",
        "histogram",
    ),
}
"""Every metric served, by key: name and help text."""


SHUTDOWN_BUCKETS = (0.1, 0.25, 0.5, 1.0, 2.0, 5.0, 10.0, 30.0, 60.0)
"""Upper bounds (seconds) of the shutdown-duration histogram's buckets (+Inf implied)."""


class ShutdownHistogram:
    """Drop durations, counted into :data:`SHUTDOWN_BUCKETS` (thread-safe)."""

    def __init__(self) -> None:
        self._counts = [0] * len(SHUTDOWN_BUCKETS)
        self._total = 0
        self._sum = 0.0
        self._lock = threading.Lock()

    def observe(self, seconds: float) -> None:
        """Count one drop that took ``seconds``."""
        with self._lock:
            index = bisect.bisect_left(SHUTDOWN_BUCKETS, seconds)
            if index < len(self._counts):
                self._counts[index] += 1
            self._total += 1
            self._sum += max(0.0, seconds)

    def model(self) -> ShutdownDurations:
        """The histogram with cumulative counts, as the report carries it."""
        with self._lock:
            cumulative, running = [], 0
            for count in self._counts:
                running += count
                cumulative.append(running)
            return ShutdownDurations(
                bounds=list(SHUTDOWN_BUCKETS),
                counts=cumulative,
                total=self._total,
                sum_seconds=self._sum,
            )


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def _number(value: float) -> str:
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    if float(value).is_integer() and abs(value) < 2**53:
        return str(int(value))
    return repr(float(value))


def _sample(name: str, labels: dict[str, str], value: float) -> str:
    inner = ",".join(f'{key}="{_escape(val)}"' for key, val in labels.items())
    return f"{name}{{{inner}}} {_number(value)}" if inner else f"{name} {_number(value)}"


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


def _histogram(name: str, labels: dict[str, str], durations: ShutdownDurations) -> list[str]:
    lines = [
        _sample(f"{name}_bucket", {**labels, "le": repr(float(bound))}, count)
        for bound, count in zip(durations.bounds, durations.counts, strict=True)
    ]
    lines.append(_sample(f"{name}_bucket", {**labels, "le": "+Inf"}, durations.total))
    lines.append(_sample(f"{name}_sum", labels, durations.sum_seconds))
    lines.append(_sample(f"{name}_count", labels, durations.total))
    return lines


def render_metrics(report: ReplicaReport, now_ms: int, labels: dict[str, str] | None = None) -> str:
    """The report as Prometheus text; ``labels`` (e.g. replica, namespace) go on every sample."""
    common = dict(labels or {})
    samples: dict[str, list[str]] = {key: [] for key in METRICS}
    for phase in ReplicaPhase:
        samples["phase"].append(
            _sample(METRICS["phase"].name, {**common, "phase": phase.value}, phase == report.phase)
        )
    samples["start"].append(_sample(METRICS["start"].name, common, report.start_time / 1000))
    if report.expiration is not None:
        remaining = (report.expiration - now_ms) / 1000
        samples["replica_remaining"].append(
            _sample(METRICS["replica_remaining"].name, common, remaining)
        )
    samples["dataflows"].append(_sample(METRICS["dataflows"].name, common, len(report.dataflows)))
    for flow in sorted(report.dataflows, key=lambda f: f.name):
        flow_labels = {**common, "dataflow": flow.name}
        for key, value in _dataflow_samples(flow, now_ms):
            samples[key].append(_sample(METRICS[key].name, flow_labels, value))
    if report.shutdowns is not None:
        samples["shutdown"] = _histogram(METRICS["shutdown"].name, common, report.shutdowns)
    lines: list[str] = []
    for key, metric in METRICS.items():
        if not samples[key]:
            continue
        lines.append(f"# HELP {metric.name} {metric.help}")
        lines.append(f"# TYPE {metric.name} {metric.type}")
        lines.extend(samples[key])
    return "\n".join(lines) + "\n"
