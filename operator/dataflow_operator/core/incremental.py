"""How a dataflow's query is maintained incrementally over changelog inputs.

Every input relation is a changelog: the source's columns followed by ``__time``
(BIGINT epoch ms, the update's logical time) and ``__diff`` (BIGINT, the change in
multiplicity), in that order, as the last two columns. :func:`plan_query` is the engine's
entry point: it finds the temporal filter (:mod:`dataflow_operator.core.temporal`) and
classifies what remains into one of these strategies:

``LINEAR``
    ``SELECT … FROM one_source [WHERE …]`` (projection and filter; generators such as
    ``explode`` are fine), and UNION ALL of such. Each update maps to output updates row
    by row. Run :attr:`MaintenancePlan.sql` on every batch of input updates: its output is
    the query's columns, then ``__time`` and ``__diff`` passed through, then the temporal
    bound columns (if any; see :class:`~dataflow_operator.core.temporal.TemporalQuery`).

``AGGREGATE``
    One source, GROUP BY plain expressions (or a global aggregate), with only
    ``count(*)``, ``count(x)``, ``count(DISTINCT x)``, ``sum``, ``avg``, ``min`` and ``max``. See
    :class:`AggregatePlan` for the two SQL statements and what the engine does between
    them.

``JOIN``
    An equi-join (inner or outer) of two or more inputs, each a source or a linear
    sub-select of one, with row-wise SELECT and WHERE: see
    :mod:`dataflow_operator.core.join`.
    :attr:`MaintenancePlan.join` is its shape; the engine resolves it against the sides'
    columns and falls back to GENERAL when that fails (an ambiguous name).

``SET``
    ``SELECT DISTINCT`` over one source, and UNION / EXCEPT [ALL] / INTERSECT [ALL] of
    two linear queries: per-row multiplicities, see :mod:`dataflow_operator.core.multiset`.
    :attr:`MaintenancePlan.multiset` is its plan.

``TOP_N``
    ``ROW_NUMBER() OVER ([PARTITION BY …] ORDER BY …)`` over a linear query of one source,
    its rank bounded by constants in the outer ``WHERE``, or ``ORDER BY … LIMIT N``: the
    ranked rows kept per partition, see :mod:`dataflow_operator.core.top_n`.
    :attr:`MaintenancePlan.top_n` is its plan.

``SESSION``
    Only ever a subquery of its own: a ``GROUP BY … session_window(ts, 'gap')`` query is
    an AGGREGATE over its *sessionizer*, which keeps each partition's rows by time and
    gives each row its session's bounds (:mod:`dataflow_operator.core.session`).
    :attr:`MaintenancePlan.session` is the sessionizer's plan.

Each of these may also read subqueries of its ``FROM`` and ``JOIN`` clauses that are
maintained by a strategy of their own (an aggregate of an aggregate, a join with one):
:attr:`MaintenancePlan.derived`, see :mod:`dataflow_operator.core.derived`.

``GENERAL``
    Anything else: other joins, other DISTINCT and set operations, min/max and other
    aggregates, other window functions,
    LIMIT, subqueries, CTEs and WITH RECURSIVE, set operations other than UNION ALL of
    linear queries. At each time the engine recomputes :attr:`MaintenancePlan.sql` over
    the *consolidated* inputs (each relation's rows with the sum of their diffs up to that
    time, repeated that many times, without ``__time``/``__diff``), and emits the
    difference from the previous result: ``(row, t, new_count − old_count)`` for every
    row whose count changed.

With a temporal filter, a LINEAR query stays one stage (the bound columns ride along in
its output). An AGGREGATE or GENERAL query over one source gets an inner, linear filter
stage whose result (after applying the bounds) is the changelog relation
``__mz_filtered``; :attr:`QueryPlan.maintenance` then describes the outer stage, which
reads ``__mz_filtered`` instead of the source.

``ORDER BY`` without ``LIMIT``/``OFFSET`` at the outermost level is dropped everywhere: a
changelog has no order.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Collection
from dataclasses import dataclass, replace
from functools import lru_cache

from sqlglot import exp

from dataflow_operator.core.derived import DERIVED_PREFIX, derived_inputs, relation_name
from dataflow_operator.core.errors import InvalidSql
from dataflow_operator.core.join import JOINED, JoinShape, join_shape
from dataflow_operator.core.multiset import MultisetPlan, multiset_shape
from dataflow_operator.core.recompute import recompute_reason
from dataflow_operator.core.session import SessionPlan, session_shape
from dataflow_operator.core.sql import parse_sql
from dataflow_operator.core.sql_rewrites import equivalent_shape
from dataflow_operator.core.sql_shape import (
    DIFF,
    FILTERED,
    NOT_AGGREGATE_ARGS,
    TIME,
    cte_names,
    from_table,
    is_aggregate,
    is_linear,
    is_mz_now,
    is_nondeterministic,
    is_session_window,
    normalized,
    render,
    set_from_table,
    unwrap,
)
from dataflow_operator.core.temporal import (
    TemporalQuery,
    check_reserved_names,
    check_temporal,
    drop_unordered_order_by,
    plan_temporal,
    remove_temporal_filters,
)
from dataflow_operator.core.top_n import TopNPlan, limit_shape, top_n_shape

__all__ = [
    "COUNT",
    "GROUPS",
    "AggregatePlan",
    "DerivedInput",
    "MaintenancePlan",
    "QueryPlan",
    "Strategy",
    "check_query",
    "classify",
    "plan_over_joined",
    "plan_query",
]

GROUPS = "__mz_groups"
"""Relation :attr:`AggregatePlan.final_sql` reads: the accumulated state of some groups."""

COUNT = "__count"
"""Hidden per-group row count (sum of diffs) of an AGGREGATE plan."""

KEY_PREFIX = "__key_"
SUM_PREFIX = "__sum_"
DISTINCT_TUPLE = "__distinct_"
"""The fields of the struct a count(DISTINCT a, b, …) counts (``__distinct_0``, …)."""


class Strategy(enum.Enum):
    """How the engine maintains a query's output as its inputs change."""

    LINEAR = "linear"
    AGGREGATE = "aggregate"
    JOIN = "join"
    SET = "set"
    TOP_N = "top_n"
    SESSION = "session"
    GENERAL = "general"


