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
from typing import Any, NamedTuple

from dataflow_operator.core.time import Timestamp

__all__ = ["DataflowKey", "Marked", "StatusQueue"]

DataflowKey = tuple[str, str, str]
"""(namespace, cluster, dataflow)."""


class Marked(NamedTuple):
    """A Dataflow taken for a status write."""

    key: DataflowKey
    since: Timestamp
    """When its status first became stale."""
    progress: bool
    """Only its frontiers moved since it was last written."""


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

    async def take(
        self, limit: int, *, progress_limit: int | None = None, wait_s: float | None = None
    ) -> list[Marked]:
        """Up to ``limit`` marked Dataflows, changes before progress, each kind oldest
        first, and at most ``progress_limit`` of them progress (``None``: no bound). The
        rest waits for the next round.

        Waits until something may be taken; with ``wait_s``, at most that long (then
        returns nothing).
        """
        loop = asyncio.get_running_loop()
        deadline = None if wait_s is None else loop.time() + wait_s
        while not (self._changed or (self._progress and progress_limit != 0)):
            remaining = None if deadline is None else deadline - loop.time()
            if remaining is not None and remaining <= 0:
                return []
            self._wake.clear()
            try:
                await asyncio.wait_for(self._wake.wait(), remaining)
            except TimeoutError:
                return []
        taken: list[Marked] = []
        while self._changed and len(taken) < limit:
            key = next(iter(self._changed))  # in marking order
            taken.append(Marked(key, self._changed.pop(key), progress=False))
        room = limit - len(taken)
        if progress_limit is not None:
            room = min(room, progress_limit)
        while self._progress and room > 0:
            key = next(iter(self._progress))
            taken.append(Marked(key, self._progress.pop(key), progress=True))
            room -= 1
        return taken
