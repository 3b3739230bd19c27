"""Updates held in Spark state until the frontier reaches their time.

The stateful operators (the temporal filter, joins, set operations, an aggregate over a
join) all keep what is not due yet the same way: a ``MapState`` keyed by the time,
holding the pickled updates due then, and an event-time timer at that time.
:class:`HeldUpdates` is that state.

What is due is what :func:`complete_through` says: the watermark, which in a batch is the
inputs' frontier *before* it (Spark computes it from the batch before). So a new query's
first batch (watermark 0) would hold all its output for a second batch. It holds nothing
from before, though, so the engine's sink tells that batch's tasks the inputs' frontier
*with* it (:data:`INPUT_FRONTIER`, a job property), and every update below it is due in the
batch itself: a new dataflow is complete, and hydrated, after one batch. It does the same
for a join's or a set operation's batches while their inputs are in step and the watermark
has passed what earlier batches held; other batches go by the watermark alone, which keeps
an operator's output in time order from one batch to the next (an aggregate over a join
relies on it): see :mod:`dataflow_operator.runtime.engine.completion`.

Spark hands a batch's rows to a processor before it fires the batch's timers. An operator
whose output depends on the order it applies updates in (a set operation's counts, an
aggregate's totals) applies what is held through a row's time with it, first
(:meth:`HeldUpdates.take_through`).
"""

from __future__ import annotations

import pickle
from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING, Any

from pyspark.sql.streaming.stateful_processor import StatefulProcessor

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["INPUT_FRONTIER", "AppliedInTimeOrder", "HeldUpdates", "complete_through"]

INPUT_FRONTIER = "dataflow.inputFrontier"
"""The Spark job property with the inputs' frontier (epoch ms) with a batch whose updates
below it are all due in the batch (see :mod:`~dataflow_operator.runtime.engine.completion`);
empty with the other batches."""


def complete_through(timer_values: Any) -> int:
    """The last time at which the inputs are complete in the running batch: the watermark,
    or in a batch told its inputs' frontier (:data:`INPUT_FRONTIER`) that frontier minus one."""
    from pyspark import TaskContext

    watermark = int(timer_values.getCurrentWatermarkInMs())
    context = TaskContext.get()
    frontier = context.getLocalProperty(INPUT_FRONTIER) if context is not None else None
    return max(watermark, int(frontier) - 1) if frontier else watermark


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

    def take_through(self, time: int) -> list[tuple[int, list[Any]]]:
        """The updates held for ``time`` and before, by time in time order, forgotten from
        now on, their timers deleted.

        For an operator whose output depends on the order it applies updates in: a batch
        hands it rows at times already complete (a new query's first batch, a batch told
        its inputs' frontier, a row that comes late) *before* its timers fire, so what is
        held through them has to be applied with them, first."""
        due = sorted(key[0] for key in self.state.keys() if key[0] <= time)  # noqa: SIM118 - a MapState, not a dict
        taken: list[tuple[int, list[Any]]] = []
        for held_time in due:
            taken.append((held_time, self.take(held_time)))
            self.handle.deleteTimer(held_time)
        return taken


class AppliedInTimeOrder(StatefulProcessor):
    """A processor whose output depends on the order it applies updates in (a set
    operation's counts, a top-N's ranks): each time's updates are held until the
    watermark reaches it, then applied in time order, what is held through a batch's
    rows applied before them (:meth:`HeldUpdates.take_through`).

    A subclass sets :attr:`pending` in its ``init``, says how a batch's rows group into
    each time's updates (:meth:`by_time`) and what applying them emits (:meth:`apply`:
    rows of :attr:`output_width` columns). pandas is imported where rows are handled:
    Spark's pre-init runner imports a processor's module only to call its ``init``."""

    output_width: int
    pending: HeldUpdates

    def by_time(self, frame: pd.DataFrame) -> Iterable[tuple[int, list[Any]]]:
        """A batch's rows of one state key as ``(time, updates)``, in time order."""
        raise NotImplementedError

    def apply(self, due: list[tuple[int, list[Any]]]) -> list[tuple[Any, ...]]:
        """Apply each time's updates, in the order given; the output rows they cause."""
        raise NotImplementedError

    def handleInputRows(  # noqa: N802 - Spark's name
        self,
        key: Any,
        rows: Iterator[pd.DataFrame],
        timerValues: Any,  # noqa: N803 - Spark passes these by name
    ) -> Iterator[pd.DataFrame]:
        """Hold the updates by time until the watermark reaches it (apply those it has)."""
        import pandas as pd

        watermark = complete_through(timerValues)
        frames = [frame for frame in rows if not frame.empty]
        if not frames:
            return
        due: list[tuple[int, list[Any]]] = []
        for time, updates in self.by_time(pd.concat(frames, ignore_index=True)):
            if time <= watermark:
                due.append((time, updates))
            else:
                self.pending.hold(time, updates)
        if due:  # at times already complete: applied after what is held through them
            due = sorted(self.pending.take_through(watermark) + due, key=lambda entry: entry[0])
        yield from self._frames(self.apply(due))

    def handleExpiredTimer(  # noqa: N802 - Spark's name
        self,
        key: Any,
        timerValues: Any,  # noqa: N803 - Spark passes these by name
        expiredTimerInfo: Any,  # noqa: N803
    ) -> Iterator[pd.DataFrame]:
        """The frontier reached a held time: apply its updates, emit what they cause."""
        time = int(expiredTimerInfo.getExpiryTimeInMs())
        held = self.pending.take(time)
        if held:
            yield from self._frames(self.apply([(time, held)]))

    def _frames(self, out: list[tuple[Any, ...]]) -> Iterator[pd.DataFrame]:
        import pandas as pd

        if out:
            yield pd.DataFrame(out, columns=range(self.output_width))

    def close(self) -> None:
        """Nothing to release."""
