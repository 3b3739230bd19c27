# kopf types its callbacks as protocols listing every kwarg it may pass; handlers that
# take only some (plus index kwargs, which the protocols cannot name) do not match them.
# mypy: disable-error-code="arg-type"
"""kopf registrations: thin wrappers that hand over to the controller's modules.

Importing this module registers the handlers in kopf's default registry. Settings put
kopf's own bookkeeping (progress, diff base, finalizer) under the ``dataflow.dev``
prefix in annotations; nothing of kopf's lands in status.
"""

from __future__ import annotations

import asyncio
import copy
import datetime
import hashlib
import json
import logging
from collections.abc import Mapping
from typing import Any

import kopf

from dataflow_operator.api.meta import GROUP, VERSION
from dataflow_operator.controller.config import OperatorConfig
from dataflow_operator.controller.control_client import ControlClient
from dataflow_operator.controller.dataflow import handlers as dataflow_handlers
from dataflow_operator.controller.dataflow.status_writer import run_status_writer
from dataflow_operator.controller.errors import mapped_errors
from dataflow_operator.controller.kube import KubeApi
from dataflow_operator.controller.naming import FINALIZER, LABEL_REPLICA, LABEL_ROLE, ROLE_DRIVER
from dataflow_operator.controller.replica.daemon import run_replica
from dataflow_operator.controller.replica.observation import PodObservation, observe_pod
from dataflow_operator.controller.standby import PEERING_LIFETIME
from dataflow_operator.controller.state import OperatorState

__all__ = ["configure_settings"]

REPLICAS = (GROUP, VERSION, "replicas")
_VOLATILE_METADATA = {"resourceVersion", "managedFields", "annotations"}
DATAFLOWS = (GROUP, VERSION, "dataflows")


def configure_settings(settings: kopf.OperatorSettings) -> None:
    """kopf's bookkeeping under our prefix, in annotations; only warnings become Events."""
    settings.persistence.finalizer = FINALIZER
    settings.persistence.progress_storage = kopf.AnnotationsProgressStorage(prefix=GROUP)
    settings.persistence.diffbase_storage = kopf.AnnotationsDiffBaseStorage(
        prefix=GROUP, key="last-handled-configuration"
    )
    settings.posting.level = logging.WARNING
    settings.background.cancellation_polling = 5
    settings.peering.lifetime = PEERING_LIFETIME


@kopf.on.startup()
async def startup(
    *,
    settings: kopf.OperatorSettings,
    memo: kopf.Memo,
    **_: Any,
) -> None:
    """Build the clients and the shared state once; start the status writer and metrics."""
    configure_settings(settings)
    config: OperatorConfig = memo.get("config") or OperatorConfig()
    state = OperatorState(config, await KubeApi.connect(), ControlClient())
    memo["state"] = state
    if config.metrics_port:
        state.metrics.serve(config.metrics_port)
    memo["writer"] = asyncio.create_task(run_status_writer(state))


@kopf.on.cleanup()
async def cleanup(*, memo: kopf.Memo, **_: Any) -> None:
    """Stop the status writer and close the HTTP sessions."""
    writer = memo.get("writer")
    if writer is not None:
        writer.cancel()
    state: OperatorState | None = memo.get("state")
    if state is not None:
        await state.kube.close()
        await state.control.close()


@kopf.index(*DATAFLOWS)
async def dataflows_by_cluster(
    *, namespace: str, body: kopf.Body, memo: kopf.Memo, **_: Any
) -> dict[tuple[str, str | None], dict[str, Any]]:
    """Every Dataflow's spec by (namespace, cluster): desired sets and cluster catalogs.

    Status and resourceVersion are left out, and an unchanged entry is handed out as the
    same object, so that status writes do not invalidate the cluster's memoized view.
    """
    metadata = {
        k: v for k, v in (body.get("metadata") or {}).items() if k not in _VOLATILE_METADATA
    }
    entry = {
        "apiVersion": body.get("apiVersion"),
        "kind": body.get("kind"),
        "metadata": metadata,
        "spec": body.get("spec"),
    }
    state: OperatorState | None = memo.get("state")
    if state is not None:  # the status writer's starting point after a restart
        state.statuses.seen[(namespace, str(metadata.get("name")))] = body.get("status") or {}
    key = json.dumps(entry, sort_keys=True, default=str)
    cached = memo.get("indexed")
    if cached is None or cached[0] != key:
        cached = (key, copy.deepcopy(entry))
        memo["indexed"] = cached
    cluster = (body.get("spec") or {}).get("cluster")
    return {(namespace, cluster): cached[1]}


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
        dataflows=dataflows_by_cluster,
    )


@kopf.on.event(*DATAFLOWS)
async def dataflow_event(
    *,
    type: str,
    namespace: str,
    name: str,
    body: kopf.Body,
    memo: kopf.Memo,
    dataflows_by_cluster: kopf.Index[Any, Mapping[str, Any]],
    **_: Any,
) -> None:
    """Validate and (re)install on every change; a watch event handler keeps no state
    in the object (no diff-base annotation, no extra patch per Dataflow)."""
    with mapped_errors():
        dataflow_handlers.dataflow_changed(
            state=memo["state"],
            body=body,
            memo=memo,
            namespace=namespace,
            name=name,
            dataflows=dataflows_by_cluster,
            deleted=type == "DELETED",
        )
        dataflow_handlers.announce_hydration(body, memo)
        dataflow_handlers.announce_strategy(body, memo)


@kopf.on.delete(*DATAFLOWS)
async def dataflow_deleted(
    *,
    namespace: str,
    name: str,
    body: kopf.Body,
    memo: kopf.Memo,
    runtime: datetime.timedelta,
    **_: Any,
) -> None:
    """Drop the Dataflow from every replica before the finalizer is removed."""
    with mapped_errors():
        dataflow_handlers.dataflow_deleted(
            state=memo["state"],
            body=body,
            namespace=namespace,
            name=name,
            runtime=runtime,
        )
