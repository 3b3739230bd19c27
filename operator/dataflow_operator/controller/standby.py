"""Standby operators: kopf peering in which the oldest operator works and the others wait.

kopf pauses an operator that sees a live peer of higher priority, and pauses *every*
operator when peers share a priority; it elects nobody. So each operator started with
``--peering`` and no ``--priority`` takes a priority that falls with its start time: the
one already working outranks any pod started later (a rollout's new pod, a restarted
pod), and a standby takes over only once the active one's record expires.

A peer's record expires :data:`PEERING_LIFETIME` seconds after its last keep-alive
(kopf renews it 5–10 s before that), so a standby takes over from a crashed operator
within that many seconds.
"""

from __future__ import annotations

__all__ = ["PEERING_LIFETIME", "seniority_priority"]

PEERING_LIFETIME = 15
"""Seconds a peer's keep-alive holds (kopf's default is 60)."""


def seniority_priority(start_ms: int) -> int:
    """The peering priority of an operator started at ``start_ms``: earlier is higher."""
    return -start_ms
