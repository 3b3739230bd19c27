# kopf types its callbacks as protocols listing every kwarg it may pass; handlers that
# take only some (plus index kwargs, which the protocols cannot name) do not match them.
# mypy: disable-error-code="arg-type"
"""kopf's registrations for Replicas: the driver-pod and executor-pod indexes, the wake-up
on spec changes and the daemon per Replica, each handing over to :mod:`.daemon`."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from typing import Any

import kopf

from dataflow_operator.api.meta import GROUP, VERSION
from dataflow_operator.controller.naming import (
    LABEL_REPLICA,
    LABEL_ROLE,
    ROLE_DRIVER,
    ROLE_EXECUTOR,
)
from dataflow_operator.controller.replica.daemon import run_replica
from dataflow_operator.controller.replica.observation import (
    ExecutorObservation,
    PodObservation,
    observe_executor,
    observe_pod,
)
from dataflow_operator.controller.state import OperatorState

__all__ = ["REPLICAS"]

REPLICAS = (GROUP, VERSION, "replicas")


@kopf.index("v1", "pods", labels={LABEL_ROLE: ROLE_DRIVER, LABEL_REPLICA: kopf.PRESENT})
async def driver_pods(
    *, namespace: str, labels: Mapping[str, str], body: kopf.Body, memo: kopf.Memo, **_: Any
) -> dict[tuple[str, str], PodObservation]:
    """Driver pods by (namespace, replica label); every change wakes that replica."""
    if labels.get(LABEL_ROLE) != ROLE_DRIVER or LABEL_REPLICA not in labels:
        return {}  # label selectors are a hint to the server; check them here too
    replica = labels[LABEL_REPLICA]
    state: OperatorState | None = memo.get("state")
    if state is not None and (runtime := state.replicas.get(namespace, replica)) is not None:
        runtime.wake.set()
    return {(namespace, replica): observe_pod(body)}


@kopf.index("v1", "pods", labels={LABEL_ROLE: ROLE_EXECUTOR, LABEL_REPLICA: kopf.PRESENT})
async def executor_pods(
    *, namespace: str, labels: Mapping[str, str], body: kopf.Body, memo: kopf.Memo, **_: Any
) -> dict[tuple[str, str], ExecutorObservation]:
    """Executor pods (Spark creates them from the replica's template, with its labels) by
    (namespace, replica label); every change wakes that replica."""
    if labels.get(LABEL_ROLE) != ROLE_EXECUTOR or LABEL_REPLICA not in labels:
        return {}
    replica = labels[LABEL_REPLICA]
    state: OperatorState | None = memo.get("state")
    if state is not None and (runtime := state.replicas.get(namespace, replica)) is not None:
        runtime.wake.set()
    return {(namespace, replica): observe_executor(body)}


@kopf.on.event(*REPLICAS)
async def replica_event(
    *, namespace: str, name: str, body: kopf.Body, memo: kopf.Memo, **_: Any
) -> None:
    """Wake the Replica's daemon when its spec or annotations change (not on status)."""
    state: OperatorState | None = memo.get("state")
    runtime = state.replicas.get(namespace, name) if state is not None else None
    if runtime is None:
        return
    metadata = body.get("metadata") or {}
    seen = json.dumps(
        [body.get("spec"), metadata.get("annotations"), metadata.get("deletionTimestamp")],
        sort_keys=True,
        default=str,
    )
    digest = hashlib.sha256(seen.encode()).hexdigest()
    if memo.get("seen") != digest:
        memo["seen"] = digest
        runtime.wake.set()


@kopf.daemon(*REPLICAS, cancellation_timeout=10.0)
async def replica_daemon(
    *,
    stopped: kopf.DaemonStopped,
    namespace: str,
    name: str,
    body: kopf.Body,
    memo: kopf.Memo,
    driver_pods: kopf.Index[Any, PodObservation],
    executor_pods: kopf.Index[Any, ExecutorObservation],
    dataflows_by_cluster: kopf.Index[Any, Mapping[str, Any]],
    **_: Any,
) -> None:
    """One per Replica: drives its driver pod and keeps its dataflows in sync."""
    await run_replica(
        state=memo["state"],
        stopped=stopped,
        namespace=namespace,
        name=name,
        body=body,
        driver_pods=driver_pods,
        executor_pods=executor_pods,
        dataflows=dataflows_by_cluster,
    )
