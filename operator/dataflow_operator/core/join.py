"""Equi-joins of two or more changelogs, maintained incrementally: the planning half.

:func:`join_shape` recognises, without any schema,

    SELECT <row-wise expressions> FROM x [INNER | LEFT | RIGHT | FULL [OUTER]] JOIN y
    ON x.a = y.b [AND …equalities] [[…] JOIN z ON … = z.c …] [WHERE <row-wise condition>]

where ``x``, ``y``, ``z``… each read one source directly or through a linear sub-select
(``(SELECT … FROM source WHERE …) AS s``). A join of more than two inputs is a chain of
two-input joins, as SQL reads it: ``(x ⋈ y) ⋈ z``, each ON comparing the inputs joined
so far with the next one. Each side becomes a linear changelog
(:attr:`JoinSide.sql`: its columns, then ``__time`` and ``__diff``). The same join with
GROUP BY (and HAVING, aggregates) over its rows is recognised too
(:attr:`JoinShape.aggregate`): its aggregation is then planned over the joined rows by
:func:`dataflow_operator.core.incremental.plan_over_joined`.

Which side an unqualified column belongs to depends on the sides' columns, which only
the engine knows: :meth:`JoinShape.resolve` takes them and yields the :class:`JoinPlan`
(the key expressions per side and the row-wise SQL from joined rows to output rows), or
``None`` when a name is ambiguous or an ON conjunct does not compare one side with the
other; the engine then recomputes the query (the GENERAL strategy) as it did before.

How the engine maintains the join (see :class:`JoinPlan`): each side's current contents
are kept per join key (the *arrangement*: rows and multiplicities); a change ``ΔL`` of
the left side at time ``t`` yields ``ΔL ⋈ R`` at ``t`` (and symmetrically), changes of
both sides at one time join once (``ΔL ⋈ R_old + L_old ⋈ ΔR + ΔL ⋈ ΔR``), and an outer
join's null-extended rows follow the other side's total multiplicity for the key going
from or to zero. A key with a NULL component matches nothing (SQL semantics) but its
rows still appear null-extended on an outer join's preserved side.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Literal

from sqlglot import exp

from dataflow_operator.core.residual import Comparison, residual_comparisons
from dataflow_operator.core.sql_shape import (
    DIFF,
    NOT_AGGREGATE_ARGS,
    TIME,
    from_table,
    is_aggregate,
    is_linear_select,
    is_nondeterministic,
    render,
)

__all__ = [
    "JOINED",
    "JoinKind",
    "JoinPlan",
    "JoinShape",
    "JoinSide",
    "JoinStep",
    "join_shape",
    "joined_column",
]

JOINED = "__mz_joined"
"""Relation :attr:`JoinPlan.output_sql` reads: joined rows, ``__time``, ``__diff``."""

JoinKind = Literal["inner", "left", "right", "full"]

_NOT_JOIN_ARGS = (*NOT_AGGREGATE_ARGS, "laterals", "pivots")


def joined_column(side: int, index: int) -> str:
    """The name in :data:`JOINED` of column ``index`` of side ``side`` (0 the first input,
    1 the second…)."""
    return f"__mz_{'lr'[side]}{index}" if side < 2 else f"__mz_s{side}_{index}"


@dataclass(frozen=True, slots=True)
class JoinSide:
    """One input of a join: the source it reads, its alias, its linear changelog SQL."""

    source: str
    alias: str
    sql: str
    """Linear SQL over ``source``: the side's columns, then ``__time`` and ``__diff``."""


@dataclass(frozen=True, slots=True)
class JoinStep:
    """One two-input join of a chain: the inputs joined so far with the next one.

    ``keys``: the key expressions of the inputs so far (SQL over their joined columns:
    the first input's own names in the first step, :func:`joined_column` names after)
    and of the next input (over its own columns, unqualified), position by position
    equal in a match.
    """

    kind: JoinKind
    keys: tuple[tuple[str, ...], tuple[str, ...]]

    @property
    def preserves(self) -> tuple[bool, bool]:
        """Whether the left and right sides' unmatched rows appear null-extended."""
        return (self.kind in ("left", "full"), self.kind in ("right", "full"))


