"""Make-before-break expiration restarts: the successor hydrates beside the serving driver.

At ``expiresAt − lead`` (:func:`~dataflow_operator.core.expiration.restart_lead`: the
configured lead time, or twice the last hydration time when longer) the decision records
a successor in ``status.handover`` — attempt number, pod name, start time, its own state
directory — and only then creates its pod. The serving driver (``status.driverPod``) and
the driver Service's selector stay as they are while the successor starts and hydrates.

* Every dataflow hydrated on the successor: **cut over**. One status write moves the
  successor into the serving fields and records ``lastHandover`` (``CutOver``); then the
  daemon points the driver Service at the new attempt and deletes the predecessor.
* The predecessor reaches its expiration (or stops, or disappears) first: the guard wins
  over availability. The successor serves at once, unhydrated (``Late``); the unserved
  window lasts until it has hydrated, and the ``Expired`` condition says so.
* The successor fails (exits, cannot start, never answers): it is deleted and the
  handover **abandoned**; the serving driver restarts break-before-make at its usual
  lead time.

Crash safety: each step is recorded before it is acted on, and every action is
idempotent (a pod created twice is a 409; pods that are neither the serving one nor the
recorded successor are deleted). An operator killed at any point converges to one
serving driver and at most one successor.

Make-before-break needs two drivers with separate state and separate addresses; when a
Replica cannot have that, :func:`handover_blocker` says why and the restart is
break-before-make.
"""

from __future__ import annotations

from dataflow_operator.api.injection import STATE_ATTEMPTS_DIR
from dataflow_operator.api.replica import (
    AttemptPhase,
    Handover,
    HandoverOutcome,
    HandoverPhase,
    HandoverRecord,
    RestartReason,
    RestartStrategy,
)
from dataflow_operator.controller.manifests import driver_spec_hash, effective_offset
from dataflow_operator.controller.naming import ANNOTATION_CONTROL_ADDRESS, driver_pod_name
from dataflow_operator.controller.replica.view import (
    EXPIRED,
    PROGRESSING,
    ActionKind,
    DecisionBuilder,
    ReplicaView,
)
from dataflow_operator.controller.shared.observation import FATAL_WAITING_REASONS, PodPhase
from dataflow_operator.core.expiration import replica_expiration
from dataflow_operator.core.time import format_timestamp

__all__ = [
    "abandon_handover",
    "abandoned_for_current",
    "begin_handover",
    "cut_over",
    "follow_handover",
    "handover_blocker",
    "new_attempt",
    "next_attempt_number",
]

_SINGLE_NODE_MODES = {"ReadWriteOnce", "ReadWriteOncePod"}


def handover_blocker(view: ReplicaView) -> str | None:
    """Why the next expiration restart cannot be make-before-break (``None``: it can)."""
    replica = view.replica
    if replica.spec.restart_strategy is RestartStrategy.BREAK_BEFORE_MAKE:
        return "spec.restartStrategy is BreakBeforeMake"
    if replica.metadata.annotations.get(ANNOTATION_CONTROL_ADDRESS):
        return (
            f"the {ANNOTATION_CONTROL_ADDRESS} annotation gives every attempt one address, "
            "so a successor could not be told apart"
        )
    storage = replica.spec.storage
    if storage is not None and set(storage.access_modes) <= _SINGLE_NODE_MODES:
        return (
            f"spec.storage.accessModes {list(storage.access_modes)} let one node "
            "mount the claim, and a successor may be scheduled on another"
        )
    if view.sink_dataflows:
        names = ", ".join(view.sink_dataflows[:5])
        return f"dataflow {names} writes a sink that two drivers cannot write at once"
    return None


def next_attempt_number(view: ReplicaView) -> int:
    """A number no attempt of this replica has used (a successor's included)."""
    status = view.replica.status
    if status is None:
        return 1
    used = [status.attempt]
    if status.handover is not None:
        used.append(status.handover.attempt)
    if status.last_handover is not None:
        used.append(status.last_handover.attempt)
    return max(used) + 1


def new_attempt(view: ReplicaView, number: int, state_dir: str) -> Handover:
    """The recorded facts of a new attempt starting now (its pod does not exist yet)."""
    replica, now = view.replica, view.now
    offset = effective_offset(replica, view.config)
    expires = replica_expiration(now, offset)
    return Handover(
        attempt=number,
        driver_pod=driver_pod_name(replica.metadata.name, number),
        start_time=format_timestamp(now),
        start_time_ms=now,
        expires_at=format_timestamp(expires) if expires is not None else None,
        expires_at_ms=expires,
        expiration_offset=str(offset),
        spec_hash=driver_spec_hash(replica, view.config),
        state_dir=state_dir,
        phase=HandoverPhase.STARTING.value,
    )


def begin_handover(b: DecisionBuilder, expires_at: str | None) -> None:
    """Record a successor, then create its pod beside the serving driver."""
    number = next_attempt_number(b.view)
    successor = new_attempt(b.view, number, f"{STATE_ATTEMPTS_DIR}/{number}")
    b.set(handover=successor.model_dump())
    message = (
        f"starting {successor.driver_pod} beside {b.old.driver_pod} (expires at {expires_at}); "
        "cutting over once it is hydrated"
    )
    b.event("Normal", "Handover", message)
    b.condition(PROGRESSING, True, "Handover", message)
    b.act(ActionKind.CREATE_POD, successor.driver_pod)
    b.decision.wake_at(b.view.config.lost_grace.millis)


