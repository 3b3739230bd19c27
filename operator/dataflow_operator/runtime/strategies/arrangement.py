"""The join's stateful processor: each join key's arrangement, joined as either side changes.

Spark's pre-init runner unpickles the processor in a new Python process at every query
start (in the first batch's planning) only to call its ``init``: this module imports
nothing heavy at its top (pandas where rows are handled), unlike :mod:`.join`, which
builds the query (sqlglot through the core, pyarrow). See :mod:`.join` for the design.
"""

from __future__ import annotations

import itertools
import pickle
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from pyspark.sql.streaming.stateful_processor import StatefulProcessor

from dataflow_operator.core.changelog import DIFF, TIME
from dataflow_operator.runtime.strategies.columns import KEY, ROW, SIDE
from dataflow_operator.runtime.strategies.held import HeldUpdates, complete_through
from dataflow_operator.runtime.strategies.state_calls import get_values, remove_keys, update_values

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["LEFT_ROW", "RIGHT_ROW", "ArrangedJoin", "Joined"]

LEFT_ROW = "__lrow"
RIGHT_ROW = "__rrow"

KEYS_AT_ONCE = 1024
"""Join keys whose arrangements are read, joined and written together."""

Joined = tuple[str | None, str | None, int, int]
"""One output update: left row, right row (either NULL when null-extended), time, diff."""


History = dict[str, dict[int, int]]
"""A side's rows for one key: row JSON → {time: diff} (no zero diffs, no empty rows).

Times at or below the one the inputs are complete through (the watermark, or the batch's
own input frontier: :func:`~.held.complete_through`) are merged into one: every update
still to come is at a later time, so they are all "before" it alike.
"""


class ArrangedJoin(StatefulProcessor):
    """Both sides' rows per join key; joined updates as either side changes.

    Input (by position): ``__side, __key, __row, __time, __diff, __bucket``. Output:
    ``__lrow, __rrow, __time, __diff`` (a missing side is NULL: a null-extended row).

    The two inputs are not in step: one side's update at time ``t`` may arrive after the
    other side's updates at later times. So each row keeps its times until the watermark
    passes them, a pair joins at the later of its two times, and an outer join's
    null-extended rows are recomputed per key at each time from the first one a batch
    changes (only the times not yet complete: those above the watermark).
    """

    def __init__(self, preserves: tuple[bool, bool], *, in_time_order: bool = False) -> None:
        self.preserves = preserves
        self.in_time_order = in_time_order

    def init(self, handle: Any) -> None:
        """Declare the state: per join key, the left and the right rows; the held output."""
        self.arrangement = handle.getMapState("arrangement", "k STRING", "rows BINARY")
        self.pending = HeldUpdates(handle)

    def _emit(self, out: list[Joined], watermark: int) -> Iterator[pd.DataFrame]:
        """``out`` now, or (``in_time_order``) once the watermark reaches each time."""
        import pandas as pd  # here, not at the top: see the module docstring

        if self.in_time_order:
            later: dict[int, list[Joined]] = {}
            for update in out:
                if update[2] > watermark:
                    later.setdefault(update[2], []).append(update)
            for time, updates in later.items():
                self.pending.hold(time, updates)
            out = [update for update in out if update[2] <= watermark]
        if out:
            yield pd.DataFrame(out, columns=range(4))

    def handleExpiredTimer(  # noqa: N802 - Spark's name
        self,
        key: Any,
        timerValues: Any,  # noqa: N803 - Spark passes these by name
        expiredTimerInfo: Any,  # noqa: N803
    ) -> Iterator[pd.DataFrame]:
        """The watermark reached a held time: emit its joined updates."""
        import pandas as pd  # here, not at the top: see the module docstring

        held = self.pending.take(int(expiredTimerInfo.getExpiryTimeInMs()))
        if held:
            yield pd.DataFrame(held, columns=range(4))

    def handleInputRows(  # noqa: N802 - Spark's name
        self,
        key: Any,
        rows: Iterator[pd.DataFrame],
        timerValues: Any,  # noqa: N803 - Spark passes these by name
    ) -> Iterator[pd.DataFrame]:
        """Apply the bucket's updates key by key; emit the joined changes."""
        import pandas as pd  # here, not at the top: see the module docstring

        frames = [frame for frame in rows if not frame.empty]
        if not frames:
            return
        complete = complete_through(timerValues)
        frame = pd.concat(frames, ignore_index=True).iloc[:, :5]
        frame.columns = [SIDE, KEY, ROW, TIME, DIFF]
        out: list[Joined] = []
        unmatched = frame[frame[KEY].isna()]
        for side in (0, 1):
            if self.preserves[side]:
                mine = unmatched[unmatched[SIDE] == side]
                out += [_extended(side, row, t, d) for row, t, d in _consolidated(mine)]
        keyed = frame[frame[KEY].notna()]
        if not keyed.empty:
            self._apply_keyed(keyed, complete, out)
        yield from self._emit(out, complete)

    def _apply_keyed(self, keyed: pd.DataFrame, watermark: int, out: list[Joined]) -> None:
        """Apply the updates that have a join key, :data:`KEYS_AT_ONCE` keys at a time: their
        arrangements read, then written, many per round trip to the JVM (:mod:`.state_calls`)."""
        changes = keyed.groupby([KEY, SIDE, ROW, TIME], sort=True)[DIFF].sum()
        changes = changes[changes != 0]
        entries = zip(changes.index.tolist(), changes.to_numpy().tolist(), strict=True)
        per_key = [
            (join_key, [(int(s), r, int(t), int(d)) for (_, s, r, t), d in by_key])
            for join_key, by_key in itertools.groupby(entries, key=lambda e: e[0][0])
        ]
        # No reads at all when the bucket holds nothing yet (a hydration).
        known = self.arrangement.exists()
        for first in range(0, len(per_key), KEYS_AT_ONCE):
            some = per_key[first : first + KEYS_AT_ONCE]
            keys = [(join_key,) for join_key, _ in some]
            stored = get_values(self.arrangement, keys) if known else [None] * len(some)
            writes: list[tuple[tuple[str], tuple[bytes]]] = []
            removals: list[tuple[str]] = []
            for (join_key, updates), value in zip(some, stored, strict=True):
                sides: tuple[History, History] = pickle.loads(value[0]) if value else ({}, {})
                self._apply_key(sides, updates, watermark, out)
                if sides[0] or sides[1]:
                    writes.append(((join_key,), (pickle.dumps(sides),)))
                else:
                    removals.append((join_key,))
            update_values(self.arrangement, writes)
            remove_keys(self.arrangement, removals)

    def _apply_key(
        self,
        sides: tuple[History, History],
        updates: list[tuple[int, str, int, int]],
        watermark: int,
        out: list[Joined],
    ) -> None:
        """Apply one join key's updates to its rows (``sides``, changed in place); the
        joined changes go to ``out``."""
        outer = [side for side in (0, 1) if self.preserves[side]]
        times: list[int] = []
        before: dict[int, list[dict[str, int]]] = {}
        if outer:
            first = min(t for _, _, t, _ in updates)
            times = sorted(
                {t for _, _, t, _ in updates}
                | {t for h in sides for row in h.values() for t in row if t >= first}
            )
            before = {side: _extended_at(sides, side, times) for side in outer}
        for side, row, time, diff in updates:
            for other, history in sides[1 - side].items():
                pair = (row, other) if side == 0 else (other, row)
                out += [(*pair, max(time, at), diff * d) for at, d in history.items()]
            _add(sides[side], row, time, diff)
        for side in outer:
            after = _extended_at(sides, side, times)
            previous: dict[str, int] = {}
            for index, time in enumerate(times):
                change = _difference(after[index], before[side][index])
                for row, diff in _difference(change, previous).items():
                    out.append(_extended(side, row, time, diff))
                previous = change
        for arranged in sides:
            _compact(arranged, watermark)

    def close(self) -> None:
        """Nothing to release."""


