"""Dataflow expiration.

A replica started at ``start`` with expiration offset ``offset`` expires at
``start + offset``. A long-running dataflow on it derives its own expiration and drops
every update at or past it, so that state does not hold retractions (of temporal
filters, say) that the replica will never live to emit. The replica is restarted before
its frontier could pass the expiration.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from dataflow_operator.core.durations import Duration
from dataflow_operator.core.refresh import RefreshSchedule
from dataflow_operator.core.time import Frontier, Timestamp
from dataflow_operator.core.timelines import Timeline

__all__ = [
    "DataflowKind",
    "ExpirationInputs",
    "dataflow_expiration",
    "dataflow_until",
    "replica_expiration",
    "restart_lead",
]


class DataflowKind(StrEnum):
    """What a dataflow maintains; all but one-off queries are long-running."""

    MATERIALIZED_VIEW = "MaterializedView"
    INDEX = "Index"
    SUBSCRIBE = "Subscribe"
    ONE_OFF = "OneOff"

    @property
    def is_long_running(self) -> bool:
        """Long-running dataflows may expire; one-off queries never do."""
        return self is not DataflowKind.ONE_OFF


def replica_expiration(start: Timestamp, offset: Duration | None) -> Timestamp | None:
    """``start + offset``; ``None`` (no expiration) when the offset is unset or zero."""
    if offset is None or offset.is_zero:
        return None
    return start + offset.millis


def restart_lead(offset_ms: int, configured_ms: int, hydration_ms: int | None = None) -> int:
    """How long before its expiration a replica's restart begins.

    The configured lead time, or twice the last observed hydration time when that is
    longer (a make-before-break successor must hydrate before the expiration); never more
    than half the offset, so an attempt serves at least half its life.
    """
    wanted = max(configured_ms, 2 * hydration_ms if hydration_ms is not None else 0)
    return max(0, min(wanted, offset_ms // 2))


@dataclass(frozen=True, slots=True)
class ExpirationInputs:
    """What a dataflow's expiration depends on.

    ``inputs_upper`` is the meet of the uppers of all transitive inputs;
    ``refresh_schedules`` are those of the dataflow and of every transitive dependency.
    """

    kind: DataflowKind
    timeline: Timeline | None
    inputs_upper: Frontier
    refresh_schedules: tuple[RefreshSchedule, ...] = ()


def dataflow_expiration(
    replica_expiration: Timestamp | None, inputs: ExpirationInputs
) -> Timestamp | None:
    """The time at and past which the dataflow drops updates, or ``None``.

    The rules, in order:

    1. no replica expiration (offset unset or zero) → none;
    2. not long-running (a one-off query) → none;
    3. timeline other than EpochMilliseconds (constants included) → none;
    4. the inputs' upper is empty (they will never change) → none;
    5. a refresh schedule on any transitive dependency rounds the replica expiration up to
       that schedule's next refresh at or after it; a schedule with no later refresh → none;
    6. the inputs' upper, if beyond that, otherwise the (rounded) replica expiration.
    """
    if replica_expiration is None:
        return None
    if not inputs.kind.is_long_running:
        return None
    if inputs.timeline is None or not inputs.timeline.is_epoch_milliseconds:
        return None
    if inputs.inputs_upper.lower is None:
        return None
    expiration = replica_expiration
    for schedule in inputs.refresh_schedules:
        rounded = schedule.round_up(expiration)
        if rounded is None:
            return None
        expiration = max(expiration, rounded)
    return max(expiration, inputs.inputs_upper.lower)


def dataflow_until(until: Frontier, expiration: Timestamp | None) -> Frontier:
    """The dataflow's ``until`` (times it must not produce), limited by its expiration."""
    if expiration is None:
        return until
    return until.meet(Frontier.at(expiration))
