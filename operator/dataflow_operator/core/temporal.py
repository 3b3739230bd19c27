"""Temporal filters: ``mz_now()`` in WHERE, turned into validity bounds per row.

A temporal filter such as ``WHERE mz_now() <= event_ts + INTERVAL '30 days'`` makes a
row valid for the logical times ``lower <= mz_now() < upper``. :func:`plan_temporal`
removes the ``mz_now()`` conjuncts from the query and adds each bound expression as an
extra output column (``__mz_bound_0``, …) evaluated in the scope of the WHERE clause.
The engine then turns every update ``(row, t, d)`` into ``(row, max(t, lower), +d)`` and,
when ``upper`` is finite, ``(row, max(t, upper), −d)`` — nothing where ``lower >= upper``.

The supported forms, with ``e`` any expression over the row (on either side of the
comparison; ``e >= mz_now()`` is ``mz_now() <= e``):

========================  ==============================
``mz_now() >= e``         lower bound ``e``
``mz_now() > e``          lower bound ``e`` + 1 ms
``mz_now() < e``          upper bound ``e``
``mz_now() <= e``         upper bound ``e`` + 1 ms
``mz_now() = e``          lower ``e``, upper ``e`` + 1 ms
``mz_now() BETWEEN a AND b``  lower ``a``, upper ``b`` + 1 ms
========================  ==============================

Each must be a top-level AND-ed conjunct of the WHERE clause of the outermost query (or
of each branch of a UNION ALL of plain queries). Everything else with ``mz_now()`` is
rejected with :class:`~dataflow_operator.core.errors.InvalidSql` on ``spec.sql``.

How the engine computes a row's interval from the bound columns: convert each bound
column to epoch milliseconds (``unix_millis`` for TIMESTAMP / TIMESTAMP_NTZ,
``unix_millis(CAST(… AS TIMESTAMP))`` for DATE, a cast to BIGINT for integral numbers,
which are then taken to be epoch ms already), add the bound's ``shift_ms`` (for
timestamps with sub-millisecond digits see :meth:`TemporalBound.millis_from_micros`), and take
``lower = greatest(lower bounds)``, ``upper = least(upper bounds)``. A NULL bound column
means "no bound" (Spark's ``greatest``/``least`` skip NULLs; this is how the bounds of
the other branches of a UNION ALL are filled); no lower bound is −∞, no upper bound +∞.
Drop the bound columns afterwards.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass
from typing import Literal

from sqlglot import exp

from dataflow_operator.core.errors import InvalidSql
from dataflow_operator.core.sql import parse_sql
from dataflow_operator.core.sql_shape import (
    DIFF,
    FILTERED,
    TIME,
    cte_names,
    from_table,
    is_aggregate,
    is_linear,
    is_linear_select,
    is_mz_now,
    is_nondeterministic,
    leaves,
    render,
    set_from_table,
    unwrap,
)

__all__ = [
    "BOUND_PREFIX",
    "TemporalBound",
    "TemporalQuery",
    "check_reserved_names",
    "check_temporal",
    "drop_unordered_order_by",
    "plan_temporal",
    "remove_temporal_filters",
]

BOUND_PREFIX = "__mz_bound_"
"""Prefix of the bound columns the rewritten SQL adds: ``__mz_bound_0``, ``__mz_bound_1``…"""

_FIELD = "spec.sql"

BoundKind = Literal["lower", "upper"]


@dataclass(frozen=True, slots=True)
class TemporalBound:
    """One bound of a row's validity interval, read from an extra output column.

    ``column`` is the output column holding the bound expression's value (a TIMESTAMP,
    DATE or epoch-ms number); the bound in epoch ms is that value converted to epoch ms
    plus ``shift_ms`` (1 for strict lower bounds ``mz_now() > e`` and inclusive upper
    bounds ``mz_now() <= e``, else 0). A row is valid for ``lower <= mz_now() < upper``.
    Two bounds may share a column (``mz_now() = e``).
    """

    column: str
    kind: BoundKind
    shift_ms: int

    def millis_from_micros(self, micros: int) -> int:
        """The bound in epoch ms for a TIMESTAMP value of ``micros`` epoch microseconds.

        Exact also for values between two milliseconds: ``mz_now()`` is a whole number of
        milliseconds, so ``mz_now() >= v`` and ``mz_now() < v`` (shift 0) round ``v`` up,
        while ``mz_now() > v`` and ``mz_now() <= v`` (shift 1) round it down and add 1.
        In Spark, for times after 1970: ``(unix_micros(v) + 999) div 1000`` for shift 0,
        ``unix_micros(v) div 1000 + 1`` for shift 1 (``unix_millis`` rounds down, which is
        exact only for whole milliseconds).
        """
        if self.shift_ms == 0:
            return -(-micros // 1000)
        return micros // 1000 + self.shift_ms


@dataclass(frozen=True, slots=True)
class TemporalQuery:
    """A query split around its temporal filter.

    ``bounds`` is empty when the query has no ``mz_now()``.

    Single stage (``inner_sql is None``): run ``sql`` on each batch of changelog updates.
    If the query is linear (see :mod:`dataflow_operator.core.incremental`) ``sql``
    carries ``__time`` and ``__diff`` through, and its output columns are the query's own,
    then ``__time``, ``__diff``, then the bound columns; apply the bounds and drop the bound
    columns. A query without ``mz_now()`` that is not linear is returned unchanged.

    Two stages (``inner_sql`` and ``outer_sql`` set; only for queries that aggregate,
    deduplicate, use window functions, LIMIT or subqueries, and read one source): the
    inner stage ``inner_sql`` is linear — ``SELECT *, <bounds> FROM source WHERE <the other
    conjuncts>`` — so it carries ``__time``/``__diff`` via ``*``. Apply the bounds to its
    output, drop the bound columns, and expose the result as the changelog relation
    ``__mz_filtered`` (the source's columns, ``__time``, ``__diff``). ``outer_sql`` is the
    rest of the query reading ``__mz_filtered`` (aliased as the source was), to be
    maintained as :mod:`~dataflow_operator.core.incremental` classifies it. ``sql`` is
    then the original query with its ``mz_now()`` conjuncts removed, for display only.
    """

    sql: str
    bounds: tuple[TemporalBound, ...]
    inner_sql: str | None = None
    outer_sql: str | None = None

    @property
    def staged(self) -> bool:
        """Whether the filter runs as an inner stage before the rest of the query."""
        return self.inner_sql is not None


def plan_temporal(sql: str, source_names: Collection[str]) -> TemporalQuery:
    """Find the ``mz_now()`` temporal filters of ``sql`` and rewrite it for the engine.

    Parses with :func:`~dataflow_operator.core.sql.parse_sql` (so unknown relations raise
    :class:`~dataflow_operator.core.errors.UnknownSource`), and raises
    :class:`~dataflow_operator.core.errors.InvalidSql` on ``spec.sql`` for any use of
    ``mz_now()`` that is not a supported temporal filter, and for the reserved names
    ``__time``, ``__diff`` and ``__mz_…`` used in the query.
    """
    found = _analysed(sql, source_names)
    tree, tops, filters = found.tree, found.tops, found.filters
    if not any(filters.values()):
        if found.linear:
            for top in tops:
                _append_time_and_diff(top)
        return TemporalQuery(sql=render(tree), bounds=())

    if found.linear:
        bounds, columns = _number_bounds(tops, filters)
        for top in tops:
            _remove_conjuncts(top, [f.conjunct for f in filters[id(top)]])
            _append_time_and_diff(top)
            top.select(*columns[id(top)], copy=False)
        return TemporalQuery(sql=render(tree), bounds=bounds)
    assert isinstance(tree, exp.Select) and found.table is not None  # see _analysed
    return _staged(tree, found.table, filters[id(tree)])


def check_temporal(sql: str, source_names: Collection[str]) -> None:
    """Raise what :func:`plan_temporal` raises, without rewriting or rendering the query.

    Every error of planning a query comes from this analysis: the operator validates
    thousands of specs with it and never needs their rewritten SQL.
    """
    _analysed(sql, source_names)


@dataclass(frozen=True, slots=True)
class _Analysis:
    """A parsed query's temporal filters, checked; what the rewriting starts from."""

    tree: exp.Query
    tops: list[exp.Select]
    filters: dict[int, list[_Filter]]
    """Each top SELECT's (by id) accepted temporal conjuncts."""
    linear: bool
    table: exp.Table | None
    """The one source a non-linear query with temporal filters reads."""


def _analysed(sql: str, source_names: Collection[str]) -> _Analysis:
    parsed = parse_sql(sql, source_names)
    if not parsed.relations:
        raise InvalidSql(
            "the query reads none of the dataflow's sources: a dataflow's output follows "
            "its inputs, so its SQL reads at least one (a constant query has none to follow)",
            field=_FIELD,
        )
    tree = unwrap(parsed.tree)  # a fresh tree of our own
    check_reserved_names(tree)
    tops = list(leaves(tree))
    filters = {id(top): _temporal_conjuncts(top) for top in tops}
    _check_every_call_is_accepted(tree, tops, filters)
    drop_unordered_order_by(tree)
    ctes = cte_names(tree)
    linear = is_linear(tree, ctes)
    table = None
    if any(filters.values()) and not linear:
        if not isinstance(tree, exp.Select):
            raise InvalidSql(
                "mz_now() in a set operation is supported only in a UNION ALL of plain "
                "SELECT … WHERE queries that read one source each",
                field=_FIELD,
            )
        table = from_table(tree, ctes)
        if table is None:
            raise InvalidSql(
                "mz_now() is supported only in a query that reads one source directly "
                "(no join, derived table, lateral view or CTE in FROM); filter the source "
                "in a dataflow of its own and read that dataflow instead",
                field=_FIELD,
            )
    return _Analysis(tree, tops, filters, linear, table)


# --- recognising temporal conjuncts -------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Filter:
    """One accepted ``mz_now()`` conjunct: the bounds it sets, on which expressions."""

    conjunct: exp.Expr
    call: exp.Expr
    parts: tuple[tuple[exp.Expr, BoundKind, int], ...]


_LOWER_OR_UPPER: dict[type[exp.Expr], tuple[BoundKind, int]] = {
    exp.GTE: ("lower", 0),
    exp.GT: ("lower", 1),
    exp.LT: ("upper", 0),
    exp.LTE: ("upper", 1),
}
_FLIPPED: dict[type[exp.Expr], type[exp.Expr]] = {
    exp.GTE: exp.LTE,
    exp.GT: exp.LT,
    exp.LT: exp.GT,
    exp.LTE: exp.GTE,
    exp.EQ: exp.EQ,
}


def _unparen(node: exp.Expr) -> exp.Expr:
    while isinstance(node, exp.Paren):
        node = node.this
    return node


def _split_and(condition: exp.Expr) -> list[exp.Expr]:
    node = _unparen(condition)
    if isinstance(node, exp.And):
        return [*_split_and(node.this), *_split_and(node.expression)]
    return [condition]


def _where_conjuncts(select: exp.Select) -> list[exp.Expr]:
    where = select.args.get("where")
    return _split_and(where.this) if isinstance(where, exp.Where) else []


def _temporal_conjuncts(select: exp.Select) -> list[_Filter]:
    """The conjuncts of ``select``'s WHERE that are supported ``mz_now()`` comparisons."""
    found = []
    for conjunct in _where_conjuncts(select):
        accepted = _as_filter(conjunct)
        if accepted is not None:
            found.append(accepted)
    return found


def _as_filter(conjunct: exp.Expr) -> _Filter | None:
    node = _unparen(conjunct)
    if isinstance(node, exp.Between):
        call = _unparen(node.this)
        if not _is_bare_call(call):
            return None
        low, high = _unparen(node.args["low"]), _unparen(node.args["high"])
        if _has_mz_now(low) or _has_mz_now(high):
            return None
        if (_row_expression_problem(low) or _row_expression_problem(high)) is not None:
            return None
        return _Filter(conjunct, call, ((low, "lower", 0), (high, "upper", 1)))
    if type(node) not in _FLIPPED:
        return None
    left, right = _unparen(node.this), _unparen(node.expression)
    if _is_bare_call(left) and not _has_mz_now(right):
        operator, call, other = type(node), left, node.expression
    elif _is_bare_call(right) and not _has_mz_now(left):
        operator, call, other = _FLIPPED[type(node)], right, node.this
    else:
        return None
    other = _unparen(other)
    if _row_expression_problem(other) is not None:
        return None
    if operator is exp.EQ:
        return _Filter(conjunct, call, ((other, "lower", 0), (other, "upper", 1)))
    kind, shift = _LOWER_OR_UPPER[operator]
    return _Filter(conjunct, call, ((other, kind, shift),))


def _is_bare_call(node: exp.Expr) -> bool:
    return is_mz_now(node) and not node.expressions


def _has_mz_now(node: exp.Expr) -> bool:
    return any(is_mz_now(n) for n in node.walk())


def _row_expression_problem(node: exp.Expr) -> str | None:
    """Why ``mz_now()`` cannot be compared with ``node``, or ``None`` when it can."""
    if (isinstance(node, exp.Literal) and node.is_string) or isinstance(node, exp.Interval):
        return (
            f"mz_now() must be compared with a timestamp, a date or a number of epoch "
            f"milliseconds, not {render(node)} (write TIMESTAMP '…' for a point in time)"
        )
    for sub in node.walk():
        if isinstance(sub, exp.Window):
            problem = "a window function"
        elif is_aggregate(sub):
            problem = f"the aggregate {render(sub)}"
        elif isinstance(sub, exp.Query | exp.Exists):
            problem = "a subquery"
        elif is_nondeterministic(sub):
            problem = f"the non-deterministic {render(sub)}"
        else:
            continue
        return (
            f"mz_now() must be compared with an expression over the row's columns, not one "
            f"containing {problem}"
        )
    return None


# --- rejecting everything else --------------------------------------------------------

_CLAUSES = {
    "expressions": "the SELECT list",
    "group": "GROUP BY",
    "having": "HAVING",
    "order": "ORDER BY",
    "sort": "SORT BY",
    "distribute": "DISTRIBUTE BY",
    "cluster": "CLUSTER BY",
    "joins": "a JOIN",
    "qualify": "QUALIFY",
    "windows": "a WINDOW definition",
    "from_": "FROM",
    "from": "FROM",
    "laterals": "a LATERAL VIEW",
    "limit": "LIMIT",
    "offset": "OFFSET",
    "distinct": "DISTINCT ON",
    "pivots": "PIVOT",
}


def _fail(message: str) -> InvalidSql:
    return InvalidSql(message, field=_FIELD)


def _check_every_call_is_accepted(
    tree: exp.Expr, tops: list[exp.Select], filters: dict[int, list[_Filter]]
) -> None:
    accepted = {id(f.call) for found in filters.values() for f in found}
    for call in [n for n in tree.walk() if is_mz_now(n)]:
        if id(call) not in accepted:
            raise _diagnose(call, tops)


def _diagnose(call: exp.Expr, tops: list[exp.Select]) -> InvalidSql:
    """The error for a ``mz_now()`` call that is not part of a supported conjunct."""
    if call.expressions:
        return _fail(f"mz_now() takes no arguments, found {render(call)}")
    if call.find_ancestor(exp.CTE) is not None:
        return _fail(
            "mz_now() is not supported inside a CTE (WITH); use it in the WHERE clause "
            "of the outermost query"
        )
    # Find the query block the call belongs to, and the clause of that block.
    child: exp.Expr = call
    scope = call.parent
    while scope is not None and not isinstance(scope, exp.Select | exp.SetOperation):
        child, scope = scope, scope.parent
    if scope is None:  # pragma: no cover - parse_sql only returns queries
        return _fail("mz_now() may appear only in WHERE conjuncts")
    key = child.arg_key or ""
    if not any(scope is top for top in tops) and not (
        isinstance(scope, exp.SetOperation) and key in _CLAUSES
    ):
        return _fail(
            "mz_now() is not supported inside a subquery; use it in the WHERE clause of "
            "the outermost query"
        )
    if key != "where":
        return _fail(
            f"mz_now() may appear only in WHERE conjuncts, not in {_CLAUSES.get(key, key)}"
        )
    return _diagnose_in_where(call, child)


def _diagnose_in_where(call: exp.Expr, where: exp.Expr) -> InvalidSql:
    path: list[exp.Expr] = []
    node = call.parent
    while node is not None and node is not where:
        path.append(node)
        node = node.parent
    if any(isinstance(n, exp.Or) for n in path):
        return _fail(
            "mz_now() may not appear under OR; a temporal filter must be an AND-ed "
            "conjunct of WHERE"
        )
    if any(isinstance(n, exp.Not) for n in path):
        return _fail(
            "mz_now() may not appear under NOT; write the comparison the other way round "
            "instead (NOT mz_now() > e is mz_now() <= e)"
        )
    parent = call.parent
    while isinstance(parent, exp.Paren):
        parent = parent.parent
    if isinstance(parent, exp.Between):
        if _unparen(parent.this) is call:
            low, high = parent.args["low"], parent.args["high"]
            if _has_mz_now(low) or _has_mz_now(high):
                return _fail("mz_now() cannot be compared with another mz_now()")
            problem = _row_expression_problem(low) or _row_expression_problem(high)
            if problem is not None:
                return _fail(problem)
        else:
            return _fail(
                "mz_now() may be the tested value of BETWEEN (mz_now() BETWEEN a AND b), "
                "not one of its bounds; write the comparison with <= or >= instead"
            )
    elif isinstance(parent, exp.GTE | exp.GT | exp.LT | exp.LTE | exp.EQ):
        other = parent.expression if _unparen(parent.this) is call else parent.this
        if _has_mz_now(other):
            return _fail("mz_now() cannot be compared with another mz_now()")
        problem = _row_expression_problem(other)
        if problem is not None:
            return _fail(problem)
    elif isinstance(parent, exp.NEQ):
        return _fail("mz_now() cannot be compared with <> or !=; use <, <=, >, >=, = or BETWEEN")
    elif isinstance(parent, exp.In):
        return _fail("mz_now() cannot be used with IN; use <, <=, >, >=, = or BETWEEN")
    else:
        return _fail(
            "mz_now() must be compared directly with an expression using <, <=, >, >=, = "
            "or BETWEEN (move any arithmetic to the other side)"
        )
    return _fail(
        "a comparison with mz_now() must be a top-level AND-ed conjunct of WHERE, not "
        "nested inside another expression"
    )


_RESERVED_EXACT = frozenset({TIME, DIFF})


def check_reserved_names(tree: exp.Expr) -> None:
    """Reject columns, aliases and relations named ``__time``, ``__diff`` or ``__mz_…``.

    Those names belong to the changelog columns and to the planner's own columns.
    """
    for node in tree.walk():
        if isinstance(node, exp.Identifier):
            name = str(node.this).lower()
            if name in _RESERVED_EXACT or name.startswith("__mz_"):
                raise _fail(
                    f"{node.this} is a reserved name (__time, __diff and __mz_… belong "
                    f"to the changelog); rename it"
                )


def remove_temporal_filters(tree: exp.Expr) -> None:
    """Remove the supported ``mz_now()`` conjuncts from the outermost WHERE clauses, in place.

    For a query :func:`plan_temporal` accepted: what remains has no ``mz_now()``.
    """
    for top in leaves(tree):
        _remove_conjuncts(top, [f.conjunct for f in _temporal_conjuncts(top)])


def drop_unordered_order_by(tree: exp.Expr) -> None:
    """Remove the outermost ORDER BY when there is no LIMIT/OFFSET: a changelog has no order."""
    if tree.args.get("order") and not (tree.args.get("limit") or tree.args.get("offset")):
        tree.set("order", None)


# --- rewriting ------------------------------------------------------------------------


def _column(name: str) -> exp.Column:
    return exp.Column(this=exp.to_identifier(name))


def _append_time_and_diff(select: exp.Select) -> None:
    """Make ``select`` pass ``__time`` and ``__diff`` through (a star already does)."""
    if not select.is_star:
        select.select(_column(TIME), _column(DIFF), copy=False)


def _number_bounds(
    tops: list[exp.Select], filters: dict[int, list[_Filter]]
) -> tuple[tuple[TemporalBound, ...], dict[int, list[exp.Expr]]]:
    """Give every bound expression a column; fill other branches' columns with NULL."""
    bounds: list[TemporalBound] = []
    expressions: list[tuple[int, exp.Expr]] = []
    for top in tops:
        for found in filters[id(top)]:
            seen: dict[int, str] = {}
            for expression, kind, shift in found.parts:
                column = seen.get(id(expression))
                if column is None:
                    column = f"{BOUND_PREFIX}{len(expressions)}"
                    seen[id(expression)] = column
                    expressions.append((id(top), expression))
                bounds.append(TemporalBound(column=column, kind=kind, shift_ms=shift))
    columns: dict[int, list[exp.Expr]] = {}
    for top in tops:
        columns[id(top)] = [
            exp.alias_(expression.copy() if owner == id(top) else exp.Null(), f"{BOUND_PREFIX}{i}")
            for i, (owner, expression) in enumerate(expressions)
        ]
    return tuple(bounds), columns


def _remove_conjuncts(select: exp.Select, remove: list[exp.Expr]) -> list[exp.Expr]:
    """Drop ``remove`` from ``select``'s WHERE; return the conjuncts that remain."""
    keep = [c for c in _where_conjuncts(select) if not any(c is r for r in remove)]
    _set_where(select, keep)
    return keep


def _set_where(select: exp.Select, conjuncts: list[exp.Expr]) -> None:
    if conjuncts:
        select.set("where", exp.Where(this=exp.and_(*(c.copy() for c in conjuncts))))
    else:
        select.set("where", None)


def _staged(select: exp.Select, table: exp.Table, found: list[_Filter]) -> TemporalQuery:
    """Split a non-linear single-source query into a linear filter stage and the rest."""
    remaining = _remove_conjuncts(select, [f.conjunct for f in found])
    display = render(select)
    bounds, columns = _number_bounds([select], {id(select): found})

    inner = exp.select(exp.Star(), *columns[id(select)], copy=False)
    set_from_table(inner, table.copy())
    with_subquery = [c for c in remaining if any(isinstance(n, exp.Query) for n in c.walk())]
    _set_where(inner, [c for c in remaining if not any(c is s for s in with_subquery)])
    assert is_linear_select(inner)

    outer = select.copy()
    alias = table.alias_or_name
    set_from_table(
        outer,
        exp.Table(
            this=exp.to_identifier(FILTERED), alias=exp.TableAlias(this=exp.to_identifier(alias))
        ),
    )
    _set_where(outer, with_subquery)
    return TemporalQuery(
        sql=display, bounds=bounds, inner_sql=render(inner), outer_sql=render(outer)
    )
