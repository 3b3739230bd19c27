"""What the processors that keep rows per partition share (a top-N's, a session window's).

Light to import (Spark's pre-init runner unpickles a processor in a new Python process at
every query start): pandas only where rows are handled.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

from dataflow_operator.runtime.strategies.chunked_state import ChunkedMap
from dataflow_operator.runtime.strategies.held import AppliedInTimeOrder, HeldUpdates

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["PartitionRows"]


class PartitionRows(AppliedInTimeOrder):
    """A processor whose state is each partition's rows (in chunks, by the partition's
    JSON) and the updates held per time.

    Input (by position, as :func:`~.partition_columns.arranged` gives it): ``__key``,
    ``__row``, the value the processor orders the row by (of :attr:`value_type`),
    ``__time``, ``__diff``, ``__bucket``. Each update is ``(partition, row, value, diff)``.
    """

    value_type: Callable[[Any], Any]

    def init(self, handle: Any) -> None:
        """Declare the state: the rows per partition (in chunks), the updates held per time."""
        self.partitions = ChunkedMap(handle, "partitions")
        self.pending = HeldUpdates(handle)

    def by_time(self, frame: pd.DataFrame) -> Iterator[tuple[int, list[Any]]]:
        """Each time's updates: ``(partition, row, value, diff)``, times in order and a
        time's updates in the frame's order (one sort and one pass: no frame per time)."""
        import numpy as np

        times = frame.iloc[:, 3].to_numpy(dtype="int64")
        order = np.argsort(times, kind="stable")
        times = times[order]
        value_type = self.value_type
        updates = [
            (str(p), str(r), value_type(v), int(d))
            for p, r, v, d in zip(
                frame.iloc[:, 0].take(order).tolist(),
                frame.iloc[:, 1].take(order).tolist(),
                frame.iloc[:, 2].take(order).tolist(),
                frame.iloc[:, 4].take(order).tolist(),
                strict=True,
            )
        ]
        starts = np.flatnonzero(np.diff(times, prepend=times[:1] - 1)).tolist()
        for start, end in zip(starts, [*starts[1:], len(updates)], strict=True):
            yield int(times[start]), updates[start:end]
