"""The join's stateful processor: each join key's arrangement, joined as either side changes.

Spark's pre-init runner unpickles the processor in a new Python process at every query
start (in the first batch's planning) only to call its ``init``: this module imports
nothing heavy at its top (pandas where rows are handled), unlike :mod:`.join`, which
builds the query (sqlglot through the core, pyarrow). See :mod:`.join` for the design.
"""

from __future__ import annotations

import pickle
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from pyspark.sql.streaming.stateful_processor import StatefulProcessor

from dataflow_operator.core.changelog import DIFF, TIME
from dataflow_operator.runtime.strategies.columns import KEY, ROW, SIDE
from dataflow_operator.runtime.strategies.gc_pause import cyclic_gc_paused
from dataflow_operator.runtime.strategies.held import HeldUpdates, complete_through
from dataflow_operator.runtime.strategies.join_rows import (
    ALL_ROWS,
    FRAGMENT_LIMIT,
    INLINE_ROWS,
    META,
    History,
    StateKey,
    StoredSide,
    add_history,
    add_row,
    compact,
    dump_meta,
    load_meta,
    merge_phase,
    merged,
    totals,
)
from dataflow_operator.runtime.strategies.output_slices import slices
from dataflow_operator.runtime.strategies.packed_rows import unpacked
from dataflow_operator.runtime.strategies.pair_filter import PairFilter
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

Update = tuple[int, str, int, int]
"""One input update of a join key: side, row JSON, time, diff."""


@dataclass(frozen=True, slots=True)
class _Reads:
    """What one join key's updates need of the state besides its meta."""

    changed: frozenset[int]
    """The sides the key's updates change."""
    whole: frozenset[int]
    """The sides in fragments read whole."""
    reads: list[StateKey]
    """The fragments to read: those of the ``whole`` sides, and those a full tail takes in."""
    merged_from: tuple[int, int]
    """Per side, the first fragment a new fragment takes in (one past the last: none)."""


