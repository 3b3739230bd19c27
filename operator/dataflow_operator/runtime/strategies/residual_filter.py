"""Which comparisons of a join's WHERE its last step can test, given the sides' types.

The core finds the WHERE's simple comparisons (:mod:`dataflow_operator.core.residual`);
here each is kept when both operands are of one kind :mod:`.pair_filter` compares as
Spark does (types Spark would cast one way or the other — an integer against a double,
a timestamp against a date, a collated string — are left to Spark's filter alone), and
its columns are named as the step's two JSON rows name them.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence
from decimal import Decimal

from pyspark.sql import types as T  # noqa: N812 - Spark's convention

from dataflow_operator.core.changelog import DIFF, TIME
from dataflow_operator.core.residual import Comparison, Operand
from dataflow_operator.runtime.strategies.pair_filter import (
    FieldComparison,
    Kind,
    PairFilter,
    Side,
)

__all__ = ["kind_of", "pair_filter_of"]

_DEFAULT_COLLATION = "UTF8_BINARY"


def kind_of(data_type: T.DataType) -> Kind | None:
    """The kind :class:`~.pair_filter.PairFilter` compares values of ``data_type`` in."""
    if isinstance(data_type, T.IntegralType | T.DecimalType):
        return "number"
    if isinstance(data_type, T.DoubleType):
        return "double"
    if isinstance(data_type, T.FloatType):
        return "float"
    if isinstance(data_type, T.StringType):
        collation = getattr(data_type, "collation", _DEFAULT_COLLATION)
        return "string" if collation == _DEFAULT_COLLATION else None
    if isinstance(data_type, T.TimestampNTZType):
        return "timestamp_ntz"
    if isinstance(data_type, T.TimestampType):
        return "timestamp"
    if isinstance(data_type, T.DateType):
        return "date"
    return None


def pair_filter_of(
    comparisons: Sequence[Comparison],
    schemas: tuple[T.StructType, T.StructType],
    counts: Iterable[int],
) -> PairFilter | None:
    """The filter of a chain's last join step, or ``None`` when no comparison qualifies.

    ``schemas``: the step's left changelog (every input before the last, in order) and
    right one (the last input); their data columns (all but ``__time`` and ``__diff``)
    are the fields of the pair's rows. ``counts``: each input's number of columns. A
    column ``(input, index)`` is the right row's field ``index`` for the last input, else
    the left row's field at the inputs' columns before it plus ``index``.
    """
    counts = list(counts)
    last = len(counts) - 1
    fields = [[f for f in schema.fields if f.name not in (TIME, DIFF)] for schema in schemas]
    repeated = [{n for n, k in Counter(f.name for f in side).items() if k > 1} for side in fields]

    def operand(given: Operand) -> _Typed | None:
        if given.column is None:
            return (given.literal, None) if given.literal is not None else None
        source, index = given.column
        side = 1 if source == last else 0
        position = index if side == 1 else sum(counts[:source]) + index
        if position >= len(fields[side]) or fields[side][position].name in repeated[side]:
            return None
        found = fields[side][position]
        return Side(side, found.name), found.dataType

    kept: list[FieldComparison] = []
    for comparison in comparisons:
        left, right = operand(comparison.left), operand(comparison.right)
        kind = _common_kind(left, right) if left and right else None
        if left and right and kind is not None:
            kept.append(FieldComparison(left[0], comparison.op, right[0], kind))
    return PairFilter(tuple(kept)) if kept else None


_Typed = tuple[Side | int | Decimal | str, T.DataType | None]
"""An operand as the filter takes it, with its column's type (``None``: a literal)."""


def _common_kind(left: _Typed, right: _Typed) -> Kind | None:
    """The kind both operands compare in, or ``None``: columns of one kind, or a number
    or string literal against a column of that kind."""
    kinds = {kind_of(data_type) for _, data_type in (left, right) if data_type is not None}
    if len(kinds) != 1:
        return None
    kind = kinds.pop()
    for value, data_type in (left, right):
        if data_type is not None or (kind, type(value)) in _LITERALS:
            continue
        return None
    return kind


_LITERALS = {("number", int), ("number", Decimal), ("string", str)}
"""The literals compared with columns: numbers with integers and decimals, strings."""
