"""What the status and Event say about a query maintained by recompute."""

from __future__ import annotations

import pytest

from dataflow_operator.core.incremental import Strategy, plan_query

SOURCES = ["t", "u", "v"]


@pytest.mark.parametrize(
    ("sql", "reason"),
    [
        (
            "WITH RECURSIVE r(n) AS (SELECT a FROM t UNION ALL SELECT n + 1 FROM r WHERE n < 3) "
            "SELECT * FROM r",
            "WITH RECURSIVE is recomputed to its fixed point",
        ),
        (
            "SELECT a, row_number() OVER (ORDER BY a) AS n FROM t",
            "a window function (ROW_NUMBER() OVER (ORDER BY a))",
        ),
        ("SELECT a FROM t LIMIT 3", "LIMIT/OFFSET without ORDER BY (which rows it keeps"),
        (  # more rows than a top-N keeps
            "SELECT a FROM t ORDER BY a LIMIT 20000",
            "ORDER BY … LIMIT/OFFSET (a top-k of constants, of up to 10,000 rows",
        ),
        (
            "SELECT t.a FROM t JOIN u ON t.a < u.a",
            "a join condition that is not a conjunction of equalities between the two inputs",
        ),
        ("SELECT t.a, u.b FROM t CROSS JOIN u", "a cross join (no equality between the inputs)"),
        ("SELECT t.a FROM t LEFT SEMI JOIN u ON t.a = u.a", "a SEMI join"),
        (
            "SELECT t.a FROM t JOIN u ON t.a = u.a JOIN v ON v.a > t.a",
            "a join condition that is not a conjunction of equalities between the inputs "
            "joined so far and the next",
        ),
        ("SELECT t.a FROM t JOIN u ON t.a = u.a CROSS JOIN v", "a cross join"),
        ("SELECT a FROM t WHERE a IN (SELECT a FROM u)", "an IN (subquery) predicate"),
        ("SELECT a FROM t WHERE EXISTS (SELECT 1 FROM u WHERE u.a = t.a)", "an EXISTS subquery"),
        ("SELECT a, (SELECT max(b) FROM u) AS m FROM t", "a scalar subquery"),
        ("SELECT percentile(a, 0.5) AS p FROM t", "the aggregate PERCENTILE(a, 0.5)"),
        ("SELECT sum(DISTINCT a) AS s FROM t", "SUM(DISTINCT a) (of the DISTINCT aggregates"),
        ("SELECT a, sum(b) AS s FROM t GROUP BY ROLLUP (a)", "GROUPING SETS, CUBE or ROLLUP"),
        ("SELECT t.a FROM t, u WHERE t.a < u.a", "a cross join (no equality between the inputs)"),
        (  # a global aggregate of an aggregate: its one row exists over no group too
            "SELECT count(*) AS n FROM (SELECT a, count(*) AS c FROM t GROUP BY a) q",
            "an aggregate of q, which is an aggregate (maintain that as a dataflow of its own, "
            "and read the dataflow)",
        ),
        (  # a join of a recomputed aggregate: the aggregate is what to change
            "SELECT x.a FROM t x JOIN (SELECT a, percentile(b, 0.5) AS p FROM u GROUP BY a) y "
            "ON x.a = y.a",
            "the aggregate PERCENTILE(b, 0.5)",
        ),
        (  # a gap of no one length (a day in a zone with summer time): see core.session
            "SELECT a, count(*) AS n, session_window.start AS s FROM t "
            "GROUP BY a, session_window(c, '1 day')",
            "GROUP BY SESSION_WINDOW(c, '1 day') (a gap of no fixed length: days, months or "
            "not understood)",
        ),
        (
            "SELECT a, count(*) AS n FROM t GROUP BY a, session_window(c, a)",
            "GROUP BY SESSION_WINDOW(c, a) (a gap that is not one constant)",
        ),
        (
            "SELECT a, count(*) AS n FROM t GROUP BY a, session_window(c, '-2 seconds')",
            "GROUP BY SESSION_WINDOW(c, '-2 seconds') (a gap of zero or less puts no row in a "
            "session)",
        ),
        (
            "SELECT t.a, count(*) AS n FROM t JOIN u ON t.a = u.a "
            "GROUP BY t.a, session_window(t.c, '1 second')",
            "GROUP BY session_window(…) of a join or a subquery",
        ),
        (  # sessions kept, an aggregate that is not: the aggregate is what to change
            "SELECT a, percentile(b, 0.5) AS p FROM t GROUP BY a, session_window(c, '1 second')",
            "the aggregate PERCENTILE(b, 0.5)",
        ),
        (  # a subquery without an alias: its columns cannot be named from outside
            "SELECT a FROM (SELECT a, count(*) AS n FROM t GROUP BY a, b) WHERE n > 1",
            "a filter or projection of a subquery, which is an aggregate",
        ),
        (  # a time window is a key: what else the query does names the reason
            "SELECT window.start AS s, percentile(b, 0.5) AS p FROM t "
            "GROUP BY window(c, '10 seconds')",
            "the aggregate PERCENTILE(b, 0.5)",
        ),
    ],
)
def test_a_recomputed_query_names_what_causes_it(sql: str, reason: str) -> None:
    maintenance = plan_query(sql, SOURCES).maintenance
    assert maintenance.strategy is Strategy.GENERAL
    assert maintenance.recompute_reason is not None
    assert maintenance.recompute_reason.startswith(reason)