@dataclass(frozen=True, slots=True)
class JoinPlan:
    """An equi-join with its columns resolved: what the engine runs.

    - ``steps``: the two-input joins, in order (one per input after the first).
    - ``output_sql``: SQL over the relation :data:`JOINED`, whose columns are each
      input's columns, input ``s``'s column ``i`` named ``joined_column(s, i)`` (NULL on
      a missing side of a null-extended row), then ``__time`` and ``__diff``. Without
      :attr:`aggregate` it is row-wise and yields the query's columns, ``__time``,
      ``__diff``; with it, it is the query's aggregation (GROUP BY, HAVING) over the
      joined rows as a query over consolidated inputs, to be planned in turn. Names are
      as written or Spark's: rename positionally to the snapshot schema.
    - ``residual``: the comparisons of the query's WHERE over the joined rows
      (:mod:`dataflow_operator.core.residual`), columns as (input, column index): the
      last join may drop the pairs they surely reject before it emits them.
    """

    steps: tuple[JoinStep, ...]
    output_sql: str
    aggregate: bool = False
    residual: tuple[Comparison, ...] = ()


@dataclass(frozen=True, slots=True)
class JoinShape:
    """An equi-join of two or more inputs recognised without schemas (see
    :func:`join_shape`)."""

    kinds: tuple[JoinKind, ...]
    """Per join, in order: its kind."""
    sides: tuple[JoinSide, ...]
    query: exp.Select = field(compare=False, repr=False)
    """The query; its join conditions are :attr:`conditions`."""
    conditions: tuple[tuple[exp.EQ, ...], ...] = field(compare=False, repr=False)
    """Per join, in order: the equalities of its ON."""
    aggregate: bool = False
    """Whether the query aggregates the joined rows (GROUP BY, aggregates, HAVING)."""

    def resolve(self, columns: Sequence[Sequence[str]]) -> JoinPlan | None:
        """The plan given each side's columns (in order), or ``None`` (then recompute).

        ``None`` when a column is ambiguous or unknown, or an ON equality does not
        compare an expression of the inputs joined so far with one of the next input.
        """
        resolver = _Resolver(self, tuple(tuple(c) for c in columns))
        try:
            steps = tuple(
                JoinStep(kind, resolver.keys(step)) for step, kind in enumerate(self.kinds, start=1)
            )
            output = resolver.aggregation() if self.aggregate else resolver.output()
        except _Unresolved:
            return None
        where = self.query.args.get("where")
        residual = residual_comparisons(
            where.this if isinstance(where, exp.Where) else None, resolver.locate
        )
        return JoinPlan(steps=steps, output_sql=output, aggregate=self.aggregate, residual=residual)


def join_shape(select: exp.Query, ctes: frozenset[str] = frozenset()) -> JoinShape | None:
    """``select`` as an equi-join of two or more inputs, or ``None`` if it is not of that
    shape."""
    if not isinstance(select, exp.Select):
        return None
    if any(select.args.get(key) for key in _NOT_JOIN_ARGS):
        return None
    joins = select.args.get("joins") or []
    from_clause = select.args.get("from_") or select.args.get("from")
    if not joins or not isinstance(from_clause, exp.From):
        return None
    kinds = [_kind(join) for join in joins]
    sides = [_side(from_clause.this, ctes), *(_side(join.this, ctes) for join in joins)]
    conditions = [_equalities(join.args.get("on")) for join in joins]
    if None in kinds or None in sides or None in conditions:
        return None
    if len({side.alias for side in sides if side is not None}) != len(sides):
        return None
    aggregate = bool(select.args.get("group") or select.args.get("having")) or any(
        is_aggregate(node) for item in select.expressions for node in item.walk()
    )
    where = select.args.get("where")
    if where is not None and not _row_wise(where):
        return None
    for item in [*select.expressions, select.args.get("group"), select.args.get("having")]:
        if item is not None and not _row_wise(item, aggregates=aggregate):
            return None
    return JoinShape(
        kinds=tuple(k for k in kinds if k is not None),
        sides=tuple(side for side in sides if side is not None),
        query=select,
        conditions=tuple(c for c in conditions if c is not None),
        aggregate=aggregate,
    )


