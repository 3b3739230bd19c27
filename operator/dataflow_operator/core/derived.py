"""Subqueries maintained by a strategy of their own and read by the query around them.

A query none of the strategies covers as written may still be made of queries they do
cover: an aggregate of an aggregate (Nexmark's q4: the average of each auction's highest
bid), a join with an aggregate (q7: the bids that are their window's highest), a join of
two aggregates (q5, q8). :func:`derived_inputs` finds the subqueries of a ``SELECT``'s
``FROM`` and ``JOIN`` clauses, has each classified on its own (by the ``classify``
callback, recursively: a subquery may have subqueries of its own), and, when each is
maintained incrementally, replaces it by a relation named :data:`DERIVED_PREFIX` + a
number, under the subquery's alias. The query around them is then classified over its
sources and those relations, as if they were sources: the engine runs each subquery's
strategy, registers its output changelog under that name, and runs the outer strategy
over it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

from sqlglot import exp

from dataflow_operator.core.sql_shape import unwrap

__all__ = ["DERIVED_PREFIX", "derived_inputs", "relation_name"]

DERIVED_PREFIX = "__mz_derived_"
"""The relations that stand for maintained subqueries (numbered within a query)."""

Plan = TypeVar("Plan")
"""What ``classify`` makes of a subquery (the core's maintenance plan)."""


def relation_name(numbers: list[int]) -> str:
    """The next derived relation's name (``numbers`` holds its number; it moves on)."""
    name = f"{DERIVED_PREFIX}{numbers[0]}"
    numbers[0] += 1
    return name


def derived_inputs(
    select: exp.Query,
    classify: Callable[[exp.Query], Plan | None],
    numbers: list[int],
) -> tuple[exp.Select, tuple[tuple[str, Plan], ...]] | None:
    """``select`` with each subquery of its ``FROM`` and ``JOIN`` clauses replaced by a
    derived relation, and each relation's name and plan; ``None`` when it has no such
    subquery or one of them is not maintained incrementally (``classify`` gives
    ``None``). ``numbers`` holds the next relation's number (shared by a query's
    subqueries)."""
    if not isinstance(select, exp.Select):
        return None
    rewritten = select.copy()
    from_clause = rewritten.args.get("from_") or rewritten.args.get("from")
    places = [from_clause, *(rewritten.args.get("joins") or [])]
    found: list[tuple[str, Plan]] = []
    for place in places:
        subquery = getattr(place, "this", None)
        if not isinstance(subquery, exp.Subquery) or not isinstance(subquery.this, exp.Query):
            continue
        if not subquery.alias:
            return None  # its columns could not be named from outside
        plan = classify(unwrap(subquery.this.copy()))
        if plan is None:
            return None
        name = relation_name(numbers)
        table = exp.to_table(name)
        table.set("alias", exp.TableAlias(this=exp.to_identifier(subquery.alias)))
        subquery.replace(table)
        found.append((name, plan))
    if not found:
        return None
    return rewritten, tuple(found)
