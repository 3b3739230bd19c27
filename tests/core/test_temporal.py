"""Temporal filters: which mz_now() uses are accepted, the bounds they give, the rewrite."""

from __future__ import annotations

from collections.abc import Callable
from operator import ge, gt, le, lt
from typing import Literal

import pytest
import sqlglot
from hypothesis import given
from hypothesis import strategies as st
from sqlglot import exp

from dataflow_operator.core.errors import DomainError, InvalidSql, UnknownSource
from dataflow_operator.core.temporal import (
    TemporalBound,
    TemporalQuery,
    check_temporal,
    plan_temporal,
)

SOURCES = ["events", "users"]


def plan(sql: str) -> TemporalQuery:
    return plan_temporal(sql, SOURCES)


def parse(sql: str) -> exp.Expr:
    tree = sqlglot.parse_one(sql, read="spark")
    assert tree is not None
    return tree


def output_names(sql: str) -> list[str]:
    tree = parse(sql)
    select = tree if isinstance(tree, exp.Select) else next(tree.find_all(exp.Select))
    return [e.alias_or_name for e in select.expressions]


def where_of(sql: str) -> str | None:
    tree = parse(sql)
    where = tree.args.get("where")
    return None if where is None else where.this.sql("spark")


# --- the README's example -------------------------------------------------------------


def test_readme_example_is_one_stage_with_an_inclusive_upper_bound() -> None:
    query = plan(
        "SELECT event_ts, content FROM events WHERE mz_now() <= event_ts + INTERVAL '30 days'"
    )
    assert query.bounds == (TemporalBound("__mz_bound_0", "upper", 1),)
    assert query.inner_sql is None
    assert query.outer_sql is None
    assert not query.staged
    assert output_names(query.sql) == ["event_ts", "content", "__time", "__diff", "__mz_bound_0"]
    assert where_of(query.sql) is None
    bound = parse(query.sql).expressions[-1]
    assert bound.this.sql("spark") == "event_ts + INTERVAL '30' DAYS"


# --- each comparison, either side ---------------------------------------------------


@pytest.mark.parametrize(
    ("condition", "kind", "shift"),
    [
        ("mz_now() >= x", "lower", 0),
        ("mz_now() > x", "lower", 1),
        ("mz_now() < x", "upper", 0),
        ("mz_now() <= x", "upper", 1),
        ("x <= mz_now()", "lower", 0),
        ("x < mz_now()", "lower", 1),
        ("x > mz_now()", "upper", 0),
        ("x >= mz_now()", "upper", 1),
        ("(mz_now()) <= (x)", "upper", 1),
        ("MZ_NOW() <= x", "upper", 1),
    ],
)
def test_each_comparison_gives_its_bound(condition: str, kind: str, shift: int) -> None:
    query = plan(f"SELECT a FROM events WHERE {condition}")
    assert query.bounds == (TemporalBound("__mz_bound_0", kind, shift),)  # type: ignore[arg-type]
    assert parse(query.sql).expressions[-1].this.sql("spark") == "x"


_COMPARISONS: dict[str, tuple[Literal["lower", "upper"], int, Callable[[int, int], bool]]] = {
    ">=": ("lower", 0, ge),
    ">": ("lower", 1, gt),
    "<": ("upper", 0, lt),
    "<=": ("upper", 1, le),
}


@given(st.integers(0, 4_000_000_000_000_000), st.sampled_from(sorted(_COMPARISONS)))
def test_bound_millis_from_micros_is_exact_for_every_millisecond(micros: int, op: str) -> None:
    kind, shift, holds = _COMPARISONS[op]
    bound = TemporalBound("__mz_bound_0", kind, shift)
    edge = bound.millis_from_micros(micros)
    value = micros / 1000
    for now in (edge - 2, edge - 1, edge, edge + 1):
        valid = now >= edge if kind == "lower" else now < edge
        assert valid == holds(now * 1000, micros), (now, value)


