"""Status conditions, following the Kubernetes API conventions.

A condition list is keyed by ``type``. Setting a condition keeps its
``lastTransitionTime`` unless its ``status`` changes, so that watchers can tell how long
a state has held.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from enum import StrEnum

from dataflow_operator.core.time import Timestamp

__all__ = ["Condition", "ConditionStatus", "find_condition", "rfc3339_seconds", "set_condition"]

MAX_MESSAGE_LENGTH = 32768  # the Kubernetes limit on condition messages


class ConditionStatus(StrEnum):
    """The three values Kubernetes allows."""

    TRUE = "True"
    FALSE = "False"
    UNKNOWN = "Unknown"


@dataclass(frozen=True, slots=True)
class Condition:
    """One condition: an observation of one aspect of an object's state."""

    type: str
    status: ConditionStatus
    reason: str
    message: str
    last_transition_time: str
    observed_generation: int | None = None


def rfc3339_seconds(now: Timestamp) -> str:
    """RFC 3339 at second precision, as Kubernetes writes times (``...T12:00:00Z``)."""
    return datetime.fromtimestamp(now // 1000, tz=UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def find_condition(conditions: Sequence[Condition], type_: str) -> Condition | None:
    """The condition of ``type_``, if present."""
    return next((c for c in conditions if c.type == type_), None)


def set_condition(
    conditions: Sequence[Condition],
    *,
    type_: str,
    status: ConditionStatus | bool,
    reason: str,
    message: str,
    now: Timestamp,
    observed_generation: int | None = None,
) -> list[Condition]:
    """Return ``conditions`` with ``type_`` set; the transition time moves only on change."""
    if isinstance(status, bool):
        status = ConditionStatus.TRUE if status else ConditionStatus.FALSE
    message = message[:MAX_MESSAGE_LENGTH]
    previous = find_condition(conditions, type_)
    if previous is not None and previous.status == status:
        updated = replace(
            previous, reason=reason, message=message, observed_generation=observed_generation
        )
    else:
        updated = Condition(
            type=type_,
            status=status,
            reason=reason,
            message=message,
            last_transition_time=rfc3339_seconds(now),
            observed_generation=observed_generation,
        )
    result = [c for c in conditions if c.type != type_]
    result.append(updated)
    return sorted(result, key=lambda c: c.type)
