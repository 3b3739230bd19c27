"""What the operator sees of a driver pod, an executor pod and the state claim, reduced
to the facts decisions need.

Parsing a Pod's status is the only place that knows Kubernetes' pod-status shapes; the
reconcile decisions work on :class:`PodObservation` values and are tested as data.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from dataflow_operator.controller.naming import (
    DRIVER_CONTAINER,
    EXECUTOR_CONTAINER,
    LABEL_ATTEMPT,
)
from dataflow_operator.core.time import parse_timestamp

__all__ = [
    "FATAL_WAITING_REASONS",
    "ClaimObservation",
    "ExecutorObservation",
    "PodObservation",
    "PodPhase",
    "observe_claim",
    "observe_executor",
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


def _container(status: Mapping[str, Any], name: str = DRIVER_CONTAINER) -> Mapping[str, Any]:
    for item in status.get("containerStatuses") or []:
        if item.get("name") == name:
            return dict(item)
    statuses = status.get("containerStatuses") or []
    return dict(statuses[0]) if statuses else {}


def _phase(status: Mapping[str, Any]) -> PodPhase:
    """A pod status's phase (``Pending`` before it has one, ``Unknown`` if unrecognised)."""
    try:
        return PodPhase(status.get("phase") or "Pending")
    except ValueError:
        return PodPhase.UNKNOWN


def observe_pod(pod: Mapping[str, Any]) -> PodObservation:
    """Reduce a Pod object to a :class:`PodObservation`."""
    metadata = pod.get("metadata") or {}
    status = pod.get("status") or {}
    phase = _phase(status)
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


@dataclass(frozen=True, slots=True)
class ExecutorObservation:
    """One executor pod (Spark creates them, owned by their driver pod) as last seen."""

    name: str
    driver: str | None
    """The driver pod that owns it: the attempt it belongs to."""
    phase: PodPhase
    running: bool = False
    """Its container runs."""
    deleting: bool = False
    exit_code: int | None = None
    reason: str | None = None
    """The terminated container's reason (``OOMKilled``, ``Error``), else the pod's."""
    message: str = ""
    """The terminated container's message (with ``FallbackToLogsOnError``, its log's tail)."""
    finished_at: int | None = None
    """When its container ended, epoch ms."""

    @property
    def failed(self) -> bool:
        """It ended with an error (a non-zero exit, or the pod failed)."""
        if self.exit_code is not None:
            return self.exit_code != 0
        return self.phase is PodPhase.FAILED


def observe_executor(pod: Mapping[str, Any]) -> ExecutorObservation:
    """Reduce an executor Pod object to an :class:`ExecutorObservation`."""
    metadata = pod.get("metadata") or {}
    status = pod.get("status") or {}
    phase = _phase(status)
    owner = next(
        (
            ref.get("name")
            for ref in metadata.get("ownerReferences") or []
            if ref.get("kind") == "Pod" and ref.get("controller")
        ),
        None,
    )
    state = _container(status, EXECUTOR_CONTAINER).get("state") or {}
    terminated = state.get("terminated") or {}
    transitions = [c.get("lastTransitionTime") for c in status.get("conditions") or []]
    finished = terminated.get("finishedAt") or (
        max((t for t in transitions if t), default=None) if phase is PodPhase.FAILED else None
    )
    try:
        finished_at = parse_timestamp(str(finished)) if finished else None
    except ValueError:
        finished_at = None
    return ExecutorObservation(
        name=str(metadata.get("name", "")),
        driver=owner,
        phase=phase,
        running=phase is PodPhase.RUNNING and "running" in state,
        deleting=bool(metadata.get("deletionTimestamp")),
        exit_code=terminated.get("exitCode") if terminated else None,
        reason=(terminated.get("reason") if terminated else None) or status.get("reason"),
        message=(terminated.get("message") if terminated else None) or status.get("message") or "",
        finished_at=finished_at,
    )
