"""The planners' rendered SQL, run by real Spark on small DataFrames.

The core never imports Spark; these tests check that what it renders is Spark SQL that
computes the intended numbers: bound columns (INTERVAL arithmetic, epoch ms) and the
diff-weighted aggregates accumulated as the engine is told to.
"""

from __future__ import annotations

from collections import Counter
from datetime import UTC, datetime
from decimal import Decimal
from typing import TYPE_CHECKING, Any

import pytest

from dataflow_operator.core.incremental import (
    COUNT,
    GROUPS,
    Strategy,
    plan_query,
)
from dataflow_operator.core.sql_shape import FILTERED
from dataflow_operator.core.temporal import TemporalQuery

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

pytestmark = pytest.mark.spark

T0 = datetime(2026, 1, 1, tzinfo=UTC)
T0_MS = int(T0.timestamp() * 1000)
DAY_MS = 86_400_000

EVENTS = "content STRING, event_ts TIMESTAMP, __time BIGINT, __diff BIGINT"
NUMBERS = "k STRING, x INT, d DECIMAL(10,2), ts BIGINT, __time BIGINT, __diff BIGINT"


def view(spark: SparkSession, name: str, rows: list[tuple[Any, ...]], schema: str) -> None:
    spark.createDataFrame(rows, schema).createOrReplaceTempView(name)


def bound_millis(spark: SparkSession, query: TemporalQuery) -> list[dict[str, int | None]]:
    """Each output row's bounds in epoch ms, as the engine computes them."""
    frame = spark.sql(query.sql)
    out = []
    for row in frame.collect():
        values: dict[str, int | None] = {}
        for bound in query.bounds:
            value = row[bound.column]
            if value is None:
                millis = None
            elif isinstance(value, datetime):
                millis = int(value.timestamp() * 1000) + bound.shift_ms
            else:
                millis = int(value) + bound.shift_ms
            values[f"{bound.kind}:{bound.column}"] = millis
        out.append(values)
    return out


@pytest.mark.slow
def test_readme_filter_bound_is_thirty_days_and_a_millisecond_later(spark: SparkSession) -> None:
    view(spark, "events", [("hello", T0, T0_MS, 1)], EVENTS)
    plan = plan_query(
        "SELECT event_ts, content FROM events WHERE mz_now() <= event_ts + INTERVAL '30 days'",
        ["events"],
    )
    frame = spark.sql(plan.temporal.sql)
    assert frame.columns == ["event_ts", "content", "__time", "__diff", "__mz_bound_0"]
    assert dict(frame.dtypes)["__mz_bound_0"] == "timestamp"
    (row,) = frame.collect()
    assert (row["__time"], row["__diff"], row["content"]) == (T0_MS, 1, "hello")
    assert bound_millis(spark, plan.temporal) == [{"upper:__mz_bound_0": T0_MS + 30 * DAY_MS + 1}]
    unix = spark.sql(f"SELECT unix_millis(__mz_bound_0) AS ms FROM ({plan.temporal.sql})")
    assert unix.collect()[0]["ms"] == T0_MS + 30 * DAY_MS


@pytest.mark.parametrize(
    ("interval", "millis"),
    [
        ("INTERVAL '30 days'", 30 * DAY_MS),
        ("INTERVAL 1 HOUR", 3_600_000),
        ("INTERVAL '2' DAY", 2 * DAY_MS),
        ("INTERVAL '1 02:00:00' DAY TO SECOND", DAY_MS + 7_200_000),
        ("INTERVAL '1-1' YEAR TO MONTH", (365 + 31) * DAY_MS),
    ],
)
def test_interval_arithmetic_renders_to_spark_timestamps(
    spark: SparkSession, interval: str, millis: int
) -> None:
    view(spark, "events", [("a", T0, T0_MS, 1)], EVENTS)
    plan = plan_query(
        f"SELECT content FROM events WHERE mz_now() > event_ts + {interval}", ["events"]
    )
    assert bound_millis(spark, plan.temporal) == [{"lower:__mz_bound_0": T0_MS + millis + 1}]


