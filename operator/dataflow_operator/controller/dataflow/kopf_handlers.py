# kopf types its callbacks as protocols listing every kwarg it may pass; handlers that
# take only some (plus index kwargs, which the protocols cannot name) do not match them.
# mypy: disable-error-code="arg-type"
"""kopf's registrations for Dataflows: the index by cluster, the handler of every watch
event and the deletion handler behind the finalizer, each handing over to :mod:`.changes`."""

from __future__ import annotations

import copy
import datetime
from collections.abc import Mapping
from typing import Any

import kopf

from dataflow_operator.api.meta import GROUP, VERSION
from dataflow_operator.controller.dataflow import changes
from dataflow_operator.controller.errors import mapped_errors
from dataflow_operator.controller.shared.state import OperatorState

__all__ = ["DATAFLOWS"]

DATAFLOWS = (GROUP, VERSION, "dataflows")
_VOLATILE_METADATA = {"resourceVersion", "managedFields", "annotations", "finalizers"}
"""What the index leaves out: bookkeeping (kopf's, the API server's) that every write of
ours changes and that no desired set or validation reads."""


@kopf.index(*DATAFLOWS)
async def dataflows_by_cluster(
    *, namespace: str, body: kopf.Body, memo: kopf.Memo, **_: Any
) -> dict[tuple[str, str | None], dict[str, Any]]:
    """Every Dataflow's spec by (namespace, cluster): desired sets and cluster catalogs.

    Status and volatile metadata are left out, and an unchanged entry is handed out as
    the same object, so that status writes and finalizers do not invalidate the
    cluster's memoized view.
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
    cached = memo.get("indexed")
    if cached is None or cached != entry:
        cached = copy.deepcopy(entry)
        memo["indexed"] = cached
    cluster = (body.get("spec") or {}).get("cluster")
    return {(namespace, cluster): cached}


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
        changes.dataflow_changed(
            state=memo["state"],
            body=body,
            memo=memo,
            namespace=namespace,
            name=name,
            dataflows=dataflows_by_cluster,
            deleted=type == "DELETED",
        )


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
        changes.dataflow_deleted(
            state=memo["state"],
            body=body,
            namespace=namespace,
            name=name,
            runtime=runtime,
        )
