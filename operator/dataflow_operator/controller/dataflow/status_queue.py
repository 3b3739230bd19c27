"""The Dataflows whose status must be written, and since when.

Replica daemons, the Dataflow handlers and replica deletions only *mark* Dataflows;
the status writer takes what is marked in rounds. A Dataflow marked again while it
waits is written once, with the time it first became stale (its status lag).
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable, Mapping
from typing import Any

from dataflow_operator.core.time import Timestamp

__all__ = ["DataflowKey", "StatusQueue"]

DataflowKey = tuple[str, str, str]
"""(namespace, cluster, dataflow)."""


class StatusQueue:
    """Marked Dataflows, coalesced per object; and each one's status as last seen."""

    def __init__(self) -> None:
        self._stale: dict[DataflowKey, Timestamp] = {}
        self._wake = asyncio.Event()
        self.seen: dict[tuple[str, str], Mapping[str, Any]] = {}
        """(namespace, dataflow) → its status as last seen on the watch: where the writer
        starts from after a restart of the operator."""

    def mark(self, namespace: str, cluster: str, names: Iterable[str], now: Timestamp) -> None:
        """These Dataflows' status must be recomputed and written."""
        for name in names:
            self._stale.setdefault((namespace, cluster, name), now)
        self._wake.set()

    def retry(self, key: DataflowKey, since: Timestamp) -> None:
        """A write that failed: in the next round, still stale since ``since``."""
        self._stale.setdefault(key, since)

    @property
    def pending(self) -> bool:
        """Something is marked and not taken yet."""
        return bool(self._stale)

    async def take(self) -> dict[DataflowKey, Timestamp]:
        """Everything marked, once there is something (waits until then)."""
        while not self._stale:
            await self._wake.wait()
            self._wake.clear()
        taken, self._stale = self._stale, {}
        return taken