def test_union_all_bounds_of_other_branches_are_null(spark: SparkSession) -> None:
    view(spark, "events", [("a", T0, T0_MS, 1)], EVENTS)
    view(spark, "numbers", [("k", 1, Decimal("1.50"), 5_000, 7, 1)], NUMBERS)
    plan = plan_query(
        "SELECT content AS c FROM events WHERE mz_now() < event_ts + INTERVAL 1 DAY "
        "UNION ALL SELECT k FROM numbers WHERE mz_now() BETWEEN ts AND ts + 10",
        ["events", "numbers"],
    )
    frame = spark.sql(plan.temporal.sql)
    assert frame.columns == [
        "c",
        "__time",
        "__diff",
        "__mz_bound_0",
        "__mz_bound_1",
        "__mz_bound_2",
    ]
    bounds = sorted(bound_millis(spark, plan.temporal), key=repr)
    assert {
        "upper:__mz_bound_0": T0_MS + DAY_MS,
        "lower:__mz_bound_1": None,
        "upper:__mz_bound_2": None,
    } in bounds
    assert {
        "upper:__mz_bound_0": None,
        "lower:__mz_bound_1": 5_000,
        "upper:__mz_bound_2": 5_011,
    } in bounds
    # Spark's greatest/least skip NULLs, so an absent bound does not bound.
    least = spark.sql(
        f"SELECT least(unix_millis(__mz_bound_0), __mz_bound_2 + 1) AS u FROM ({plan.temporal.sql})"
    )
    assert sorted(r["u"] for r in least.collect()) == [5_011, T0_MS + DAY_MS]


UPDATES = [
    # k, x, d, ts, __time, __diff
    ("a", 1, Decimal("1.50"), 10, 1, 1),
    ("a", None, None, 10, 1, 2),
    ("a", 4, Decimal("2.25"), 20, 2, 1),
    ("b", 3, Decimal("0.10"), 30, 2, 1),
    ("a", 1, Decimal("1.50"), 10, 3, -1),
    ("b", 3, Decimal("0.10"), 30, 4, -1),
    ("c", None, None, 40, 4, 1),
]


def normal(counts: Counter[tuple[Any, ...]]) -> Counter[tuple[Any, ...]]:
    """Numbers compared to 6 decimals, whatever their Spark type."""
    result: Counter[tuple[Any, ...]] = Counter()
    for row, n in counts.items():
        result[tuple(round(float(v), 6) if isinstance(v, float | Decimal) else v for v in row)] += n
    return result


def consolidated(spark: SparkSession, time: int) -> DataFrame:
    counts: Counter[tuple[Any, ...]] = Counter()
    for *row, at, diff in UPDATES:
        if at <= time:
            counts[tuple(row)] += diff
    rows = [row for row, n in counts.items() for _ in range(n)]
    return spark.createDataFrame(rows, "k STRING, x INT, d DECIMAL(10,2), ts BIGINT")


def accumulate(
    spark: SparkSession, sql: str, transitions: list[dict[str, Any]] | None = None
) -> dict[int, dict[tuple[Any, ...], dict[str, Any]]]:
    """Run the partial aggregation; the engine's running state after each time.

    Appends to ``transitions`` the state rows the engine emits when a group changes: its
    totals before (``__diff`` −1, when it existed) and after (+1).
    """
    plan = plan_query(sql, ["numbers"])
    assert plan.maintenance.strategy is Strategy.AGGREGATE
    aggregate = plan.maintenance.aggregate
    assert aggregate is not None
    view(spark, "numbers", UPDATES, NUMBERS)
    partials = sorted(spark.sql(plan.maintenance.sql).collect(), key=lambda r: r["__time"])
    state: dict[tuple[Any, ...], dict[str, Any]] = {}
    history = {}
    for time in range(1, 5):
        for partial in (p for p in partials if p["__time"] == time):
            key = tuple(partial[k] for k in aggregate.keys)
            zero = {
                **dict(zip(aggregate.keys, key, strict=True)),
                **dict.fromkeys((*aggregate.sums, COUNT), 0),
            }
            # A global aggregate's one group exists from the start, at zero.
            existed = state.get(key) or (zero if aggregate.global_aggregate else None)
            old = existed or zero
            assert all(partial[c] is not None for c in (*aggregate.sums, COUNT))
            state[key] = {**old, **{c: old[c] + partial[c] for c in (*aggregate.sums, COUNT)}}
            if transitions is not None:
                if existed is not None:
                    transitions.append({**existed, "__time": time, "__diff": -1})
                transitions.append({**state[key], "__time": time, "__diff": 1})
        history[time] = {k: dict(v) for k, v in state.items()}
    return history


