"""A join's early test of its matched pairs against the WHERE's comparisons.

The join (:class:`~.arrangement.ArrangedJoin`) holds each pair as two rows in JSON (as
:mod:`.join` writes them); :class:`PairFilter` reads the compared fields and drops a pair
only when a comparison is surely not true for it (false, or NULL: a NULL operand), as
Spark would find it. Whatever it cannot be sure of — a field it does not find, a value
not of the expected kind, a string Spark may hold other bytes for — it keeps: Spark's
filter after the join decides (see :mod:`dataflow_operator.core.residual`).

Each comparison is tested in the one *kind* the runtime found both operands to be of
(:func:`~.join.pair_filter_of`), in which Python's order is Spark's:

- ``number``: integral and decimal values (JSON integers and exact decimals);
- ``double``, ``float``: the same floating type on both sides (the JSON text of a value
  read as an exact decimal: distinct values keep their order; NaN and infinities, which
  Spark writes as strings, are left undecided);
- ``string``: Spark's binary order is the order of code points;
- ``timestamp``, ``timestamp_ntz``, ``date``: the text read as a point in time or a day;
  a point in time only when written in UTC (a session in another zone writes offsets to
  the minute, and a zone's old offsets have seconds).

Light to import (the standard library only): the processor is unpickled at every query
start in a Python process of its own.
"""

from __future__ import annotations

import operator
from collections.abc import Callable
from dataclasses import dataclass
from datetime import date, datetime
from decimal import Decimal
from typing import Any, Literal

from dataflow_operator.runtime.strategies.exact_json import decode_exact

__all__ = ["FieldComparison", "Kind", "PairFilter", "Side"]

Kind = Literal["number", "double", "float", "string", "timestamp", "timestamp_ntz", "date"]

_OPERATORS: dict[str, Callable[[Any, Any], bool]] = {
    "=": operator.eq,
    "<>": operator.ne,
    "<": operator.lt,
    "<=": operator.le,
    ">": operator.gt,
    ">=": operator.ge,
}
_REPLACEMENT = "\ufffd"
"""What Spark writes for bytes of a string that are not UTF-8: the bytes are not known."""
_CACHED_ROWS = 65_536
"""Rows whose fields are kept parsed; the cache starts over past it."""


class _Undecided(Exception):
    """A value the filter cannot compare as Spark would."""


@dataclass(frozen=True, slots=True)
class Side:
    """A field of the left (0) or right (1) row of a pair, by its JSON name."""

    side: int
    name: str


@dataclass(frozen=True, slots=True)
class FieldComparison:
    """``left op right`` over fields of the pair (:class:`Side`) or a literal value."""

    left: Side | int | Decimal | str
    op: str
    right: Side | int | Decimal | str
    kind: Kind


class PairFilter:
    """Drops the pairs some comparison is surely not true for; keeps every other pair."""

    def __init__(self, comparisons: tuple[FieldComparison, ...]) -> None:
        self.comparisons = comparisons
        self._rows: dict[str, dict[str, Any] | None] = {}

    def __getstate__(self) -> tuple[FieldComparison, ...]:
        return self.comparisons

    def __setstate__(self, comparisons: tuple[FieldComparison, ...]) -> None:
        self.comparisons = comparisons
        self._rows = {}

    def keeps(self, left: str, right: str) -> bool:
        """Whether the pair of rows (JSON objects) may pass the comparisons."""
        rows = (self._row(left), self._row(right))
        for comparison in self.comparisons:
            try:
                a = _value(comparison.left, rows, comparison.kind)
                b = _value(comparison.right, rows, comparison.kind)
            except _Undecided:
                continue
            if a is None or b is None or not _OPERATORS[comparison.op](a, b):
                return False
        return True

    def _row(self, text: str) -> dict[str, Any] | None:
        try:
            return self._rows[text]
        except KeyError:
            pass
        if len(self._rows) >= _CACHED_ROWS:
            self._rows.clear()
        try:
            row = decode_exact(text)
        except ValueError:
            row = None
        parsed = row if isinstance(row, dict) else None
        self._rows[text] = parsed
        return parsed


def _value(
    operand: Side | int | Decimal | str,
    rows: tuple[dict[str, Any] | None, dict[str, Any] | None],
    kind: Kind,
) -> Any:
    """The operand's value to compare in ``kind``; ``None`` for NULL."""
    if not isinstance(operand, Side):
        return operand
    row = rows[operand.side]
    if row is None or operand.name not in row:
        raise _Undecided  # Spark leaves out NULL fields, but a name may also be wrong
    value = row[operand.name]
    if value is None:
        return None
    return _READERS[kind](value)


def _number(value: Any) -> int | Decimal:
    if isinstance(value, bool) or not isinstance(value, int | Decimal):
        raise _Undecided
    if isinstance(value, Decimal) and not value.is_finite():
        raise _Undecided
    return value


def _string(value: Any) -> str:
    if not isinstance(value, str) or _REPLACEMENT in value:
        raise _Undecided
    return value


def _timestamp(value: Any) -> datetime:
    text = _string(value)
    if not text.endswith("Z"):
        raise _Undecided  # an offset Spark writes to the minute: a zone's may have seconds
    return _point_in_time(text)


def _timestamp_ntz(value: Any) -> datetime:
    parsed = _point_in_time(_string(value))
    if parsed.tzinfo is not None:
        raise _Undecided
    return parsed


def _point_in_time(text: str) -> datetime:
    try:
        return datetime.fromisoformat(text)
    except ValueError:
        raise _Undecided from None


def _date(value: Any) -> date:
    try:
        return date.fromisoformat(_string(value))
    except ValueError:
        raise _Undecided from None


_READERS: dict[str, Callable[[Any], Any]] = {
    "number": _number,
    "double": _number,
    "float": _number,
    "string": _string,
    "timestamp": _timestamp,
    "timestamp_ntz": _timestamp_ntz,
    "date": _date,
}