@dataclass(frozen=True, slots=True)
class AggregatePlan:
    """The diff-weighted form of a GROUP BY query with count/sum/avg/min/max.

    What the engine does:

    1. Run :attr:`per_row_sql` on each batch of input updates: one row per input row
       with the key columns :attr:`keys` (``__key_0``, …; none for a global aggregate),
       ``__time``, the row's terms of the partial sums :attr:`sums` (``__sum_0``, …) and
       ``__count`` (its diff). Summed per group and time they are
       :attr:`MaintenancePlan.sql`, the partial aggregation (never NULL), which a stream
       cannot run before its state: it gives the columns' types.
    2. Keep per group (keyed by :attr:`keys`), in state, the running total of each column
       of :attr:`sums` and of ``__count``: all start at 0 and accumulate by plain
       addition. Apply a group's partial rows in ``__time`` order; for each, emit one
       *transition* row: the keys, ``__time``, the totals after (named as in the state,
       ``__sum_0``, …, ``__count``) and before (named by :func:`old_column`:
       ``__old_sum_0``, …, ``__old_count``; zeros for a group not seen before). Drop a
       group's state when its ``__count`` returns to 0 (but keep a global aggregate's).
       A column whose :attr:`kinds` entry is ``min`` or ``max`` is not a sum: its partial
       is the row's value (the partial SQL's ``MIN(x)``/``MAX(x)``, evaluated per row, with
       the row's diff in ``__count``); the state keeps the multiset of those values (value
       → count, NULLs left out) and the column's total is its least or greatest value with
       a positive count (NULL when none), so retracting the minimum reveals the next one;
       for ``count_distinct`` (``count(DISTINCT x)``, partial ``MIN(x)``) it is the
       number of values with a positive count (a BIGINT).
    3. For each group and time that changed, run :attr:`changelog_sql` over its totals
       before (diff −1; none for a group not seen before) and after (diff +1) as the
       relation ``__mz_groups``: it is row-wise (fine on a stream) and yields the output
       changelog — the query's columns, ``__time``, ``__diff`` — with no row for a group
       whose ``__count`` is 0 or that HAVING rejects. A before and after that give the
       same output row cancel when the batch is consolidated.
    4. A global aggregate (:attr:`global_aggregate`, no GROUP BY) always has exactly one
       output row, also over no input (``count`` 0, ``sum``/``avg`` NULL): at the
       dataflow's first time, emit :attr:`final_sql` over the all-zero state with diff +1.

    :attr:`final_sql` maps state rows (the relation ``__mz_groups``: keys, sums,
    ``__count``) to the current output rows: what an Index peek returns, and how to
    snapshot the state. Both give the query's output columns in order, named by their
    alias, their column name, or else their SQL text (``COUNT(*)``); for Spark's exact
    names and types rename and cast positionally to the schema of
    :attr:`MaintenancePlan.snapshot_sql`. ``sum`` over DECIMAL gets a wider precision,
    ``avg`` of DECIMAL a different scale.
    """

    keys: tuple[str, ...]
    sums: tuple[str, ...]
    final_sql: str
    global_aggregate: bool
    per_row_sql: str
    """Step 1: the partial aggregation's terms per input row (no GROUP BY, no SUM)."""
    changelog_sql: str
    """Step 3: :attr:`final_sql` passing each state row's ``__time`` and ``__diff``."""
    kinds: tuple[str, ...] = ()
    """Per column of :attr:`sums`: ``sum``, ``min``, ``max`` or ``count_distinct``
    (empty: all ``sum``)."""


