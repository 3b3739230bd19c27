"""One group's totals while a batch's updates are added to them, time after time.

A group's totals (:class:`~.aggregate.GroupTotals`) are, per column, a sum, or for a
``min``/``max``/``count_distinct`` column a multiset: each value with its count, the
value present while its count is positive. Each time a group changes, its totals are
emitted before and after: a multiset column as its least or greatest present value, or
how many values are present. Recounting that from the whole multiset at every time costs
a group of *n* values *n* per time, so a window collecting a bid a millisecond costs the
square of its bids. :class:`RunningTotals` keeps each multiset's answer up to date as
values come and go instead: a value that comes is compared with the extreme, one that
goes is counted out, and only the extreme itself going makes the next answer a recount.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

__all__ = ["RunningTotals", "add_sums"]


def add_sums(a: Any, b: Any) -> Any:
    """Two partial sums added, a missing one (None, NaN) taken as nothing to add."""
    if a is None or (isinstance(a, float) and math.isnan(a)):
        return b
    if b is None or (isinstance(b, float) and math.isnan(b)):
        return a
    return a + b


class RunningTotals:
    """A group's ``totals`` (one per kind in ``kinds``; the last, ``sum``, is the group's
    row count) as :meth:`add` changes them in place, and what they emit (:meth:`emitted`).

    ``totals``: the group's stored totals (changed in place; ``None``: a new group's).
    """

    def __init__(self, totals: list[Any] | None, kinds: Sequence[str]) -> None:
        self.kinds = tuple(kinds)
        self.totals = totals or [0 if kind == "sum" else {} for kind in self.kinds]
        self._answers: list[Any] = [None] * len(self.kinds)
        self._stale = [kind != "sum" for kind in self.kinds]

    @property
    def count(self) -> Any:
        """The group's row count (its last total)."""
        return self.totals[-1]

    def add(self, amounts: Sequence[Any]) -> None:
        """Add one time's amounts: a sum per ``sum`` column, a ``{value: count}`` per
        multiset column."""
        for index, (amount, kind) in enumerate(zip(amounts, self.kinds, strict=True)):
            if kind == "sum":
                self.totals[index] = add_sums(self.totals[index], amount)
                continue
            values = self.totals[index]
            for value, count in amount.items():
                was = values.get(value, 0)
                now = was + count
                if now:
                    values[value] = now
                else:
                    values.pop(value, None)
                if (was > 0) != (now > 0) and not self._stale[index]:
                    self._comes_or_goes(index, kind, value, now > 0)

    def _comes_or_goes(self, index: int, kind: str, value: Any, comes: bool) -> None:
        answer = self._answers[index]
        if kind == "count_distinct":
            self._answers[index] = answer + (1 if comes else -1)
        elif comes:
            if answer is None or (value < answer if kind == "min" else value > answer):
                self._answers[index] = value
        elif value == answer:
            self._stale[index] = True  # the extreme went: recount when next asked

    def emitted(self) -> list[Any]:
        """The totals as a group's row has them: sums as they are, a multiset column's
        least or greatest present value (NULL if none) or its count of present values."""
        emitted: list[Any] = []
        for index, kind in enumerate(self.kinds):
            if kind == "sum":
                emitted.append(self.totals[index])
                continue
            if self._stale[index]:
                self._answers[index] = _recounted(self.totals[index], kind)
                self._stale[index] = False
            emitted.append(self._answers[index])
        return emitted


def _recounted(values: dict[Any, int], kind: str) -> Any:
    present = [value for value, count in values.items() if count > 0]
    if kind == "count_distinct":
        return len(present)
    pick = min if kind == "min" else max
    return pick(present) if present else None
