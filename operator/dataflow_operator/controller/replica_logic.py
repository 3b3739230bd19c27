"""Pure reconcile decisions for a Replica: what to do, and the status that says so.

:func:`decide` takes everything observed (the Replica, its driver pod, the last control
API poll, the time) and returns a :class:`Decision`: the new status, the actions to take
*after* that status is written, the Events to post, and when to look again.

Crash safety comes from the order: a new attempt is first recorded in status (attempt
number, the deterministic pod name, its start time, phase ``Creating``), and only then
are old pods deleted and the new one created. An operator killed anywhere re-reads that
status and repeats the idempotent steps: it deletes any driver pod that is not the
recorded one, waits until none is left, and creates the recorded one (a 409 means it
already exists). So there is never more than one driver, and never none for long.

Storage: with ``spec.storage`` every attempt mounts the Replica's one state claim, which
the handler creates (idempotently) before any driver pod. An existing claim is never
changed: a ``spec.storage`` that no longer matches it (another size, class or access
modes) keeps the claim as it is and says so in ``PersistentState=False``
(``StorageChangeRejected``) and a Warning Event. With ``spec.stateUri`` the state lives on
that object store / HDFS location: ``PersistentState=True`` (``StateUri``). With neither
the state is an emptyDir, lost on every restart: ``PersistentState=False``
(``EphemeralState``). Each message says where the state lives.

Phases (``status.phase``): ``Creating`` → ``Pending`` → ``Running``; on a failure
``BackingOff`` (pod deleted, waiting for the backoff) → ``Creating``; ``Failed`` when the
restart policy gives up; ``Completed`` when a driver exited 0 and the policy does not
restart successes. Expected restarts (``Expired``, ``SpecChanged``) go straight to a new
attempt and never count as failures.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from enum import StrEnum

from dataflow_operator.api import injection
from dataflow_operator.api.protocol import ReplicaPhase, ReplicaReport
from dataflow_operator.api.replica import (
    Replica,
    ReplicaStatus,
    RestartCount,
    RestartPolicyType,
    RestartReason,
)
from dataflow_operator.controller.config import OperatorConfig
from dataflow_operator.controller.manifests import (
    LOCAL_STATE_URI,
    driver_spec_hash,
    effective_offset,
    quantity_bytes,
)
from dataflow_operator.controller.naming import driver_pod_name, state_claim_name
from dataflow_operator.controller.observation import (
    FATAL_WAITING_REASONS,
    ClaimObservation,
    PodObservation,
    PodPhase,
)
from dataflow_operator.controller.status_conditions import from_api, to_api
from dataflow_operator.core.conditions import Condition, ConditionStatus, set_condition
from dataflow_operator.core.expiration import replica_expiration
from dataflow_operator.core.time import Timestamp, format_timestamp

__all__ = [
    "Action",
    "ActionKind",
    "ControlObservation",
    "Decision",
    "EventNote",
    "Phase",
    "ReplicaView",
    "backoff_delay_ms",
    "decide",
    "storage_conflicts",
]

READY = "Ready"
PROGRESSING = "Progressing"
DEGRADED = "Degraded"
EXPIRED = "Expired"
PERSISTENT_STATE = "PersistentState"
WAIT_FOR_DELETION_MS = 1_000


class Phase(StrEnum):
    """Where the current attempt is; see the module docstring."""

    CREATING = "Creating"
    PENDING = "Pending"
    RUNNING = "Running"
    BACKING_OFF = "BackingOff"
    FAILED = "Failed"
    COMPLETED = "Completed"


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
    """The last poll of the driver's control API (``GET /status``)."""

    reachable: bool
    report: ReplicaReport | None = None
    error: str | None = None


@dataclass(frozen=True, slots=True)
class ReplicaView:
    """Everything :func:`decide` looks at."""

    replica: Replica
    now: Timestamp
    config: OperatorConfig
    driver: PodObservation | None = None
    """The pod named by ``status.driverPod``, if it exists."""
    other_pods: tuple[PodObservation, ...] = ()
    """Driver pods of this replica with any other name (earlier attempts)."""
    driver_missing_since: Timestamp | None = None
    """Since when the recorded driver pod has been absent (kept in memory)."""
    control: ControlObservation | None = None
    claim: ClaimObservation | None = None
    """The replica's state claim, if ``spec.storage`` is set and the claim exists."""