@dataclass(frozen=True, slots=True)
class DerivedInput:
    """A subquery maintained by ``plan``, read by the query around it as ``name``
    (:mod:`dataflow_operator.core.derived`)."""

    name: str
    plan: MaintenancePlan


@dataclass(frozen=True, slots=True)
class MaintenancePlan:
    """The strategy for one stage and the SQL the engine runs for it.

    - ``sql``: LINEAR — the query over a batch of changelog updates, passing ``__time``
      and ``__diff`` through; AGGREGATE — the partial aggregation over a batch (see
      :class:`AggregatePlan`); GENERAL — the query over consolidated inputs.
    - ``snapshot_sql``: the query over consolidated inputs (relations without
      ``__time``/``__diff``), whatever the strategy: its schema is the output schema.
      A LINEAR query's temporal filter is not in it (it is in the bounds); a staged
      query's is (the stage reads ``__mz_filtered``).
    - ``inputs``: the relation names the stage reads (lower case): sources, and
      ``__mz_filtered`` for the outer stage of a temporal query.
    - ``aggregate``: set for AGGREGATE only.
    - ``join``: set for JOIN only; ``sql`` is then the query itself, as for GENERAL.
    - ``multiset``: set for SET only; ``sql`` is then the query itself.
    - ``top_n``: set for TOP_N only; ``sql`` is then the query itself.
    - ``session``: set for SESSION only (a session-window query's sessionizer, only ever
      a derived input); ``sql`` and ``snapshot_sql`` are then the rows it sessionizes.
    - ``derived``: the subqueries maintained on their own that this stage reads as
      relations (:mod:`dataflow_operator.core.derived`); its strategy, ``sql`` and
      ``inputs`` are then the query's over them, ``snapshot_sql`` the query as written.
    - ``recompute_reason``: set for GENERAL only: what no incremental strategy covers, in
      a user's words (:func:`~dataflow_operator.core.recompute.recompute_reason`).
    """

    strategy: Strategy
    sql: str
    snapshot_sql: str
    inputs: frozenset[str]
    aggregate: AggregatePlan | None = None
    join: JoinShape | None = None
    multiset: MultisetPlan | None = None
    top_n: TopNPlan | None = None
    session: SessionPlan | None = None
    derived: tuple[DerivedInput, ...] = ()
    recompute_reason: str | None = None


@dataclass(frozen=True, slots=True)
class QueryPlan:
    """Everything the engine needs for one dataflow's query.

    If ``temporal.staged``: run ``temporal.inner_sql`` (linear) over each batch of source
    updates, apply ``temporal.bounds``, drop the bound columns, and feed the result as the
    changelog relation ``__mz_filtered`` to ``maintenance`` (AGGREGATE or GENERAL).
    Otherwise ``maintenance`` reads the sources directly; when it is LINEAR,
    ``maintenance.sql`` equals ``temporal.sql`` and carries the bound columns of
    ``temporal.bounds`` (none without ``mz_now()``), to apply to its output.
    """

    temporal: TemporalQuery
    maintenance: MaintenancePlan


