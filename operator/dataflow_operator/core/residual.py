"""The comparisons of a join's WHERE that its matched pairs can be tested with early.

A WHERE over a join's rows filters them after the join; a filter commutes with a
changelog (it keeps or drops each update of a row alike), so the join may test its
matched pairs with any conjunct of the WHERE before it emits them, and emit only those
that can pass. Spark's filter still runs after the join, so the early test needs only
be *safe*: it may keep a pair the WHERE drops, never drop one it keeps. That is what
makes a join whose ON also compares with ``>=`` (Nexmark's q5: the windows' counts
against their maximum), or whose WHERE has a range (q4's ``BETWEEN``), emit its result
and not every pair its equalities match.

:func:`residual_comparisons` picks the conjuncts simple enough to be tested without
Spark: a comparison (``=``, ``<>``, ``<``, ``<=``, ``>``, ``>=``, ``BETWEEN`` as its two)
of two columns, or of a column and a plain number or string literal. The runtime decides
by the columns' types which of them it can test exactly
(:mod:`dataflow_operator.runtime.strategies.pair_filter`).

Pure sqlglot: no schema here; columns are located by the caller.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from decimal import Decimal
from typing import Literal

from sqlglot import exp

__all__ = ["Comparison", "ComparisonOp", "Operand", "residual_comparisons"]

ComparisonOp = Literal["=", "<>", "<", "<=", ">", ">="]

_OPERATORS: dict[type[exp.Expr], ComparisonOp] = {
    exp.EQ: "=",
    exp.NEQ: "<>",
    exp.LT: "<",
    exp.LTE: "<=",
    exp.GT: ">",
    exp.GTE: ">=",
}
_INTEGER = re.compile(r"\d+")
_DECIMAL = re.compile(r"\d*\.\d+|\d+\.\d*")
_PLAIN_TEXT = re.compile(r"[^'\"\\]*")
"""A string literal whose text is its value in Spark too (no quote, no escape)."""


@dataclass(frozen=True, slots=True)
class Operand:
    """A column of the join's inputs (``column``: input, column index) or a literal."""

    column: tuple[int, int] | None = None
    literal: int | Decimal | str | None = None


@dataclass(frozen=True, slots=True)
class Comparison:
    """``left op right``: true, false or NULL (an operand NULL) for a joined row."""

    left: Operand
    op: ComparisonOp
    right: Operand


def residual_comparisons(
    where: exp.Expr | None, locate: Callable[[exp.Column], tuple[int, int]]
) -> tuple[Comparison, ...]:
    """The comparisons among the AND-ed conjuncts of ``where`` (``None``: none).

    ``locate`` gives a column's (input, index) or raises (any exception): a conjunct with
    a column it cannot place is left out, as is every conjunct of another form (OR, NOT,
    functions, casts, typed literals such as ``10L``).
    """
    found: list[Comparison] = []
    for conjunct in _conjuncts(where):
        try:
            found += _comparisons(conjunct, locate)
        except _NotSimple:
            continue
    return tuple(found)


class _NotSimple(Exception):
    """A conjunct that is not a comparison of columns and plain literals."""


def _conjuncts(node: exp.Expr | None) -> list[exp.Expr]:
    if node is None:
        return []
    while isinstance(node, exp.Paren):
        node = node.this
    if isinstance(node, exp.And):
        return [*_conjuncts(node.this), *_conjuncts(node.expression)]
    return [node]


def _comparisons(
    node: exp.Expr, locate: Callable[[exp.Column], tuple[int, int]]
) -> list[Comparison]:
    if isinstance(node, exp.Between):
        value = _operand(node.this, locate)
        low = _operand(node.args["low"], locate)
        high = _operand(node.args["high"], locate)
        return [_checked(value, ">=", low), _checked(value, "<=", high)]
    op = _OPERATORS.get(type(node))
    if op is None:
        raise _NotSimple
    return [_checked(_operand(node.this, locate), op, _operand(node.expression, locate))]


def _checked(left: Operand, op: ComparisonOp, right: Operand) -> Comparison:
    if left.column is None and right.column is None:
        raise _NotSimple  # a constant: Spark folds it
    return Comparison(left, op, right)


def _operand(node: exp.Expr, locate: Callable[[exp.Column], tuple[int, int]]) -> Operand:
    while isinstance(node, exp.Paren):
        node = node.this
    if isinstance(node, exp.Column) and not node.is_star:
        try:
            return Operand(column=locate(node))
        except Exception as unplaced:  # the caller's own "unresolved"
            raise _NotSimple from unplaced
    negative = isinstance(node, exp.Neg)
    if negative:
        node = node.this
    if not isinstance(node, exp.Literal):
        raise _NotSimple
    text = str(node.this)
    if node.is_string:
        if negative or not _PLAIN_TEXT.fullmatch(text):
            raise _NotSimple
        return Operand(literal=text)
    if _INTEGER.fullmatch(text):
        return Operand(literal=-int(text) if negative else int(text))
    if _DECIMAL.fullmatch(text):
        return Operand(literal=-Decimal(text) if negative else Decimal(text))
    raise _NotSimple  # an exponent: a DOUBLE in Spark
