"""The state of make-before-break attempts: each successor its own, older ones removed.

A successor runs beside the driver it succeeds, so its state lives apart:
``<location>/attempts/N``. When it starts, only its own state and its predecessor's
(named by ``DATAFLOW_STATE_KEEP``, relative to the location) are still needed; every
other attempt's state is removed, so a replica keeps at most two.
"""

from __future__ import annotations

from dataflow_operator.api.injection import STATE_ATTEMPTS_DIR as ATTEMPTS_DIR
from dataflow_operator.runtime.storage import Location

__all__ = ["ROOT_STATE", "prune_attempt_states"]

ROOT_STATE = "dataflows"
"""The state an attempt keeps at the location's root (break-before-make attempts)."""


def prune_attempt_states(own: Location, keep: str) -> list[str]:
    """Remove every attempt's state but ``own`` and ``keep``; what was removed (relative).

    ``own`` must be ``<location>/attempts/N``; anything else removes nothing.
    """
    attempts = own.parent
    if attempts.name != ATTEMPTS_DIR:
        return []
    keep = keep.strip("/")
    removed = []
    for name in attempts.list(directories=True):
        relative = f"{ATTEMPTS_DIR}/{name}"
        if name != own.name and relative != keep:
            attempts.child(name).delete()
            removed.append(relative)
    root_state = attempts.parent.child(ROOT_STATE)
    if keep and root_state.is_dir():
        root_state.delete()
        removed.append(ROOT_STATE)
    return removed
