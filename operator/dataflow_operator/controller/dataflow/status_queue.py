"""The Dataflows whose status must be written, and since when.

Replica daemons, the Dataflow handlers and replica deletions only *mark* Dataflows;
the status writer takes what is marked in small rounds. A Dataflow marked again while
it waits is written once, with the time it first became stale (its status lag).

Marks come in two kinds. *Progress* — a frontier moved, nothing else — is what every
Dataflow of a busy operator produces all the time; everything else (a new Dataflow, a
validity change, a replica that starts or stops maintaining it, hydration) is taken
first, so that under load a new Dataflow's status does not wait behind thousands of
frontier updates.
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
        self._changed: dict[DataflowKey, Timestamp] = {}
        self._progress: dict[DataflowKey, Timestamp] = {}
        self._wake = asyncio.Event()
        self.seen: dict[tuple[str, str], Mapping[str, Any]] = {}
        """(namespace, dataflow) → its status as last seen on the watch: where the writer
        starts from after a restart of the operator."""

    def mark(
        self,
        namespace: str,
        cluster: str,
        names: Iterable[str],
        now: Timestamp,
        *,
        progress: bool = False,
    ) -> None:
        """These Dataflows' status must be recomputed and written; ``progress``: only
        their frontiers moved."""
        for name in names:
            key = (namespace, cluster, name)
            if progress and key not in self._changed:
                self._progress.setdefault(key, now)
            else:
                self._changed.setdefault(key, self._progress.pop(key, now))
        self._wake.set()

    def retry(self, key: DataflowKey, since: Timestamp) -> None:
        """A write that failed: in a next round, still stale since ``since``."""
        self._changed.setdefault(key, since)

    @property
    def pending(self) -> bool:
        """Something is marked and not taken yet."""
        return bool(self._changed or self._progress)

    async def take(self, limit: int) -> list[tuple[DataflowKey, Timestamp]]:
        """Up to ``limit`` marked Dataflows, changes before progress, each kind oldest
        first (waits until something is marked). The rest waits for the next round."""
        while not self.pending:
            await self._wake.wait()
            self._wake.clear()
        taken: list[tuple[DataflowKey, Timestamp]] = []
        for marks in (self._changed, self._progress):
            while marks and len(taken) < limit:
                key = next(iter(marks))  # in marking order
                taken.append((key, marks.pop(key)))
        return taken
