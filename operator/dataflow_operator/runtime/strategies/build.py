"""Turning a dataflow's spec into a Spark streaming DataFrame of its output changelog.

The SQL planning is the core's (:func:`dataflow_operator.core.incremental.plan_query`);
this module wires it onto Spark: each source becomes a streaming changelog
(:mod:`dataflow_operator.runtime.sources`) with an event-time watermark on its batch
time, the SQL runs over those streams, the temporal bounds become ``[__lower, __upper)``
and the temporal filter runs as a ``transformWithStateInPandas`` operator
(:mod:`.temporal_filter`). AGGREGATE queries keep their groups' totals in Spark state
too (:mod:`.aggregate`), equi-joins their inputs' arrangements (:mod:`.join`); GENERAL
ones are recomputed per changed time and diffed (:mod:`.general`).
"""

from __future__ import annotations

import tempfile
import threading
from collections.abc import Callable
from dataclasses import dataclass, replace

import pyarrow as pa
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F  # noqa: N812 - Spark's convention
from pyspark.sql import types as T  # noqa: N812 - Spark's convention

from dataflow_operator.core.derived import DERIVED_PREFIX
from dataflow_operator.core.errors import InvalidSql
from dataflow_operator.core.incremental import (
    COUNT,
    GROUPS,
    MaintenancePlan,
    QueryPlan,
    Strategy,
    plan_over_joined,
    plan_query,
)
from dataflow_operator.core.join import JOINED, joined_column
from dataflow_operator.core.sql_shape import FILTERED
from dataflow_operator.core.temporal import TemporalBound
from dataflow_operator.core.top_n import RANKED
from dataflow_operator.runtime.changelog_store import DIFF, TIME
from dataflow_operator.runtime.sources.frames import (
    SourceInput,
    register_source_format,
    source_frame,
)
from dataflow_operator.runtime.storage import Location
from dataflow_operator.runtime.strategies.aggregate import GroupTotals
from dataflow_operator.runtime.strategies.buckets import bucket_of
from dataflow_operator.runtime.strategies.columns import BUCKET
from dataflow_operator.runtime.strategies.distinct_values import distinct_text
from dataflow_operator.runtime.strategies.flat_keys import FlatKeys
from dataflow_operator.runtime.strategies.general import Recompute, inputs_changelog
from dataflow_operator.runtime.strategies.join import joined_changelog
from dataflow_operator.runtime.strategies.multiset import multiset_changelog
from dataflow_operator.runtime.strategies.partial_sums import PartialSums, sums_exactly
from dataflow_operator.runtime.strategies.residual_filter import pair_filter_of
from dataflow_operator.runtime.strategies.sessions import session_changelog, unsessioned_type
from dataflow_operator.runtime.strategies.temporal_filter import apply_bounds
from dataflow_operator.runtime.strategies.top_n import top_n_changelog, unordered_type

__all__ = [
    "UNRESOLVED_JOIN",
    "BuiltDataflow",
    "SourceInput",
    "build_dataflow",
    "ddl_of",
    "planned_recompute_reason",
]

_views_lock = threading.Lock()


class Unsupported(InvalidSql):
    """A query shape the engine does not maintain yet."""

    reason = "Unsupported"


@dataclass(frozen=True, slots=True)
class BuiltDataflow:
    """The output changelog stream and what the engine needs to know about it."""

    frame: DataFrame
    columns: tuple[str, ...]
    data_ddl: str
    stateful: bool
    plan: QueryPlan
    transform: Callable[[pa.Table, int], pa.Table] | None = None
    """For GENERAL queries: turns a batch of the stream (input updates) into output updates."""
    recompute_reason: str | None = None
    """For GENERAL queries: what no incremental strategy covers, in a user's words."""
    sources: tuple[SourceInput, ...] = ()
    """Its sources, with the options their readers were given."""

    @property
    def kafka_sources(self) -> tuple[SourceInput, ...]:
        """Its kafka sources: the engine has the executors read their batches
        (:mod:`~dataflow_operator.runtime.sources.kafka_stage`)."""
        return tuple(s for s in self.sources if s.options.get("kind") == "kafka")

    @property
    def may_idle(self) -> bool:
        """Whether a batch with nothing new in its inputs can change its output only
        through the timers of its state: false for a recomputed query with ``mz_now()``
        (its result moves with the clock alone)."""
        return self.transform is None or not self.plan.temporal.bounds

    @property
    def releases_at_frontier(self) -> bool:
        """Its stateful operators, told the inputs' frontier with a batch, hold nothing
        below it (joins, set operations, an aggregate over a join; no temporal filter):
        see :mod:`dataflow_operator.runtime.engine.completion`."""
        return self.stateful and not self.plan.temporal.bounds


