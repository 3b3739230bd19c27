"""Queries rewritten into the equivalent shape the incremental strategies recognise.

Spark SQL says some things two ways, and users (and suites such as Nexmark) write the
one the strategies do not match. Each rewrite here gives the same result on every input,
so the maintenance strategy is chosen on the rewritten query and runs it:

- :func:`inner_join_conditions`: ``FROM a, b WHERE a.k = b.k AND …`` (or ``CROSS JOIN``)
  is the inner join ``FROM a JOIN b ON a.k = b.k WHERE …``: each equality between the
  inputs joined so far and the next one moves from WHERE into that join's ON; and
  ``a JOIN b ON a.k = b.k AND a.t < b.t`` is ``a JOIN b ON a.k = b.k WHERE a.t < b.t``
  (an inner join's residual condition filters its matched pairs);
- :func:`filters_as_case`: ``agg(x) FILTER (WHERE c)`` is ``agg(CASE WHEN c THEN x END)``
  for ``count``, ``sum``, ``avg``, ``min`` and ``max`` (an aggregate skips NULLs, so the
  rows ``c`` does not keep are the rows it skips; ``count(*)`` counts ``CASE WHEN c THEN 1
  END``);
- :func:`time_window_keys`: ``SELECT window.start, … GROUP BY window(ts, '1 hour')`` names
  the grouping key by the column Spark gives it (``window``); written ``SELECT window(ts,
  '1 hour').start AS start, …`` the outputs are expressions of the key itself, the shape
  of any other grouping expression (Spark computes the same window for both).

Pure sqlglot: the rewrites take a tree and return a rewritten copy.
"""

from __future__ import annotations

from collections.abc import Sequence

from sqlglot import exp

from dataflow_operator.core.sql_shape import is_aggregate, is_nondeterministic, render

__all__ = ["equivalent_shape", "filters_as_case", "inner_join_conditions", "time_window_keys"]

_CASE_AGGREGATES = (exp.Count, exp.Sum, exp.Avg, exp.Min, exp.Max)
"""Aggregates whose FILTER is a CASE inside them: they skip the NULLs CASE gives."""
WINDOW = "window"
"""Spark's tumbling and sliding window function, and the name of the column it gives a
grouping key made with it."""


def equivalent_shape(query: exp.Query) -> exp.Query:
    """``query`` with every rewrite of this module applied (a copy)."""
    return time_window_keys(filters_as_case(inner_join_conditions(query)))


def inner_join_conditions(query: exp.Query) -> exp.Query:
    """A copy of ``query`` whose selects of inner and cross joins only (where ON and WHERE
    mean the same) have each WHERE equality between two of their inputs in the ON of the
    join that brings in the later input (qualified columns only: an unqualified one could
    belong to either input), and each other condition of an ON that has an equality in
    WHERE (a residual condition is a filter of the joined rows)."""
    query = query.copy()
    for select in list(query.find_all(exp.Select)):
        _place_conditions(select)
    return query


def _place_conditions(select: exp.Select) -> None:
    joins: list[exp.Join] = select.args.get("joins") or []
    from_clause = select.args.get("from_") or select.args.get("from")
    if not joins or not isinstance(from_clause, exp.From):
        return
    if not all(_inner(join) for join in joins):
        return
    found = [_input_name(from_clause.this), *(_input_name(join.this) for join in joins)]
    names = [name for name in found if name is not None]
    if len(names) != len(found) or len(set(names)) != len(names):
        return
    where = select.args.get("where")
    pool = _conjuncts(where.this) if where is not None else []
    for join in joins:
        on = join.args.get("on")
        conjuncts = _conjuncts(on) if on is not None else []
        equalities = [c for c in conjuncts if isinstance(c, exp.EQ)]
        if equalities and len(equalities) < len(conjuncts):
            pool += [c for c in conjuncts if not isinstance(c, exp.EQ)]
            join.set("on", _all_of(equalities))
    for index, join in enumerate(joins, start=1):
        earlier, later = set(names[:index]), names[index]
        moved = [c for c in pool if _joins_inputs(c, earlier, later)]
        if not moved:
            continue
        pool = [c for c in pool if not any(c is m for m in moved)]
        on = join.args.get("on")
        join.set("on", _all_of(_conjuncts(on) + moved if on is not None else moved))
        join.set("kind", None)  # a cross join with an equality is an inner join
    select.set("where", exp.Where(this=_all_of(pool)) if pool else None)


def _all_of(conditions: Sequence[exp.Expr]) -> exp.Expr:
    condition = conditions[0].copy()
    for conjunct in conditions[1:]:
        condition = exp.and_(condition, conjunct.copy(), copy=False)
    return condition


def _inner(join: exp.Join) -> bool:
    kind = str(join.args.get("kind") or "").upper()
    plain = not (join.args.get("side") or join.args.get("using") or join.args.get("method"))
    return plain and kind in ("", "INNER", "CROSS")