def plan_query(sql: str, source_names: Collection[str]) -> QueryPlan:
    """Plan ``sql`` over the declared sources: temporal filter plus maintenance strategy.

    Raises :class:`~dataflow_operator.core.errors.InvalidSql` (bad SQL, unsupported
    ``mz_now()``, reserved names) and
    :class:`~dataflow_operator.core.errors.UnknownSource` (a relation that is not a
    source), both on ``spec.sql``. Plans are immutable and depend on nothing else, so the
    latest are kept: dataflows made from one template are planned once.
    """
    return _plan_query(sql, frozenset(source_names))


def check_query(sql: str, source_names: Collection[str]) -> None:
    """Raise what :func:`plan_query` would raise, at a fraction of its cost.

    Every error of planning comes from the temporal stage (parsing, unknown sources,
    reserved names, ``mz_now()`` uses); choosing the maintenance strategy never rejects a
    query (a shape it cannot maintain incrementally is GENERAL). So validating thousands
    of specs neither rewrites nor renders them.
    """
    check_temporal(sql, source_names)


@lru_cache(maxsize=1024)
def _plan_query(sql: str, source_names: frozenset[str]) -> QueryPlan:
    temporal = plan_temporal(sql, source_names)
    if temporal.outer_sql is not None:
        outer = parse_sql(temporal.outer_sql, [*source_names, FILTERED])
        maintenance = _classify(outer.tree, outer.relations)
    else:
        parsed = parse_sql(sql, source_names)
        tree = unwrap(parsed.tree.copy())
        remove_temporal_filters(tree)  # they are in temporal.bounds
        drop_unordered_order_by(tree)
        maintenance = _classify(tree, parsed.relations)
    if maintenance.strategy is Strategy.LINEAR and not maintenance.derived:
        maintenance = MaintenancePlan(
            strategy=Strategy.LINEAR,
            sql=temporal.sql,
            snapshot_sql=maintenance.snapshot_sql,
            inputs=maintenance.inputs,
        )
    return QueryPlan(temporal=temporal, maintenance=maintenance)


def classify(sql: str, source_names: Collection[str]) -> MaintenancePlan:
    """The maintenance strategy of ``sql``, which must not use ``mz_now()``.

    A query with ``mz_now()`` needs :func:`plan_query` (it raises
    :class:`~dataflow_operator.core.errors.InvalidSql` here).
    """
    parsed = parse_sql(sql, source_names)
    tree = unwrap(parsed.tree.copy())
    check_reserved_names(tree)
    if any(is_mz_now(node) for node in tree.walk()):
        raise InvalidSql(
            "classify() does not handle mz_now(); plan the query with plan_query()",
            field="spec.sql",
        )
    drop_unordered_order_by(tree)
    return _classify(tree, parsed.relations)


def _classify(
    tree: exp.Query, inputs: frozenset[str], numbers: list[int] | None = None
) -> MaintenancePlan:
    """The strategy of ``tree`` over ``inputs``; ``numbers``: the next derived relation's
    number, shared by the subqueries of one query."""
    numbers = [0] if numbers is None else numbers
    tree = equivalent_shape(tree)  # comma joins and FILTER in the shapes strategies match
    snapshot = render(tree)
    ctes = cte_names(tree)
    if is_linear(tree, ctes):
        linear = tree.copy()
        for select in [linear] if isinstance(linear, exp.Select) else linear.find_all(exp.Select):
            if not select.is_star:
                select.select(exp.column(TIME), exp.column(DIFF), copy=False)
        return MaintenancePlan(Strategy.LINEAR, render(linear), snapshot, inputs)
    sessions = _sessions(tree, inputs, numbers) if not ctes else None
    if sessions is not None:
        return replace(sessions, snapshot_sql=snapshot)
    if isinstance(tree, exp.Select):
        aggregate = _aggregate_plan(tree, ctes)
        if aggregate is not None:
            partial_sql, plan = aggregate
            return MaintenancePlan(Strategy.AGGREGATE, partial_sql, snapshot, inputs, plan)
    join = join_shape(tree, ctes)
    if join is not None and (not join.aggregate or _aggregates_joined_rows(join)):
        return MaintenancePlan(Strategy.JOIN, snapshot, snapshot, inputs, join=join)
    multiset = multiset_shape(tree) if not ctes else None
    if multiset is not None:
        return MaintenancePlan(Strategy.SET, snapshot, snapshot, inputs, multiset=multiset)
    ranked_input: list[DerivedInput] = []  # a top-N's inner query, maintained on its own
    top_n = None
    if not ctes:
        derive = _deriver(inputs, numbers, ranked_input)
        top_n = top_n_shape(tree, derive) or limit_shape(tree, derive)
    if top_n is not None:
        derived = tuple(ranked_input)
        return MaintenancePlan(
            Strategy.TOP_N,
            snapshot,
            snapshot,
            inputs | {d.name for d in derived},
            top_n=top_n,
            derived=derived,
        )
    subqueries: list[str] = []  # why a subquery is recomputed
    composed = _composed(tree, inputs, numbers, subqueries) if not ctes else None
    if composed is not None:
        return replace(composed, snapshot_sql=snapshot)
    reason = subqueries[0] if subqueries else recompute_reason(tree)
    return MaintenancePlan(Strategy.GENERAL, snapshot, snapshot, inputs, recompute_reason=reason)