@dataclass(slots=True)
class Decision:
    """The outcome of one reconcile."""

    status: ReplicaStatus
    actions: list[Action] = field(default_factory=list)
    events: list[EventNote] = field(default_factory=list)
    requeue_after_ms: int | None = None

    def wake_at(self, delay_ms: int) -> None:
        """Look again within ``delay_ms`` (the earliest request wins)."""
        delay_ms = max(0, delay_ms)
        if self.requeue_after_ms is None or delay_ms < self.requeue_after_ms:
            self.requeue_after_ms = delay_ms


def backoff_delay_ms(replica: Replica, failures: int) -> int:
    """Delay before the next attempt after ``failures`` consecutive failures."""
    backoff = replica.spec.restart_policy.backoff
    delay = backoff.initial.millis * backoff.multiplier ** max(0, failures - 1)
    return int(min(backoff.max.millis, delay))


def _increment(restarts: Sequence[RestartCount], reason: RestartReason) -> list[RestartCount]:
    counts = {item.reason: item.count for item in restarts}
    counts[reason] = counts.get(reason, 0) + 1
    return [RestartCount(reason=r, count=counts[r]) for r in RestartReason if r in counts]


class _Builder:
    """Accumulates the new status, conditions, actions and events of one decision."""

    def __init__(self, view: ReplicaView) -> None:
        self.view = view
        self.old = view.replica.status or ReplicaStatus()
        self.values = self.old.model_dump()
        self.conditions: list[Condition] = from_api(self.old.conditions)
        self.decision = Decision(status=self.old)
        self.generation = view.replica.metadata.generation

    def set(self, **values: object) -> None:
        self.values.update(values)

    def condition(self, type_: str, status: bool, reason: str, message: str = "") -> None:
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
        self.decision.actions.append(Action(kind, pod))

    def event(self, type_: str, reason: str, message: str) -> None:
        self.decision.events.append(EventNote(type_, reason, message))

    def finish(self) -> Decision:
        self.values["observed_generation"] = self.generation
        self.values["conditions"] = to_api(self.conditions)
        status = ReplicaStatus.model_validate(self.values)
        old_phase, new_phase = self.old.phase, status.phase
        if old_phase != new_phase and new_phase is not None and not self.decision.events:
            self.event("Normal", f"Driver{new_phase}", f"driver {status.driver_pod}: {new_phase}")
        self.decision.status = status
        return self.decision


def decide(view: ReplicaView) -> Decision:
    """The next step for one Replica; see the module docstring."""
    b = _Builder(view)
    old = b.old
    for pod in view.other_pods:
        if not pod.deleting:
            b.act(ActionKind.DELETE_POD, pod.name)
    spec_hash = driver_spec_hash(view.replica, view.config)
    phase = next((p for p in Phase if p.value == old.phase), None)
    if old.attempt == 0 or old.driver_pod is None or phase is None:
        _start_attempt(b, None)
    elif phase in (Phase.FAILED, Phase.COMPLETED):
        if spec_hash != old.spec_hash:
            _start_attempt(b, RestartReason.SPEC_CHANGED, reset_failures=True)
    elif phase is Phase.BACKING_OFF:
        _backing_off(b, spec_hash)
    elif phase is Phase.CREATING and view.driver is None:
        _creating(b)
    else:
        _observe(b, spec_hash)
    _expired_condition(b)
    _storage(b)
    return b.finish()