def ddl_of(schema: T.StructType, exclude: frozenset[str] = frozenset({TIME, DIFF})) -> str:
    """The DDL of ``schema``'s fields (``a INT, b STRING``), without the runtime columns."""
    return ", ".join(
        f"`{field.name}` {field.dataType.simpleString()}"
        for field in schema.fields
        if field.name not in exclude
    )


def _aggregate(
    spark: SparkSession, plan: MaintenancePlan, *, in_time_order: bool = False
) -> DataFrame:
    """The AGGREGATE strategy over the registered inputs: totals in state, transitions out.

    ``in_time_order``: the inputs' updates do not come in time order from one batch to the
    next (a join's output), so the totals take in a time's updates once the watermark
    reaches it (:class:`~.aggregate.GroupTotals`)."""
    aggregate = plan.aggregate
    assert aggregate is not None
    partial = spark.sql(plan.sql)  # for the partial sums' types only
    per_row = spark.sql(aggregate.per_row_sql)
    kinds = aggregate.kinds or ("sum",) * len(aggregate.sums)
    tuples = {  # count(DISTINCT a, b): its structs kept as text
        name
        for name, kind in zip(aggregate.sums, kinds, strict=True)
        if kind == "count_distinct" and isinstance(partial.schema[name].dataType, T.StructType)
    }
    have = {field.name: field.dataType for field in per_row.schema.fields}
    per_row = per_row.select(
        *[
            (
                distinct_text(F.col(f"`{field.name}`"), field.dataType)
                if field.name in tuples and isinstance(field.dataType, T.StructType)
                else _typed(field.name, have[field.name], field.dataType)
            ).alias(field.name)
            for field in partial.schema.fields
        ]
    )
    keys = [partial.schema[k] for k in aggregate.keys]
    sums = [
        T.StructField(name, T.LongType()) if kind == "count_distinct" else partial.schema[name]
        for name, kind in zip(aggregate.sums, kinds, strict=True)
    ]
    sums.append(partial.schema[COUNT])
    flat = FlatKeys(tuple(keys))  # keys cross the processor's pandas frames as numbers
    totals = [*sums, T.StructField(TIME, T.LongType()), T.StructField(DIFF, T.LongType())]
    valued = [name for name, kind in zip(aggregate.sums, kinds, strict=True) if kind != "sum"]
    added = [name for name, kind in zip(aggregate.sums, kinds, strict=True) if kind == "sum"]
    grouped = (*aggregate.keys, TIME, *valued)
    summed = (*added, COUNT)
    if sums_exactly(
        [per_row.schema[n].dataType for n in grouped], [per_row.schema[n].dataType for n in summed]
    ):
        per_row = per_row.mapInArrow(PartialSums(grouped, summed), per_row.schema)
    key_columns = [F.col(f"`{k}`") for k in aggregate.keys]
    groups = per_row.select(  # by position: the keys first, as the partial sums have them
        *flat.encoded(),
        *[F.col(f"`{name}`") for name in per_row.columns[len(keys) :]],
        bucket_of(key_columns).alias(BUCKET),
    )
    groups = groups.groupBy(BUCKET).transformWithStateInPandas(
        statefulProcessor=GroupTotals(
            len(flat.fields),
            len(aggregate.sums),
            tuple(isinstance(f.dataType, T.IntegralType) for f in flat.fields),
            aggregate.kinds,
            in_time_order=in_time_order,
        ),
        outputStructType=T.StructType([*flat.fields, *totals]),
        outputMode="Append",
        timeMode="EventTime" if in_time_order else "None",
    )
    groups = groups.select(*flat.decoded(), *[F.col(f"`{f.name}`") for f in totals])
    groups.createOrReplaceTempView(GROUPS)
    try:
        return spark.sql(aggregate.changelog_sql)
    finally:
        spark.catalog.dropTempView(GROUPS)


def _snapshot_schema(spark: SparkSession, plan: QueryPlan) -> T.StructType:
    """The query's output schema over its inputs' data columns (a star over the streams
    would also pick up ``__time`` and ``__diff``)."""
    streams = {name: spark.table(name) for name in sorted(plan.maintenance.inputs)}
    try:
        for name, stream in streams.items():
            fields = [f for f in stream.schema.fields if f.name not in (TIME, DIFF)]
            spark.createDataFrame([], T.StructType(fields)).createOrReplaceTempView(name)
        return spark.sql(plan.maintenance.snapshot_sql).schema
    finally:
        for name, stream in streams.items():
            stream.createOrReplaceTempView(name)