@pytest.mark.parametrize(
    "sql",
    [
        "SELECT k, COUNT(*) AS n, COUNT(x) AS nx, SUM(x) AS s, AVG(x) AS m, SUM(d) AS sd, "
        "AVG(d) AS md FROM numbers GROUP BY k",
        "SELECT k, SUM(x) + COUNT(*) AS t FROM numbers WHERE ts < 40 GROUP BY k HAVING COUNT(x) > 0",
        "SELECT COUNT(*) AS n, SUM(x) AS s, AVG(x) AS m FROM numbers",
        "SELECT k, SUM(x) AS s FROM numbers GROUP BY k HAVING s >= 2 AND k <> 'b'",
        "SELECT k, COUNT(*) FILTER (WHERE x > 1) AS n, SUM(x) FILTER (WHERE d > 0) AS s, "
        "AVG(d) FILTER (WHERE x IS NULL OR x < 3) AS m FROM numbers GROUP BY k",
    ],
)
@pytest.mark.slow
def test_diff_weighted_aggregates_equal_the_query_over_consolidated_input(
    spark: SparkSession, sql: str
) -> None:
    from pyspark.sql.types import DecimalType, StructField, StructType

    plan = plan_query(sql, ["numbers"])
    aggregate = plan.maintenance.aggregate
    assert aggregate is not None
    transitions: list[dict[str, Any]] = []
    history = accumulate(spark, sql, transitions)
    view(spark, "numbers", UPDATES, NUMBERS)
    types = {f.name: f.dataType for f in spark.sql(plan.maintenance.sql).schema}
    types["__diff"] = types[COUNT]
    names = list(transitions[0])
    schema = StructType([StructField(n, types[n]) for n in names])
    rows_ = [
        tuple(Decimal(t[n]) if isinstance(schema[n].dataType, DecimalType) else t[n] for n in names)
        for t in transitions
    ]
    spark.createDataFrame(rows_, schema).createOrReplaceTempView(GROUPS)
    changelog: list[tuple[Any, ...]] = [
        tuple(r) for r in spark.sql(aggregate.changelog_sql).collect()
    ]
    if aggregate.global_aggregate:
        spark.createDataFrame([dict.fromkeys((*aggregate.sums, COUNT), 0)]).createOrReplaceTempView(
            GROUPS
        )
        changelog += [(*row, 0, 1) for row in spark.sql(aggregate.final_sql).collect()]
    for time, state in history.items():
        groups = list(state.values()) or [dict.fromkeys((*aggregate.sums, COUNT), 0)]
        state_frame = spark.createDataFrame(groups)
        state_frame.createOrReplaceTempView(GROUPS)
        maintained = spark.sql(aggregate.final_sql)
        consolidated(spark, time).createOrReplaceTempView("numbers")
        expected = spark.sql(plan.maintenance.snapshot_sql)
        assert len(maintained.columns) == len(expected.columns)

        def rows(frame: DataFrame) -> Counter[tuple[Any, ...]]:
            return Counter(
                tuple(round(float(v), 6) if isinstance(v, float | Decimal) else v for v in r)
                for r in frame.collect()
            )

        assert rows(maintained) == rows(expected), (time, state)
        as_of: Counter[tuple[Any, ...]] = Counter()
        for *values, at, diff in changelog:
            if at <= time:
                as_of[tuple(values)] += diff
        assert +normal(as_of) == normal(rows(expected)), (time, changelog)


def test_staged_temporal_aggregate_runs_in_two_steps(spark: SparkSession) -> None:
    view(spark, "numbers", UPDATES, NUMBERS)
    plan = plan_query(
        "SELECT k, COUNT(*) AS n FROM numbers AS t WHERE mz_now() < t.ts + 5 AND x > 0 GROUP BY k",
        ["numbers"],
    )
    assert plan.temporal.inner_sql is not None
    inner = spark.sql(plan.temporal.inner_sql)
    assert inner.columns == ["k", "x", "d", "ts", "__time", "__diff", "__mz_bound_0"]
    assert sorted(r["__mz_bound_0"] for r in inner.collect()) == [15, 15, 25, 35, 35]
    inner.drop("__mz_bound_0").createOrReplaceTempView(FILTERED)
    partial = spark.sql(plan.maintenance.sql)
    assert {(r["__key_0"], r["__time"], r[COUNT]) for r in partial.collect()} == {
        ("a", 1, 1),
        ("a", 2, 1),
        ("b", 2, 1),
        ("a", 3, -1),
        ("b", 4, -1),
    }


def test_general_query_runs_over_consolidated_inputs(spark: SparkSession) -> None:
    consolidated(spark, 4).createOrReplaceTempView("numbers")
    plan = plan_query("SELECT k, max_by(x, x) AS top FROM numbers GROUP BY k", ["numbers"])
    assert plan.maintenance.strategy is Strategy.GENERAL
    assert sorted(tuple(r) for r in spark.sql(plan.maintenance.sql).collect()) == [
        ("a", 4),
        ("c", None),
    ]