def test_equality_gives_both_bounds_on_one_column() -> None:
    query = plan("SELECT a FROM events WHERE mz_now() = x")
    assert query.bounds == (
        TemporalBound("__mz_bound_0", "lower", 0),
        TemporalBound("__mz_bound_0", "upper", 1),
    )
    assert output_names(query.sql) == ["a", "__time", "__diff", "__mz_bound_0"]


def test_between_gives_lower_and_inclusive_upper() -> None:
    query = plan("SELECT a FROM events WHERE mz_now() BETWEEN lo AND hi")
    assert query.bounds == (
        TemporalBound("__mz_bound_0", "lower", 0),
        TemporalBound("__mz_bound_1", "upper", 1),
    )
    select = parse(query.sql)
    assert [e.this.sql("spark") for e in select.expressions[-2:]] == ["lo", "hi"]


def test_several_conjuncts_keep_the_others_in_where() -> None:
    query = plan(
        "SELECT a FROM events WHERE a > 1 AND mz_now() >= ts AND (b = 2 OR c = 3) "
        "AND mz_now() < ts + INTERVAL 1 HOUR"
    )
    assert query.bounds == (
        TemporalBound("__mz_bound_0", "lower", 0),
        TemporalBound("__mz_bound_1", "upper", 0),
    )
    assert where_of(query.sql) == "a > 1 AND (b = 2 OR c = 3)"


def test_bound_keeps_the_table_qualifier_of_its_scope() -> None:
    query = plan("SELECT e.a FROM events AS e WHERE mz_now() < e.ts + INTERVAL '2' DAYS")
    assert parse(query.sql).expressions[-1].this.sql("spark") == "e.ts + INTERVAL '2' DAYS"


def test_select_star_carries_time_and_diff_itself() -> None:
    query = plan("SELECT * FROM events WHERE mz_now() < ts")
    assert output_names(query.sql) == ["*", "__mz_bound_0"]


def test_order_by_without_limit_is_dropped() -> None:
    query = plan("SELECT a FROM events WHERE mz_now() < ts ORDER BY a")
    assert parse(query.sql).args.get("order") is None
    assert not query.staged


# --- queries without mz_now() ---------------------------------------------------------


def test_linear_query_without_mz_now_only_gains_time_and_diff() -> None:
    query = plan("SELECT a, b + 1 AS c FROM events WHERE a > 0")
    assert query.bounds == ()
    assert query.inner_sql is None
    assert output_names(query.sql) == ["a", "c", "__time", "__diff"]


def test_non_linear_query_without_mz_now_is_unchanged() -> None:
    sql = "SELECT a, COUNT(*) FROM events GROUP BY a"
    query = plan(sql)
    assert query == TemporalQuery(sql=sql.replace("COUNT", "COUNT"), bounds=())
    assert query.sql == "SELECT a, COUNT(*) FROM events GROUP BY a"


# --- UNION ALL ----------------------------------------------------------------------


def test_union_all_branches_fill_each_others_bounds_with_null() -> None:
    query = plan(
        "SELECT a FROM events WHERE mz_now() < ts UNION ALL SELECT a FROM users WHERE mz_now() >= t"
    )
    assert query.bounds == (
        TemporalBound("__mz_bound_0", "upper", 0),
        TemporalBound("__mz_bound_1", "lower", 0),
    )
    branches = list(parse(query.sql).find_all(exp.Select))
    first, second = sorted(branches, key=lambda s: s.sql("spark"))
    assert [e.sql("spark") for e in first.expressions] == [
        "a",
        "__time",
        "__diff",
        "NULL AS __mz_bound_0",
        "t AS __mz_bound_1",
    ]
    assert [e.sql("spark") for e in second.expressions] == [
        "a",
        "__time",
        "__diff",
        "ts AS __mz_bound_0",
        "NULL AS __mz_bound_1",
    ]


def test_union_all_with_a_star_branch() -> None:
    query = plan("SELECT * FROM events WHERE mz_now() < ts UNION ALL SELECT * FROM users")
    assert "SELECT *, NULL AS __mz_bound_0 FROM users" in query.sql