def _kind(join: exp.Join) -> JoinKind | None:
    if join.args.get("method") or join.args.get("using") or join.args.get("pivots"):
        return None
    kind = str(join.args.get("kind") or "").upper()
    side = str(join.args.get("side") or "").upper()
    if kind not in ("", "INNER", "OUTER"):
        return None  # CROSS, SEMI, ANTI…
    if side == "":
        return "inner" if kind != "OUTER" else None
    if kind == "INNER":
        return None
    return {"LEFT": "left", "RIGHT": "right", "FULL": "full"}.get(side)  # type: ignore[return-value]


def _side(relation: exp.Expr, ctes: frozenset[str]) -> JoinSide | None:
    """A join input that is a source, or a linear sub-select of one, with its SQL."""
    if isinstance(relation, exp.Table):
        probe = exp.select(exp.Star(), copy=False)
        probe.set("from_" if "from_" in exp.Select.arg_types else "from", exp.From(this=relation))
        table = from_table(probe, ctes)
        if table is None or table.args.get("db") or table.args.get("catalog"):
            return None
        sql = exp.select(exp.Star(), copy=False).from_(exp.to_identifier(table.name), copy=False)
        return JoinSide(table.name.lower(), table.alias_or_name.lower(), render(sql))
    if isinstance(relation, exp.Subquery) and relation.alias:
        inner = relation.this
        if not isinstance(inner, exp.Select) or not is_linear_select(inner, ctes):
            return None
        table = from_table(inner, ctes)
        assert table is not None  # a linear select reads one relation
        items = inner.expressions
        only_star = len(items) == 1 and (
            isinstance(items[0], exp.Star)
            or (isinstance(items[0], exp.Column) and items[0].is_star)
        )
        if not only_star and any(
            isinstance(i, exp.Star) or (isinstance(i, exp.Column) and i.is_star) for i in items
        ):
            return None  # a star and more: __time and __diff would not come last
        side_sql = inner.copy()
        if not only_star:
            side_sql.select(exp.column(TIME), exp.column(DIFF), copy=False)
        return JoinSide(table.name.lower(), relation.alias.lower(), render(side_sql))
    return None


def is_equi_condition(condition: exp.Expr | None) -> bool:
    """True when ``condition`` (an ON clause) is AND-ed equalities and nothing else."""
    return _equalities(condition) is not None


def _equalities(condition: exp.Expr | None) -> tuple[exp.EQ, ...] | None:
    """The AND-ed equalities of an ON clause, or ``None`` if it is anything else."""
    if condition is None:
        return None
    found: list[exp.EQ] = []
    pending = [condition]
    while pending:
        node = pending.pop()
        while isinstance(node, exp.Paren):
            node = node.this
        if isinstance(node, exp.And):
            pending += [node.expression, node.this]
        elif isinstance(node, exp.EQ) and _row_wise(node):
            found.append(node)
        else:
            return None
    return tuple(found)


def _row_wise(node: exp.Expr, *, aggregates: bool = False) -> bool:
    """Whether ``node`` is computed from one joined row alone (no subquery, window…), or
    with ``aggregates`` from one group of them."""
    for sub in node.walk():
        if isinstance(sub, exp.Query | exp.Window | exp.Exists):
            return False
        if is_aggregate(sub) and not aggregates:
            return False
        if is_nondeterministic(sub):
            return False
    return True


class _Unresolved(Exception):
    """A name or condition the schemas cannot attribute to exactly one side."""