def _add(history: History, row: str, time: int, diff: int) -> None:
    times = history.setdefault(row, {})
    total = times.get(time, 0) + diff
    if total:
        times[time] = total
    else:
        times.pop(time, None)
        if not times:
            del history[row]


def _compact(history: History, watermark: int) -> None:
    """Merge each row's times at or below ``watermark`` into one, at ``watermark``.

    A row with one time is left as it is, whatever the time: all times at or below the
    watermark are alike (see :data:`History`), so only a row with more than one needs
    merging. Most rows have one, so this looks at each row once and rewrites few.
    """
    for row in [row for row, times in history.items() if len(times) > 1]:
        times = history[row]
        old = [t for t in times if t <= watermark]
        if len(old) > 1:
            total = sum(times.pop(t) for t in old)
            if total:
                times[watermark] = total
            if not times:
                del history[row]


def _extended_at(
    sides: tuple[History, History], side: int, times: list[int]
) -> list[dict[str, int]]:
    """At each of ``times``: ``side``'s rows (with counts) if the other side has no row
    for the key then (its total multiplicity is 0), else none."""
    result: list[dict[str, int]] = []
    for time in times:
        other = sum(d for h in sides[1 - side].values() for t, d in h.items() if t <= time)
        if other:
            result.append({})
            continue
        counts = {row: sum(d for t, d in h.items() if t <= time) for row, h in sides[side].items()}
        result.append({row: n for row, n in counts.items() if n})
    return result


def _difference(a: dict[str, int], b: dict[str, int]) -> dict[str, int]:
    """``a − b`` per row, without zeros (negative counts kept)."""
    result = dict(a)
    for row, n in b.items():
        total = result.get(row, 0) - n
        if total:
            result[row] = total
        else:
            result.pop(row, None)
    return result


def _extended(side: int, row: str, time: int, diff: int) -> Joined:
    """``row`` of ``side`` with NULLs for the other side's columns."""
    return (row, None, time, diff) if side == 0 else (None, row, time, diff)


def _consolidated(frame: pd.DataFrame) -> list[tuple[str, int, int]]:
    """(row, time, summed diff) of ``frame``'s updates, without zero sums."""
    if frame.empty:
        return []
    sums = frame.groupby([ROW, TIME], sort=True)[DIFF].sum()
    return [(row, int(t), int(d)) for (row, t), d in sums.items() if d != 0]
