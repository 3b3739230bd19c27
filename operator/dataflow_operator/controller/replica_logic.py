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

Storage (``status.stateClaim``, ``PersistentState``): :mod:`.replica_storage`.

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

from collections.abc import Sequence

from dataflow_operator.api import injection
from dataflow_operator.api.protocol import ReplicaPhase
from dataflow_operator.api.replica import (
    AttemptPhase,
    HandoverOutcome,
    Replica,
    RestartCount,
    RestartPolicyType,
    RestartReason,
    RestartStrategy,
)
from dataflow_operator.controller.handover import (
    abandoned_for_current,
    begin_handover,
    cut_over,
    follow_handover,
    handover_blocker,
    new_attempt,
    next_attempt_number,
)
from dataflow_operator.controller.manifests import (
    driver_spec_hash,
)
from dataflow_operator.controller.naming import driver_service_name
from dataflow_operator.controller.observation import (
    FATAL_WAITING_REASONS,
    PodObservation,
    PodPhase,
)
from dataflow_operator.controller.replica_storage import storage_condition
from dataflow_operator.controller.replica_view import (
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
from dataflow_operator.core.conditions import ConditionStatus
from dataflow_operator.core.expiration import restart_lead
from dataflow_operator.core.time import format_timestamp

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
    "backoff_delay_ms",
    "decide",
]

WAIT_FOR_DELETION_MS = 1_000


def backoff_delay_ms(replica: Replica, failures: int) -> int:
    """Delay before the next attempt after ``failures`` consecutive failures."""
    backoff = replica.spec.restart_policy.backoff
    delay = backoff.initial.millis * backoff.multiplier ** max(0, failures - 1)
    return int(min(backoff.max.millis, delay))


def _increment(restarts: Sequence[RestartCount], reason: RestartReason) -> list[RestartCount]:
    counts = {item.reason: item.count for item in restarts}
    counts[reason] = counts.get(reason, 0) + 1
    return [RestartCount(reason=r, count=counts[r]) for r in RestartReason if r in counts]


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
        _start_attempt(b, None)
    elif phase in (AttemptPhase.FAILED, AttemptPhase.COMPLETED):
        if spec_hash != old.spec_hash:
            _start_attempt(b, RestartReason.SPEC_CHANGED, reset_failures=True)
    elif phase is AttemptPhase.BACKING_OFF:
        _backing_off(b, spec_hash)
    elif phase is AttemptPhase.CREATING and view.driver is None:
        _creating(b)
    else:
        _observe(b, spec_hash)
    _expired_condition(b)
    storage_condition(b)
    return b.finish()


def _start_attempt(
    b: DecisionBuilder,
    reason: RestartReason | None,
    *,
    reset_failures: bool = False,
    message: str = "",
) -> None:
    """Break-before-make: record a new attempt, delete every driver pod, then create it.

    The new attempt keeps the state directory of the one it replaces (it resumes from its
    checkpoint); a handover under way is given up.
    """
    view, old = b.view, b.old
    attempt = new_attempt(view, next_attempt_number(view), old.state_dir)
    pod = attempt.driver_pod
    restarts = _increment(old.restarts, reason) if reason else list(old.restarts)
    b.set(
        **attempt.model_dump(exclude={"phase", "hydrated"}),
        phase=AttemptPhase.CREATING.value,
        pending_restart=None,
        next_attempt_at_ms=None,
        restarts=restarts,
        total_restarts=sum(item.count for item in restarts),
        handover=None,
        hydrated_at_ms=None,
    )
    if reason is RestartReason.EXPIRED and old.unserved_since_ms is None:
        b.set(unserved_since_ms=view.now)
    if reset_failures:
        b.set(consecutive_failures=0)
    why = reason.value if reason else "Created"
    b.condition(READY, False, "Restarting" if reason else "Creating", f"starting {pod}")
    b.condition(PROGRESSING, True, why, f"attempt {attempt.attempt}: creating driver pod {pod}")
    if reason is RestartReason.EXPIRED:
        b.condition(EXPIRED, True, "RestartingAtExpiration", message)
    if reason is not None:
        b.event("Normal", reason.value, f"restarting as {pod}: {message or reason.value}")
    else:
        b.event("Normal", "Creating", f"creating driver pod {pod}")
    stale = [p for p in (view.driver, view.successor, *view.other_pods) if p is not None]
    for running in (view.driver, view.successor):
        if running is not None and not running.deleting:
            b.act(ActionKind.DELETE_POD, running.name)
    if not stale:
        b.act(ActionKind.CREATE_POD, pod)
    else:
        b.decision.wake_at(WAIT_FOR_DELETION_MS)


def _creating(b: DecisionBuilder) -> None:
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


def _backing_off(b: DecisionBuilder, spec_hash: str) -> None:
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


