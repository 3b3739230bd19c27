"""Conversions between the API's condition model and the core's condition values."""

from __future__ import annotations

from collections.abc import Sequence

from dataflow_operator.api.meta import Condition as ApiCondition
from dataflow_operator.core.conditions import Condition, ConditionStatus

__all__ = ["from_api", "to_api"]


def from_api(conditions: Sequence[ApiCondition]) -> list[Condition]:
    """API conditions → core conditions."""
    return [
        Condition(
            type=c.type,
            status=ConditionStatus(c.status),
            reason=c.reason,
            message=c.message,
            last_transition_time=c.last_transition_time,
            observed_generation=c.observed_generation,
        )
        for c in conditions
    ]


def to_api(conditions: Sequence[Condition]) -> list[ApiCondition]:
    """Core conditions → API conditions."""
    return [
        ApiCondition(
            type=c.type,
            status=c.status.value,
            reason=c.reason,
            message=c.message,
            last_transition_time=c.last_transition_time,
            observed_generation=c.observed_generation,
        )
        for c in conditions
    ]
