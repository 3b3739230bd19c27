"""A Replica's expiration: when its restart begins, how, and the condition that says so.

The restart is planned at ``expiresAt − lead``
(:func:`~dataflow_operator.core.expiration.restart_lead`). MakeBeforeBreak starts a
successor then and follows it (:mod:`.handover`);
BreakBeforeMake, or MakeBeforeBreak where it cannot apply or whose successor failed,
starts a new attempt then (:mod:`.attempts`). A runtime that reports itself
expired is restarted at once.
"""

from __future__ import annotations

from dataflow_operator.api.protocol import ReplicaPhase
from dataflow_operator.api.replica import (
    AttemptPhase,
    HandoverOutcome,
    RestartReason,
    RestartStrategy,
)
from dataflow_operator.controller.replica.attempts import start_attempt
from dataflow_operator.controller.replica.handover import (
    abandoned_for_current,
    begin_handover,
    cut_over,
    follow_handover,
    handover_blocker,
)
from dataflow_operator.controller.replica.view import (
    EXPIRED,
    ControlObservation,
    DecisionBuilder,
)
from dataflow_operator.core.conditions import ConditionStatus
from dataflow_operator.core.expiration import restart_lead
from dataflow_operator.core.time import format_timestamp

__all__ = ["expiration_restart", "expired_condition", "report_expired"]


def report_expired(control: ControlObservation | None) -> str | None:
    if control is None or control.report is None:
        return None
    report = control.report
    if report.phase is ReplicaPhase.EXPIRED:
        return "the runtime reports the replica expired"
    expired = sorted(d.name for d in report.dataflows if d.expired)
    if expired:
        return f"the runtime reports dataflow {', '.join(expired)} expired"
    return None


def expiration_restart(b: DecisionBuilder, started: int) -> bool:
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
    start_attempt(
        b,
        RestartReason.EXPIRED,
        message=f"expires at {old.expires_at}; restarting {lead / 1000:g}s before "
        f"(BreakBeforeMake: {blocker})",
    )
    return True


def expired_condition(b: DecisionBuilder) -> None:
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