def test_sub_millisecond_bounds_in_spark_match_millis_from_micros(spark: SparkSession) -> None:
    plan = plan_query(
        "SELECT content FROM events WHERE mz_now() >= event_ts AND mz_now() <= event_ts",
        ["events"],
    )
    lower, upper = plan.temporal.bounds
    micros = T0_MS * 1000 + 500
    (row,) = spark.sql(
        f"SELECT (unix_micros(timestamp_micros({micros})) + 999) div 1000 AS up, "
        f"unix_micros(timestamp_micros({micros})) div 1000 + 1 AS down_plus_one"
    ).collect()
    assert row["up"] == lower.millis_from_micros(micros) == T0_MS + 1
    assert row["down_plus_one"] == upper.millis_from_micros(micros) == T0_MS + 1


SHAPES = [
    "SELECT a, b + 1 AS c FROM events WHERE a > 1",
    "SELECT * FROM events WHERE mz_now() < ts + INTERVAL '30 days'",
    "SELECT e.a, explode(e.tags) AS tag FROM events AS e WHERE mz_now() BETWEEN e.ts AND e.t",
    "SELECT a FROM events WHERE mz_now() = ts UNION ALL SELECT a FROM users WHERE mz_now() >= t",
    "SELECT * FROM events UNION ALL SELECT * FROM events",
    "SELECT k, COUNT(*) AS n, SUM(x), AVG(x + 1), COUNT(b) FROM events GROUP BY k",
    "SELECT date_trunc('DAY', ts), COUNT(*) FROM events GROUP BY date_trunc('DAY', ts)",
    "SELECT COUNT(*), SUM(x) FROM events WHERE mz_now() < ts + INTERVAL 1 HOUR",
    "SELECT k, SUM(x) / COUNT(*) AS r FROM events AS e WHERE e.a > 0 GROUP BY 1 HAVING r > 1",
    "SELECT DISTINCT a FROM events WHERE mz_now() < ts AND a IN (SELECT a FROM users)",
    "SELECT a, ROW_NUMBER() OVER (ORDER BY b) AS r FROM events WHERE mz_now() <= ts",
    "SELECT e.a FROM events AS e JOIN users AS u ON e.a = u.a",
    "SELECT k, MAX(x) FROM events WHERE mz_now() > ts GROUP BY k ORDER BY k LIMIT 3",
]


@pytest.mark.parametrize("sql", SHAPES)
def test_every_rendered_statement_is_analysed_by_spark(spark: SparkSession, sql: str) -> None:
    """Analysis only (no job): every statement the planners render resolves in Spark."""
    changelog = "__time BIGINT, __diff BIGINT"
    schemas = {
        "events": f"a INT, b INT, k STRING, x INT, ts TIMESTAMP, t TIMESTAMP, tags ARRAY<STRING>, {changelog}",
        "users": f"a INT, b INT, t TIMESTAMP, {changelog}",
    }
    for name, schema in schemas.items():
        view(spark, name, [], schema)
    plan = plan_query(sql, ["events", "users"])
    temporal, maintenance = plan.temporal, plan.maintenance
    if temporal.inner_sql is not None:
        inner = spark.sql(temporal.inner_sql)
        assert {b.column for b in temporal.bounds} <= set(inner.columns)
        inner.drop(*{b.column for b in temporal.bounds}).createOrReplaceTempView(FILTERED)
    else:
        assert {b.column for b in temporal.bounds} <= set(spark.sql(temporal.sql).columns)
    for derived in maintenance.derived:  # a subquery maintained on its own: its changelog
        output = spark.sql(derived.plan.snapshot_sql)
        output.selectExpr("*", "0L AS __time", "0L AS __diff").createOrReplaceTempView(derived.name)
    if maintenance.top_n is not None:
        assert spark.sql(maintenance.top_n.input_sql).columns[-2:] == ["__time", "__diff"]
    stage = spark.sql(maintenance.sql)
    if maintenance.strategy is Strategy.LINEAR:
        assert stage.columns[-2 - len({b.column for b in temporal.bounds}) :][:2] == [
            "__time",
            "__diff",
        ]
    aggregate = maintenance.aggregate
    if aggregate is not None:
        stage.drop("__time").createOrReplaceTempView(GROUPS)
        final = spark.sql(aggregate.final_sql)
        spark.sql(f"SELECT *, 1 AS __diff FROM ({maintenance.sql})").createOrReplaceTempView(GROUPS)
        changes = spark.sql(aggregate.changelog_sql)
        assert changes.columns == [*final.columns, "__time", "__diff"]
        spark.sql(aggregate.per_row_sql).createOrReplaceTempView("per_row")
        assert spark.table("per_row").columns == stage.columns
    for name in maintenance.inputs:
        relation = spark.table(FILTERED if name == FILTERED else name)
        relation.drop("__time", "__diff").createOrReplaceTempView(name)
    snapshot = spark.sql(maintenance.snapshot_sql)
    if aggregate is not None:
        assert len(snapshot.columns) == len(final.columns)
