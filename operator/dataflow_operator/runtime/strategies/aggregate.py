"""GROUP BY with count/sum/avg/min/max, maintained in Spark state (``transformWithStateInPandas``).

The core plans the query (:class:`dataflow_operator.core.incremental.AggregatePlan`): the
partial sums' terms per input row (``per_row_sql``), and ``changelog_sql``, which maps a
group's totals to its output row, passing ``__time`` and ``__diff``. Here
:class:`GroupTotals` keeps each group's totals in a :class:`~.chunked_state.ChunkedMap`
(groups bucketed into a few state keys, a bucket's groups into a few chunks) and, for
each group and time it changes, emits its totals before (diff −1) and after (diff +1)
as ``__mz_groups`` rows, which ``changelog_sql`` turns into output updates. A
before/after pair that maps to the same output row cancels out when the sink
consolidates its batch.
"""

from __future__ import annotations

import math
import pickle
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

from pyspark.sql.streaming.stateful_processor import StatefulProcessor

from dataflow_operator.runtime.strategies.chunked_state import ChunkedMap
from dataflow_operator.runtime.strategies.held import HeldUpdates, complete_through
from dataflow_operator.runtime.strategies.output_slices import slices
from dataflow_operator.runtime.strategies.running_totals import RunningTotals, add_sums

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["GroupTotals"]