def _input_name(relation: exp.Expr) -> str | None:
    if isinstance(relation, exp.Table | exp.Subquery) and relation.alias_or_name:
        return relation.alias_or_name.lower()
    return None


def _conjuncts(condition: exp.Expr) -> list[exp.Expr]:
    while isinstance(condition, exp.Paren):
        condition = condition.this
    if isinstance(condition, exp.And):
        return [*_conjuncts(condition.this), *_conjuncts(condition.expression)]
    return [condition]


def _joins_inputs(condition: exp.Expr, earlier: set[str], later: str) -> bool:
    """True when ``condition`` is ``x = y`` with ``x`` over ``earlier`` inputs and ``y``
    over ``later`` (or the other way round), every column qualified, nothing else."""
    if not isinstance(condition, exp.EQ):
        return False
    sides = [_inputs_of(condition.this), _inputs_of(condition.expression)]
    if any(side is None or not side for side in sides):
        return False
    left, right = sides
    assert left is not None and right is not None
    return (left <= earlier and right == {later}) or (right <= earlier and left == {later})


def _inputs_of(side: exp.Expr) -> set[str] | None:
    """The inputs ``side``'s columns name, or ``None`` when it is not a plain row-wise
    expression of qualified columns."""
    inputs: set[str] = set()
    for node in side.walk():
        if isinstance(node, exp.Query | exp.Window) or is_aggregate(node):
            return None
        if is_nondeterministic(node):
            return None
        if isinstance(node, exp.Column):
            if not node.table:
                return None
            inputs.add(node.table.lower())
    return inputs


def filters_as_case(query: exp.Query) -> exp.Query:
    """A copy of ``query`` with each ``count``/``sum``/``avg``/``min``/``max`` ``FILTER
    (WHERE c)`` written as the same aggregate of ``CASE WHEN c THEN … END``."""
    query = query.copy()
    for node in list(query.find_all(exp.Filter)):
        aggregate, where = node.this, node.expression
        if not isinstance(aggregate, _CASE_AGGREGATES) or not isinstance(where, exp.Where):
            continue
        argument = aggregate.this
        distinct = isinstance(argument, exp.Distinct)
        values = argument.expressions if distinct else [argument]
        if not values or any(value is None for value in values):
            continue
        # count(DISTINCT a, b) FILTER (WHERE c) counts the pairs of CASE WHEN c THEN a END
        # and CASE WHEN c THEN b END: a row c rejects has NULLs, which it does not count.
        cases = [
            exp.Case(
                ifs=[
                    exp.If(
                        this=where.this.copy(),
                        true=exp.Literal.number(1) if isinstance(v, exp.Star) else v.copy(),
                    )
                ]
            )
            for v in values
        ]
        rewritten = aggregate.copy()
        if distinct:
            rewritten.this.set("expressions", cases)
        else:
            rewritten.set("this", cases[0])
        node.replace(rewritten)
    return query


def time_window_keys(query: exp.Query) -> exp.Query:
    """A copy of ``query`` in which each select grouped by one ``window(…)`` call reads
    the window through that call instead of through the ``window`` column: ``window`` is
    the call, ``window.start`` is ``window(…).start``; an output so rewritten keeps its
    name. A select that reads from a relation named ``window`` is left as it is."""
    query = query.copy()
    for select in list(query.find_all(exp.Select)):
        _read_window_through_key(select)
    return query


def _read_window_through_key(select: exp.Select) -> None:
    group = select.args.get("group")
    keys = group.expressions if isinstance(group, exp.Group) else []
    calls = [key for key in keys if isinstance(key, exp.Anonymous) and key.name.lower() == WINDOW]
    if len({render(call) for call in calls}) != 1:
        return
    relations = [select.args.get("from_") or select.args.get("from"), *select.args.get("joins", [])]
    if any(
        isinstance(r, exp.From | exp.Join) and r.this.alias_or_name.lower() == WINDOW
        for r in relations
    ):
        return  # window.start may name that relation's column
    call = calls[0]

    def through_key(node: exp.Expr) -> exp.Expr:
        if not isinstance(node, exp.Column) or len(node.parts) > 2:
            return node
        if not node.table and node.name.lower() == WINDOW:
            return call.copy()
        if node.table.lower() == WINDOW:
            return exp.Dot(this=call.copy(), expression=node.this.copy())
        return node

    outputs = []
    for item in select.expressions:
        rewritten = item.transform(through_key)
        if rewritten != item and not isinstance(item, exp.Alias):
            name = item.name if isinstance(item, exp.Column) else render(item)
            rewritten = exp.alias_(rewritten, name, quoted=True)
        outputs.append(rewritten)
    select.set("expressions", outputs)
    for clause in ("having", "order"):
        part = select.args.get(clause)
        if part is not None:
            select.set(clause, part.transform(through_key))
