"""Prometheus metrics of the operator, served on ``/metrics``.

Gauges about replicas (by condition, seconds until expiration) are computed at scrape
time from the operator's in-memory view, so that they cost nothing between scrapes.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, start_http_server
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

__all__ = ["Metrics", "ReplicaSample"]


@dataclass(frozen=True, slots=True)
class ReplicaSample:
    """One replica as the metrics see it."""

    namespace: str
    name: str
    conditions: dict[str, str]
    expires_at_ms: int | None


class _ReplicaCollector(Collector):
    def __init__(self, samples: Callable[[], Iterable[ReplicaSample]], now: Callable[[], int]):
        self._samples = samples
        self._now = now

    def collect(self) -> Iterator[Metric]:
        by_condition = GaugeMetricFamily(
            "dataflow_operator_replicas",
            "Replicas by condition type and status.",
            labels=["condition", "status"],
        )
        until = GaugeMetricFamily(
            "dataflow_operator_replica_seconds_until_expiration",
            "Seconds until the replica's current attempt expires.",
            labels=["namespace", "replica"],
        )
        counts: dict[tuple[str, str], int] = {}
        now = self._now()
        for sample in self._samples():
            for condition, status in sample.conditions.items():
                counts[(condition, status)] = counts.get((condition, status), 0) + 1
            if sample.expires_at_ms is not None:
                until.add_metric(
                    [sample.namespace, sample.name], (sample.expires_at_ms - now) / 1000
                )
        for (condition, status), count in sorted(counts.items()):
            by_condition.add_metric([condition, status], count)
        yield by_condition
        yield until


class Metrics:
    """The operator's metrics, in their own registry."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        self.restarts = Counter(
            "dataflow_operator_replica_restarts",
            "Replica restarts by reason.",
            ["reason"],
            registry=self.registry,
        )
        self.reconcile_seconds = Histogram(
            "dataflow_operator_reconcile_duration_seconds",
            "Duration of one reconcile.",
            ["kind"],
            registry=self.registry,
            buckets=(0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1, 5, 10),
        )
        self.status_lag_seconds = Histogram(
            "dataflow_operator_status_lag_seconds",
            "From a replica report received to the Dataflow status written.",
            registry=self.registry,
            buckets=(0.05, 0.1, 0.25, 0.5, 1, 2, 5, 10, 30),
        )
        self.loop_lag_seconds = Gauge(
            "dataflow_operator_event_loop_lag_seconds",
            "How late the operator's event loop last woke a timer (its load).",
            registry=self.registry,
        )
        self.status_progress_rate = Gauge(
            "dataflow_operator_status_progress_rate",
            "Progress-only Dataflow status writes allowed a second: the status writer's "
            "rate, lowered while the event loop is late.",
            registry=self.registry,
        )
        self.unserved_seconds = Histogram(
            "dataflow_operator_replica_unserved_seconds",
            "Per expiration restart: how long no hydrated driver served the replica "
            "(0 for a make-before-break cutover).",
            registry=self.registry,
            buckets=(0, 1, 5, 15, 30, 60, 120, 300, 600, 1800),
        )
        self.handover_seconds = Histogram(
            "dataflow_operator_replica_handover_overlap_seconds",
            "Per handover: how long the successor ran beside its predecessor.",
            ["outcome"],
            registry=self.registry,
            buckets=(5, 15, 30, 60, 120, 300, 600, 1800, 3600),
        )
        self.control_errors = Counter(
            "dataflow_operator_control_api_errors",
            "Failed calls to replicas' control API.",
            ["reason"],
            registry=self.registry,
        )

    def watch_replicas(
        self, samples: Callable[[], Iterable[ReplicaSample]], now: Callable[[], int]
    ) -> None:
        """Compute the replica gauges from ``samples`` at scrape time."""
        self.registry.register(_ReplicaCollector(samples, now))

    def serve(self, port: int, address: str = "0.0.0.0") -> None:
        """Serve ``/metrics`` on ``port`` (a background thread)."""
        start_http_server(port, addr=address, registry=self.registry)