def _start_attempt(
    b: _Builder, reason: RestartReason | None, *, reset_failures: bool = False, message: str = ""
) -> None:
    view, old = b.view, b.old
    number = old.attempt + 1
    pod = driver_pod_name(view.replica.metadata.name, number)
    offset = effective_offset(view.replica, view.config)
    expires = replica_expiration(view.now, offset)
    restarts = _increment(old.restarts, reason) if reason else list(old.restarts)
    b.set(
        attempt=number,
        driver_pod=pod,
        start_time=format_timestamp(view.now),
        start_time_ms=view.now,
        expires_at=format_timestamp(expires) if expires is not None else None,
        expiration_offset=str(offset),
        spec_hash=driver_spec_hash(view.replica, view.config),
        phase=Phase.CREATING.value,
        pending_restart=None,
        next_attempt_at_ms=None,
        restarts=restarts,
        total_restarts=sum(item.count for item in restarts),
    )
    if reset_failures:
        b.set(consecutive_failures=0)
    why = reason.value if reason else "Created"
    b.condition(READY, False, "Restarting" if reason else "Creating", f"starting {pod}")
    b.condition(PROGRESSING, True, why, f"attempt {number}: creating driver pod {pod}")
    if reason is RestartReason.EXPIRED:
        b.condition(EXPIRED, True, "RestartingAtExpiration", message)
    if reason is not None:
        b.event("Normal", reason.value, f"restarting as {pod}: {message or reason.value}")
    else:
        b.event("Normal", "Creating", f"creating driver pod {pod}")
    stale = [p for p in (view.driver, *view.other_pods) if p is not None]
    if view.driver is not None and not view.driver.deleting:
        b.act(ActionKind.DELETE_POD, view.driver.name)
    if not stale:
        b.act(ActionKind.CREATE_POD, pod)
    else:
        b.decision.wake_at(WAIT_FOR_DELETION_MS)


def _creating(b: _Builder) -> None:
    """The attempt is recorded; its pod is not seen yet: create it once the old are gone."""
    view, old = b.view, b.old
    started = old.start_time_ms or view.now
    if view.now - started >= view.config.start_timeout.millis:
        _fail(b, RestartReason.DRIVER_FAILED, "DriverNotCreated", "the driver pod was never seen")
        return
    if view.other_pods:
        b.decision.wake_at(WAIT_FOR_DELETION_MS)
        return
    assert old.driver_pod is not None
    b.act(ActionKind.CREATE_POD, old.driver_pod)
    b.decision.wake_at(view.config.lost_grace.millis)


def _backing_off(b: _Builder, spec_hash: str) -> None:
    view, old = b.view, b.old
    if view.driver is not None and not view.driver.deleting:
        b.act(ActionKind.DELETE_POD, view.driver.name)
    if spec_hash != old.spec_hash:
        _start_attempt(b, RestartReason.SPEC_CHANGED, reset_failures=True)
        return
    due = old.next_attempt_at_ms or view.now
    if view.now < due:
        b.decision.wake_at(due - view.now)
        return
    _start_attempt(b, old.pending_restart or RestartReason.DRIVER_FAILED, message="after backoff")


def _fail(b: _Builder, kind: RestartReason, reason: str, message: str) -> None:
    """A failed attempt: back off and restart, or give up per the restart policy."""
    view, old = b.view, b.old
    policy = view.replica.spec.restart_policy
    failures = old.consecutive_failures + 1
    b.set(consecutive_failures=failures)
    limit = policy.max_attempts
    if policy.type is RestartPolicyType.NEVER or (limit is not None and failures >= limit):
        why = (
            "restartPolicy is Never"
            if policy.type is RestartPolicyType.NEVER
            else f"gave up after {failures} consecutive failures"
        )
        b.set(phase=Phase.FAILED.value, pending_restart=None, next_attempt_at_ms=None)
        b.condition(DEGRADED, True, reason, f"{message} ({why})")
        b.condition(READY, False, reason, message)
        b.condition(PROGRESSING, False, "GaveUp", why)
        b.event("Warning", reason, f"{message}; {why}")
        return
    delay = backoff_delay_ms(view.replica, failures)
    b.set(
        phase=Phase.BACKING_OFF.value,
        pending_restart=kind.value,
        next_attempt_at_ms=view.now + delay,
    )
    b.condition(DEGRADED, True, reason, f"{message}; restarting in {delay / 1000:g}s")
    b.condition(READY, False, reason, message)
    b.condition(PROGRESSING, True, "BackingOff", f"failure {failures}; next attempt in backoff")
    b.event("Warning", reason, f"{message}; {kind.value}, restarting in {delay / 1000:g}s")
    if view.driver is not None and not view.driver.deleting:
        b.act(ActionKind.DELETE_POD, view.driver.name)
    b.decision.wake_at(delay)


def _report_expired(control: ControlObservation | None) -> str | None:
    if control is None or control.report is None:
        return None
    report = control.report
    if report.phase is ReplicaPhase.EXPIRED:
        return "the runtime reports the replica expired"
    expired = sorted(d.name for d in report.dataflows if d.expired)
    if expired:
        return f"the runtime reports dataflow {', '.join(expired)} expired"
    return None