def _on_its_own(
    query: exp.Query, inputs: frozenset[str], numbers: list[int], recomputed: list[str]
) -> MaintenancePlan | None:
    """The plan of ``query`` when a query around it can read its maintained output as a
    relation (an incremental strategy, not a global aggregate, no star beside other
    columns: ``__time`` and ``__diff`` would not come last), else ``None``; why it is
    recomputed, if it is, goes to ``recomputed``."""
    if isinstance(query, exp.Select) and query.is_star and len(query.expressions) > 1:
        return None
    plan = _classify(query, inputs, numbers)
    if plan.recompute_reason is not None:
        recomputed.append(plan.recompute_reason)
    global_aggregate = plan.aggregate is not None and plan.aggregate.global_aggregate
    return None if plan.strategy is Strategy.GENERAL or global_aggregate else plan


def _deriver(
    inputs: frozenset[str], numbers: list[int], derived: list[DerivedInput]
) -> Callable[[exp.Select], str | None]:
    """What maintains a query on its own (adding it to ``derived``) and names the
    relation its output will be, or gives ``None`` where no strategy maintains it."""

    def derive(query: exp.Select) -> str | None:
        plan = _on_its_own(query, inputs, numbers, [])
        if plan is None:
            return None
        name = relation_name(numbers)
        derived.append(DerivedInput(name, plan))
        return name

    return derive


def _sessions(
    tree: exp.Query, inputs: frozenset[str], numbers: list[int]
) -> MaintenancePlan | None:
    """A session-window query as a GROUP BY over its sessionizer, maintained on its own
    (:mod:`dataflow_operator.core.session`), or ``None``."""
    relation = f"{DERIVED_PREFIX}{numbers[0]}"
    shape = session_shape(tree, relation)
    if shape is None:
        return None
    relation_name(numbers)  # taken
    session = shape.plan
    sessionizer = MaintenancePlan(
        Strategy.SESSION, session.input_sql, session.input_sql, inputs, session=session
    )
    outer = _on_its_own(shape.outer, inputs | {relation}, numbers, [])
    if outer is None or outer.strategy is not Strategy.AGGREGATE:
        return None
    return replace(outer, derived=(DerivedInput(relation, sessionizer),))


def _composed(
    tree: exp.Query, inputs: frozenset[str], numbers: list[int], recomputed: list[str]
) -> MaintenancePlan | None:
    """``tree`` maintained over its subqueries maintained on their own, or ``None`` (see
    :mod:`dataflow_operator.core.derived`); the reason a subquery is recomputed, if one
    is, goes to ``recomputed``: it is what a user would change."""

    def subquery(query: exp.Query) -> MaintenancePlan | None:
        return _on_its_own(query, inputs, numbers, recomputed)

    found = derived_inputs(tree, subquery, numbers)
    if found is None:
        return None
    rewritten, relations = found
    derived = tuple(DerivedInput(name, plan) for name, plan in relations)
    outer = _on_its_own(rewritten, inputs | {d.name for d in derived}, numbers, [])
    return None if outer is None else replace(outer, derived=derived)


def plan_over_joined(sql: str) -> MaintenancePlan | None:
    """The AGGREGATE plan of a join's aggregation (:attr:`JoinPlan.output_sql
    <dataflow_operator.core.join.JoinPlan.output_sql>` with ``aggregate``) over the
    joined rows, or ``None`` if it is not one with GROUP BY (then recompute the query)."""
    parsed = parse_sql(sql, [JOINED])
    plan = _classify(unwrap(parsed.tree.copy()), parsed.relations)
    if plan.aggregate is None or plan.aggregate.global_aggregate:
        return None
    return plan