def _fail(b: DecisionBuilder, kind: RestartReason, reason: str, message: str) -> None:
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
        b.set(phase=AttemptPhase.FAILED.value, pending_restart=None, next_attempt_at_ms=None)
        b.condition(DEGRADED, True, reason, f"{message} ({why})")
        b.condition(READY, False, reason, message)
        b.condition(PROGRESSING, False, "GaveUp", why)
        b.event("Warning", reason, f"{message}; {why}")
        return
    delay = backoff_delay_ms(view.replica, failures)
    b.set(
        phase=AttemptPhase.BACKING_OFF.value,
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
        if handover is not None:
            why = f"{driver.name} exited with code {driver.exit_code}"
            cut_over(b, handover, HandoverOutcome.LATE, why)
            return
        _terminated(b, driver)
        return
    control = view.control
    if control is not None and control.hydrated and driver.phase is PodPhase.RUNNING:
        _hydrated(b, age)
    if _expiration(b, started):
        return
    expired = _report_expired(view.control)
    if expired is not None:
        if handover is not None:
            cut_over(b, handover, HandoverOutcome.LATE, expired)
        else:
            _start_attempt(b, RestartReason.EXPIRED, message=expired)
        return
    if driver.phase is PodPhase.PENDING or driver.phase is PodPhase.UNKNOWN:
        _pending(b, driver, age)
        return
    _running(b, age)


def _expiration(b: DecisionBuilder, started: int) -> bool:
    """Plan, begin or follow the expiration restart; True when it took this decision over.

    MakeBeforeBreak starts a successor at ``expiresAt − lead`` and follows it (see
    :mod:`.handover`); BreakBeforeMake, or MakeBeforeBreak that cannot apply or whose
    successor failed, restarts at ``expiresAt − lead`` with the configured lead time.
    """
    view, old = b.view, b.old
    config = view.config
    expires_ms = old.expiration_ms()
    if expires_ms is None:
        b.set(planned_cutover_at=None, restart_strategy=None)
        return False
    offset = expires_ms - started
    blocker = handover_blocker(view)
    if blocker is None and abandoned_for_current(b):
        blocker = "its successor failed"
    handover = old.handover
    if handover is not None:
        if view.now >= expires_ms:
            cut_over(b, handover, HandoverOutcome.LATE, f"{old.driver_pod} reached its expiration")
            return True
        b.decision.wake_at(expires_ms - view.now)
        return follow_handover(b, handover)
    if blocker is None:
        seconds = b.values.get("last_hydration_seconds")
        hydration = int(seconds * 1000) if seconds else None
        lead = restart_lead(offset, config.expiration_lead_time.millis, hydration)
        strategy = RestartStrategy.MAKE_BEFORE_BREAK
    else:
        lead = restart_lead(offset, config.expiration_lead_time.millis)
        strategy = RestartStrategy.BREAK_BEFORE_MAKE
    restart_at = expires_ms - lead
    b.set(planned_cutover_at=format_timestamp(restart_at), restart_strategy=strategy.value)
    if view.now < restart_at:
        b.decision.wake_at(restart_at - view.now)
        return False
    if blocker is None:
        begin_handover(b, old.expires_at)
        return False  # the serving driver is followed as usual meanwhile
    _start_attempt(
        b,
        RestartReason.EXPIRED,
        message=f"expires at {old.expires_at}; restarting {lead / 1000:g}s before "
        f"(BreakBeforeMake: {blocker})",
    )
    return True


def _terminated(b: DecisionBuilder, driver: PodObservation) -> None:
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
        b.set(phase=AttemptPhase.COMPLETED.value)
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


def _pending(b: DecisionBuilder, driver: PodObservation, age: int) -> None:
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


def _expired_condition(b: DecisionBuilder) -> None:
    status = b.values
    current = next((c for c in b.conditions if c.type == EXPIRED), None)
    expired = current is not None and current.status is ConditionStatus.TRUE
    if expired and status.get("phase") == AttemptPhase.CREATING.value:
        return  # keep "restarting at expiration" until the new attempt runs
    late = current is not None and current.reason == "ExpiredBeforeHandover"
    if expired and late and status.get("unserved_since_ms") is not None:
        return  # keep "serving before hydrated" until the successor has hydrated
    if status.get("expires_at") is None:
        b.condition(EXPIRED, False, "ExpirationDisabled", "expiration offset is 0")
        return
    message = f"expires at {status['expires_at']}"
    strategy, planned = status.get("restart_strategy"), status.get("planned_cutover_at")
    if planned and strategy:
        message += f"; {strategy} restart begins at {planned}"
        blocker = handover_blocker(b.view) or (
            "its successor failed" if abandoned_for_current(b) else None
        )
        if strategy == RestartStrategy.BREAK_BEFORE_MAKE.value and blocker:
            message += f" ({blocker})"
    handover = status.get("handover")
    if handover:
        message += f"; successor {handover['driver_pod']} {handover['phase'].lower()}"
        if handover.get("hydrated"):
            message += f" ({handover['hydrated']} dataflows hydrated)"
    b.condition(EXPIRED, False, "NotExpired", message)
