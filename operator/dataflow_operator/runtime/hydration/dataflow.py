"""A running dataflow's hydration: the one place the runtime decides it.

:class:`DataflowHydration` is created when the dataflow is installed (``hydrationTime``
counts from then), begins following the snapshot batch when the engine first steps the
dataflow, and is told of every batch's frontier. Its :meth:`~DataflowHydration.status`
is what the dataflow reports: hydrated or not, since when, and each plan node.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from dataflow_operator.core.time import Frontier
from dataflow_operator.logs import get_logger
from dataflow_operator.runtime.hydration.monitor import HydrationMonitor, shared_monitor
from dataflow_operator.runtime.hydration.probe import StreamingQueryProbe
from dataflow_operator.runtime.hydration.tracker import (
    HydrationStatus,
    HydrationTracker,
    monotonic_ms,
)

__all__ = ["DataflowHydration"]

log = get_logger(__name__)

NOT_BEGUN = HydrationStatus(hydrated=False, hydration_time_ms=None, nodes=())
"""The status before the dataflow's first batch."""


class DataflowHydration:
    """The hooks a running dataflow calls to have its hydration tracked.

    :meth:`begin` when its query starts processing the snapshot (``as_of``),
    :meth:`observe_frontier` after each batch, :meth:`status` for its report,
    :meth:`stop` when it is dropped.
    """

    def __init__(
        self,
        name: str,
        monitor: HydrationMonitor | None = None,
        *,
        clock: Callable[[], int] = monotonic_ms,
    ) -> None:
        self.name = name
        self._monitor = monitor
        self._clock = clock
        self._installed_at = clock()
        self.tracker: HydrationTracker | None = None
        self._query: Any = None

    def begin(self, query: Any, as_of: Frontier, job_groups: Iterable[str] = ()) -> None:
        """Start following ``query``'s next batch, the snapshot at ``as_of`` (once)."""
        if self.tracker is not None:
            return
        self.tracker = self._tracker(as_of)
        self._query = query
        probe = None
        if query is not None:
            try:
                probe = StreamingQueryProbe(query, job_groups)
            except Exception as error:  # no JVM query behind it: dataflow-level only
                log.debug("no hydration probe", dataflow=self.name, error=str(error))
        self._monitor_().watch(self.tracker, probe)

    def observe_frontier(self, frontier: Frontier, query: Any = None) -> None:
        """A batch of ``query`` completed: the dataflow's write frontier is ``frontier``.

        Before :meth:`begin`, a batch that left the frontier at the minimum read nothing:
        Spark runs a new query's first batch at once, before the engine first steps the
        dataflow, and that batch says nothing of its hydration. Any other batch before
        it is one of a dataflow that never begins (see :meth:`wait`).
        """
        if self.tracker is None:
            if frontier == Frontier.minimum():
                return
            self.tracker = self._tracker(Frontier.empty())
            self._query = query
        self.tracker.observe_frontier(frontier)

    def wait(self, frontier: Frontier) -> None:
        """The engine stepped the dataflow without a snapshot time (a refresh schedule
        that has not fired yet): it reads nothing but what it is given, so it is hydrated
        at ``frontier``."""
        if self.tracker is None:
            self.tracker = self._tracker(Frontier.empty())
        self.tracker.observe_frontier(frontier)

    def status(self) -> HydrationStatus:
        """The dataflow's hydration and its plan nodes' (all hydrated when it is).

        A dataflow that hydrated before the monitor saw its snapshot batch's plan (a
        batch shorter than a poll) reads the plan once, now, to list its nodes (with a
        probe of its own: the monitor's may still be polling).
        """
        if self.tracker is None:
            return NOT_BEGUN
        status = self.tracker.status()
        if status.hydrated and not status.nodes and self._query is not None:
            query, self._query = self._query, None  # one try: the plan does not change
            try:
                self.tracker.observe_progress(StreamingQueryProbe(query).poll())
            except Exception as error:  # the query is gone; no nodes to list
                log.debug("no plan for hydration", dataflow=self.name, error=str(error))
            status = self.tracker.status()
        return status

    def stop(self) -> None:
        """Stop following the dataflow."""
        self._monitor_().forget(self.name)

    def _tracker(self, as_of: Frontier) -> HydrationTracker:
        return HydrationTracker(
            self.name, as_of, clock=self._clock, installed_at=self._installed_at
        )

    def _monitor_(self) -> HydrationMonitor:
        return self._monitor or shared_monitor()
