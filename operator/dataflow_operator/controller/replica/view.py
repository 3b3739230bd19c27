"""What a Replica's reconcile decision looks at, and what it produces.

:class:`ReplicaView` holds everything observed (the Replica, its driver pods, the last
control-API polls, the time); :class:`Decision` the new status, the actions to take
*after* that status is written, the Events to post and when to look again.
:class:`DecisionBuilder` accumulates one decision; :mod:`.logic` and
:mod:`.handover` fill it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum

from dataflow_operator.api.protocol import ReplicaReport
from dataflow_operator.api.replica import Replica, ReplicaStatus
from dataflow_operator.controller.config import OperatorConfig
from dataflow_operator.controller.replica.observation import (
    ClaimObservation,
    ExecutorObservation,
    PodObservation,
)
from dataflow_operator.controller.status_conditions import from_api, to_api
from dataflow_operator.core.conditions import Condition, ConditionStatus, set_condition
from dataflow_operator.core.time import Timestamp

__all__ = [
    "DEGRADED",
    "EXECUTORS_FAILING",
    "EXPIRED",
    "PERSISTENT_STATE",
    "PROGRESSING",
    "READY",
    "Action",
    "ActionKind",
    "ControlObservation",
    "Decision",
    "DecisionBuilder",
    "EventNote",
    "ReplicaView",
]

READY = "Ready"
PROGRESSING = "Progressing"
DEGRADED = "Degraded"
EXPIRED = "Expired"
PERSISTENT_STATE = "PersistentState"
EXECUTORS_FAILING = "ExecutorsFailing"


class ActionKind(StrEnum):
    """What the handler does after writing the status."""

    CREATE_POD = "CreatePod"
    DELETE_POD = "DeletePod"


@dataclass(frozen=True, slots=True)
class Action:
    """One idempotent step on the cluster."""

    kind: ActionKind
    pod: str


@dataclass(frozen=True, slots=True)
class EventNote:
    """A Kubernetes Event to post on the Replica."""

    type: str  # Normal | Warning
    reason: str
    message: str


@dataclass(frozen=True, slots=True)
class ControlObservation:
    """The last poll of a driver's control API (``GET /status``)."""

    reachable: bool
    report: ReplicaReport | None = None
    error: str | None = None
    hydrated: bool = False
    """Every dataflow the replica should run is installed and hydrated on it."""
    hydrated_dataflows: int = 0
    """How many of them are."""
    dataflows: int = 0
    """How many the replica should run."""


@dataclass(frozen=True, slots=True)
class ReplicaView:
    """Everything a decision looks at."""

    replica: Replica
    now: Timestamp
    config: OperatorConfig
    driver: PodObservation | None = None
    """The pod named by ``status.driverPod``, if it exists."""
    other_pods: tuple[PodObservation, ...] = ()
    """Driver pods of this replica that are neither the serving one nor its successor."""
    driver_missing_since: Timestamp | None = None
    """Since when the recorded driver pod has been absent (kept in memory)."""
    control: ControlObservation | None = None
    claim: ClaimObservation | None = None
    """The replica's state claim, if ``spec.storage`` is set and the claim exists."""
    successor: PodObservation | None = None
    """The pod named by ``status.handover.driverPod``, if it exists."""
    successor_control: ControlObservation | None = None
    sink_dataflows: tuple[str, ...] = ()
    """Dataflows of the replica's cluster that write an external sink (``spec.sink``)."""
    executors: tuple[ExecutorObservation, ...] = ()
    """The replica's executor pods (of every attempt: each names its driver pod)."""


@dataclass(slots=True)
class Decision:
    """The outcome of one reconcile."""

    status: ReplicaStatus
    actions: list[Action] = field(default_factory=list)
    events: list[EventNote] = field(default_factory=list)
    requeue_after_ms: int | None = None
    unserved_seconds: float | None = None
    """Set when a restart's unserved window closed: how long no hydrated driver served."""
    overlap_seconds: float | None = None
    """Set when a handover ended: how long the successor ran beside its predecessor."""

    def wake_at(self, delay_ms: int) -> None:
        """Look again within ``delay_ms`` (the earliest request wins)."""
        delay_ms = max(0, delay_ms)
        if self.requeue_after_ms is None or delay_ms < self.requeue_after_ms:
            self.requeue_after_ms = delay_ms


class DecisionBuilder:
    """Accumulates the new status, conditions, actions and events of one decision."""

    def __init__(self, view: ReplicaView) -> None:
        self.view = view
        self.old = view.replica.status or ReplicaStatus()
        self.values = self.old.model_dump()
        self.conditions: list[Condition] = from_api(self.old.conditions)
        self.decision = Decision(status=self.old)
        self.generation = view.replica.metadata.generation

    def set(self, **values: object) -> None:
        """Set status fields (by their Python names)."""
        self.values.update(values)

    def condition(self, type_: str, status: bool, reason: str, message: str = "") -> None:
        """Set one condition (its transition time moves only when its status does)."""
        self.conditions = set_condition(
            self.conditions,
            type_=type_,
            status=ConditionStatus.TRUE if status else ConditionStatus.FALSE,
            reason=reason,
            message=message,
            now=self.view.now,
            observed_generation=self.generation,
        )

    def act(self, kind: ActionKind, pod: str) -> None:
        """Take an action after the status is written."""
        self.decision.actions.append(Action(kind, pod))

    def event(self, type_: str, reason: str, message: str) -> None:
        """Post an Event."""
        self.decision.events.append(EventNote(type_, reason, message))

    def finish(self) -> Decision:
        """The decision, with the status validated and a phase change announced."""
        self.values["observed_generation"] = self.generation
        self.values["conditions"] = to_api(self.conditions)
        status = ReplicaStatus.model_validate(self.values)
        old_phase, new_phase = self.old.phase, status.phase
        if old_phase != new_phase and new_phase is not None and not self.decision.events:
            self.event("Normal", f"Driver{new_phase}", f"driver {status.driver_pod}: {new_phase}")
        self.decision.status = status
        return self.decision