def _aggregates_joined_rows(join: JoinShape) -> bool:
    """Whether a join's aggregation is a GROUP BY with count/sum/avg (which side each
    column comes from does not matter for that)."""
    probe = join.query.copy()
    probe.set("joins", None)
    set_from_table(probe, exp.to_table(JOINED))

    def unqualified(node: exp.Expr) -> exp.Expr:
        if isinstance(node, exp.Column) and node.table:
            return exp.Column(this=node.this.copy())
        return node

    unqualified_probe = probe.transform(unqualified)
    assert isinstance(unqualified_probe, exp.Select)
    found = _aggregate_plan(unqualified_probe, frozenset())
    return found is not None and not found[1].global_aggregate


# --- AGGREGATE ------------------------------------------------------------------------


class _NotSupported(Exception):
    """The query is not of the AGGREGATE shape (it is then GENERAL)."""


def _aggregate_plan(select: exp.Select, ctes: frozenset[str]) -> tuple[str, AggregatePlan] | None:
    """The partial SQL and aggregate plan of ``select``, or ``None`` if it is not one."""
    if any(select.args.get(key) for key in NOT_AGGREGATE_ARGS):
        return None
    table = from_table(select, ctes)
    if table is None:
        return None
    for node in select.walk():
        if node is not select and isinstance(
            node, exp.Query | exp.Exists | exp.Window | exp.Filter | exp.Star
        ):
            if isinstance(node, exp.Star) and isinstance(node.parent, exp.Count):
                continue
            return None
        if is_nondeterministic(node) or is_session_window(node):
            return None  # a session window's groups merge: core.session
    select = _unqualified(select, table.alias_or_name)
    group = select.args.get("group")
    try:
        keys = _group_keys(select, group)
    except _NotSupported:
        return None
    if group is None and not any(is_aggregate(n) for e in select.expressions for n in e.walk()):
        return None
    builder = _AggregateBuilder(keys)
    try:
        outputs = [builder.output(item) for item in select.expressions]
        having = select.args.get("having")
        having_condition = (
            builder.condition(_resolve_aliases(having.this, select, keys))
            if isinstance(having, exp.Having)
            else None
        )
    except _NotSupported:
        return None

    partial = exp.select(
        *(exp.alias_(key.copy(), f"{KEY_PREFIX}{i}") for i, key in enumerate(keys)),
        exp.column(TIME),
        *(exp.alias_(s, name) for name, s in builder.partials),
        exp.alias_(exp.func("SUM", exp.column(DIFF)), COUNT),
        copy=False,
    )
    set_from_table(partial, table.copy())
    where = select.args.get("where")
    if where is not None:
        partial.set("where", where.copy())
    partial.set(
        "group",
        exp.Group(expressions=[*(key.copy() for key in keys), exp.column(TIME)]),
    )

    final = exp.select(*outputs, copy=False).from_(GROUPS, copy=False)
    conditions: list[exp.Expr] = []
    if group is not None:
        conditions.append(exp.GT(this=exp.column(COUNT), expression=exp.Literal.number(0)))
    if having_condition is not None:
        conditions.append(having_condition)
    if conditions:
        final.set("where", exp.Where(this=exp.and_(*conditions)))
    per_row = exp.select(
        *(exp.alias_(key.copy(), f"{KEY_PREFIX}{i}") for i, key in enumerate(keys)),
        exp.column(TIME),
        *(exp.alias_(_per_row_term(s), name) for name, s in builder.partials),
        exp.alias_(exp.column(DIFF), COUNT),
        copy=False,
    )
    set_from_table(per_row, table.copy())
    if where is not None:
        per_row.set("where", where.copy())
    changelog = final.copy().select(exp.column(TIME), exp.column(DIFF), copy=False)
    plan = AggregatePlan(
        keys=tuple(f"{KEY_PREFIX}{i}" for i in range(len(keys))),
        sums=tuple(name for name, _ in builder.partials),
        final_sql=render(final),
        global_aggregate=group is None,
        per_row_sql=render(per_row),
        changelog_sql=render(changelog),
        kinds=tuple(builder.kinds) if any(k != "sum" for k in builder.kinds) else (),
    )
    return render(partial), plan