class GroupTotals(StatefulProcessor):
    """Running totals per group; before (−1) and after (+1) rows when a group changes.

    Input (by position): ``keys…, __time, sums…, __count, __bucket``. Output: ``keys…,
    sums…, __count, __time, __diff`` (a group's zero totals before it existed are not
    emitted: they map to no output row).

    ``kinds`` says, per column of sums, ``sum`` (the default) or ``min``/``max``/
    ``count_distinct``: such a column's input is each row's value, and its total the
    multiset of values (value → count) whose least or greatest with a positive count is
    emitted (NULL if none), or how many values have a positive count.

    ``integral_keys`` says which key columns are integers: pandas hands such a column
    over as floats when the batch has a NULL in it (``1.0``, ``NaN``), and a group must
    be the same state key in every batch (``1``; ``None`` for NULL).

    With ``in_time_order`` (over a join, whose updates come as soon as they are known,
    not in time order from one batch to the next: :mod:`.join`) the rows of a time the
    inputs are not complete through yet are held (:class:`~.held.HeldUpdates`) until the
    watermark reaches it, so that a group's totals change in time order. They are held
    here, after the partial sums (:mod:`.partial_sums`), rather than as the join's
    output: a row per group, time and task instead of every joined row.

    Spark's pre-init runner unpickles it in a new Python process for every query start,
    to call :meth:`init` only: pandas is imported where rows are handled, not at the
    module's top (a part of the runner's life worth saving, in the first batch's
    planning; ``bench/RESULTS.md``).
    """

    def __init__(
        self,
        keys: int,
        sums: int,
        integral_keys: tuple[bool, ...] = (),
        kinds: tuple[str, ...] = (),
        *,
        in_time_order: bool = False,
    ) -> None:
        self.keys = keys
        self.in_time_order = in_time_order
        self.sums = sums
        self.integral_keys = integral_keys or (False,) * keys
        self.kinds = (*(kinds or ("sum",) * sums), "sum")  # the last total is __count

    def _group(self, values: tuple[Any, ...]) -> tuple[Any, ...]:
        return tuple(
            None
            if value is None or (isinstance(value, float) and math.isnan(value) and integral)
            else int(value)
            if integral
            else value
            for value, integral in zip(values, self.integral_keys, strict=True)
        )

    def init(self, handle: Any) -> None:
        """Declare the state: totals by group; with ``in_time_order``, the held rows."""
        self.totals = ChunkedMap(handle, "totals")
        if self.in_time_order:
            self.pending = HeldUpdates(handle)

    def handleInputRows(  # noqa: N802 - Spark's name
        self,
        key: Any,
        rows: Iterator[pd.DataFrame],
        timerValues: Any,  # noqa: N803 - Spark passes these by name
    ) -> Iterator[pd.DataFrame]:
        """Apply each group's partial rows in time order, emitting the transitions (with
        ``in_time_order``, those of times the inputs are complete through; the others are
        held until the watermark reaches them)."""
        import pandas as pd  # here, not at the top: see the class docstring

        frames = [frame for frame in rows if not frame.empty]
        if not frames:
            return
        frame = pd.concat(frames, ignore_index=True)
        width = self.keys + 1 + self.sums + 1
        partials = list(frame.iloc[:, :width].itertuples(index=False, name=None))
        if self.in_time_order:
            complete = complete_through(timerValues)
            partials = self._held_back(partials, complete)
            if partials:  # at times already complete: after what is held through them
                held = self.pending.take_through(complete)
                partials = [row for _, rows in held for row in rows] + partials
        yield from self._applied(partials)

    def handleExpiredTimer(  # noqa: N802 - Spark's name
        self,
        key: Any,
        timerValues: Any,  # noqa: N803 - Spark passes these by name
        expiredTimerInfo: Any,  # noqa: N803
    ) -> Iterator[pd.DataFrame]:
        """The watermark reached a held time: apply its partial rows."""
        yield from self._applied(self.pending.take(int(expiredTimerInfo.getExpiryTimeInMs())))

    def _held_back(self, partials: list[tuple[Any, ...]], complete: int) -> list[tuple[Any, ...]]:
        """``partials`` at times through ``complete``; the later ones held until then."""
        later: dict[int, list[tuple[Any, ...]]] = {}
        now: list[tuple[Any, ...]] = []
        for row in partials:
            time = int(row[self.keys])
            if time > complete:
                later.setdefault(time, []).append(row)
            else:
                now.append(row)
        for time, held in later.items():
            self.pending.hold(time, held)
        return now

    def _applied(self, partials: list[tuple[Any, ...]]) -> Iterator[pd.DataFrame]:
        """Apply ``partials`` (``keys…, __time, sums…, __count`` each) to the totals;
        the transitions, per group in time order."""
        import pandas as pd  # here, not at the top: see the class docstring

        if not partials:
            return
        k = self.keys
        # By the group's pickled form: equal groups are equal bytes (a float NaN is not
        # equal to itself, so tuples holding one never match as dictionary keys).
        per_group: dict[bytes, dict[int, list[Any]]] = {}
        for row in partials:
            group, time = self._group(row[:k]), int(row[k])
            amounts = self._amounts(row[k + 1 :], pd.isna)
            per_time = per_group.setdefault(pickle.dumps(group), {})
            current = per_time.get(time)
            per_time[time] = amounts if current is None else self._combine(current, amounts)
        out: list[tuple[Any, ...]] = []
        stored = self.totals.load(per_group)
        for pickled, per_time in per_group.items():
            group = pickle.loads(pickled)
            running = RunningTotals(stored.get(pickled), self.kinds)
            for time in sorted(per_time):
                before = running.emitted() if running.count != 0 else None
                running.add(per_time[time])
                if before is not None:
                    out.append((*group, *before, time, -1))
                if running.count != 0:
                    out.append((*group, *running.emitted(), time, 1))
            if running.count == 0:
                self.totals.delete(pickled)
            else:
                self.totals.set(pickled, running.totals)
        self.totals.store()
        for part in slices(out):
            yield pd.DataFrame(part, columns=range(len(part[0])))

    def _amounts(self, row: tuple[Any, ...], isna: Callable[[Any], bool]) -> list[Any]:
        """One input row's contribution per total: its partial sums, and for a min/max
        column its value counted with the row's diff (the last column, ``__count``);
        ``isna``: pandas' test for a missing value (None, NaN, NaT)."""
        diff = row[-1]
        return [
            value if kind == "sum" else ({} if value is None or isna(value) else {value: int(diff)})
            for value, kind in zip(row, self.kinds, strict=True)
        ]

    def _combine(self, amounts: list[Any], more: list[Any]) -> list[Any]:
        """Two rows' amounts at one time as one."""
        combined: list[Any] = []
        for amount, added, kind in zip(amounts, more, self.kinds, strict=True):
            if kind == "sum":
                combined.append(add_sums(amount, added))
                continue
            values = dict(amount)
            for value, count in added.items():
                values[value] = values.get(value, 0) + count
            combined.append(values)
        return combined

    def close(self) -> None:
        """Nothing to release."""