def _join(spark: SparkSession, plan: QueryPlan, until: int | None) -> DataFrame | None:
    """The JOIN strategy over the registered inputs, or ``None`` where it does not apply
    (a column name the sides' schemas cannot resolve, keys of unmatched types).

    A join with GROUP BY feeds its joined rows, as the relation ``__mz_joined``, to the
    AGGREGATE strategy's state (:mod:`.aggregate`)."""
    shape = plan.maintenance.join
    assert shape is not None
    sides = [spark.sql(side.sql) for side in shape.sides]
    columns = [[c for c in side.columns if c not in (TIME, DIFF)] for side in sides]
    resolved = shape.resolve(columns)
    if resolved is None:
        return None
    aggregation = plan_over_joined(resolved.output_sql) if resolved.aggregate else None
    if resolved.aggregate and aggregation is None:
        return None
    # A chain: the inputs joined so far (named as in the joined rows) with the next one.
    # The sides are not in step, so a join's updates do not come in time order from one
    # batch to the next. The next join takes them as they come; what reads the last
    # one's needs them in time order: the aggregate's totals hold its partial sums until
    # the watermark reaches their times, or (no GROUP BY) the join holds its rows.
    # The last join tests its pairs with the WHERE's comparisons it can (the WHERE filters
    # its rows after it).
    joined = sides[0]
    for number, step in enumerate(resolved.steps, start=1):
        names = (
            [joined_column(s, i) for s in range(number) for i in range(len(columns[s]))],
            [joined_column(number, i) for i in range(len(columns[number]))],
        )
        last = number == len(resolved.steps)
        chained = joined_changelog(
            step,
            joined,
            sides[number],
            names=names,
            until=until,
            in_time_order=aggregation is None and last,
            pairs=(
                pair_filter_of(
                    resolved.residual, (joined.schema, sides[number].schema), map(len, columns)
                )
                if last
                else None
            ),
        )
        if chained is None:
            return None
        joined = chained
    output = _snapshot_schema(spark, plan)
    joined.createOrReplaceTempView(JOINED)
    try:
        if aggregation is not None:
            # Its groups' totals over the joined rows.
            frame = _aggregate(spark, aggregation, in_time_order=True)
        else:
            frame = spark.sql(resolved.output_sql)
    finally:
        spark.catalog.dropTempView(JOINED)
    return _as_output(frame, output)


def _as_output(frame: DataFrame, output: T.StructType) -> DataFrame:
    """``frame`` (data columns, ``__time``, ``__diff``) with Spark's own names and types
    for the query's output, by position (names may repeat)."""
    names = [f.name for f in output.fields]
    have = [f.dataType for f in frame.schema.fields[: len(names)]]
    if have == [f.dataType for f in output.fields]:
        return frame.toDF(*names, TIME, DIFF)  # one call to the JVM, not a few a column
    positions = [f"__c{i}" for i in range(len(output.fields))]
    frame = frame.toDF(*positions, TIME, DIFF)
    return frame.select(
        *[
            _typed(p, current, f.dataType).alias(f.name)
            for p, current, f in zip(positions, have, output.fields, strict=True)
        ],
        F.col(TIME),
        F.col(DIFF),
    )


def _typed(name: str, current: T.DataType, wanted: T.DataType) -> Column:
    """Column ``name`` (of type ``current``) as ``wanted``: cast only if they differ (each
    cast is calls to the JVM while the plan is built)."""
    column = F.col(f"`{name}`")
    return column if current == wanted else column.cast(wanted)


def _multiset(spark: SparkSession, plan: QueryPlan, until: int | None) -> DataFrame:
    """The SET strategy (DISTINCT, set operations) over the registered inputs."""
    multiset = plan.maintenance.multiset
    assert multiset is not None
    inputs = [spark.sql(sql) for sql in multiset.inputs]
    frame = multiset_changelog(multiset, inputs, until=until)
    return _as_output(frame, _snapshot_schema(spark, plan))


