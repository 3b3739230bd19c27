"""One dataflow's hydration, and that of each of its plan nodes: pure, no JVM.

The rules are the core's (:mod:`dataflow_operator.core.hydration`): the dataflow is
hydrated once its write frontier is strictly beyond ``as_of`` (``hydrationTime`` is how
long that took from installation); its plan nodes hydrate earlier, stage by stage, as
Spark finishes the snapshot batch (:class:`~dataflow_operator.core.hydration.Progress`,
read by :mod:`.probe`).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from dataflow_operator.api.dataflow import NodeStatus
from dataflow_operator.core.hydration import Progress, hydrated_nodes, is_hydrated, loops_done
from dataflow_operator.core.plan import PlanTree
from dataflow_operator.core.time import Frontier
from dataflow_operator.logs import get_logger

__all__ = ["HydrationStatus", "HydrationTracker", "monotonic_ms"]

log = get_logger(__name__)


@dataclass(frozen=True, slots=True)
class HydrationStatus:
    """A dataflow's hydration, as reported in ``/status``."""

    hydrated: bool
    hydration_time_ms: int | None
    nodes: tuple[NodeStatus, ...]


def monotonic_ms() -> int:
    """The monotonic clock in milliseconds, the trackers' default."""
    return time.monotonic_ns() // 1_000_000


class HydrationTracker:
    """One dataflow's hydration on this replica (thread-safe, no JVM).

    ``as_of`` is the snapshot time; an empty ``as_of`` (all inputs constant) is hydrated
    from the start. ``hydrationTime`` counts from ``installed_at`` (on ``clock``, in ms),
    by default the tracker's creation. The engine reports the write frontier with
    :meth:`observe_frontier`; a probe (through the monitor) reports Spark's progress with
    :meth:`observe_progress`. Once hydrated, nothing changes any more.
    """

    def __init__(
        self,
        name: str,
        as_of: Frontier,
        *,
        clock: Callable[[], int] = monotonic_ms,
        installed_at: int | None = None,
    ) -> None:
        self.name = name
        self.as_of = as_of
        self._clock = clock
        self._lock = threading.Lock()
        self._installed_at = clock() if installed_at is None else installed_at
        self._frontier = Frontier.minimum() if as_of.lower is not None else Frontier.empty()
        self._tree: PlanTree | None = None
        self._hydrated_nodes: set[int] = set()
        self._hydration_time_ms: int | None = None
        self._update_dataflow()

    @property
    def hydrated(self) -> bool:
        """Whether the dataflow is hydrated."""
        return self._hydration_time_ms is not None

    def observe_frontier(self, frontier: Frontier) -> None:
        """The dataflow's write frontier advanced to ``frontier``."""
        with self._lock:
            self._frontier = frontier if self._frontier <= frontier else self._frontier
            self._update_dataflow()

    def observe_progress(self, progress: Progress) -> None:
        """Spark's progress on the snapshot batch (node hydration only ever grows)."""
        with self._lock:
            if progress.tree is None:
                return
            if self._tree is None or self._tree != progress.tree:
                self._tree = progress.tree
                self._hydrated_nodes &= {n.node_id for n in progress.tree}
            if self.hydrated:
                return
            recursion_done = (
                progress.recursion_done
                if progress.recursion_done is not None
                else progress.batch_done or loops_done(progress.tree, progress.done_groups)
            )
            now = hydrated_nodes(
                progress.tree,
                progress.done_groups,
                recursion_done=recursion_done,
                everything=progress.batch_done,
            )
            new = now - self._hydrated_nodes
            self._hydrated_nodes |= now
            if new:
                tree = progress.tree
                log.info(
                    "plan nodes hydrated",
                    dataflow=self.name,
                    nodes=f"{len(self._hydrated_nodes)}/{len(tree)}",
                    hydrated=[f"{tree.node(n).operator} ({n})" for n in sorted(new)],
                )

    def _update_dataflow(self) -> None:
        if self._hydration_time_ms is None and is_hydrated(self._frontier, self.as_of):
            self._hydration_time_ms = max(0, self._clock() - self._installed_at)
            log.info("dataflow hydrated", dataflow=self.name, ms=self._hydration_time_ms)

    def status(self) -> HydrationStatus:
        """The current hydration of the dataflow and of each plan node."""
        with self._lock:
            tree = self._tree
            hydrated = self._hydration_time_ms is not None
            nodes = (
                ()
                if tree is None
                else tuple(
                    NodeStatus(
                        id=node.node_id,
                        operator=node.operator,
                        hydrated=hydrated or node.node_id in self._hydrated_nodes,
                    )
                    for node in tree
                )
            )
            return HydrationStatus(hydrated, self._hydration_time_ms, nodes)
