"""Top-N per group, maintained as ranked rows in state: the planning half.

:func:`top_n_shape` recognises the way SQL writes a top-N::

    SELECT <row-wise items> FROM (
        SELECT <row-wise items>, ROW_NUMBER() OVER ([PARTITION BY p, …] ORDER BY o, …) AS rn
        FROM relation [WHERE …]
    ) [AS t]
    WHERE rn <= N [AND <row-wise conditions>]

The rank condition may be ``rn <= N``, ``rn < N``, ``rn = K``, ``rn BETWEEN A AND B``,
or several of those (``rn > 1 AND rn <= 3``): the ranks kept are one range,
:attr:`TopNPlan.first` to :attr:`TopNPlan.last`. The engine keeps, per partition (the
``PARTITION BY`` values), the multiset of its rows with their ordering values, and
whenever a partition changes emits the change of its ranked rows in that range.

``ROW_NUMBER`` numbers rows that tie in the ``ORDER BY`` in an order Spark does not
define; the engine breaks such ties by the whole row (its JSON text), so its answer is
always one of the answers Spark could give, and the same one on every replica and after
every restart.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from sqlglot import exp

from dataflow_operator.core.sql_shape import (
    DIFF,
    TIME,
    is_linear_select,
    is_row_wise,
    render,
)

__all__ = [
    "MAX_RANK",
    "ORDER_PREFIX",
    "PARTITION_PREFIX",
    "RANKED",
    "TopNPlan",
    "limit_shape",
    "top_n_shape",
]

RANKED = "__mz_ranked"
"""The relation :attr:`TopNPlan.output_sql` reads: the ranked rows kept, as a changelog."""

PARTITION_PREFIX = "__topn_p"
"""Columns of :attr:`TopNPlan.input_sql` holding the ``PARTITION BY`` values."""
ORDER_PREFIX = "__topn_o"
"""Columns of :attr:`TopNPlan.input_sql` holding the ``ORDER BY`` values."""

MAX_RANK = 10_000
"""The highest rank kept, at most (the whole partition is read at every change of it)."""


@dataclass(frozen=True, slots=True)
class TopNPlan:
    """A top-N per partition over one linear input.

    ``input_sql`` is the inner query as a changelog: its row-wise items (a star carries
    ``__time`` and ``__diff`` along; without one they are appended), then each
    ``PARTITION BY`` value as ``__topn_p0``, … and each ``ORDER BY`` value as
    ``__topn_o0``, …; the engine tells them apart by name (the user's columns never start
    with ``__``). ``order`` holds, per ``ORDER BY`` value, whether it is descending and
    whether its NULLs come first (Spark's defaults spelled out). Ranks ``first`` to
    ``last`` (1-based) are kept, named ``rank`` among the ranked rows (``RANKED``:
    the inner query's columns, then the rank, ``__time`` and ``__diff``), over which
    ``output_sql`` (linear) gives the query's output changelog. For ``ORDER BY … LIMIT``
    (:func:`limit_shape`) both are ``None``: the ranked rows without their rank are the
    output.
    """

    input_sql: str
    partitions: int
    order: tuple[tuple[bool, bool], ...]
    first: int
    last: int
    rank: str | None
    output_sql: str | None


def top_n_shape(
    query: exp.Query, derive: Callable[[exp.Select], str | None] | None = None
) -> TopNPlan | None:
    """``query`` as a top-N over a linear input, or ``None``.

    With ``derive``, the inner query may be another shape (Nexmark's q9 ranks a join's
    rows): ``derive`` is given it without the ranking and with the ``PARTITION BY`` and
    ``ORDER BY`` values as columns, and names the relation that will hold its maintained
    output (:mod:`dataflow_operator.core.derived`), or gives ``None`` where it is not
    maintained; the top-N reads that relation."""
    if not isinstance(query, exp.Select) or not is_linear_select(_over_table(query)):
        return None
    source = query.args.get("from_") or query.args.get("from")
    subquery = source.this if isinstance(source, exp.From) else None
    if not isinstance(subquery, exp.Subquery) or not isinstance(subquery.this, exp.Select):
        return None
    inner = subquery.this
    found = _ranking(inner)
    if found is None:
        return None
    position, window, rank = found
    ranks = _rank_range(query.args.get("where"), rank, subquery.alias_or_name)
    if ranks is None:
        return None
    (first, last), rest = ranks
    partition_by = list(window.args.get("partition_by") or [])
    order = window.args.get("order")
    ordered = list(order.expressions) if isinstance(order, exp.Order) else []
    if not ordered or any(not isinstance(o, exp.Ordered) for o in ordered):
        return None
    values = [*partition_by, *(o.this for o in ordered)]
    if any(not is_row_wise(value) for value in values):
        return None
    plain = inner.copy()
    items = list(plain.expressions)
    del items[position]
    items += [exp.alias_(p.copy(), f"{PARTITION_PREFIX}{i}") for i, p in enumerate(partition_by)]
    items += [exp.alias_(o.this.copy(), f"{ORDER_PREFIX}{i}") for i, o in enumerate(ordered)]
    plain.set("expressions", items)
    input_sql = _ranked_input(plain, derive)
    if input_sql is None:
        return None
    output = query.copy()
    output.set("from_" if "from_" in exp.Select.arg_types else "from", _ranked(subquery))
    output.set("where", exp.Where(this=exp.and_(*rest)) if rest else None)
    if not any(_is_star(item) for item in output.expressions):  # a star carries them
        output.select(exp.column(TIME), exp.column(DIFF), copy=False)
    return TopNPlan(
        input_sql=input_sql,
        partitions=len(partition_by),
        order=tuple((bool(o.args.get("desc")), bool(o.args.get("nulls_first"))) for o in ordered),
        first=first,
        last=last,
        rank=rank,
        output_sql=render(output),
    )


def limit_shape(
    query: exp.Query, derive: Callable[[exp.Select], str | None] | None = None
) -> TopNPlan | None:
    """``SELECT … ORDER BY … LIMIT N [OFFSET M]`` as a top-N without ``PARTITION BY``:
    the rows ranked ``M + 1`` to ``M + N``, or ``None``.

    An ``ORDER BY`` item may name an output (by alias or position), as in Spark. The
    query without its ``ORDER BY`` and ``LIMIT`` may be of any maintained shape (the
    highest counts of a GROUP BY): ``derive`` then names the relation of its maintained
    output, as for :func:`top_n_shape`."""
    if not isinstance(query, exp.Select):
        return None
    order, limit, offset = (query.args.get(k) for k in ("order", "limit", "offset"))
    if not isinstance(order, exp.Order) or not isinstance(limit, exp.Limit):
        return None
    count = _integer(limit.expression)
    skip = _integer(offset.expression) if isinstance(offset, exp.Offset) else 0
    if count is None or skip is None or count < 1 or skip < 0 or skip + count > MAX_RANK:
        return None
    ordered = list(order.expressions)
    if any(not isinstance(o, exp.Ordered) for o in ordered):
        return None
    values = [_output_named(o.this, query) for o in ordered]
    if any(value is None for value in values):
        return None
    plain = query.copy()
    for clause in ("order", "limit", "offset"):
        plain.set(clause, None)
    items = list(plain.expressions)
    items += [exp.alias_(v, f"{ORDER_PREFIX}{i}") for i, v in enumerate(values) if v is not None]
    plain.set("expressions", items)
    input_sql = _ranked_input(plain, derive)
    if input_sql is None:
        return None
    return TopNPlan(
        input_sql=input_sql,
        partitions=0,
        order=tuple((bool(o.args.get("desc")), bool(o.args.get("nulls_first"))) for o in ordered),
        first=skip + 1,
        last=skip + count,
        rank=None,
        output_sql=None,
    )


def _ranked_input(
    plain: exp.Select, derive: Callable[[exp.Select], str | None] | None
) -> str | None:
    """The changelog the top-N ranks: ``plain`` (the rows with their partition and ordering
    values) itself when it is linear (``__time`` and ``__diff`` appended unless a star
    carries them), else the relation ``derive`` names for its maintained output (``None``
    where it is not maintained)."""
    if is_linear_select(plain):
        if not any(_is_star(item) for item in plain.expressions):
            plain.select(exp.column(TIME), exp.column(DIFF), copy=False)
        return render(plain)
    name = derive(plain) if derive is not None else None
    return None if name is None else f"SELECT * FROM {name}"  # its columns, __time, __diff


def _output_named(value: exp.Expr, query: exp.Select) -> exp.Expr | None:
    """An ``ORDER BY`` value over the query's input: a position or an output's alias is
    the output's expression (``None`` for a position of a star)."""
    items = query.expressions
    if isinstance(value, exp.Literal) and value.is_int:
        position = int(value.name)
        if not 1 <= position <= len(items) or _is_star(items[position - 1]):
            return None
        output: exp.Expr = items[position - 1].unalias().copy()
        return output
    aliases: dict[str, exp.Expr] = {
        item.alias.lower(): item.this for item in items if isinstance(item, exp.Alias)
    }

    def through_alias(node: exp.Expr) -> exp.Expr:
        if isinstance(node, exp.Column) and not node.table and node.name.lower() in aliases:
            return aliases[node.name.lower()].copy()
        return node

    resolved: exp.Expr = value.copy().transform(through_alias)
    return resolved


def _over_table(query: exp.Select) -> exp.Select:
    """``query`` reading a plain table instead of its subquery (to check it is row-wise)."""
    probe = query.copy()
    probe.set(
        "from_" if "from_" in exp.Select.arg_types else "from", exp.From(this=exp.to_table(RANKED))
    )
    return probe


def _ranked(subquery: exp.Subquery) -> exp.From:
    """``FROM __mz_ranked [AS alias]``: the subquery's alias keeps qualified names valid."""
    table = exp.to_table(RANKED)
    if subquery.alias:
        table.set("alias", exp.TableAlias(this=exp.to_identifier(subquery.alias)))
    return exp.From(this=table)


def _is_star(item: exp.Expr) -> bool:
    return isinstance(item, exp.Star) or (isinstance(item, exp.Column) and item.is_star)


def _ranking(inner: exp.Select) -> tuple[int, exp.Window, str] | None:
    """The position, window and alias of ``inner``'s one ``ROW_NUMBER() OVER (…)`` item."""
    found = [
        (i, item)
        for i, item in enumerate(inner.expressions)
        if any(isinstance(n, exp.Window) for n in item.walk())
    ]
    if len(found) != 1:
        return None
    position, item = found[0]
    if not isinstance(item, exp.Alias) or not isinstance(item.this, exp.Window):
        return None
    window = item.this
    if not isinstance(window.this, exp.RowNumber) or window.args.get("spec"):
        return None
    return position, window, item.alias


def _rank_range(
    where: exp.Expr | None, rank: str, alias: str
) -> tuple[tuple[int, int], list[exp.Expr]] | None:
    """The ranks the outer ``WHERE`` keeps (an upper bound is needed) and its other
    conditions, or ``None`` when it does not bound the rank by constants alone."""
    if not isinstance(where, exp.Where):
        return None
    first, last = 1, None
    rest: list[exp.Expr] = []
    for condition in where.this.flatten() if isinstance(where.this, exp.And) else [where.this]:
        bounds = _bounds(condition, rank, alias)
        if bounds is None:
            if _names_rank(condition, rank, alias):
                return None  # the rank compared otherwise: not a range of constants
            rest.append(condition.copy())
            continue
        low, high = bounds
        first = max(first, low)
        last = high if last is None or high is None else min(last, high)
    if last is None or last > MAX_RANK or first > last:
        return None
    return (first, last), rest


def _names_rank(node: exp.Expr, rank: str, alias: str) -> bool:
    return any(_is_rank(n, rank, alias) for n in node.walk())


def _is_rank(node: exp.Expr, rank: str, alias: str) -> bool:
    return (
        isinstance(node, exp.Column)
        and node.name.lower() == rank.lower()
        and (not node.table or node.table.lower() == alias.lower())
    )


def _bounds(condition: exp.Expr, rank: str, alias: str) -> tuple[int, int | None] | None:
    """The ranks ``low`` to ``high`` (``None``: unbounded) one condition keeps."""
    if isinstance(condition, exp.Paren):
        return _bounds(condition.this, rank, alias)
    if isinstance(condition, exp.Between) and _is_rank(condition.this, rank, alias):
        low, high = _integer(condition.args.get("low")), _integer(condition.args.get("high"))
        return None if low is None or high is None else (low, high)
    comparisons = (exp.LTE, exp.LT, exp.GTE, exp.GT, exp.EQ)
    if not isinstance(condition, comparisons):
        return None
    left, right = condition.this, condition.expression
    flipped = {exp.LTE: exp.GTE, exp.LT: exp.GT, exp.GTE: exp.LTE, exp.GT: exp.LT, exp.EQ: exp.EQ}
    kind: type[exp.Expr] = type(condition)
    if _is_rank(right, rank, alias):
        left, right, kind = right, left, flipped[type(condition)]
    value = _integer(right)
    if not _is_rank(left, rank, alias) or value is None:
        return None
    if kind is exp.LTE:
        return 1, value
    if kind is exp.LT:
        return 1, value - 1
    if kind is exp.GTE:
        return value, None
    if kind is exp.GT:
        return value + 1, None
    return value, value


def _integer(node: exp.Expr | None) -> int | None:
    if isinstance(node, exp.Literal) and node.is_int:
        return int(node.name)
    return None
