"""Updates held in Spark state until the frontier reaches their time.

The stateful operators (the temporal filter, joins, set operations) all keep what is not
due yet the same way: a ``MapState`` keyed by the time, holding the pickled updates due
then, and an event-time timer at that time. :class:`HeldUpdates` is that state.
"""

from __future__ import annotations

import pickle
from typing import Any

__all__ = ["HeldUpdates"]


class HeldUpdates:
    """The updates of one grouping key held by time (``pending``: ``t BIGINT → rows BINARY``)."""

    def __init__(self, handle: Any) -> None:
        self.handle = handle
        self.state = handle.getMapState("pending", "t BIGINT", "rows BINARY")

    def hold(self, time: int, updates: list[Any]) -> None:
        """Keep ``updates`` until the frontier reaches ``time`` (its timer fires then)."""
        stored = self.state.getValue((time,))
        held: list[Any] = pickle.loads(stored[0]) if stored else []
        self.state.updateValue((time,), (pickle.dumps(held + updates),))
        self.handle.registerTimer(time)

    def take(self, time: int) -> list[Any]:
        """The updates held for ``time``, forgotten from now on (``[]`` if none)."""
        stored = self.state.getValue((time,))
        if not stored:
            return []
        self.state.removeKey((time,))
        held: list[Any] = pickle.loads(stored[0])
        return held