def test_union_distinct_with_mz_now_is_rejected() -> None:
    with pytest.raises(InvalidSql, match="set operation is supported only in a UNION ALL"):
        plan("SELECT a FROM events WHERE mz_now() < ts UNION SELECT a FROM users")


# --- two stages -------------------------------------------------------------------------


def test_aggregate_puts_the_filter_in_an_inner_stage() -> None:
    query = plan(
        "SELECT content, COUNT(*) AS n FROM events WHERE mz_now() <= event_ts + INTERVAL 30 DAYS "
        "AND content <> '' GROUP BY content"
    )
    assert query.staged
    assert query.bounds == (TemporalBound("__mz_bound_0", "upper", 1),)
    assert query.inner_sql == (
        "SELECT *, event_ts + INTERVAL '30' DAYS AS __mz_bound_0 FROM events WHERE content <> ''"
    )
    assert (
        query.outer_sql
        == "SELECT content, COUNT(*) AS n FROM __mz_filtered AS events GROUP BY content"
    )
    assert (
        query.sql
        == "SELECT content, COUNT(*) AS n FROM events WHERE content <> '' GROUP BY content"
    )


@pytest.mark.parametrize(
    "shape",
    [
        "SELECT DISTINCT a FROM events AS e WHERE mz_now() < e.ts",
        "SELECT a, ROW_NUMBER() OVER (ORDER BY b) FROM events AS e WHERE mz_now() < e.ts",
        "SELECT a FROM events AS e WHERE mz_now() < e.ts ORDER BY a LIMIT 3",
        "SELECT MAX(a) FROM events AS e WHERE mz_now() < e.ts",
        "SELECT a FROM events AS e WHERE mz_now() < e.ts GROUP BY a HAVING COUNT(*) > 1",
    ],
)
def test_non_linear_shapes_are_staged(shape: str) -> None:
    query = plan(shape)
    assert query.staged
    assert query.outer_sql is not None
    assert "FROM __mz_filtered AS e" in query.outer_sql
    assert "mz_now" not in query.outer_sql.lower()
    assert query.inner_sql == "SELECT *, e.ts AS __mz_bound_0 FROM events AS e"


def test_subquery_conjuncts_stay_in_the_outer_stage() -> None:
    query = plan(
        "SELECT DISTINCT a FROM events WHERE mz_now() < ts AND a > 0 AND a IN (SELECT a FROM users)"
    )
    assert query.inner_sql == "SELECT *, ts AS __mz_bound_0 FROM events WHERE a > 0"
    assert query.outer_sql == (
        "SELECT DISTINCT a FROM __mz_filtered AS events WHERE a IN (SELECT a FROM users)"
    )


def test_subquery_elsewhere_makes_the_query_staged() -> None:
    query = plan("SELECT a, (SELECT COUNT(*) FROM users) FROM events WHERE mz_now() < ts")
    assert query.staged


# --- rejections ------------------------------------------------------------------------

