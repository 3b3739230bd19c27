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

Attempts (starting, failing, backing off): :mod:`.attempts`; the expiration
restart: :mod:`.expiry`; storage (``status.stateClaim``, ``PersistentState``):
:mod:`.storage`; the executors (``status.executors*``, ``ExecutorsFailing``):
:mod:`.executors`.

Expiration restarts follow ``spec.restartStrategy``: MakeBeforeBreak hands over to a
successor that hydrates beside the serving driver (:mod:`.handover`); BreakBeforeMake,
or MakeBeforeBreak where it cannot apply, records a new attempt as above (one driver
at a time). Either way
``status.plannedCutoverAt`` says when the restart begins, and the unserved window (no
hydrated driver serving) is measured from the break to the new attempt's hydration.

Phases (``status.phase``): ``Creating`` → ``Pending`` → ``Running``; on a failure
``BackingOff`` (pod deleted, waiting for the backoff) → ``Creating``; ``Failed`` when the
restart policy gives up; ``Completed`` when a driver exited 0 and the policy does not
restart successes. Expected restarts (``Expired``, ``SpecChanged``) go straight to a new
attempt and never count as failures.
"""

from __future__ import annotations

from dataflow_operator.api import injection
from dataflow_operator.api.replica import (
    AttemptPhase,
    HandoverOutcome,
    RestartPolicyType,
    RestartReason,
)
from dataflow_operator.controller.manifests import (
    driver_spec_hash,
)
from dataflow_operator.controller.naming import driver_service_name
from dataflow_operator.controller.replica.attempts import (
    WAIT_FOR_DELETION_MS,
    fail,
    start_attempt,
)
from dataflow_operator.controller.replica.executors import executor_status
from dataflow_operator.controller.replica.expiry import (
    expiration_restart,
    expired_condition,
    report_expired,
)
from dataflow_operator.controller.replica.handover import cut_over
from dataflow_operator.controller.replica.observation import (
    FATAL_WAITING_REASONS,
    PodObservation,
    PodPhase,
)
from dataflow_operator.controller.replica.storage import storage_condition
from dataflow_operator.controller.replica.view import (
    DEGRADED,
    EXPIRED,
    PERSISTENT_STATE,
    PROGRESSING,
    READY,
    Action,
    ActionKind,
    ControlObservation,
    Decision,
    DecisionBuilder,
    EventNote,
    ReplicaView,
)

__all__ = [
    "DEGRADED",
    "EXPIRED",
    "PERSISTENT_STATE",
    "PROGRESSING",
    "READY",
    "Action",
    "ActionKind",
    "ControlObservation",
    "Decision",
    "EventNote",
    "ReplicaView",
    "decide",
]


def decide(view: ReplicaView) -> Decision:
    """The next step for one Replica; see the module docstring."""
    b = DecisionBuilder(view)
    old = b.old
    b.set(service_name=driver_service_name(view.replica.metadata.name))
    for pod in view.other_pods:
        if not pod.deleting:
            b.act(ActionKind.DELETE_POD, pod.name)
    spec_hash = driver_spec_hash(view.replica, view.config)
    phase = old.phase
    if old.attempt == 0 or old.driver_pod is None or phase is None:
        start_attempt(b, None)
    elif phase in (AttemptPhase.FAILED, AttemptPhase.COMPLETED):
        if spec_hash != old.spec_hash:
            start_attempt(b, RestartReason.SPEC_CHANGED, reset_failures=True)
    elif phase is AttemptPhase.BACKING_OFF:
        _backing_off(b, spec_hash)
    elif phase is AttemptPhase.CREATING and view.driver is None:
        _creating(b)
    else:
        _observe(b, spec_hash)
    expired_condition(b)
    storage_condition(b)
    executor_status(b)
    return b.finish()


def _creating(b: DecisionBuilder) -> None:
    """The attempt is recorded; its pod is not seen yet: create it once the old are gone."""
    view, old = b.view, b.old
    started = old.start_time_ms or view.now
    if view.now - started >= view.config.start_timeout.millis:
        fail(b, RestartReason.DRIVER_FAILED, "DriverNotCreated", "the driver pod was never seen")
        return
    if view.other_pods:
        b.decision.wake_at(WAIT_FOR_DELETION_MS)
        return
    assert old.driver_pod is not None
    b.act(ActionKind.CREATE_POD, old.driver_pod)
    b.decision.wake_at(view.config.lost_grace.millis)


def _backing_off(b: DecisionBuilder, spec_hash: str) -> None:
    view, old = b.view, b.old
    if view.driver is not None and not view.driver.deleting:
        b.act(ActionKind.DELETE_POD, view.driver.name)
    if spec_hash != old.spec_hash:
        start_attempt(b, RestartReason.SPEC_CHANGED, reset_failures=True)
        return
    due = old.next_attempt_at_ms or view.now
    if view.now < due:
        b.decision.wake_at(due - view.now)
        return
    start_attempt(b, old.pending_restart or RestartReason.DRIVER_FAILED, message="after backoff")


def _observe(b: DecisionBuilder, spec_hash: str) -> None:
    """The attempt's pod exists (or existed): follow it, restart it or fail it."""
    view, old = b.view, b.old
    config, driver, handover = view.config, view.driver, old.handover
    started = old.start_time_ms or view.now
    age = view.now - started
    if driver is None or driver.deleting:
        if handover is not None:
            cut_over(b, handover, HandoverOutcome.LATE, f"{old.driver_pod} disappeared")
            return
        missing = view.driver_missing_since or view.now
        if view.now - missing < config.lost_grace.millis:
            b.condition(READY, False, "DriverMissing", f"driver pod {old.driver_pod} is missing")
            b.decision.wake_at(config.lost_grace.millis - (view.now - missing))
            return
        fail(
            b,
            RestartReason.DRIVER_LOST,
            "DriverLost",
            f"driver pod {old.driver_pod} disappeared",
        )
        return
    if spec_hash != old.spec_hash:
        start_attempt(b, RestartReason.SPEC_CHANGED, message="the driver spec changed")
        return
    if driver.terminated:
        if handover is not None:
            why = f"{driver.name} exited with code {driver.exit_code}"
            cut_over(b, handover, HandoverOutcome.LATE, why)
            return
        _terminated(b, driver)
        return
    control = view.control
    if control is not None and control.hydrated and driver.phase is PodPhase.RUNNING:
        _hydrated(b, age)
    if expiration_restart(b, started):
        return
    expired = report_expired(view.control)
    if expired is not None:
        if handover is not None:
            cut_over(b, handover, HandoverOutcome.LATE, expired)
        else:
            start_attempt(b, RestartReason.EXPIRED, message=expired)
        return
    if driver.phase is PodPhase.PENDING or driver.phase is PodPhase.UNKNOWN:
        _pending(b, driver, age)
        return
    _running(b, age)