def _per_row_term(partial: exp.Expr) -> exp.Expr:
    """A partial sum's term for one row: ``COALESCE(SUM(x * __diff), 0)`` →
    ``COALESCE(x * __diff, 0)``; a MIN or MAX is the row's value (its state counts it)."""

    def term(node: exp.Expr) -> exp.Expr:
        if isinstance(node, exp.Sum | exp.Min | exp.Max):
            argument: exp.Expr = node.this
            return argument.copy()
        return node

    return partial.copy().transform(term)


def _resolve_aliases(condition: exp.Expr, select: exp.Select, keys: list[exp.Expr]) -> exp.Expr:
    """``condition`` (HAVING) with output aliases replaced by what they name, as Spark does.

    A name that is a group key stays a reference to the key.
    """
    aliases: dict[str, exp.Expr] = {
        item.alias.lower(): item.this for item in select.expressions if item.alias
    }
    normalized_keys = [normalized(key) for key in keys]

    def resolve(node: exp.Expr) -> exp.Expr:
        if isinstance(node, exp.Column) and not node.table:
            target = aliases.get(node.name.lower())
            if target is not None and normalized(node) not in normalized_keys:
                return target.copy()
        return node

    return condition.transform(resolve)


def _unqualified(select: exp.Select, relation: str) -> exp.Select:
    """A copy of ``select`` whose columns drop the qualifier naming its only relation."""

    def strip(node: exp.Expr) -> exp.Expr:
        if isinstance(node, exp.Column) and node.table.lower() == relation.lower():
            return exp.Column(this=node.this.copy())
        return node

    result = select.transform(strip)
    assert isinstance(result, exp.Select)
    return result


def _group_keys(select: exp.Select, group: exp.Expr | None) -> list[exp.Expr]:
    if group is None:
        return []
    if not isinstance(group, exp.Group) or any(
        group.args.get(k) for k in ("grouping_sets", "cube", "rollup", "totals", "all")
    ):
        raise _NotSupported
    aliases = {item.alias.lower(): item for item in select.expressions if item.alias}
    keys: list[exp.Expr] = []
    for expression in group.expressions:
        if isinstance(expression, exp.GroupingSets | exp.Cube | exp.Rollup):
            raise _NotSupported
        if isinstance(expression, exp.Literal) and expression.is_int:
            position = int(expression.name)
            if not 1 <= position <= len(select.expressions):
                raise _NotSupported
            keys.append(select.expressions[position - 1].unalias())
            continue
        if isinstance(expression, exp.Column) and not expression.table:
            aliased = aliases.get(expression.name.lower())
            if aliased is not None and normalized(aliased.unalias()) != normalized(expression):
                # GROUP BY a name that is also an output alias: Spark picks the source
                # column if there is one, which only the schema tells.
                raise _NotSupported
        if any(is_aggregate(n) for n in expression.walk()):
            raise _NotSupported
        keys.append(expression)
    return keys


