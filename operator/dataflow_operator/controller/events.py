"""Events the operator posts outside kopf's handlers.

``kopf.event`` posts only from kopf's object handlers, where kopf keeps its event
queue. The status writer decides what a written status announces (a hydration flip, a
recompute) and posts it here, through the operator's Kubernetes client, in the form kopf
gives its own Events, so that ``kubectl describe`` lists both alike.
"""

from __future__ import annotations

import datetime
import socket
from collections.abc import Mapping
from typing import Any

from dataflow_operator.controller.kube import KubeApi

__all__ = ["MAX_MESSAGE_LENGTH", "REPORTING_COMPONENT", "event_body", "post_event"]

REPORTING_COMPONENT = "dataflow-operator"
"""The ``From`` of every Event the operator posts (kopf's are configured alike)."""
MAX_MESSAGE_LENGTH = 1024
"""An Event message's longest length, as kopf cuts its own."""


def event_body(
    involved: Mapping[str, Any],
    *,
    type: str,
    reason: str,
    message: str,
    now: datetime.datetime,
    instance: str,
) -> dict[str, Any]:
    """A core/v1 Event about ``involved`` (an object with apiVersion, kind, metadata)."""
    metadata = involved.get("metadata") or {}
    stamp = now.isoformat()
    return {
        "metadata": {"namespace": metadata.get("namespace"), "generateName": "dataflow-event-"},
        "type": type,
        "reason": reason,
        "message": message[:MAX_MESSAGE_LENGTH],
        "action": reason,
        "reportingComponent": REPORTING_COMPONENT,
        "reportingInstance": instance,
        "source": {"component": REPORTING_COMPONENT},
        "involvedObject": {
            "apiVersion": involved.get("apiVersion"),
            "kind": involved.get("kind"),
            "name": metadata.get("name"),
            "namespace": metadata.get("namespace"),
            "uid": metadata.get("uid"),
        },
        "firstTimestamp": stamp,
        "lastTimestamp": stamp,
        "eventTime": stamp,
    }


async def post_event(
    kube: KubeApi, involved: Mapping[str, Any], *, type: str, reason: str, message: str
) -> None:
    """Post one Event about ``involved`` now; raises :class:`ApiError` if refused."""
    body = event_body(
        involved,
        type=type,
        reason=reason,
        message=message,
        now=datetime.datetime.now(datetime.UTC),
        instance=socket.gethostname(),
    )
    await kube.create(KubeApi.core(str(body["metadata"]["namespace"]), "events"), body)