class _Resolver:
    """Attributes column references to sides, given the sides' columns."""

    def __init__(self, shape: JoinShape, columns: tuple[tuple[str, ...], ...]) -> None:
        self.shape = shape
        self.columns = columns
        self.index = tuple({name.lower(): i for i, name in enumerate(c)} for c in columns)
        self.aliases = tuple(side.alias for side in shape.sides)

    def locate(self, column: exp.Column) -> tuple[int, int]:
        """(side, column index) of a column reference."""
        if column.args.get("db") or column.args.get("catalog"):
            raise _Unresolved
        name = column.name.lower()
        qualifier = column.table.lower()
        if qualifier:
            if qualifier not in self.aliases:
                raise _Unresolved
            side = self.aliases.index(qualifier)
            if name not in self.index[side]:
                raise _Unresolved
            return side, self.index[side][name]
        found = [(s, index[name]) for s, index in enumerate(self.index) if name in index]
        if len(found) != 1:
            raise _Unresolved
        return found[0]

    def sides_of(self, node: exp.Expr) -> set[int]:
        return {self.locate(c)[0] for c in node.find_all(exp.Column)}

    def over(self, node: exp.Expr, *, joined: bool) -> str:
        """``node`` over its side's own columns (unqualified, as the side names them), or
        with ``joined`` over the joined columns (:func:`joined_column`)."""

        def local(sub: exp.Expr) -> exp.Expr:
            if isinstance(sub, exp.Column):
                side, index = self.locate(sub)
                if joined:
                    return exp.column(joined_column(side, index))
                return exp.column(exp.to_identifier(self.columns[side][index], quoted=True))
            return sub

        return render(node.copy().transform(local))

    def keys(self, step: int) -> tuple[tuple[str, ...], tuple[str, ...]]:
        """The keys of the join of the inputs before ``step`` with input ``step``."""
        before: list[str] = []
        after: list[str] = []
        for equality in self.shape.conditions[step - 1]:
            a, b = equality.this, equality.expression
            sides = self.sides_of(a), self.sides_of(b)
            if sides[0] == {step}:
                a, b = b, a
                sides = sides[1], sides[0]
            if not sides[0] or max(sides[0]) >= step or sides[1] != {step}:
                raise _Unresolved  # a filter in ON, or not the joined inputs against the next
            before.append(self.over(a, joined=step > 1))
            after.append(self.over(b, joined=False))
        return tuple(before), tuple(after)

    def joined(self, node: exp.Expr) -> exp.Expr:
        """``node`` over :data:`JOINED`'s columns."""

        def rename(sub: exp.Expr) -> exp.Expr:
            if isinstance(sub, exp.Column) and not sub.is_star:
                return exp.column(joined_column(*self.locate(sub)))
            return sub

        return node.copy().transform(rename)

    def star(self, qualifier: str) -> list[exp.Expr]:
        sides = range(len(self.columns)) if not qualifier else (self._side_named(qualifier),)
        return [
            exp.alias_(exp.column(joined_column(s, i)), name, quoted=True)
            for s in sides
            for i, name in enumerate(self.columns[s])
        ]

    def _side_named(self, qualifier: str) -> int:
        if qualifier.lower() not in self.aliases:
            raise _Unresolved
        return self.aliases.index(qualifier.lower())

    def aggregation(self) -> str:
        """The query's aggregation over :data:`JOINED` (no join), columns renamed."""
        query = self.shape.query.copy()
        query.set("joins", None)
        for key in ("from_", "from"):
            if key in exp.Select.arg_types:
                query.set(key, exp.From(this=exp.to_table(JOINED)))

        def rename(sub: exp.Expr) -> exp.Expr:
            if isinstance(sub, exp.Column) and not sub.is_star:
                return exp.column(joined_column(*self.locate(sub)))
            if isinstance(sub, exp.Column) and sub.is_star:
                raise _Unresolved
            return sub

        return render(query.transform(rename))

    def output(self) -> str:
        items: list[exp.Expr] = []
        for item in self.shape.query.expressions:
            if isinstance(item, exp.Star):
                items += self.star("")
            elif isinstance(item, exp.Column) and item.is_star:
                items += self.star(item.table)
            elif isinstance(item, exp.Column):
                items.append(exp.alias_(self.joined(item), item.name, quoted=True))
            elif any(isinstance(s, exp.Star) for s in item.walk()):
                raise _Unresolved  # a star inside an expression (struct(*)…)
            else:
                items.append(self.joined(item))
        select = exp.select(*items, exp.column(TIME), exp.column(DIFF), copy=False)
        select = select.from_(JOINED, copy=False)
        where = self.shape.query.args.get("where")
        if isinstance(where, exp.Where):
            select.set("where", exp.Where(this=self.joined(where.this)))
        return render(select)
