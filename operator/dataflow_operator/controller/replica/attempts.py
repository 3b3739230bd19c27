"""Starting and failing a Replica's driver attempts: the break-before-make steps.

A new attempt is recorded in status first (attempt number, the deterministic pod name,
its start time, phase ``Creating``) and only then are old pods deleted and the new one
created (see :mod:`.logic`). A failure backs off exponentially
(``spec.restartPolicy.backoff``) or gives up per the restart policy.
"""

from __future__ import annotations

from collections.abc import Sequence

from dataflow_operator.api.replica import (
    AttemptPhase,
    Replica,
    RestartCount,
    RestartPolicyType,
    RestartReason,
)
from dataflow_operator.controller.replica.handover import new_attempt, next_attempt_number
from dataflow_operator.controller.replica.view import (
    DEGRADED,
    EXPIRED,
    PROGRESSING,
    READY,
    ActionKind,
    DecisionBuilder,
)

__all__ = ["WAIT_FOR_DELETION_MS", "backoff_delay_ms", "fail", "start_attempt"]

WAIT_FOR_DELETION_MS = 1_000


def backoff_delay_ms(replica: Replica, failures: int) -> int:
    """Delay before the next attempt after ``failures`` consecutive failures."""
    backoff = replica.spec.restart_policy.backoff
    delay = backoff.initial.millis * backoff.multiplier ** max(0, failures - 1)
    return int(min(backoff.max.millis, delay))


def increment_restarts(
    restarts: Sequence[RestartCount], reason: RestartReason
) -> list[RestartCount]:
    """``restarts`` with one more of ``reason``, in the order of :class:`RestartReason`."""
    counts = {item.reason: item.count for item in restarts}
    counts[reason] = counts.get(reason, 0) + 1
    return [RestartCount(reason=r, count=counts[r]) for r in RestartReason if r in counts]


def start_attempt(
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
    restarts = increment_restarts(old.restarts, reason) if reason else list(old.restarts)
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


def fail(b: DecisionBuilder, kind: RestartReason, reason: str, message: str) -> None:
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
