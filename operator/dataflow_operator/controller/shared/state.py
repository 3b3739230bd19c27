"""The operator's in-memory state, shared by its handlers, daemons and status writer.

Nothing here is durable: everything can be rebuilt from the API server (kopf's indexes
are populated before any handler runs) and from the replicas' next reports. It is the
clients and three parts, each owned by one side: the Replica daemons' registry, the
Dataflows' cluster views and the status writer's queue.
"""

from __future__ import annotations

import time
from collections.abc import Iterable

from dataflow_operator.controller.config import OperatorConfig
from dataflow_operator.controller.control_client import ControlClient
from dataflow_operator.controller.kube import KubeApi
from dataflow_operator.controller.metrics import Metrics
from dataflow_operator.controller.shared.registry import ReplicaRegistry
from dataflow_operator.controller.shared.status_queue import StatusQueue
from dataflow_operator.controller.shared.views import ClusterViews
from dataflow_operator.core.time import Timestamp

__all__ = ["OperatorState", "now_ms"]


def now_ms() -> Timestamp:
    """The wall clock in epoch milliseconds."""
    return int(time.time() * 1000)


class OperatorState:
    """Shared state of one operator process."""

    def __init__(self, config: OperatorConfig, kube: KubeApi, control: ControlClient) -> None:
        self.config = config
        self.kube = kube
        self.control = control
        self.metrics = Metrics()
        self.replicas = ReplicaRegistry()
        self.views = ClusterViews()
        self.statuses = StatusQueue()
        self.metrics.watch_replicas(self.replicas.samples, now_ms)

    def mark_dirty(
        self, namespace: str, cluster: str, names: Iterable[str], *, progress: bool = False
    ) -> None:
        """These dataflows' status must be recomputed and written (``progress``: only
        their frontiers moved)."""
        self.statuses.mark(namespace, cluster, names, now_ms(), progress=progress)
