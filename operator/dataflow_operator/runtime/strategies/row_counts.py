"""DISTINCT's and the set operations' stateful processor: each row's multiplicity per
input, and the output's change when it changes.

Spark's pre-init runner unpickles the processor in a new Python process at every query
start (in the first batch's planning) only to call its ``init``: this module imports
nothing heavy at its top (pandas where rows are handled), unlike :mod:`.multiset`, which
builds the query (sqlglot through the core, pyarrow). See :mod:`.multiset` for the design.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from dataflow_operator.core.changelog import DIFF, TIME
from dataflow_operator.core.multiplicity import SetOperation, output_multiplicity
from dataflow_operator.runtime.strategies.chunked_state import ChunkedMap
from dataflow_operator.runtime.strategies.columns import ROW, SIDE
from dataflow_operator.runtime.strategies.held import AppliedInTimeOrder, HeldUpdates

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["RowCounts", "Update"]


Update = tuple[int, str, int]
"""One held input update: side, row JSON, diff."""


class RowCounts(AppliedInTimeOrder):
    """Each row's multiplicity per input; output changes once the frontier passes.

    Input (by position): ``__side, __row, __time, __diff, __bucket``. Output: ``__row,
    __time, __diff``.
    """

    output_width = 3

    def __init__(self, operation: SetOperation) -> None:
        self.operation = operation

    def init(self, handle: Any) -> None:
        """Declare the state: counts per row (in chunks), and the updates held per time."""
        self.counts = ChunkedMap(handle, "counts")
        self.pending = HeldUpdates(handle)

    def by_time(self, frame: pd.DataFrame) -> Iterator[tuple[int, list[Update]]]:
        """Each time's updates, each row's diffs per side summed (none that sum to 0)."""
        frame = frame.iloc[:, :4]
        frame.columns = [SIDE, ROW, TIME, DIFF]
        sums = frame.groupby([TIME, SIDE, ROW], sort=True)[DIFF].sum()
        sums = sums[sums != 0]
        entries = zip(sums.index.tolist(), sums.to_numpy().tolist(), strict=True)
        for time, at_time in itertools.groupby(entries, key=lambda e: int(e[0][0])):
            yield time, [(int(side), row, int(diff)) for (_, side, row), diff in at_time]

    def apply(self, due: list[tuple[int, list[Update]]]) -> list[tuple[str, int, int]]:
        """Apply each due time's updates, in time order (the rows' chunks read and written
        once); the output changes they cause."""
        per_time: list[tuple[int, dict[str, list[int]]]] = []
        for time, updates in due:
            changes: dict[str, list[int]] = {}
            for side, row, diff in updates:
                changes.setdefault(row, [0, 0])[side] += diff
            per_time.append((time, changes))
        keys = {row: row.encode() for _, changes in per_time for row in changes}
        counts = self.counts.load(keys.values())
        out: list[tuple[str, int, int]] = []
        for time, changes in per_time:
            for row, (da, db) in changes.items():
                key = keys[row]
                a, b = counts.get(key, (0, 0))
                before = output_multiplicity(self.operation, a, b)
                a, b = a + da, b + db
                change = output_multiplicity(self.operation, a, b) - before
                if change:
                    out.append((row, time, change))
                counts[key] = (a, b)
                if a or b:
                    self.counts.set(key, (a, b))
                else:
                    self.counts.delete(key)
        self.counts.store()
        return out
