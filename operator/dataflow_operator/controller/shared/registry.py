"""The Replicas this operator runs daemons for, and what each daemon knows.

One entry per Replica, opened by its daemon and closed when the daemon ends; the
handlers reach a daemon through it (to wake it) and the Dataflow status reads each
replica's last report from it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from dataflow_operator.api.protocol import DataflowReport, ReplicaReport
from dataflow_operator.controller.metrics import ReplicaSample
from dataflow_operator.controller.shared.observation import ClaimObservation
from dataflow_operator.core.time import Timestamp

__all__ = ["AttemptLink", "ReplicaRegistry", "ReplicaRuntime"]

Key = tuple[str, str]
"""(namespace, name)."""


@dataclass(slots=True)
class AttemptLink:
    """The operator's view of one driver attempt's control API."""

    pod: str
    """The driver pod it is about."""
    ready: bool = False
    """The last poll answered."""
    report: ReplicaReport | None = None
    report_at: Timestamp | None = None
    error: str | None = None
    applied: str | None = None
    """Digest of the desired set the attempt last accepted."""
    applied_at: Timestamp = 0
    """When it last accepted a desired set: a report taken before then may not show it."""
    released: str | None = None
    """The release frontiers (JSON) the attempt last accepted."""
    next_poll_at: Timestamp = 0
    _index: tuple[ReplicaReport, dict[str, DataflowReport]] | None = field(
        default=None, init=False, repr=False
    )

    def reported(self, dataflow: str) -> DataflowReport | None:
        """The last report's entry of ``dataflow`` (indexed once per report: the status
        writer asks for one Dataflow at a time, thousands of times a second)."""
        report = self.report
        if report is None:
            return None
        if self._index is None or self._index[0] is not report:
            self._index = (report, {d.name: d for d in report.dataflows})
        return self._index[1].get(dataflow)


@dataclass(slots=True)
class ReplicaRuntime:
    """What one Replica's daemon knows between iterations."""

    cluster: str | None = None
    """Set through :meth:`ReplicaRegistry.assign`, which indexes it."""
    wake: asyncio.Event = field(default_factory=asyncio.Event)
    status: dict[str, Any] | None = None
    """The status this operator last wrote (the watch may lag behind it)."""
    driver_missing_since: Timestamp | None = None
    serving: AttemptLink | None = None
    """The serving driver's control API, once polled."""
    successor: AttemptLink | None = None
    """A make-before-break successor's control API, while it hydrates."""
    service_attempt: int | None = None
    """The attempt the driver Service was last made to select."""
    attempts_service_ensured: bool = False
    claim: ClaimObservation | None = None
    """The state claim as last read or created (``None``: none seen)."""
    claim_spec: str | None = None
    """The ``spec.storage`` (JSON) that :attr:`claim` was last compared with."""
    conditions: dict[str, str] = field(default_factory=dict)
    expires_at_ms: int | None = None
    token: str | None = None
    """The replica's control token as last read from (or written to) its Secret."""

    @property
    def ready(self) -> bool:
        """The serving driver's control API answered its last poll."""
        return self.serving is not None and self.serving.ready

    @property
    def report(self) -> ReplicaReport | None:
        """The serving driver's last report."""
        return self.serving.report if self.serving is not None else None

    def reported(self, dataflow: str) -> DataflowReport | None:
        """The serving driver's last report of ``dataflow``."""
        return self.serving.reported(dataflow) if self.serving is not None else None


class ReplicaRegistry:
    """Every Replica's :class:`ReplicaRuntime`, by (namespace, name)."""

    def __init__(self) -> None:
        self._replicas: dict[Key, ReplicaRuntime] = {}
        self._by_cluster: dict[Key, dict[str, ReplicaRuntime]] = {}
        """(namespace, cluster) → its replicas by name (polls and status writes ask
        for a cluster's replicas thousands of times a second)."""

    def open(self, namespace: str, name: str) -> ReplicaRuntime:
        """The Replica's runtime, made on first use (its daemon starts)."""
        return self._replicas.setdefault((namespace, name), ReplicaRuntime())

    def close(self, namespace: str, name: str) -> None:
        """Forget the Replica (its daemon ended)."""
        rt = self._replicas.pop((namespace, name), None)
        if rt is not None:
            self._leave(namespace, name, rt)

    def assign(self, namespace: str, name: str, cluster: str) -> None:
        """The Replica serves ``cluster`` (its spec says so; it may have changed)."""
        rt = self._replicas.get((namespace, name))
        if rt is None or rt.cluster == cluster:
            return
        self._leave(namespace, name, rt)
        rt.cluster = cluster
        self._by_cluster.setdefault((namespace, cluster), {})[name] = rt

    def _leave(self, namespace: str, name: str, rt: ReplicaRuntime) -> None:
        members = self._by_cluster.get((namespace, rt.cluster or ""))
        if members is not None:
            members.pop(name, None)
            if not members:
                del self._by_cluster[(namespace, rt.cluster or "")]

    def get(self, namespace: str, name: str) -> ReplicaRuntime | None:
        """The Replica's runtime while its daemon runs."""
        return self._replicas.get((namespace, name))

    def of_cluster(self, namespace: str, cluster: str) -> list[tuple[str, ReplicaRuntime]]:
        """The replicas of one cluster, by name."""
        return list(self._by_cluster.get((namespace, cluster), {}).items())

    def wake_cluster(self, namespace: str, cluster: str) -> None:
        """Make every replica daemon of the cluster reconcile now."""
        for _, rt in self.of_cluster(namespace, cluster):
            rt.wake.set()

    def samples(self) -> Iterable[ReplicaSample]:
        """Replica samples for the metrics."""
        return [
            ReplicaSample(ns, name, dict(rt.conditions), rt.expires_at_ms)
            for (ns, name), rt in list(self._replicas.items())
        ]
