"""DISTINCT and set operations, maintained by per-row multiplicity: the planning half.

:func:`multiset_shape` recognises

- ``SELECT DISTINCT <row-wise expressions> FROM source [WHERE …]`` (one input), and
- ``A UNION B``, ``A EXCEPT [ALL] B``, ``A INTERSECT [ALL] B`` (``MINUS`` is ``EXCEPT``)
  where ``A`` and ``B`` are linear queries of one source each (two inputs).

Each input is a linear changelog (:attr:`MultisetPlan.inputs`: its columns, then
``__time`` and ``__diff``); the inputs are matched by position, as SQL does. The engine
keeps, per distinct row, its multiplicity in each input (``a``, and ``b`` for the second),
and whenever they change emits the change of :func:`output_multiplicity` for that row.
"""

from __future__ import annotations

from dataclasses import dataclass

from sqlglot import exp

from dataflow_operator.core.multiplicity import SetOperation, output_multiplicity
from dataflow_operator.core.sql_shape import DIFF, TIME, is_linear_select, render

__all__ = ["MultisetPlan", "SetOperation", "multiset_shape", "output_multiplicity"]


@dataclass(frozen=True, slots=True)
class MultisetPlan:
    """A query whose output is a function of each row's multiplicity in its inputs."""

    operation: SetOperation
    inputs: tuple[str, ...]
    """Linear SQL per input (one for DISTINCT, two for a set operation)."""


def _changelog(select: exp.Expr) -> str | None:
    """A linear SELECT as a changelog query (``__time``, ``__diff`` last), or ``None``."""
    while isinstance(select, exp.Subquery) and not select.alias:
        select = select.this
    if not isinstance(select, exp.Select) or not is_linear_select(select):
        return None
    items = select.expressions
    stars = [
        i for i in items if isinstance(i, exp.Star) or (isinstance(i, exp.Column) and i.is_star)
    ]
    if stars and len(items) != 1:
        return None  # a star and more: __time and __diff would not come last
    changelog = select.copy()
    if not stars:
        changelog.select(exp.column(TIME), exp.column(DIFF), copy=False)
    return render(changelog)


def multiset_shape(query: exp.Query) -> MultisetPlan | None:
    """``query`` as DISTINCT or a set operation over linear inputs, or ``None``."""
    if isinstance(query, exp.Select):
        distinct = query.args.get("distinct")
        if not isinstance(distinct, exp.Distinct) or distinct.args.get("on"):
            return None
        plain = query.copy()
        plain.set("distinct", None)
        sql = _changelog(plain)
        return None if sql is None else MultisetPlan("distinct", (sql,))
    if not isinstance(query, exp.Union | exp.Except | exp.Intersect):
        return None
    if any(query.args.get(k) for k in ("with_", "with", "order", "limit", "offset")):
        return None
    distinct = bool(query.args.get("distinct"))
    if isinstance(query, exp.Union):
        if not distinct:
            return None  # UNION ALL of linear queries is linear
        operation: SetOperation = "union"
    elif isinstance(query, exp.Except):
        operation = "except" if distinct else "except_all"
    else:
        operation = "intersect" if distinct else "intersect_all"
    left, right = _changelog(query.this), _changelog(query.expression)
    if left is None or right is None:
        return None
    return MultisetPlan(operation, (left, right))
