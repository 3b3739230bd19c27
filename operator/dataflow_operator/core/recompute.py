"""Why a query is maintained by recompute, said in a user's words.

A query that no incremental strategy covers (see :mod:`dataflow_operator.core.incremental`)
is recomputed over its whole consolidated input at every changed time. Users see that
in the Dataflow's status (``strategy: Recompute``) and in an Event: :func:`recompute_reason`
names the first construct of the query that put it there, so they know what to change.
"""

from __future__ import annotations

from sqlglot import exp

from dataflow_operator.core.join import is_equi_condition
from dataflow_operator.core.session import unkept_window
from dataflow_operator.core.sql import DIALECT
from dataflow_operator.core.sql_shape import (
    from_table,
    is_aggregate,
    is_linear_select,
    is_session_window,
)
from dataflow_operator.core.top_n import MAX_RANK

__all__ = ["INCREMENTAL_AGGREGATES", "recompute_reason"]

INCREMENTAL_AGGREGATES = (exp.Count, exp.Sum, exp.Avg, exp.Min, exp.Max)
"""The aggregate functions kept in state (``count(DISTINCT …)`` included)."""


def recompute_reason(query: exp.Query) -> str:
    """The construct of ``query`` that no incremental strategy maintains.

    Checked from the most specific to the most general, so the reason names what a user
    would change first; a query none of them explains gets a general sentence.
    """
    for check in (
        _recursion,
        _window,
        _limit,
        _subquery,
        _joins,
        _query_of_query,
        _time_windows,
        _aggregates,
        _ctes,
        _set_operation,
    ):
        reason = check(query)
        if reason is not None:
            return reason
    return "its shape has no incremental strategy (see docs/incremental.md)"


def _recursion(query: exp.Query) -> str | None:
    with_ = query.args.get("with_") or query.args.get("with")
    if isinstance(with_, exp.With) and with_.args.get("recursive"):
        return "WITH RECURSIVE is recomputed to its fixed point"
    return None


def _window(query: exp.Query) -> str | None:
    window = query.find(exp.Window)
    return None if window is None else f"a window function ({_shown(window)})"


def _limit(query: exp.Query) -> str | None:
    for select in query.find_all(exp.Select, exp.Union, exp.Except, exp.Intersect):
        if select.args.get("limit") or select.args.get("offset"):
            if not select.args.get("order"):
                return "LIMIT/OFFSET without ORDER BY (which rows it keeps is not defined)"
            return (
                f"ORDER BY … LIMIT/OFFSET (a top-k of constants, of up to {MAX_RANK:,} rows, over "
                "a maintained query is incremental)"
            )
    return None


def _subquery(query: exp.Query) -> str | None:
    for node in query.walk():
        if isinstance(node, exp.Exists):
            return "an EXISTS subquery"
        if isinstance(node, exp.In) and node.args.get("query") is not None:
            return "an IN (subquery) predicate"
        if isinstance(node, exp.Subquery) and not isinstance(node.parent, exp.From | exp.Join):
            return "a scalar subquery"
    return None


def _joins(query: exp.Query) -> str | None:
    joins = list(query.find_all(exp.Join))
    if not joins:
        return None
    for join in joins:
        kind = str(join.args.get("kind") or "").upper()
        if kind == "CROSS" or (join.args.get("on") is None and not join.args.get("using")):
            return "a cross join (no equality between the inputs)"
        if kind in ("SEMI", "ANTI"):
            return f"a {kind} join"
        if join.args.get("using"):
            return "a join with USING (write it as ON a.x = b.x)"
    for select in query.find_all(exp.Select):
        if not select.args.get("joins"):
            continue
        from_clause = select.args.get("from_") or select.args.get("from")
        for relation in [from_clause, *select.args["joins"]]:
            inner = getattr(relation, "this", None)
            if isinstance(inner, exp.Subquery) and not is_linear_select(inner.this):
                return (
                    f"a join of {inner.alias or 'a subquery'}, which is {_shape_of(inner.this)} "
                    "(maintain that as a dataflow of its own, and join the dataflow)"
                )
    if all(is_equi_condition(join.args.get("on")) for join in joins):
        return None  # equi-joins: what makes the query recomputed is elsewhere
    if len(joins) == 1:
        return "a join condition that is not a conjunction of equalities between the two inputs"
    return (
        "a join condition that is not a conjunction of equalities between the inputs "
        "joined so far and the next"
    )


def _query_of_query(query: exp.Query) -> str | None:
    for select in query.find_all(exp.Select):
        from_clause = select.args.get("from_") or select.args.get("from")
        inner = getattr(from_clause, "this", None)
        if select.args.get("joins") or not isinstance(inner, exp.Subquery):
            continue
        if is_linear_select(inner.this):
            continue
        what = "an aggregate" if _aggregates_itself(select) else "a filter or projection"
        return (
            f"{what} of {inner.alias or 'a subquery'}, which is {_shape_of(inner.this)} "
            "(maintain that as a dataflow of its own, and read the dataflow)"
        )
    return None


def _time_windows(query: exp.Query) -> str | None:
    for select in query.find_all(exp.Select):
        group = select.args.get("group")
        keys = group.expressions if group is not None else []
        sessions = [key for key in keys if is_session_window(key)]
        if len(sessions) > 1:
            return "GROUP BY two session_window(…) keys"
        for key in sessions:
            unkept = unkept_window(key)
            if unkept is not None:
                return f"GROUP BY {unkept}"
        if sessions and (select.args.get("joins") or from_table(select) is None):
            return "GROUP BY session_window(…) of a join or a subquery"
    return None


def _aggregates_itself(select: exp.Select) -> bool:
    """Whether ``select`` groups or aggregates (not only a subquery in its FROM)."""
    items = [*select.expressions, select.args.get("having")]
    return bool(select.args.get("group")) or any(
        is_aggregate(node) for item in items if item is not None for node in item.walk()
    )


def _shape_of(query: exp.Expr) -> str:
    if isinstance(query, exp.Select):
        if _aggregates_itself(query):
            return "an aggregate"
        if query.args.get("joins"):
            return "a join"
    return "a query of another shape"


def _aggregates(query: exp.Query) -> str | None:
    for node in query.walk():
        if isinstance(node, exp.GroupingSets | exp.Cube | exp.Rollup):
            return "GROUPING SETS, CUBE or ROLLUP"
        if not is_aggregate(node):
            continue
        if not isinstance(node, INCREMENTAL_AGGREGATES):
            return f"the aggregate {_shown(node)} (count, sum, avg, min and max are incremental)"
        if not isinstance(node, exp.Count) and isinstance(node.this, exp.Distinct):
            return f"{_shown(node)} (of the DISTINCT aggregates, count is incremental)"
    return None


def _shown(node: exp.Expr) -> str:
    return node.sql(dialect=DIALECT)


def _ctes(query: exp.Query) -> str | None:
    with_ = query.args.get("with_") or query.args.get("with")
    return "a WITH clause (inline it as a subquery)" if isinstance(with_, exp.With) else None


def _set_operation(query: exp.Query) -> str | None:
    if isinstance(query, exp.Union | exp.Except | exp.Intersect):
        return f"{query.key.upper()} over inputs that are not plain filters and projections"
    return None