REJECTED: dict[str, tuple[str, str]] = {
    "in SELECT": ("SELECT mz_now() FROM events", "not in the SELECT list"),
    "in SELECT expression": ("SELECT a, mz_now() < ts AS live FROM events", "the SELECT list"),
    "in GROUP BY": ("SELECT COUNT(*) FROM events GROUP BY mz_now()", "not in GROUP BY"),
    "in ORDER BY": ("SELECT a FROM events ORDER BY mz_now()", "not in ORDER BY"),
    "in HAVING": (
        "SELECT a FROM events GROUP BY a HAVING mz_now() < MAX(ts)",
        "not in HAVING",
    ),
    "in JOIN ON": (
        "SELECT a FROM events JOIN users ON mz_now() < events.ts",
        "not in a JOIN",
    ),
    "under OR": ("SELECT a FROM events WHERE mz_now() < ts OR a = 1", "under OR"),
    "under NOT": ("SELECT a FROM events WHERE NOT (mz_now() < ts)", "under NOT"),
    "NOT BETWEEN": ("SELECT a FROM events WHERE mz_now() NOT BETWEEN a AND b", "under NOT"),
    "two mz_now": ("SELECT a FROM events WHERE mz_now() <= mz_now()", "another mz_now()"),
    "mz_now inside the other side": (
        "SELECT a FROM events WHERE mz_now() < ts + (mz_now() - ts)",
        "another mz_now()",
    ),
    "mz_now in BETWEEN bound": (
        "SELECT a FROM events WHERE mz_now() BETWEEN mz_now() AND ts",
        "another mz_now()",
    ),
    "in a subquery": (
        "SELECT a FROM events WHERE a IN (SELECT a FROM users WHERE mz_now() < t)",
        "inside a subquery",
    ),
    "in a derived table": (
        "SELECT a FROM (SELECT a FROM events WHERE mz_now() < ts) AS s",
        "inside a subquery",
    ),
    "in a CTE": (
        "WITH s AS (SELECT a FROM events WHERE mz_now() < ts) SELECT a FROM s",
        "inside a CTE",
    ),
    "with a subquery": (
        "SELECT a FROM events WHERE mz_now() < (SELECT MAX(t) FROM users)",
        "not one containing a subquery",
    ),
    "with an aggregate": (
        "SELECT a FROM events WHERE mz_now() < MAX(ts)",
        "not one containing the aggregate MAX(ts)",
    ),
    "with a window function": (
        "SELECT a FROM events WHERE mz_now() < LAG(ts) OVER (ORDER BY ts)",
        "not one containing a window function",
    ),
    "with current_timestamp": (
        "SELECT a FROM events WHERE mz_now() < current_timestamp()",
        "non-deterministic",
    ),
    "with a string": (
        "SELECT a FROM events WHERE mz_now() < '2026-01-01'",
        "not '2026-01-01' (write TIMESTAMP",
    ),
    "with an interval": (
        "SELECT a FROM events WHERE mz_now() BETWEEN ts AND INTERVAL 1 DAY",
        "a number of epoch milliseconds, not INTERVAL '1' DAY",
    ),
    "with arguments": ("SELECT a FROM events WHERE mz_now(1) < ts", "takes no arguments"),
    "arithmetic on mz_now": (
        "SELECT a FROM events WHERE mz_now() - INTERVAL 1 DAY < ts",
        "compared directly",
    ),
    "bare mz_now": ("SELECT a FROM events WHERE mz_now()", "compared directly"),
    "mz_now IS NULL": ("SELECT a FROM events WHERE mz_now() IS NULL", "compared directly"),
    "function of mz_now": (
        "SELECT a FROM events WHERE unix_millis(mz_now()) < ts",
        "compared directly",
    ),
    "not equal": ("SELECT a FROM events WHERE mz_now() <> ts", "<> or !="),
    "IN list": ("SELECT a FROM events WHERE mz_now() IN (ts, t)", "IN"),
    "BETWEEN bound": (
        "SELECT a FROM events WHERE ts BETWEEN mz_now() AND t",
        "not one of its bounds",
    ),
    "nested comparison": (
        "SELECT a FROM events WHERE COALESCE(mz_now() < ts, TRUE)",
        "top-level AND-ed conjunct",
    ),
    "comparison compared": (
        "SELECT a FROM events WHERE (mz_now() < ts) = TRUE",
        "top-level AND-ed conjunct",
    ),
    "with a join": (
        "SELECT a FROM events JOIN users ON events.a = users.a WHERE mz_now() < ts",
        "reads one source directly",
    ),
    "from a derived table": (
        "SELECT a FROM (SELECT * FROM events) AS s WHERE mz_now() < ts",
        "reads one source directly",
    ),
    "reserved output name": ("SELECT a AS __diff FROM events", "reserved name"),
    "reserved bound name": ("SELECT a AS __mz_bound_0 FROM events", "reserved name"),
}


@pytest.mark.parametrize("case", sorted(REJECTED))
def test_unsupported_mz_now_is_rejected_with_one_clear_sentence(case: str) -> None:
    sql, expected = REJECTED[case]
    with pytest.raises(InvalidSql) as raised:
        plan(sql)
    assert expected in raised.value.message
    assert raised.value.field == "spec.sql"
    assert "\n" not in raised.value.message
    with pytest.raises(InvalidSql) as checked:  # validation, which renders nothing
        check_temporal(sql, SOURCES)
    assert checked.value.message == raised.value.message