class _AggregateBuilder:
    """Rewrites output expressions over the group state, collecting partial sums."""

    def __init__(self, keys: list[exp.Expr]) -> None:
        self._keys = [normalized(key) for key in keys]
        self.partials: list[tuple[str, exp.Expr]] = []
        self.kinds: list[str] = []
        self._by_sql: dict[str, str] = {}

    def output(self, item: exp.Expr) -> exp.Expr:
        """Select item ``item`` computed from the state, named as Spark would show it."""
        if isinstance(item, exp.Alias):
            name, expression = item.alias, item.this
        elif isinstance(item, exp.Column):
            name, expression = item.name, item
        else:
            name, expression = render(item), item
        return exp.alias_(self.condition(expression), name, quoted=not _plain(name))

    def condition(self, expression: exp.Expr) -> exp.Expr:
        """``expression`` (over keys and aggregates) computed from the state columns."""
        return expression.transform(self._rewrite)

    def _rewrite(self, node: exp.Expr) -> exp.Expr:
        comparable = normalized(node)
        for index, key in enumerate(self._keys):
            if comparable == key:
                return exp.column(f"{KEY_PREFIX}{index}")
        if is_aggregate(node):
            return self._aggregate(node)
        if isinstance(node, exp.Column):
            raise _NotSupported  # neither a group key nor inside an aggregate
        return node

    def _aggregate(self, node: exp.Expr) -> exp.Expr:
        if not isinstance(node, exp.Count | exp.Sum | exp.Avg | exp.Min | exp.Max):
            raise _NotSupported
        argument = node.this
        if isinstance(node, exp.Count) and isinstance(argument, exp.Distinct):
            return self._count_distinct(argument)
        if node.expressions or argument is None or isinstance(argument, exp.Distinct):
            raise _NotSupported
        if any(is_aggregate(n) or is_mz_now(n) for n in argument.walk()):
            raise _NotSupported
        if isinstance(node, exp.Min | exp.Max):
            kind = "min" if isinstance(node, exp.Min) else "max"
            return self._partial(exp.func(kind.upper(), argument.copy()), kind)
        count = self._count(argument)
        if isinstance(node, exp.Count):
            return count
        total = self._sum(argument)
        if isinstance(node, exp.Sum):
            return _null_if_zero(count, total)
        return _null_if_zero(count, exp.Div(this=total, expression=count.copy()))

    def _count_distinct(self, distinct: exp.Distinct) -> exp.Column:
        """count(DISTINCT x): the number of values of the group's multiset of ``x``;
        count(DISTINCT x, y, …): of the structs of ``x``, ``y``, … none of which is NULL
        (the engine keeps each as its JSON, :data:`DISTINCT_TUPLE`)."""
        arguments = distinct.expressions
        if distinct.args.get("on") or not arguments:
            raise _NotSupported
        if any(is_aggregate(n) or is_mz_now(n) for a in arguments for n in a.walk()):
            raise _NotSupported
        value = arguments[0].copy() if len(arguments) == 1 else _distinct_tuple(arguments)
        return self._partial(exp.func("MIN", value), "count_distinct")

    def _partial(self, expression: exp.Expr, kind: str = "sum") -> exp.Column:
        """The state column accumulating the diff-weighted partial sum ``expression``
        (or, for ``min``/``max``/``count_distinct``, the multiset of the rows' values)."""
        text = f"{kind}:{render(expression)}"
        name = self._by_sql.get(text)
        if name is None:
            name = f"{SUM_PREFIX}{len(self.partials)}"
            self._by_sql[text] = name
            self.partials.append((name, expression))
            self.kinds.append(kind)
        return exp.column(name)

    def _count(self, argument: exp.Expr) -> exp.Column:
        """count(argument): the row count for ``*`` and constants, else the non-NULL count."""
        if isinstance(argument, exp.Star | exp.Literal):
            return exp.column(COUNT)
        weighted = exp.Case(
            ifs=[
                exp.If(
                    this=exp.Not(this=exp.Is(this=_paren(argument), expression=exp.Null())),
                    true=exp.column(DIFF),
                )
            ],
            default=exp.Literal.number(0),
        )
        return self._partial(exp.func("SUM", weighted))

    def _sum(self, argument: exp.Expr) -> exp.Column:
        weighted = exp.Mul(this=_paren(argument), expression=exp.column(DIFF))
        return self._partial(exp.func("COALESCE", exp.func("SUM", weighted), exp.Literal.number(0)))


def _distinct_tuple(arguments: list[exp.Expr]) -> exp.Expr:
    """``CASE WHEN a IS NULL OR b IS NULL … THEN NULL ELSE STRUCT(a AS __distinct_0, …)
    END``: what count(DISTINCT a, b, …) counts the distinct values of (Spark counts the
    rows none of whose values is NULL)."""
    fields = [exp.alias_(a.copy(), f"{DISTINCT_TUPLE}{i}") for i, a in enumerate(arguments)]
    nulls = [exp.Is(this=_paren(a), expression=exp.Null()) for a in arguments]
    return exp.Case(
        ifs=[exp.If(this=exp.or_(*nulls), true=exp.Null())],
        default=exp.Struct(expressions=fields),
    )


def _paren(expression: exp.Expr) -> exp.Expr:
    if isinstance(expression, exp.Column | exp.Literal | exp.Paren | exp.Func):
        return expression.copy()
    return exp.Paren(this=expression.copy())


def _null_if_zero(count: exp.Expr, value: exp.Expr) -> exp.Expr:
    return exp.Case(
        ifs=[
            exp.If(
                this=exp.EQ(this=count.copy(), expression=exp.Literal.number(0)),
                true=exp.Null(),
            )
        ],
        default=value,
    )


def _plain(name: str) -> bool:
    return name.replace("_", "a").isalnum() and not name[:1].isdigit()