@pytest.mark.parametrize(
    "sql",
    [
        "SELECT a FROM t WHERE a > 1",
        "SELECT a, count(*) AS n, min(b) AS low FROM t GROUP BY a",
        "SELECT t.a, u.b FROM t LEFT JOIN u ON t.a = u.a",
        "SELECT u.b, sum(t.a) AS s FROM t JOIN u ON t.a = u.a GROUP BY u.b",
        "SELECT DISTINCT a FROM t",
        "SELECT a FROM t EXCEPT SELECT a FROM u",
        "SELECT a FROM t WHERE mz_now() <= b + INTERVAL '1 day'",
        "SELECT t.a, u.b FROM t, u WHERE t.a = u.a AND u.b > 1",
        "SELECT t.a, u.b FROM t JOIN u ON t.a = u.a AND t.c BETWEEN u.c AND u.d",
        "SELECT T.a, count(*) AS n FROM t T, u U, v V WHERE T.a = U.a AND V.b = U.b GROUP BY T.a",
        "SELECT a, count(*) FILTER (WHERE b > 1) AS n, sum(b) FILTER (WHERE b < 9) AS s "
        "FROM t GROUP BY a",
        "SELECT window.start AS s, window, count(*) AS n FROM t GROUP BY window(c, '1 minute')",
        # Subqueries maintained on their own (core.derived): joins of aggregates, a join of
        # a join, an aggregate of a join's aggregate (Nexmark's q4), a filter of one.
        "SELECT x.a, y.m FROM (SELECT a, count(*) AS n FROM t GROUP BY a) x "
        "JOIN (SELECT a, max(b) AS m FROM u GROUP BY a) y ON x.a = y.a",
        "SELECT t.a FROM t JOIN (SELECT u.a FROM u JOIN v ON u.a = v.a) w ON t.a = w.a",
        "SELECT q.b, avg(q.m) AS a FROM (SELECT t.b, max(u.b) AS m FROM t, u "
        "WHERE t.a = u.a AND u.c BETWEEN t.c AND t.d GROUP BY t.a, t.b) q GROUP BY q.b",
        "SELECT q.a FROM (SELECT a, count(*) AS n FROM t GROUP BY a, b) q WHERE q.n > 1",
    ],
)
def test_an_incremental_query_has_no_recompute_reason(sql: str) -> None:
    maintenance = plan_query(sql, SOURCES).maintenance
    assert maintenance.strategy is not Strategy.GENERAL
    assert maintenance.recompute_reason is None