def _observe(b: _Builder, spec_hash: str) -> None:
    """The attempt's pod exists (or existed): follow it, restart it or fail it."""
    view, old = b.view, b.old
    config, driver = view.config, view.driver
    started = old.start_time_ms or view.now
    age = view.now - started
    if driver is None or driver.deleting:
        missing = view.driver_missing_since or view.now
        if view.now - missing < config.lost_grace.millis:
            b.condition(READY, False, "DriverMissing", f"driver pod {old.driver_pod} is missing")
            b.decision.wake_at(config.lost_grace.millis - (view.now - missing))
            return
        _fail(
            b,
            RestartReason.DRIVER_LOST,
            "DriverLost",
            f"driver pod {old.driver_pod} disappeared",
        )
        return
    if spec_hash != old.spec_hash:
        _start_attempt(b, RestartReason.SPEC_CHANGED, message="the driver spec changed")
        return
    if driver.terminated:
        _terminated(b, driver)
        return
    expires_ms = started + effective_offset(view.replica, config).millis if old.expires_at else None
    if expires_ms is not None:
        offset = expires_ms - started
        lead = min(config.expiration_lead_time.millis, offset // 2)
        restart_at = expires_ms - lead
        if view.now >= restart_at:
            _start_attempt(
                b,
                RestartReason.EXPIRED,
                message=f"expires at {old.expires_at}; restarting {lead / 1000:g}s before",
            )
            return
        b.decision.wake_at(restart_at - view.now)
    expired = _report_expired(view.control)
    if expired is not None:
        _start_attempt(b, RestartReason.EXPIRED, message=expired)
        return
    if driver.phase is PodPhase.PENDING or driver.phase is PodPhase.UNKNOWN:
        _pending(b, driver, age)
        return
    _running(b, age)


def _terminated(b: _Builder, driver: PodObservation) -> None:
    view = b.view
    if driver.exit_code == injection.EXIT_EXPIRED:
        _start_attempt(
            b, RestartReason.EXPIRED, message="the driver exited with the expired exit code"
        )
        return
    succeeded = driver.exit_code == 0 or (
        driver.exit_code is None and driver.phase is PodPhase.SUCCEEDED
    )
    policy = view.replica.spec.restart_policy.type
    if succeeded and policy is not RestartPolicyType.ALWAYS:
        b.set(phase=Phase.COMPLETED.value)
        b.condition(READY, False, "DriverCompleted", "the driver exited with code 0")
        b.condition(PROGRESSING, False, "DriverCompleted", f"restartPolicy is {policy.value}")
        return
    code = driver.exit_code
    reason = driver.reason or ("Completed" if succeeded else "Error")
    detail = f": {driver.message}" if driver.message else ""
    _fail(
        b,
        RestartReason.DRIVER_FAILED,
        reason,
        f"driver {driver.name} exited with code {code}{detail}",
    )


def _pending(b: _Builder, driver: PodObservation, age: int) -> None:
    view = b.view
    timeout = view.config.start_timeout.millis
    reason = driver.reason or "DriverPending"
    message = driver.message or f"driver pod {driver.name} is pending"
    if driver.reason in FATAL_WAITING_REASONS:
        _fail(b, RestartReason.DRIVER_FAILED, reason, message)
        return
    if age >= timeout:
        _fail(
            b,
            RestartReason.DRIVER_FAILED,
            reason if driver.reason else "StartTimeout",
            f"{message} (not running {timeout / 1000:g}s after the attempt began)",
        )
        return
    b.set(phase=Phase.PENDING.value)
    b.condition(READY, False, reason, message)
    b.condition(PROGRESSING, True, "DriverPending", message)
    if driver.reason and ("Err" in driver.reason or "BackOff" in driver.reason):
        b.condition(DEGRADED, True, driver.reason, message)
    b.decision.wake_at(timeout - age)


def _running(b: _Builder, age: int) -> None:
    view, old = b.view, b.old
    control = view.control
    b.set(phase=Phase.RUNNING.value)
    if control is not None and control.reachable:
        was_ready = any(c.type == READY and c.status == "True" for c in old.conditions)
        b.condition(READY, True, "DriverReady", "driver running and control API answering")
        b.condition(PROGRESSING, False, "Stable", f"attempt {old.attempt} is running")
        b.condition(DEGRADED, False, "Healthy", "")
        if not was_ready:
            b.event("Normal", "Ready", f"driver {old.driver_pod} is ready")
        reset = view.replica.spec.restart_policy.reset_after.millis
        if old.consecutive_failures and age >= reset:
            b.set(consecutive_failures=0)
        elif old.consecutive_failures:
            b.decision.wake_at(reset - age)
        return
    timeout = view.config.ready_timeout.millis
    error = control.error if control is not None and control.error else "not polled yet"
    if age >= timeout:
        _fail(
            b,
            RestartReason.DRIVER_FAILED,
            "ReadyTimeout",
            f"control API not answering {timeout / 1000:g}s after the attempt began: {error}",
        )
        return
    b.condition(READY, False, "ControlApiUnavailable", error)
    b.condition(PROGRESSING, True, "DriverStarting", "driver running, waiting for its control API")
    b.decision.wake_at(timeout - age)


def _expired_condition(b: _Builder) -> None:
    status = b.values
    if status.get("phase") == Phase.CREATING.value and any(
        c.type == EXPIRED and c.status is ConditionStatus.TRUE for c in b.conditions
    ):
        return  # keep "restarting at expiration" until the new attempt runs
    if status.get("expires_at") is None:
        b.condition(EXPIRED, False, "ExpirationDisabled", "expiration offset is 0")
    else:
        b.condition(EXPIRED, False, "NotExpired", f"expires at {status['expires_at']}")


def storage_conflicts(replica: Replica, claim: ClaimObservation) -> list[str]:
    """How ``spec.storage`` differs from the existing claim (empty: it matches).

    A class left to the cluster's default matches whatever class the claim got.
    """
    storage = replica.spec.storage
    if storage is None:
        return []
    problems = []
    if claim.size is None or quantity_bytes(claim.size) != quantity_bytes(storage.size):
        problems.append(f"size {storage.size} (the claim has {claim.size})")
    wanted_class = storage.storage_class_name
    if wanted_class is not None and wanted_class != claim.storage_class_name:
        problems.append(
            f"storageClassName {wanted_class} (the claim has {claim.storage_class_name})"
        )
    if sorted(storage.access_modes) != sorted(claim.access_modes):
        problems.append(
            f"accessModes {list(storage.access_modes)} (the claim has {list(claim.access_modes)})"
        )
    return problems


def _storage(b: _Builder) -> None:
    """``status.stateClaim`` and the ``PersistentState`` condition; see the module docstring."""
    replica, claim = b.view.replica, b.view.claim
    if replica.spec.state_uri is not None:
        b.set(state_claim=None)
        b.condition(
            PERSISTENT_STATE,
            True,
            "StateUri",
            f"state at {replica.spec.state_uri}, reached by the driver and every executor; "
            "it survives restarts and is not deleted with the Replica",
        )
        return
    if replica.spec.storage is None:
        b.set(state_claim=None)
        b.condition(
            PERSISTENT_STATE,
            False,
            "EphemeralState",
            f"no spec.storage nor spec.stateUri: the state ({LOCAL_STATE_URI}) is an emptyDir "
            "in the driver pod, lost on every restart",
        )
        return
    name = state_claim_name(replica.metadata.name)
    b.set(state_claim=name)
    problems = storage_conflicts(replica, claim) if claim is not None else []
    if not problems:
        b.condition(
            PERSISTENT_STATE,
            True,
            "StateClaim",
            f"state ({LOCAL_STATE_URI}) in PersistentVolumeClaim {name}, mounted on the driver "
            "and every executor; it survives restarts",
        )
        return
    message = (
        f"spec.storage asks for {'; '.join(problems)}: the existing claim {name} is kept "
        "unchanged (delete the Replica to recreate it; expand a claim in place with "
        "kubectl where its class allows, then set the same size here)"
    )
    was = next((c for c in b.conditions if c.type == PERSISTENT_STATE), None)
    if was is None or was.message != message:
        b.event("Warning", "StorageChangeRejected", message)
    b.condition(PERSISTENT_STATE, False, "StorageChangeRejected", message)