def test_unknown_relation_is_reported_by_parse_sql() -> None:
    with pytest.raises(UnknownSource, match="'nowhere'"):
        plan("SELECT a FROM nowhere WHERE mz_now() < ts")


@pytest.mark.parametrize(
    "sql",
    [
        "SELECT 1 AS one",
        "SELECT 1 AS one WHERE mz_now() < 5",
        "WITH RECURSIVE r(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM r WHERE n < 3) "
        "SELECT * FROM r",
    ],
)
def test_a_query_that_reads_no_source_is_refused_by_check_and_plan(sql: str) -> None:
    for refuse in (check_temporal, plan_temporal):
        with pytest.raises(InvalidSql, match="reads none of the dataflow's sources") as raised:
            refuse(sql, SOURCES)
        assert raised.value.field == "spec.sql"


def test_unparsable_sql_is_invalid() -> None:
    with pytest.raises(InvalidSql, match="does not parse"):
        plan("SELEC a FROM events")


# --- properties ------------------------------------------------------------------------

_OPERATORS = {"<": ("upper", 0), "<=": ("upper", 1), ">": ("lower", 1), ">=": ("lower", 0)}
_MIRROR = {"<": ">", "<=": ">=", ">": "<", ">=": "<="}
_EXPRESSIONS = [
    "ts",
    "ts + INTERVAL '30 days'",
    "ts - INTERVAL 1 HOUR",
    "CAST(ms AS BIGINT) * 1000",
    "e.ts + INTERVAL '1' DAY",
    "to_timestamp(s)",
    "1000",
]


@given(
    st.lists(
        st.tuples(
            st.sampled_from(sorted(_OPERATORS)), st.sampled_from(_EXPRESSIONS), st.booleans()
        ),
        min_size=1,
        max_size=4,
    ),
    st.lists(st.sampled_from(["a > 1", "b IS NULL", "(c = 1 OR c = 2)"]), max_size=2),
    st.booleans(),
)
@pytest.mark.slow
def test_any_mix_of_conjuncts_gives_one_bound_each_in_order(
    comparisons: list[tuple[str, str, bool]], others: list[str], aggregate: bool
) -> None:
    conjuncts = [
        f"mz_now() {op} {e}" if left else f"{e} {_MIRROR[op]} mz_now()"
        for op, e, left in comparisons
    ]
    where = " AND ".join(conjuncts + others)
    select = "a, COUNT(*)" if aggregate else "a"
    group = " GROUP BY a" if aggregate else ""
    query = plan(f"SELECT {select} FROM events AS e WHERE {where}{group}")

    assert [(b.kind, b.shift_ms) for b in query.bounds] == [
        _OPERATORS[op] for op, _, _ in comparisons
    ]
    assert [b.column for b in query.bounds] == [f"__mz_bound_{i}" for i in range(len(comparisons))]
    stage = query.inner_sql if aggregate else query.sql
    assert stage is not None
    assert query.staged == aggregate
    tree = parse(stage)
    assert "mz_now" not in stage.lower()
    bound_columns = {e.alias: e.this for e in tree.expressions if e.alias.startswith("__mz_bound_")}
    for index, (_, expression, _) in enumerate(comparisons):
        rendered = parse(f"SELECT {expression}").expressions[0].sql("spark")
        assert bound_columns[f"__mz_bound_{index}"].sql("spark") == rendered
    remaining = where_of(stage)
    if others:
        assert remaining is not None
        assert len(remaining) > 0
    else:
        assert remaining is None
    if aggregate:
        assert query.outer_sql is not None
        assert "__mz_filtered" in query.outer_sql
        parse(query.outer_sql)