def _terminated(b: DecisionBuilder, driver: PodObservation) -> None:
    view = b.view
    if driver.exit_code == injection.EXIT_EXPIRED:
        start_attempt(
            b, RestartReason.EXPIRED, message="the driver exited with the expired exit code"
        )
        return
    succeeded = driver.exit_code == 0 or (
        driver.exit_code is None and driver.phase is PodPhase.SUCCEEDED
    )
    policy = view.replica.spec.restart_policy.type
    if succeeded and policy is not RestartPolicyType.ALWAYS:
        b.set(phase=AttemptPhase.COMPLETED.value)
        b.condition(READY, False, "DriverCompleted", "the driver exited with code 0")
        b.condition(PROGRESSING, False, "DriverCompleted", f"restartPolicy is {policy.value}")
        return
    code = driver.exit_code
    reason = driver.reason or ("Completed" if succeeded else "Error")
    detail = f": {driver.message}" if driver.message else ""
    fail(
        b,
        RestartReason.DRIVER_FAILED,
        reason,
        f"driver {driver.name} exited with code {code}{detail}",
    )


def _pending(b: DecisionBuilder, driver: PodObservation, age: int) -> None:
    view = b.view
    timeout = view.config.start_timeout.millis
    reason = driver.reason or "DriverPending"
    message = driver.message or f"driver pod {driver.name} is pending"
    if driver.reason in FATAL_WAITING_REASONS:
        fail(b, RestartReason.DRIVER_FAILED, reason, message)
        return
    if age >= timeout:
        fail(
            b,
            RestartReason.DRIVER_FAILED,
            reason if driver.reason else "StartTimeout",
            f"{message} (not running {timeout / 1000:g}s after the attempt began)",
        )
        return
    b.set(phase=AttemptPhase.PENDING.value)
    b.condition(READY, False, reason, message)
    b.condition(PROGRESSING, True, "DriverPending", message)
    if driver.reason and ("Err" in driver.reason or "BackOff" in driver.reason):
        b.condition(DEGRADED, True, driver.reason, message)
    b.decision.wake_at(timeout - age)


def _running(b: DecisionBuilder, age: int) -> None:
    view, old = b.view, b.old
    control = view.control
    b.set(phase=AttemptPhase.RUNNING.value)
    if control is not None and control.reachable:
        was_ready = any(c.type == READY and c.status == "True" for c in old.conditions)
        b.condition(READY, True, "DriverReady", "driver running and control API answering")
        if b.values.get("handover") is None:
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
        fail(
            b,
            RestartReason.DRIVER_FAILED,
            "ReadyTimeout",
            f"control API not answering {timeout / 1000:g}s after the attempt began: {error}",
        )
        return
    b.condition(READY, False, "ControlApiUnavailable", error)
    b.condition(PROGRESSING, True, "DriverStarting", "driver running, waiting for its control API")
    b.decision.wake_at(timeout - age)


def _hydrated(b: DecisionBuilder, age: int) -> None:
    """Every dataflow is hydrated on the serving attempt: note when, close a gap."""
    old, now = b.old, b.view.now
    if old.hydrated_at_ms is None:
        b.set(hydrated_at_ms=now, last_hydration_seconds=age / 1000)
    if old.unserved_since_ms is not None:
        gap = max(0, now - old.unserved_since_ms) / 1000
        b.set(unserved_since_ms=None)
        b.decision.unserved_seconds = gap
        b.event("Normal", "Hydrated", f"{old.driver_pod} serves again after {gap:g}s unserved")