def _top_n(spark: SparkSession, plan: QueryPlan, until: int | None) -> DataFrame | str:
    """The TOP_N strategy over the registered inputs (under the views' lock), or why it
    recomputes instead (an ``ORDER BY`` value of a type it cannot sort as Spark does)."""
    top_n = plan.maintenance.top_n
    assert top_n is not None
    inner = spark.sql(top_n.input_sql)
    unordered = unordered_type(top_n, inner)
    if unordered is not None:
        return f"a top-N ordered by a value of type {unordered}"
    frame = top_n_changelog(top_n, inner, until=until)
    if top_n.output_sql is not None:
        frame.createOrReplaceTempView(RANKED)
        try:
            frame = spark.sql(top_n.output_sql)
        finally:
            spark.catalog.dropTempView(RANKED)
    return _as_output(frame, _snapshot_schema(spark, plan))


def _sessions(spark: SparkSession, plan: QueryPlan, until: int | None) -> DataFrame | str:
    """A session window's sessionizer over the registered inputs (always a subquery of
    its own: :mod:`dataflow_operator.core.session`), or why the query recomputes instead
    (a time of a type it cannot take)."""
    session = plan.maintenance.session
    assert session is not None
    inner = spark.sql(session.input_sql)
    unsessioned = unsessioned_type(inner)
    if unsessioned is not None:
        return f"a session window over a time of type {unsessioned} (a TIMESTAMP is kept)"
    return session_changelog(session, inner, until=until)


def _register_derived(
    spark: SparkSession,
    maintenance: MaintenancePlan,
    plan: QueryPlan,
    until: int | None,
    registered: list[str],
) -> str | None:
    """Register the output changelog of each subquery ``maintenance`` reads as a relation
    of its own (:mod:`dataflow_operator.core.derived`; theirs first), adding the names to
    ``registered``; why the query is recomputed when one cannot be maintained after all
    (its join does not resolve, its top-N cannot sort its values), else ``None``.

    Every strategy's output comes in time order from one batch to the next (a join's and
    an aggregate's over a join are held until the watermark passes), as a source's
    does: the strategy reading it needs nothing more."""
    for derived in maintenance.derived:
        subquery = QueryPlan(plan.temporal, derived.plan)  # no bounds: mz_now() is outermost
        strategy = derived.plan.strategy
        frame = _strategy_frame(
            spark, subquery, strategy, until=until, previous_until=None, derived=registered
        )
        if isinstance(frame, str):
            return frame
        if strategy in (Strategy.AGGREGATE, Strategy.LINEAR):  # Spark's names for its columns
            frame = _as_output(frame, _snapshot_schema(spark, subquery))
        if until is not None:
            frame = frame.filter(F.col(TIME) < F.lit(until))
        frame.createOrReplaceTempView(derived.name)
        registered.append(derived.name)
    return None


def _recomputed(plan: QueryPlan) -> QueryPlan:
    """``plan`` recomputed as written, over its sources (not its subqueries' relations)."""
    maintenance = plan.maintenance
    sources = frozenset(n for n in maintenance.inputs if not n.startswith(DERIVED_PREFIX))
    general = MaintenancePlan(
        Strategy.GENERAL, maintenance.snapshot_sql, maintenance.snapshot_sql, sources
    )
    return QueryPlan(plan.temporal, general)


def _strategy_frame(
    spark: SparkSession,
    plan: QueryPlan,
    strategy: Strategy,
    *,
    until: int | None,
    previous_until: int | None,
    derived: list[str],
) -> DataFrame | str:
    """The output changelog by ``strategy`` over the registered inputs (and the relations
    of its maintained subqueries, whose names it adds to ``derived``), or why the query
    is recomputed instead."""
    if strategy is Strategy.GENERAL:
        return planned_recompute_reason(plan) or UNRESOLVED_JOIN
    unmaintained = _register_derived(spark, plan.maintenance, plan, until, derived)
    if unmaintained is not None:
        return unmaintained
    if strategy is Strategy.JOIN:
        joined = _join(spark, plan, until)
        return UNRESOLVED_JOIN if joined is None else joined
    if strategy is Strategy.TOP_N:
        return _top_n(spark, plan, until)
    if strategy is Strategy.SESSION:
        return _sessions(spark, plan, until)
    if strategy is Strategy.SET:
        return _multiset(spark, plan, until)
    if strategy is Strategy.AGGREGATE:
        return _aggregate(spark, plan.maintenance)
    frame = spark.sql(plan.maintenance.sql)  # LINEAR: with the bounds' columns, if any
    bounds = plan.temporal.bounds
    return apply_bounds(frame, bounds, until, previous_until) if bounds else frame


UNRESOLVED_JOIN = (
    "the join does not resolve against its inputs' columns (an ambiguous name, or join "
    "keys of different kinds)"
)
"""Why a query planned as a JOIN is recomputed after all."""