def follow_handover(b: DecisionBuilder, handover: Handover) -> bool:
    """Watch the successor: cut over once hydrated, abandon it if it fails.

    Returns True when the handover ended in a cutover (the decision is complete).
    """
    view, config = b.view, b.view.config
    pod, control = view.successor, view.successor_control
    age = view.now - handover.start_time_ms
    if pod is None or pod.deleting:
        if age >= config.start_timeout.millis:
            abandon_handover(b, handover, f"successor pod {handover.driver_pod} never appeared")
            return False
        if pod is None:
            b.act(ActionKind.CREATE_POD, handover.driver_pod)  # idempotent: 409 if it exists
        b.decision.wake_at(config.lost_grace.millis)
        return False
    if pod.terminated:
        detail = f": {pod.message}" if pod.message else ""
        abandon_handover(
            b, handover, f"successor {pod.name} exited with code {pod.exit_code}{detail}"
        )
        return False
    if pod.phase is not PodPhase.RUNNING:
        if pod.reason in FATAL_WAITING_REASONS or age >= config.start_timeout.millis:
            why = pod.message or pod.reason or "not running"
            abandon_handover(b, handover, f"successor {pod.name} did not start: {why}")
            return False
        b.decision.wake_at(config.start_timeout.millis - age)
        return False
    if control is not None and control.hydrated:
        cut_over(b, handover, HandoverOutcome.CUT_OVER)
        return True
    if control is not None and control.reachable:
        progress = f"{control.hydrated_dataflows}/{control.dataflows}"
        if (handover.phase, handover.hydrated) != (HandoverPhase.HYDRATING, progress):
            b.set(
                handover={
                    **handover.model_dump(),
                    "phase": HandoverPhase.HYDRATING.value,
                    "hydrated": progress,
                }
            )
        return False
    if age >= config.ready_timeout.millis:
        error = control.error if control is not None and control.error else "not answering"
        abandon_handover(b, handover, f"successor {pod.name}'s control API: {error}")
    return False


def cut_over(
    b: DecisionBuilder, handover: Handover, outcome: HandoverOutcome, why: str = ""
) -> None:
    """The successor becomes the serving attempt; the predecessor is deleted."""
    view, old, now = b.view, b.old, b.view.now
    overlap = max(0, now - handover.start_time_ms) / 1000
    hydrated = outcome is HandoverOutcome.CUT_OVER
    restarts = {item.reason: item.count for item in old.restarts}
    restarts[RestartReason.EXPIRED] = restarts.get(RestartReason.EXPIRED, 0) + 1
    running = view.successor is not None and view.successor.phase is PodPhase.RUNNING
    b.set(
        attempt=handover.attempt,
        driver_pod=handover.driver_pod,
        start_time=handover.start_time,
        start_time_ms=handover.start_time_ms,
        expires_at=handover.expires_at,
        expires_at_ms=handover.expires_at_ms,
        expiration_offset=handover.expiration_offset,
        spec_hash=handover.spec_hash,
        state_dir=handover.state_dir,
        phase=(AttemptPhase.RUNNING if running else AttemptPhase.PENDING).value,
        handover=None,
        hydrated_at_ms=now if hydrated else None,
        last_hydration_seconds=overlap if hydrated else old.last_hydration_seconds,
        unserved_since_ms=None if hydrated else now,
        restarts=[{"reason": r, "count": restarts[r]} for r in RestartReason if r in restarts],
        total_restarts=sum(restarts.values()),
        consecutive_failures=0,
    )
    if hydrated:
        message = (
            f"{handover.driver_pod} serves now: hydrated {overlap:g}s after it started "
            f"beside {old.driver_pod}, which is being stopped"
        )
        b.event("Normal", "CutOver", message)
        b.decision.unserved_seconds = 0.0
    else:
        message = (
            f"{why}: {handover.driver_pod} serves before it has hydrated "
            f"({overlap:g}s after it started); the expiration comes first"
        )
        b.event("Warning", "HandoverLate", message)
        b.condition(EXPIRED, True, "ExpiredBeforeHandover", message)
    b.decision.overlap_seconds = overlap
    b.set(
        last_handover=HandoverRecord(
            attempt=handover.attempt,
            outcome=outcome,
            at=format_timestamp(now),
            overlap_seconds=overlap,
            message=message[:1024],
        ).model_dump()
    )
    if view.driver is not None and not view.driver.deleting:
        b.act(ActionKind.DELETE_POD, view.driver.name)


def abandon_handover(b: DecisionBuilder, handover: Handover, message: str) -> None:
    """The successor failed: delete it; the serving driver restarts break-before-make."""
    view, now = b.view, b.view.now
    overlap = max(0, now - handover.start_time_ms) / 1000
    text = f"{message}; {b.old.driver_pod} serves on and restarts break-before-make"
    b.set(
        handover=None,
        restart_strategy=RestartStrategy.BREAK_BEFORE_MAKE.value,
        last_handover=HandoverRecord(
            attempt=handover.attempt,
            outcome=HandoverOutcome.ABANDONED,
            at=format_timestamp(now),
            overlap_seconds=overlap,
            message=text[:1024],
        ).model_dump(),
    )
    b.event("Warning", "HandoverAbandoned", text)
    b.decision.overlap_seconds = overlap
    if view.successor is not None and not view.successor.deleting:
        b.act(ActionKind.DELETE_POD, view.successor.name)


def abandoned_for_current(b: DecisionBuilder) -> bool:
    """The serving attempt already had a handover abandoned (it restarts break-before-make)."""
    record = b.values.get("last_handover")
    if not record:
        return False
    outcome = HandoverOutcome(record["outcome"])
    return outcome is HandoverOutcome.ABANDONED and record["attempt"] > b.values["attempt"]
