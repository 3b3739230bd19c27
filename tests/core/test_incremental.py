"""Maintenance strategies: classification, the rewrites, and their meaning.

The meaning is checked without Spark: sqlglot's Python executor runs the rewritten SQL
on small changelogs, a few lines below simulate what the engine does with each strategy
(temporal expansion, per-group accumulation), and the result must equal the original
query recomputed over the consolidated inputs at every time, with ``mz_now()`` replaced
by that time.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import Any

import pytest
import sqlglot
from hypothesis import given, settings
from hypothesis import strategies as st
from sqlglot import exp
from sqlglot.executor import execute

from dataflow_operator.core.errors import DomainError, InvalidSql, UnknownSource
from dataflow_operator.core.incremental import (
    COUNT,
    GROUPS,
    MaintenancePlan,
    QueryPlan,
    Strategy,
    check_query,
    classify,
    plan_query,
)
from dataflow_operator.core.sql import DIALECT
from dataflow_operator.core.sql_shape import FILTERED, is_mz_now
from dataflow_operator.core.temporal import TemporalQuery

SOURCES = ["events", "users"]

Row = dict[str, Any]


def parse(sql: str) -> exp.Expr:
    tree = sqlglot.parse_one(sql, read=DIALECT)  # the project's Spark SQL (window(…) too)
    assert tree is not None
    return tree


# --- classification -------------------------------------------------------------------

CLASSIFIED: dict[str, tuple[str, Strategy]] = {
    "projection": ("SELECT a, b + 1 AS c FROM events", Strategy.LINEAR),
    "filter": ("SELECT a FROM events WHERE a > 1 AND b LIKE 'x%'", Strategy.LINEAR),
    "star": ("SELECT * FROM events", Strategy.LINEAR),
    "qualified star": ("SELECT e.* FROM events AS e", Strategy.LINEAR),
    "generator": ("SELECT explode(tags) AS tag FROM events", Strategy.LINEAR),
    "union all": ("SELECT a FROM events UNION ALL SELECT a FROM users", Strategy.LINEAR),
    "union all of stars": ("SELECT * FROM events UNION ALL SELECT * FROM users", Strategy.LINEAR),
    "order by without limit is dropped": ("SELECT a FROM events ORDER BY a", Strategy.LINEAR),
    "group by count": ("SELECT a, COUNT(*) FROM events GROUP BY a", Strategy.AGGREGATE),
    "sum avg count(x)": (
        "SELECT a, SUM(b), AVG(b), COUNT(b) FROM events GROUP BY a",
        Strategy.AGGREGATE,
    ),
    "global aggregate": ("SELECT COUNT(*), SUM(b) FROM events", Strategy.AGGREGATE),
    "group by expression": (
        "SELECT date_trunc('DAY', ts), COUNT(*) FROM events GROUP BY date_trunc('DAY', ts)",
        Strategy.AGGREGATE,
    ),
    "group by ordinal": ("SELECT a, COUNT(*) FROM events GROUP BY 1", Strategy.AGGREGATE),
    "having": (
        "SELECT a FROM events GROUP BY a HAVING SUM(b) > 10",
        Strategy.AGGREGATE,
    ),
    "having on an output alias": (
        "SELECT a, COUNT(*) AS n FROM events GROUP BY a HAVING n > 1",
        Strategy.AGGREGATE,
    ),
    "group by without aggregate": ("SELECT a FROM events GROUP BY a", Strategy.AGGREGATE),
    "aggregate arithmetic": (
        "SELECT a, SUM(b) / COUNT(*) + 1 FROM events GROUP BY a",
        Strategy.AGGREGATE,
    ),
    "group by in another case": (
        "SELECT E.k, COUNT(*) FROM events AS e GROUP BY e.K",
        Strategy.AGGREGATE,
    ),
    "group by a backquoted name": ("SELECT `k`, SUM(x) FROM events GROUP BY k", Strategy.AGGREGATE),
    "parenthesised query": ("((SELECT a FROM events))", Strategy.LINEAR),
    "non-deterministic projection": ("SELECT a, rand() AS r FROM events", Strategy.GENERAL),
    "non-deterministic filter": (
        "SELECT a FROM events WHERE ts < current_timestamp()",
        Strategy.GENERAL,
    ),
    "non-deterministic aggregate": (
        "SELECT a, SUM(rand()) FROM events GROUP BY a",
        Strategy.GENERAL,
    ),
    "group by an output alias": (
        "SELECT b + 1 AS a, COUNT(*) FROM events GROUP BY a",
        Strategy.GENERAL,
    ),
    "equi-join": ("SELECT e.a FROM events AS e JOIN users AS u ON e.a = u.a", Strategy.JOIN),
    "non-equi join": ("SELECT e.a FROM events AS e JOIN users AS u ON e.a < u.a", Strategy.GENERAL),
    "join then aggregate": (
        "SELECT u.a, COUNT(*) FROM events AS e JOIN users AS u ON e.a = u.a GROUP BY u.a",
        Strategy.JOIN,
    ),
    "join then max": (
        "SELECT u.a, MAX(e.b) FROM events AS e JOIN users AS u ON e.a = u.a GROUP BY u.a",
        Strategy.JOIN,
    ),
    "join then median": (
        "SELECT u.a, MEDIAN(e.b) FROM events AS e JOIN users AS u ON e.a = u.a GROUP BY u.a",
        Strategy.GENERAL,
    ),
    "join then global count": (
        "SELECT COUNT(*) FROM events AS e JOIN users AS u ON e.a = u.a",
        Strategy.GENERAL,
    ),
    "distinct": ("SELECT DISTINCT a FROM events", Strategy.SET),
    "distinct over a join": (
        "SELECT DISTINCT e.a FROM events AS e JOIN users AS u ON e.a = u.a",
        Strategy.GENERAL,
    ),
    "min": ("SELECT a, MIN(b) FROM events GROUP BY a", Strategy.AGGREGATE),
    "max": ("SELECT MAX(b) FROM events", Strategy.AGGREGATE),
    "min distinct": ("SELECT a, MIN(DISTINCT b) FROM events GROUP BY a", Strategy.GENERAL),
    "count distinct": ("SELECT a, COUNT(DISTINCT b) FROM events GROUP BY a", Strategy.AGGREGATE),
    "count distinct of two": (
        "SELECT a, COUNT(DISTINCT b, c) FROM events GROUP BY a",
        Strategy.AGGREGATE,
    ),
    "aggregate filter": ("SELECT COUNT(*) FILTER (WHERE b > 1) FROM events", Strategy.AGGREGATE),
    "aggregate filter over two columns": (
        "SELECT a, COUNT(DISTINCT a, b) FILTER (WHERE b > 1) FROM events GROUP BY a",
        Strategy.AGGREGATE,
    ),
    "anonymous aggregate": ("SELECT a, try_sum(b) FROM events GROUP BY a", Strategy.GENERAL),
    "window": ("SELECT a, ROW_NUMBER() OVER (ORDER BY b) FROM events", Strategy.GENERAL),
    "top-n": (
        "SELECT a FROM (SELECT a, ROW_NUMBER() OVER (PARTITION BY a ORDER BY b) AS r "
        "FROM events) WHERE r <= 3",
        Strategy.TOP_N,
    ),
    "tumbling window": (
        "SELECT window.start, COUNT(*) FROM events GROUP BY window(b, '1 hour')",
        Strategy.AGGREGATE,
    ),
    "sliding window over a join": (
        "SELECT u.a, window.end, MAX(e.b) FROM events AS e JOIN users AS u ON e.a = u.a "
        "GROUP BY u.a, window(e.b, '1 hour', '10 minutes')",
        Strategy.JOIN,
    ),
    # an aggregate over its sessionizer (core.session)
    "session window": (
        "SELECT session_window.start, COUNT(*) FROM events GROUP BY session_window(b, '5 minutes')",
        Strategy.AGGREGATE,
    ),
    "session window of a day": (
        "SELECT session_window.start, COUNT(*) FROM events GROUP BY session_window(b, '1 day')",
        Strategy.GENERAL,
    ),
    "limit": ("SELECT a FROM events ORDER BY a LIMIT 10", Strategy.TOP_N),
    "limit without order": ("SELECT a FROM events LIMIT 10", Strategy.GENERAL),
    "subquery in where": (
        "SELECT a FROM events WHERE a IN (SELECT a FROM users)",
        Strategy.GENERAL,
    ),
    "subquery in aggregate query": (
        "SELECT a, COUNT(*) FROM events WHERE a IN (SELECT a FROM users) GROUP BY a",
        Strategy.GENERAL,
    ),
    "derived table": ("SELECT a FROM (SELECT a FROM events) AS s", Strategy.LINEAR),
    "derived table without an alias": ("SELECT a FROM (SELECT a FROM events)", Strategy.GENERAL),
    "derived table with a star and more": (
        "SELECT a FROM (SELECT *, 1 AS one FROM events) AS s",
        Strategy.GENERAL,
    ),
    "cte": ("WITH s AS (SELECT a FROM events) SELECT a FROM s", Strategy.GENERAL),
    "recursive cte": (
        "WITH RECURSIVE r AS (SELECT 1 AS n UNION ALL SELECT n + 1 FROM r WHERE n < 5) "
        "SELECT n FROM r",
        Strategy.GENERAL,
    ),
    "union distinct": ("SELECT a FROM events UNION SELECT a FROM users", Strategy.SET),
    "except": ("SELECT a FROM events EXCEPT SELECT a FROM users", Strategy.SET),
    "union of three": (
        "SELECT a FROM events UNION SELECT a FROM users UNION SELECT a FROM events",
        Strategy.GENERAL,
    ),
    "union all with an aggregate branch": (
        "SELECT a FROM events UNION ALL SELECT COUNT(*) FROM users",
        Strategy.GENERAL,
    ),
    "union all with a star and more": (
        "SELECT *, 1 AS one FROM events UNION ALL SELECT * FROM users",
        Strategy.GENERAL,
    ),
    "no source": ("SELECT 1 AS one", Strategy.GENERAL),
    "rollup": ("SELECT a, COUNT(*) FROM events GROUP BY ROLLUP (a)", Strategy.GENERAL),
    "column not grouped": ("SELECT a, b FROM events GROUP BY a", Strategy.GENERAL),
    "lateral view": (
        "SELECT t FROM events LATERAL VIEW explode(tags) x AS t",
        Strategy.GENERAL,
    ),
}


@pytest.mark.parametrize("case", sorted(CLASSIFIED))
def test_classification(case: str) -> None:
    sql, strategy = CLASSIFIED[case]
    plan = classify(sql, SOURCES)
    assert plan.strategy is strategy
    assert (plan.aggregate is not None) == (strategy is Strategy.AGGREGATE)
    for text in (plan.sql, plan.snapshot_sql):
        assert parse(text).sql(dialect=DIALECT) == text
    assert (plan.join is not None) == (strategy is Strategy.JOIN)
    assert (plan.multiset is not None) == (strategy is Strategy.SET)
    assert (plan.top_n is not None) == (strategy is Strategy.TOP_N)
    if strategy in (Strategy.GENERAL, Strategy.JOIN, Strategy.SET, Strategy.TOP_N):
        assert plan.sql == plan.snapshot_sql


def test_general_sql_is_the_query_itself() -> None:
    plan = classify("SELECT e.a FROM events AS e JOIN users AS u ON e.a < u.a", SOURCES)
    assert plan.sql == "SELECT e.a FROM events AS e JOIN users AS u ON e.a < u.a"
    assert plan.inputs == frozenset({"events", "users"})


def test_linear_appends_time_and_diff() -> None:
    plan = classify("SELECT a, b + 1 AS c FROM events WHERE a > 1", SOURCES)
    assert plan.sql == "SELECT a, b + 1 AS c, __time, __diff FROM events WHERE a > 1"
    assert plan.snapshot_sql == "SELECT a, b + 1 AS c FROM events WHERE a > 1"


def test_linear_star_keeps_time_and_diff_naturally() -> None:
    assert classify("SELECT * FROM events", SOURCES).sql == "SELECT * FROM events"


def test_linear_union_all_appends_to_every_branch() -> None:
    plan = classify("SELECT a FROM events UNION ALL SELECT b FROM users WHERE b > 0", SOURCES)
    assert plan.sql == (
        "SELECT a, __time, __diff FROM events UNION ALL "
        "SELECT b, __time, __diff FROM users WHERE b > 0"
    )


def test_aggregate_rewrite_is_diff_weighted() -> None:
    plan = classify(
        "SELECT a, COUNT(*) AS n, COUNT(b) AS nb, SUM(b) AS s, AVG(b) AS m "
        "FROM events AS e WHERE e.c > 0 GROUP BY e.a",
        SOURCES,
    )
    assert plan.sql == (
        "SELECT a AS __key_0, __time, "
        "SUM(CASE WHEN NOT b IS NULL THEN __diff ELSE 0 END) AS __sum_0, "
        "COALESCE(SUM(b * __diff), 0) AS __sum_1, "
        "SUM(__diff) AS __count "
        "FROM events AS e WHERE c > 0 GROUP BY a, __time"
    )
    assert plan.aggregate is not None
    assert plan.aggregate.keys == ("__key_0",)
    assert plan.aggregate.sums == ("__sum_0", "__sum_1")
    assert not plan.aggregate.global_aggregate
    assert plan.aggregate.final_sql == (
        "SELECT __key_0 AS a, __count AS n, __sum_0 AS nb, "
        "CASE WHEN __sum_0 = 0 THEN NULL ELSE __sum_1 END AS s, "
        "CASE WHEN __sum_0 = 0 THEN NULL ELSE __sum_1 / __sum_0 END AS m "
        f"FROM {GROUPS} WHERE {COUNT} > 0"
    )


def test_unaliased_aggregate_outputs_are_named_by_their_sql() -> None:
    plan = classify("SELECT a, COUNT(*), SUM(b + 1) FROM events GROUP BY a", SOURCES)
    assert plan.aggregate is not None
    names = [e.alias for e in parse(plan.aggregate.final_sql).expressions]
    assert names == ["a", "COUNT(*)", "SUM(b + 1)"]


def test_global_aggregate_keeps_its_row_when_empty() -> None:
    plan = classify("SELECT COUNT(*) AS n FROM events", SOURCES)
    assert plan.aggregate is not None
    assert plan.aggregate.global_aggregate
    assert plan.aggregate.keys == ()
    assert "WHERE" not in plan.aggregate.final_sql
    assert plan.sql == "SELECT __time, SUM(__diff) AS __count FROM events GROUP BY __time"


def test_having_filters_the_final_rows() -> None:
    plan = classify("SELECT a FROM events GROUP BY a HAVING SUM(b) > 10", SOURCES)
    assert plan.aggregate is not None
    assert plan.aggregate.final_sql == (
        "SELECT __key_0 AS a FROM __mz_groups WHERE __count > 0 AND "
        "CASE WHEN __sum_0 = 0 THEN NULL ELSE __sum_1 END > 10"
    )


def test_classify_refuses_mz_now() -> None:
    with pytest.raises(InvalidSql, match="plan_query"):
        classify("SELECT a FROM events WHERE mz_now() < ts", SOURCES)


def test_classify_reports_unknown_sources() -> None:
    with pytest.raises(UnknownSource):
        classify("SELECT a FROM nowhere", SOURCES)


# --- plan_query: temporal and maintenance together ----------------------------------------


def test_temporal_linear_is_one_stage() -> None:
    plan = plan_query(
        "SELECT event_ts, content FROM events WHERE mz_now() <= event_ts + INTERVAL '30 days'",
        SOURCES,
    )
    assert plan.maintenance.strategy is Strategy.LINEAR
    assert not plan.temporal.staged
    assert plan.maintenance.sql == plan.temporal.sql
    assert "__mz_bound_0" in plan.maintenance.sql
    assert plan.maintenance.snapshot_sql == "SELECT event_ts, content FROM events"
    assert plan.maintenance.inputs == frozenset({"events"})


def test_temporal_aggregate_reads_the_filtered_relation() -> None:
    plan = plan_query(
        "SELECT content, COUNT(*) FROM events WHERE mz_now() < ts + 10 GROUP BY content",
        SOURCES,
    )
    assert plan.temporal.staged
    assert plan.maintenance.strategy is Strategy.AGGREGATE
    assert plan.maintenance.inputs == frozenset({FILTERED})
    assert f"FROM {FILTERED} AS events" in plan.maintenance.sql


def test_temporal_general_reads_the_filtered_relation_and_the_others() -> None:
    plan = plan_query(
        "SELECT DISTINCT a FROM events WHERE mz_now() < ts AND a IN (SELECT a FROM users)",
        SOURCES,
    )
    assert plan.maintenance.strategy is Strategy.GENERAL
    assert plan.maintenance.inputs == frozenset({FILTERED, "users"})


def test_query_without_mz_now() -> None:
    plan = plan_query("SELECT a, SUM(b) FROM events GROUP BY a", SOURCES)
    assert plan.temporal == TemporalQuery(sql="SELECT a, SUM(b) FROM events GROUP BY a", bounds=())
    assert plan.maintenance.strategy is Strategy.AGGREGATE


def test_plan_query_rejects_unsupported_mz_now() -> None:
    with pytest.raises(InvalidSql, match="under OR"):
        plan_query("SELECT a FROM events WHERE mz_now() < ts OR a = 1", SOURCES)


# --- a model of the engine, run with sqlglot's executor ----------------------------------

SCHEMA = ("k", "x", "ts")


CHANGELOG = (*SCHEMA, "__time", "__diff")


def run(sql: str, tables: dict[str, list[Row]]) -> list[Row]:
    schema = {
        name: {
            column: "VARCHAR" if column == "k" else "BIGINT"
            for column in (rows[0] if rows else CHANGELOG)
        }
        for name, rows in tables.items()
    }
    result = execute(sql, schema=schema, dialect="spark", tables=tables)
    return [dict(zip(result.columns, row, strict=True)) for row in result.rows]


def consolidate(updates: Sequence[Row], time: int, columns: Sequence[str]) -> list[Row]:
    counts: Counter[tuple[Any, ...]] = Counter()
    for update in updates:
        if update["__time"] <= time:
            counts[tuple(update[c] for c in columns)] += update["__diff"]
    assert all(n >= 0 for n in counts.values()), counts
    return [dict(zip(columns, key, strict=True)) for key, n in counts.items() for _ in range(n)]


def expand(rows: list[Row], plan: TemporalQuery) -> list[Row]:
    """What the engine does with bound columns: two updates per row, bounds dropped."""
    out = []
    for row in rows:
        lowers = [row[b.column] + b.shift_ms for b in plan.bounds if b.kind == "lower"]
        uppers = [row[b.column] + b.shift_ms for b in plan.bounds if b.kind == "upper"]
        lowers = [v for v in lowers if v is not None]
        uppers = [v for v in uppers if v is not None]
        lower = max(lowers) if lowers else None
        upper = min(uppers) if uppers else None
        data = {k: v for k, v in row.items() if not k.startswith("__mz_bound_")}
        if lower is not None and upper is not None and lower >= upper:
            continue
        start = row["__time"] if lower is None else max(row["__time"], lower)
        out.append({**data, "__time": start})
        if upper is not None:
            out.append({**data, "__time": max(row["__time"], upper), "__diff": -row["__diff"]})
    return out


def maintain(
    plan: MaintenancePlan, tables: dict[str, list[Row]], first_time: int
) -> list[tuple[tuple[Any, ...], int, int]]:
    """The output changelog of LINEAR and AGGREGATE plans, as the engine would make it."""
    if plan.strategy is Strategy.LINEAR:
        return [
            (tuple(v for k, v in r.items() if not k.startswith("__")), r["__time"], r["__diff"])
            for r in run(plan.sql, tables)
        ]
    assert plan.aggregate is not None
    aggregate = plan.aggregate
    partials = sorted(run(plan.sql, tables), key=lambda r: r["__time"])
    totals = (*aggregate.sums, COUNT)
    if not aggregate.kinds:  # sums only: the per-row terms, summed, are the partial sums
        summed: dict[tuple[Any, ...], Counter[str]] = {}
        for row in run(aggregate.per_row_sql, tables):
            group = tuple(row[k] for k in (*aggregate.keys, "__time"))
            summed.setdefault(group, Counter()).update({c: row[c] for c in totals})
        assert {
            tuple(p[k] for k in (*aggregate.keys, "__time")): {c: p[c] for c in totals}
            for p in partials
        } == {group: {c: sums[c] for c in totals} for group, sums in summed.items()}
    zero = dict.fromkeys(totals, 0)
    state: dict[tuple[Any, ...], Row] = {}
    changelog = []
    empty: list[Row] = []
    if aggregate.global_aggregate:
        state[()] = dict(zero)
        empty = run(aggregate.final_sql, {GROUPS: [dict(zero)]})
        changelog += [(tuple(row.values()), first_time, 1) for row in empty]
    for partial in partials:
        key = tuple(partial[k] for k in aggregate.keys)
        keys = {k: partial[k] for k in aggregate.keys}
        old = state.get(key)
        new = {c: (old or zero)[c] + partial[c] for c in totals}
        # As the engine's state: the group's totals before (−1) and after (+1), mapped
        # by changelog_sql; equal rows cancel when the batch is consolidated.
        before = [{**keys, **old, "__time": partial["__time"], "__diff": -1}] if old else []
        after = [{**keys, **new, "__time": partial["__time"], "__diff": 1}]
        for row in run(aggregate.changelog_sql, {GROUPS: before + after}):
            values = tuple(v for k, v in row.items() if k not in ("__time", "__diff"))
            changelog.append((values, row["__time"], row["__diff"]))
        if new[COUNT] == 0 and not aggregate.global_aggregate:
            state.pop(key, None)
        else:
            state[key] = new
    # final_sql over the state left at the end is the current output.
    groups = [
        {**dict(zip(aggregate.keys, key, strict=True)), **totals_} for key, totals_ in state.items()
    ]
    current = Counter(
        tuple(r.values()) for g in groups for r in run(aggregate.final_sql, {GROUPS: [g]})
    )
    assert normal(current) == normal(as_of(changelog, 10**9))
    return changelog


def as_of(changelog: list[tuple[tuple[Any, ...], int, int]], time: int) -> Counter[Any]:
    counts: Counter[Any] = Counter()
    for row, t, diff in changelog:
        if t <= time:
            counts[row] += diff
    return +counts


def recompute(sql: str, tables: dict[str, list[Row]], time: int) -> Counter[Any]:
    tree = parse(sql).transform(
        lambda n: exp.Literal.number(time) if is_mz_now(n) else n, copy=True
    )
    snapshot = {name: consolidate(rows, time, SCHEMA) for name, rows in tables.items()}
    return Counter(tuple(r.values()) for r in run(tree.sql("spark"), snapshot))


def normal(counts: Counter[Any]) -> Counter[Any]:
    def value(v: Any) -> Any:
        return round(v, 6) if isinstance(v, float) else v

    return Counter({tuple(value(v) for v in row): n for row, n in counts.items()})


def engine(plan: QueryPlan, tables: dict[str, list[Row]], first_time: int) -> Any:
    temporal = plan.temporal
    if temporal.staged:
        assert temporal.inner_sql is not None
        assert len(tables) == 1
        filtered = expand(run(temporal.inner_sql, tables), temporal)
        return maintain(plan.maintenance, {FILTERED: filtered}, first_time)
    if temporal.bounds:
        rows = expand(run(plan.maintenance.sql, tables), temporal)
        return [
            (tuple(v for k, v in r.items() if not k.startswith("__")), r["__time"], r["__diff"])
            for r in rows
        ]
    return maintain(plan.maintenance, tables, first_time)


@st.composite
def changelogs(draw: st.DrawFn) -> list[Row]:
    """Inserts and later deletes of (k, x, ts) rows; multiplicities never go negative."""
    updates: list[Row] = []
    live: Counter[tuple[Any, ...]] = Counter()
    for time in range(draw(st.integers(1, 8))):
        for _ in range(draw(st.integers(0, 3))):
            present = sorted((r for r, n in live.items() if n > 0), key=repr)
            if len(present) > 0 and draw(st.booleans()):
                row = draw(st.sampled_from(present))
                diff = -draw(st.integers(1, live[row]))
            else:
                row = (
                    draw(st.sampled_from(["a", "b", "c"])),
                    draw(st.none() | st.integers(-3, 5)),
                    draw(st.integers(0, 10)),
                )
                diff = draw(st.integers(1, 2))
            live[row] += diff
            updates.append({"k": row[0], "x": row[1], "ts": row[2], "__time": time, "__diff": diff})
    return updates


QUERIES = [
    "SELECT k, x FROM events WHERE x > 0",
    "SELECT k, x * 2 AS y FROM events",
    "SELECT k, COUNT(*) AS n FROM events GROUP BY k",
    "SELECT k, SUM(x) AS s, COUNT(x) AS c, AVG(x) AS m FROM events GROUP BY k",
    "SELECT k, COUNT(*) AS n FROM events WHERE x >= 0 GROUP BY k HAVING SUM(x) > 2",
    "SELECT x % 2 AS parity, SUM(x) AS s FROM events GROUP BY x % 2",
    "SELECT COUNT(*) AS n, SUM(x) AS s FROM events",
    "SELECT k FROM events GROUP BY k",
    "SELECT k, SUM(x) AS s FROM events GROUP BY k HAVING s >= 2",
    "SELECT K, COUNT(X) AS c FROM events GROUP BY k",
    "SELECT k, x FROM events WHERE mz_now() < ts",
    "SELECT k, x FROM events WHERE mz_now() >= ts - 2 AND mz_now() <= ts + 1",
    "SELECT k FROM events WHERE mz_now() > ts AND x > 0",
    "SELECT k, ts FROM events WHERE mz_now() = ts",
    "SELECT k FROM events WHERE mz_now() BETWEEN ts - 1 AND ts + 1",
    "SELECT k, COUNT(*) AS n FROM events WHERE mz_now() <= ts GROUP BY k",
    "SELECT k, SUM(x) AS s FROM events WHERE mz_now() BETWEEN ts - 3 AND ts GROUP BY k",
    "SELECT COUNT(*) AS n FROM events WHERE mz_now() < ts + 2",
]


@pytest.mark.parametrize("sql", QUERIES)
@settings(max_examples=10, deadline=None)
@given(updates=changelogs())
@pytest.mark.slow
def test_maintained_output_equals_recomputation_at_every_time(sql: str, updates: list[Row]) -> None:
    plan = plan_query(sql, ["events"])
    assert plan.maintenance.strategy is not Strategy.GENERAL
    tables = {"events": updates}
    changelog = engine(plan, tables, first_time=0)
    for time in range(16):
        assert normal(as_of(changelog, time)) == normal(recompute(sql, tables, time)), time


@pytest.mark.parametrize(
    "sql",
    [
        "SELECT * FROM events WHERE mz_now() < ts",
        "SELECT a FROM events WHERE mz_now() = ts UNION ALL SELECT a FROM users WHERE mz_now() >= t",
        "SELECT a, COUNT(*) FROM events WHERE mz_now() < ts GROUP BY a",
        "SELECT DISTINCT a FROM events WHERE mz_now() < ts AND a > 1",
        "SELECT MAX(a) FROM events WHERE mz_now() BETWEEN ts AND ts + 1",
    ],
)
def test_no_statement_the_engine_runs_mentions_mz_now(sql: str) -> None:
    plan = plan_query(sql, SOURCES)
    statements = [
        plan.temporal.sql,
        plan.temporal.inner_sql,
        plan.temporal.outer_sql,
        plan.maintenance.sql,
        plan.maintenance.snapshot_sql,
    ]
    if plan.maintenance.aggregate is not None:
        statements += [
            plan.maintenance.aggregate.final_sql,
            plan.maintenance.aggregate.per_row_sql,
            plan.maintenance.aggregate.changelog_sql,
        ]
    for statement in statements:
        if statement is not None:
            assert "mz_now" not in statement.lower()
            assert parse(statement).sql(dialect=DIALECT) == statement


@pytest.mark.parametrize(
    "sql",
    [
        "SELECT content FROM events",
        "SELECT x, count(*) AS n FROM events GROUP BY x HAVING count(*) > 1",
        "SELECT DISTINCT content FROM events WHERE mz_now() <= event_ts + INTERVAL '30 days'",
        "SELECT a.x FROM events a JOIN other b ON a.x = b.x",
        "SELECT nope FROM missing",
        "SELECT x FROM events WHERE mz_now() <= ts OR x > 1",
        "SELECT __time FROM events",
        "SELEC x FROM events",
        "SELECT x, max(y) FROM events GROUP BY x",
        "SELECT * FROM events WHERE mz_now() > 5 AND mz_now() < ts",
    ],
)
def test_checking_a_query_rejects_exactly_what_planning_rejects(sql: str) -> None:
    """check_query is validation's cheap path: it must agree with plan_query."""
    names = ["events", "other"]
    try:
        plan_query(sql, names)
    except DomainError as planned:
        with pytest.raises(type(planned)) as checked:
            check_query(sql, names)
        assert checked.value.message == planned.message
    else:
        check_query(sql, names)