@pytest.mark.parametrize(
    "sql",
    [
        "SELECT event_ts, content FROM events WHERE mz_now() <= event_ts + INTERVAL '30 days'",
        "SELECT a FROM events WHERE mz_now() BETWEEN ts AND ts + INTERVAL 2 HOURS AND a = 'x'",
        "SELECT a, SUM(b) FROM events WHERE mz_now() < ts + INTERVAL '1-2' YEAR TO MONTH GROUP BY a",
        "SELECT * FROM events WHERE mz_now() >= ts UNION ALL SELECT * FROM users",
    ],
)
def test_every_rendered_stage_parses_back_to_itself(sql: str) -> None:
    query = plan(sql)
    for stage in (query.sql, query.inner_sql, query.outer_sql):
        if stage is not None:
            assert parse(stage).sql("spark") == stage


# --- robustness: random queries either plan cleanly or are rejected cleanly ---------------

_GOOD_ATOMS = {  # atom -> number of bounds it gives
    "mz_now() < ts": 1,
    "ts + INTERVAL 1 DAY >= mz_now()": 1,
    "mz_now() BETWEEN ts AND ts + 5": 2,
    "mz_now() = ts": 2,
}
_BAD_ATOMS = [
    "mz_now() <> ts",
    "mz_now() + 1 < ts",
    "mz_now() < MAX(ts)",
    "a IN (SELECT a FROM users WHERE mz_now() < t)",
    "mz_now() < mz_now()",
    "mz_now(3) < ts",
]
_PLAIN_ATOMS = ["a > 1", "b IS NULL", "a IN (SELECT a FROM users)"]


@st.composite
def conditions(draw: st.DrawFn) -> tuple[str, bool, int]:
    """A WHERE condition, whether it should be accepted, and its number of bounds."""
    atoms = draw(
        st.lists(
            st.sampled_from([*_GOOD_ATOMS, *_BAD_ATOMS, *_PLAIN_ATOMS]), min_size=1, max_size=4
        )
    )
    combine = draw(st.sampled_from(["AND", "OR", "NOT"]))
    mz = [a for a in atoms if "mz_now" in a]
    if combine == "AND" or (combine == "OR" and len(atoms) == 1):
        ok = all(a in _GOOD_ATOMS for a in mz)
        return " AND ".join(atoms), ok, sum(_GOOD_ATOMS.get(a, 0) for a in atoms)
    if combine == "OR":
        return " OR ".join(f"({a})" for a in atoms), not mz, 0
    return " AND ".join(f"NOT ({a})" for a in atoms), not mz, 0


@given(
    conditions(),
    st.sampled_from(["a", "a, b + 1 AS c", "*", "a, mz_now() AS now", "DISTINCT a"]),
    st.sampled_from(["events", "events AS e", "events JOIN users ON events.a = users.a"]),
    st.sampled_from(["", " GROUP BY a", " ORDER BY a", " ORDER BY a LIMIT 3"]),
    st.booleans(),
)
def test_random_queries_plan_or_fail_with_a_domain_error(
    condition: tuple[str, bool, int], items: str, source: str, suffix: str, union: bool
) -> None:
    where, ok, bound_count = condition
    if "GROUP BY" in suffix and items not in ("a", "DISTINCT a"):
        suffix = ""
    sql = f"SELECT {items} FROM {source} WHERE {where}{suffix}"
    if union:
        sql += " UNION ALL SELECT a FROM users"
    has_mz_now = "mz_now" in sql
    try:
        query = plan(sql)
    except DomainError as error:
        assert isinstance(error, InvalidSql)
        assert error.field == "spec.sql"
        assert not ok or "mz_now" in items or (has_mz_now and ("JOIN" in source or union))
        with pytest.raises(InvalidSql) as checked:  # validation says the same, and as much
            check_temporal(sql, SOURCES)
        assert checked.value.message == error.message
        return
    check_temporal(sql, SOURCES)  # what plans is valid
    assert ok
    assert "mz_now" not in items
    assert len(query.bounds) == bound_count
    for stage in (query.sql, query.inner_sql, query.outer_sql):
        if stage is not None:
            assert "mz_now" not in stage.lower()
            assert parse(stage).sql("spark") == stage
