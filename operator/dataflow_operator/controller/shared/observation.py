"""What the operator sees of a driver pod, reduced to the facts decisions need.

Parsing a Pod's status is the only place that knows Kubernetes' pod-status shapes; the
reconcile decisions work on :class:`PodObservation` values and are tested as data.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from dataflow_operator.controller.naming import DRIVER_CONTAINER, LABEL_ATTEMPT

__all__ = [
    "FATAL_WAITING_REASONS",
    "ClaimObservation",
    "PodObservation",
    "PodPhase",
    "observe_claim",
    "observe_pod",
]

FATAL_WAITING_REASONS = frozenset(
    {"InvalidImageName", "ErrImageNeverPull", "CreateContainerConfigError"}
)
"""Waiting reasons that no amount of waiting fixes: the attempt fails at once."""


class PodPhase(StrEnum):
    """Kubernetes pod phases."""

    PENDING = "Pending"
    RUNNING = "Running"
    SUCCEEDED = "Succeeded"
    FAILED = "Failed"
    UNKNOWN = "Unknown"


@dataclass(frozen=True, slots=True)
class PodObservation:
    """One driver pod as last seen."""

    name: str
    phase: PodPhase
    attempt: int | None = None
    ready: bool = False
    deleting: bool = False
    exit_code: int | None = None
    reason: str | None = None
    """The container's waiting or terminated reason (``ImagePullBackOff``, ``OOMKilled``),
    else the pod's own (``Evicted``)."""
    message: str = ""
    ip: str | None = None
    """``status.podIP``: where the operator reaches its control API."""

    @property
    def terminated(self) -> bool:
        """The driver ended (its container terminated, or the pod phase says so)."""
        return self.phase in (PodPhase.SUCCEEDED, PodPhase.FAILED) or self.exit_code is not None


def _container(status: Mapping[str, Any]) -> Mapping[str, Any]:
    for item in status.get("containerStatuses") or []:
        if item.get("name") == DRIVER_CONTAINER:
            return dict(item)
    statuses = status.get("containerStatuses") or []
    return dict(statuses[0]) if statuses else {}


def observe_pod(pod: Mapping[str, Any]) -> PodObservation:
    """Reduce a Pod object to a :class:`PodObservation`."""
    metadata = pod.get("metadata") or {}
    status = pod.get("status") or {}
    try:
        phase = PodPhase(status.get("phase") or "Pending")
    except ValueError:
        phase = PodPhase.UNKNOWN
    attempt_label = (metadata.get("labels") or {}).get(LABEL_ATTEMPT)
    container = _container(status)
    state = container.get("state") or {}
    exit_code: int | None = None
    reason = status.get("reason")
    message = status.get("message") or ""
    if "terminated" in state:
        terminated = state["terminated"] or {}
        exit_code = terminated.get("exitCode")
        reason = terminated.get("reason") or reason
        message = terminated.get("message") or message
    elif "waiting" in state:
        waiting = state["waiting"] or {}
        reason = waiting.get("reason") or reason
        message = waiting.get("message") or message
    if reason is None and phase is PodPhase.PENDING:
        for condition in status.get("conditions") or []:
            if condition.get("type") == "PodScheduled" and condition.get("status") == "False":
                reason = condition.get("reason") or "Unschedulable"
                message = condition.get("message") or message
    return PodObservation(
        name=str(metadata.get("name", "")),
        phase=phase,
        attempt=int(attempt_label) if attempt_label and attempt_label.isdigit() else None,
        ready=bool(container.get("ready")),
        deleting=bool(metadata.get("deletionTimestamp")),
        exit_code=exit_code,
        reason=reason,
        message=message,
        ip=status.get("podIP") or None,
    )


@dataclass(frozen=True, slots=True)
class ClaimObservation:
    """The replica's state PersistentVolumeClaim as it exists: what it was created with."""

    name: str
    size: str | None
    """``spec.resources.requests.storage``."""
    storage_class_name: str | None
    access_modes: tuple[str, ...]


def observe_claim(body: Mapping[str, Any]) -> ClaimObservation:
    """The facts of a PersistentVolumeClaim that ``spec.storage`` is compared with."""
    spec = body.get("spec") or {}
    requests = (spec.get("resources") or {}).get("requests") or {}
    size = requests.get("storage")
    return ClaimObservation(
        name=str((body.get("metadata") or {}).get("name") or ""),
        size=str(size) if size is not None else None,
        storage_class_name=spec.get("storageClassName"),
        access_modes=tuple(spec.get("accessModes") or ()),
    )