class ArrangedJoin(StatefulProcessor):
    """Both sides' rows per join key; joined updates as either side changes.

    Input: ``__side, __key, __row, __time, __diff`` packed per bucket
    (:func:`~.packed_rows.pack`). Output:
    ``__lrow, __rrow, __time, __diff`` (a missing side is NULL: a null-extended row).

    The two inputs are not in step: one side's update at time ``t`` may arrive after the
    other side's updates at later times. So each row keeps its times until the watermark
    passes them, a pair joins at the later of its two times, and an outer join's
    null-extended rows are recomputed per key at each time from the first one a batch
    changes (only the times not yet complete: those above the watermark).

    With ``pairs``, a matched pair it surely rejects is not emitted (the query's WHERE,
    applied after the join, would drop it); null-extended rows are all emitted.
    """

    def __init__(
        self,
        preserves: tuple[bool, bool],
        *,
        in_time_order: bool = False,
        pairs: PairFilter | None = None,
        inline_rows: int = INLINE_ROWS,
        fragment_limit: int = FRAGMENT_LIMIT,
    ) -> None:
        self.preserves = preserves
        self.in_time_order = in_time_order
        self.pairs = pairs
        self.inline_rows = inline_rows
        self.fragment_limit = fragment_limit

    def init(self, handle: Any) -> None:
        """Declare the state: per join key, the left and the right rows (laid out as
        :mod:`.join_rows` says); the held output."""
        self.arrangement = handle.getMapState("arrangement", "k STRING, s INT, n INT", "v BINARY")
        self.pending = HeldUpdates(handle)

    def _emit(self, out: list[Joined], watermark: int) -> Iterator[pd.DataFrame]:
        """``out`` now, or (``in_time_order``) once the watermark reaches each time."""
        if self.in_time_order:
            later: dict[int, list[Joined]] = {}
            for update in out:
                if update[2] > watermark:
                    later.setdefault(update[2], []).append(update)
            for time, updates in later.items():
                self.pending.hold(time, updates)
            out = [update for update in out if update[2] <= watermark]
        for part in slices(out):
            yield _frame(part)

    def handleExpiredTimer(  # noqa: N802 - Spark's name
        self,
        key: Any,
        timerValues: Any,  # noqa: N803 - Spark passes these by name
        expiredTimerInfo: Any,  # noqa: N803
    ) -> Iterator[pd.DataFrame]:
        """The watermark reached a held time: emit its joined updates."""
        held = self.pending.take(int(expiredTimerInfo.getExpiryTimeInMs()))
        for part in slices(held):
            yield _frame(part)

    def handleInputRows(  # noqa: N802 - Spark's name
        self,
        key: Any,
        rows: Iterator[pd.DataFrame],
        timerValues: Any,  # noqa: N803 - Spark passes these by name
    ) -> Iterator[pd.DataFrame]:
        """Apply the bucket's updates (packed: :mod:`.packed_rows`) key by key; emit the
        joined changes."""
        with cyclic_gc_paused():
            frame = unpacked(rows)
            if frame is None or frame.empty:
                return
            complete = complete_through(timerValues)
            out: list[Joined] = []
            unmatched = frame[frame[KEY].isna()]
            for side in (0, 1):
                if self.preserves[side]:
                    mine = unmatched[unmatched[SIDE] == side]
                    out += [_extended(side, row, t, d) for row, t, d in _consolidated(mine)]
            keyed = frame[frame[KEY].notna()]
            if not keyed.empty:
                self._apply_keyed(keyed, complete, out)
            emitted = list(self._emit(out, complete))
        yield from emitted

    def _apply_keyed(self, keyed: pd.DataFrame, watermark: int, out: list[Joined]) -> None:
        """Apply the updates that have a join key, :data:`KEYS_AT_ONCE` keys at a time: their
        metas read, then the fragments they need (:mod:`.join_rows`), then what changed
        written, many calls per round trip to the JVM (:mod:`.state_calls`)."""
        per_key = _per_key(keyed)
        # No reads at all when the bucket holds nothing yet (a hydration).
        known = self.arrangement.exists()
        for first in range(0, len(per_key), KEYS_AT_ONCE):
            some = per_key[first : first + KEYS_AT_ONCE]
            metas = (
                get_values(self.arrangement, [(k, META, 0) for k, _ in some])
                if known
                else [None] * len(some)
            )
            stored = [load_meta(meta) for meta in metas]
            plans = [
                self._plan(join_key, sides, updates)
                for (join_key, updates), sides in zip(some, stored, strict=True)
            ]
            wanted = [key for plan in plans for key in plan.reads]
            values = get_values(self.arrangement, wanted) if wanted else []
            fetched = dict(zip(wanted, values, strict=True))
            writes: list[tuple[StateKey, tuple[bytes]]] = []
            removals: list[StateKey] = []
            for (join_key, updates), meta, sides, plan in zip(
                some, metas, stored, plans, strict=True
            ):
                rows = (
                    sides[0].rows(join_key, 0, fetched if 0 in plan.whole else None),
                    sides[1].rows(join_key, 1, fetched if 1 in plan.whole else None),
                )
                self._apply_key(rows, updates, watermark, out)
                after: list[StoredSide] = []
                for side in (0, 1):
                    stored_side, written, removed = self._store(
                        (join_key, side),
                        sides[side],
                        rows[side],
                        changed=side in plan.changed,
                        read=side in plan.whole,
                        merged_from=plan.merged_from[side],
                        fetched=fetched,
                        watermark=watermark,
                    )
                    after.append(stored_side)
                    writes += written
                    removals += removed
                if not (after[0].empty and after[1].empty):
                    writes.append(((join_key, META, 0), dump_meta((after[0], after[1]))))
                elif meta is not None:
                    removals.append((join_key, META, 0))
            update_values(self.arrangement, writes)
            remove_keys(self.arrangement, removals)

    def _plan(
        self, join_key: str, sides: tuple[StoredSide, StoredSide], updates: list[Update]
    ) -> _Reads:
        """What a key's ``updates`` need read: sides in fragments whole (see
        :mod:`.join_rows`), or the newest fragments a side's full tail takes in."""
        changed = {side for side, *_ in updates}
        retracting = {side for side, _, _, diff in updates if diff < 0}
        whole = {
            side
            for side in (0, 1)
            if sides[side].inline is None
            and (
                1 - side in changed
                or side in retracting
                or len(sides[side].sizes) >= self.fragment_limit
            )
        }
        reads = [key for side in sorted(whole) for key in sides[side].fragment_keys(join_key, side)]
        merged_from = [len(sides[side].sizes) + 1 for side in (0, 1)]
        for side in changed - whole:
            stored = sides[side]
            if stored.inline is not None:
                continue
            # The tail :meth:`_store` will hold: a side not read whole only gains rows (a
            # retraction reads it whole), so its stored tail's rows and this batch's.
            tail = set(stored.tail).union(row for s, row, _, _ in updates if s == side)
            if len(tail) > self.inline_rows:  # the tail becomes a fragment
                merged_from[side] = stored.merged_from(len(tail), merge_phase(join_key))
                reads += stored.fragment_keys(join_key, side, merged_from[side])
        return _Reads(frozenset(changed), frozenset(whole), reads, (merged_from[0], merged_from[1]))

    def _store(
        self,
        key_side: tuple[str, int],
        before: StoredSide,
        rows: History,
        *,
        changed: bool,
        read: bool,
        merged_from: int,
        fetched: dict[StateKey, Any],
        watermark: int,
    ) -> tuple[StoredSide, list[tuple[StateKey, tuple[bytes]]], list[StateKey]]:
        """Store one side's ``rows`` as they are after the batch: what the meta says of the
        side then, the state's writes and removals.

        Rows not read (``before`` in fragments, ``read`` false) are the stand-in and this
        batch's rows: the latter join the side's tail, which becomes a fragment once it has
        more than :attr:`inline_rows` rows, taking in the fragments from number
        ``merged_from`` on (read into ``fetched``)."""
        join_key, side = key_side
        if before.inline is None and not read:
            side_totals = totals(rows, watermark)  # the stand-in's and this batch's rows
            tail = before.tail
            rows.pop(ALL_ROWS, None)
            add_history(tail, rows, take_over=True)  # ``rows`` is not used after this
            compact(tail, watermark)
            after = StoredSide(None, before.sizes, side_totals, tail)
            if len(tail) <= self.inline_rows:
                return after, [], []
            taken = before.fragment_keys(join_key, side, merged_from)
            fragment = tail
            if taken:
                fragment = merged([fetched[key] for key in taken], tail)
                compact(fragment, watermark)
            after.sizes = (*before.sizes[: merged_from - 1], len(fragment))
            after.tail = {}
            write = ((join_key, side, merged_from), (pickle.dumps(fragment),))
            return after, [write], taken[1:]
        if len(rows) <= self.inline_rows:
            return StoredSide(rows), [], before.fragment_keys(join_key, side)
        if changed or len(before.sizes) != 1:
            write = ((join_key, side, 1), (pickle.dumps(rows),))
            stale = before.fragment_keys(join_key, side, 2)
            return StoredSide(None, (len(rows),), totals(rows, watermark)), [write], stale
        return before, [], []

    def _apply_key(
        self,
        sides: tuple[History, History],
        updates: list[Update],
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
        keeps = self.pairs.keeps if self.pairs is not None else None
        for side, row, time, diff in updates:
            for other, history in sides[1 - side].items():
                pair = (row, other) if side == 0 else (other, row)
                if keeps is None or keeps(*pair):
                    out += [(*pair, max(time, at), diff * d) for at, d in history.items()]
            add_row(sides[side], row, time, diff)
        for side in outer:
            after = _extended_at(sides, side, times)
            previous: dict[str, int] = {}
            for index, time in enumerate(times):
                change = _difference(after[index], before[side][index])
                for row, diff in _difference(change, previous).items():
                    out.append(_extended(side, row, time, diff))
                previous = change
        for arranged in sides:
            compact(arranged, watermark)

    def close(self) -> None:
        """Nothing to release."""


def _frame(out: Sequence[Joined]) -> pd.DataFrame:
    """``out`` as the operator's output frame, built column by column (from the list of
    tuples, pandas infers each column's type value by value)."""
    import numpy as np  # here, not at the top: see the module docstring
    import pandas as pd

    left, right, times, diffs = zip(*out, strict=True)
    return pd.DataFrame(
        {
            0: np.array(left, dtype=object),
            1: np.array(right, dtype=object),
            2: np.array(times, dtype=np.int64),
            3: np.array(diffs, dtype=np.int64),
        }
    )


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


def _per_key(keyed: pd.DataFrame) -> list[tuple[str, list[Update]]]:
    """``keyed``'s updates consolidated (diffs of the same row at the same time summed,
    zero sums dropped) and grouped by join key: in a Python dictionary, which is twice as
    fast as pandas' ``groupby`` on these string columns."""
    columns = (keyed[c].tolist() for c in (KEY, SIDE, ROW, TIME))  # Python ints and strs
    sums: dict[tuple[str, int, str, int], int] = {}
    for update, diff in zip(zip(*columns, strict=True), keyed[DIFF].tolist(), strict=True):
        sums[update] = sums.get(update, 0) + diff
    per_key: dict[str, list[Update]] = {}
    for (join_key, side, row, time), diff in sums.items():
        if diff:
            per_key.setdefault(join_key, []).append((side, row, time, diff))
    return list(per_key.items())


def _consolidated(frame: pd.DataFrame) -> list[tuple[str, int, int]]:
    """(row, time, summed diff) of ``frame``'s updates, without zero sums."""
    if frame.empty:
        return []
    sums = frame.groupby([ROW, TIME], sort=True)[DIFF].sum()
    return [(row, int(t), int(d)) for (row, t), d in sums.items() if d != 0]