def planned_recompute_reason(plan: QueryPlan) -> str | None:
    """Why the engine recomputes ``plan``, as far as the plan tells (``None``:
    incremental, unless its join does not resolve: :data:`UNRESOLVED_JOIN`)."""
    maintenance = plan.maintenance
    if maintenance.recompute_reason is not None:
        return maintenance.recompute_reason
    if maintenance.aggregate is not None and maintenance.aggregate.global_aggregate:
        return "an aggregate without GROUP BY (its one row exists even over no input)"
    return None


def _general(
    spark: SparkSession,
    plan: QueryPlan,
    bounds: tuple[TemporalBound, ...],
    work_dir: Location | None,
    reason: str,
) -> BuiltDataflow:
    """The GENERAL strategy over the registered inputs (see :mod:`.general`)."""
    views = {name: spark.table(name) for name in sorted(plan.maintenance.inputs)}
    schemas = {
        name: T.StructType([f for f in frame.schema.fields if f.name not in (TIME, DIFF)])
        for name, frame in views.items()
    }
    output = spark.sql(plan.maintenance.snapshot_sql).schema  # analysed over the streams
    directory = work_dir or Location.of(tempfile.mkdtemp(prefix="general-"))
    recompute = Recompute(
        spark,
        plan.maintenance.snapshot_sql,
        schemas,
        output,
        work_dir=directory,
        views_lock=_views_lock,
    )
    return BuiltDataflow(
        frame=inputs_changelog(views),
        columns=tuple(f.name for f in output.fields),
        data_ddl=ddl_of(output),
        stateful=bool(bounds),
        plan=plan,
        transform=recompute,
        recompute_reason=reason,
    )


def build_dataflow(
    spark: SparkSession,
    sql: str,
    sources: list[SourceInput],
    until: int | None,
    previous_until: int | None,
    *,
    work_dir: Location | None = None,
) -> BuiltDataflow:
    """The dataflow's output changelog as a streaming DataFrame.

    ``work_dir`` holds a GENERAL query's input history and results (default: a new
    temporary directory).

    Raises :class:`~dataflow_operator.core.errors.DomainError` for SQL the core rejects
    (a query that reads none of ``sources`` is one), and :class:`Unsupported` for shapes
    not maintained yet.
    """
    plan = plan_query(sql, [s.name for s in sources])
    strategy = plan.maintenance.strategy
    aggregate = plan.maintenance.aggregate
    if aggregate is not None and aggregate.global_aggregate:
        # One row even over no input: recompute-and-diff gives that without special state.
        strategy = Strategy.GENERAL
    bounds = plan.temporal.bounds
    if not bounds:
        # Nothing is ever dropped at until without a temporal filter: nothing to replay.
        sources = [SourceInput(s.name, s.data_ddl, {**s.options, "until": "-1"}) for s in sources]
    register_source_format(spark)
    derived: list[str] = []  # the relations of subqueries maintained on their own
    with _views_lock:
        # Views are session-wide: register and resolve under one lock, so that two
        # dataflows with a source of the same name never see each other's.
        for source in sources:
            source_frame(spark, source).createOrReplaceTempView(source.name)
        try:
            if plan.temporal.staged:
                assert plan.temporal.inner_sql is not None
                inner = spark.sql(plan.temporal.inner_sql)
                filtered = apply_bounds(inner, bounds, until, previous_until)
                filtered.createOrReplaceTempView(FILTERED)
            outcome = _strategy_frame(
                spark, plan, strategy, until=until, previous_until=previous_until, derived=derived
            )
            if isinstance(outcome, str):
                general = _general(spark, _recomputed(plan), bounds, work_dir, outcome)
                return replace(general, sources=tuple(sources))
            frame = outcome
        finally:
            for name in [*(s.name for s in sources), FILTERED, *derived]:
                spark.catalog.dropTempView(name)
    if until is not None:
        frame = frame.filter(F.col(TIME) < F.lit(until))
    columns = tuple(c for c in frame.columns if c not in (TIME, DIFF))
    # Joins, set operations and top-Ns hold their output until the inputs are complete to
    # its time.
    held = strategy in (Strategy.JOIN, Strategy.SET, Strategy.TOP_N) or bool(derived)
    return BuiltDataflow(
        frame=frame,
        columns=columns,
        data_ddl=ddl_of(frame.schema),
        stateful=bool(bounds) or held,
        plan=plan,
        sources=tuple(sources),
    )
