"""What happens when a Dataflow is created, changed or deleted.

Validation runs against the whole cluster (a dataflow may read others), the result
becomes the Ready condition (written by the status writer) and, when invalid, a Warning
Event with the core's exact message. Installing is the replica daemons' job: they are
woken to send their full desired set, from which an invalid dataflow is absent. The
Events that follow the status (Hydrated, Recompute) are posted by the status writer.
"""

from __future__ import annotations

import datetime
from collections.abc import Mapping
from typing import Any

import kopf

from dataflow_operator.controller.shared.state import OperatorState

__all__ = ["dataflow_changed", "dataflow_deleted"]


def _cluster(body: Mapping[str, Any]) -> str | None:
    cluster = (body.get("spec") or {}).get("cluster")
    return cluster if isinstance(cluster, str) else None


def dataflow_changed(
    *,
    state: OperatorState,
    body: kopf.Body,
    memo: kopf.Memo,
    namespace: str,
    name: str,
    dataflows: kopf.Index[Any, Mapping[str, Any]],
    deleted: bool = False,
) -> None:
    """Validate within the cluster, report, and wake the cluster's replicas.

    Called on every watch event; acts only when the cluster's set of specs or this
    dataflow's validity changed (status writes of our own come back as events too).
    The validity last announced in an Event is kept in the object's own ``memo``.
    """
    cluster = _cluster(body)
    if deleted:
        memo.pop("announced", None)
    if cluster is None:
        if memo.get("announced") != ("InvalidSpec", ""):
            memo["announced"] = ("InvalidSpec", "")
            kopf.warn(body, reason="InvalidSpec", message="spec.cluster: required field is missing")
        return
    view = state.views.view(namespace, cluster, dataflows.get((namespace, cluster), []))
    validity = view.validity.get(name)
    if not deleted and validity is not None:
        announcement = (validity.reason, validity.message)
        if memo.get("announced") != announcement:
            memo["announced"] = announcement
            if not validity.ok:
                kopf.warn(body, reason=validity.reason, message=validity.message)
            elif validity.reason == "Valid":
                replicas = len(state.replicas.of_cluster(namespace, cluster))
                kopf.event(
                    body,
                    type="Normal",
                    reason="Accepted",
                    message=f"installing on {replicas} replica(s)",
                )
    previous = state.views.acted.get((namespace, cluster))
    if previous is None or previous.digest != view.digest:
        state.views.acted[(namespace, cluster)] = view
        state.mark_dirty(namespace, cluster, view.changed_from(previous))
        state.replicas.wake_cluster(namespace, cluster)
    elif not deleted and body.get("status") is None:
        state.mark_dirty(namespace, cluster, [name])


def dataflow_deleted(
    *,
    state: OperatorState,
    body: kopf.Body,
    namespace: str,
    name: str,
    runtime: datetime.timedelta,
) -> None:
    """Drop from every replica; wait for them to confirm, up to the delete timeout.

    A replica confirms once the dataflow is gone from a report taken after its last
    install: while its Spark work is still stopping it is reported (as ``dropping``), and
    the finalizer keeps waiting.
    Raises :class:`kopf.TemporaryError` while some ready replica still reports it.
    """
    cluster = _cluster(body)
    if cluster is None:
        return
    # The watch event of the deletion already marked the readers it invalidates.
    state.replicas.wake_cluster(namespace, cluster)
    holders = sorted(
        replica
        for replica, rt in state.replicas.of_cluster(namespace, cluster)
        for link in (rt.serving, rt.successor)
        if link is not None
        and link.ready
        and link.report is not None
        and (
            # a report from before the last install cannot confirm anything was dropped
            (link.report_at or 0) <= link.applied_at
            or any(d.name == name for d in link.report.dataflows)
        )
    )
    if not holders:
        kopf.event(
            body,
            type="Normal",
            reason="Dropped",
            message="dropped from every replica of the cluster",
        )
        return
    timeout = state.config.delete_timeout.millis / 1000
    if runtime.total_seconds() >= timeout:
        kopf.warn(
            body,
            reason="DropTimedOut",
            message=f"replica(s) {', '.join(holders)} did not confirm the drop within "
            f"{timeout:g}s; deleting anyway",
        )
        return
    raise kopf.TemporaryError(f"waiting for {', '.join(holders)} to drop it", delay=1)
