"""Inner joins' conditions and FILTER aggregates rewritten into the shapes the strategies maintain."""

from __future__ import annotations

import pytest
import sqlglot

from dataflow_operator.core.sql import DIALECT
from dataflow_operator.core.sql_rewrites import (
    filters_as_case,
    inner_join_conditions,
    time_window_keys,
)
from dataflow_operator.core.sql_shape import render


def _rewritten(rewrite: object, sql: str) -> str:
    assert callable(rewrite)
    return render(rewrite(sqlglot.parse_one(sql, read=DIALECT)))


@pytest.mark.parametrize(
    ("sql", "expected"),
    [
        (
            "SELECT a.x FROM a, b WHERE a.k = b.k AND a.x > 1",
            "SELECT a.x FROM a JOIN b ON a.k = b.k WHERE a.x > 1",
        ),
        (  # each equality goes to the join that brings in its later input
            "SELECT A.x FROM a A, b B, c C WHERE C.j = B.j AND A.k = B.k AND A.x + 1 = C.y",
            "SELECT A.x FROM a AS A JOIN b AS B ON A.k = B.k "
            "JOIN c AS C ON C.j = B.j AND A.x + 1 = C.y",
        ),
        (
            "SELECT a.x FROM a CROSS JOIN b WHERE (a.k = b.k)",
            "SELECT a.x FROM a JOIN b ON a.k = b.k",
        ),
        (  # an explicit inner join keeps its ON and gains the WHERE's equality
            "SELECT a.x FROM a JOIN b ON a.k = b.k WHERE a.j = b.j",
            "SELECT a.x FROM a JOIN b ON a.k = b.k AND a.j = b.j",
        ),
        (  # an inner join's residual condition filters its matched pairs
            "SELECT a.x FROM a JOIN b ON a.k = b.k AND a.t < b.t WHERE a.x > 1",
            "SELECT a.x FROM a JOIN b ON a.k = b.k WHERE a.x > 1 AND a.t < b.t",
        ),
        (
            "SELECT a.x FROM a JOIN b ON k = b.k AND (a.t < b.t OR b.t IS NULL)",
            "SELECT a.x FROM a JOIN b ON k = b.k WHERE a.t < b.t OR b.t IS NULL",
        ),
        (
            "SELECT s.x FROM (SELECT * FROM a WHERE x > 0) s, b WHERE s.k = b.k",
            "SELECT s.x FROM (SELECT * FROM a WHERE x > 0) AS s JOIN b ON s.k = b.k",
        ),
    ],
)
def test_equalities_between_inputs_move_into_the_join(sql: str, expected: str) -> None:
    assert _rewritten(inner_join_conditions, sql) == expected


@pytest.mark.parametrize(
    "sql",
    [
        "SELECT a.x FROM a, b WHERE a.x < b.y",  # no equality: still a cross join
        "SELECT x FROM a, b WHERE k = j",  # unqualified: either input's column
        "SELECT a.x FROM a, b WHERE a.k = b.k OR a.j = b.j",  # not a conjunct
        "SELECT a.x FROM a, b WHERE a.k = a.j",  # one input only
        "SELECT a.x FROM a, b WHERE a.k = b.k + rand()",  # nondeterministic
        "SELECT a.x FROM a, b LEFT JOIN c ON b.k = c.k WHERE a.k = b.k",  # an outer join
        "SELECT a.x FROM a, a WHERE a.k = a.k",  # the same name twice
        "SELECT a.x FROM a JOIN b ON a.t < b.t",  # no equality to join on
        "SELECT a.x FROM a LEFT JOIN b ON a.k = b.k AND a.t < b.t",  # it null-extends
    ],
)
def test_what_is_not_an_equality_between_two_inputs_stays(sql: str) -> None:
    tree = sqlglot.parse_one(sql, read=DIALECT)
    assert _rewritten(inner_join_conditions, sql) == render(tree)


@pytest.mark.parametrize(
    ("sql", "expected"),
    [
        (
            "SELECT g, count(*) FILTER (WHERE v > 1) AS n FROM t GROUP BY g",
            "SELECT g, COUNT(CASE WHEN v > 1 THEN 1 END) AS n FROM t GROUP BY g",
        ),
        (
            "SELECT sum(v) FILTER (WHERE v > 1) AS s, avg(v) FILTER (WHERE w) AS a FROM t",
            "SELECT SUM(CASE WHEN v > 1 THEN v END) AS s, AVG(CASE WHEN w THEN v END) AS a FROM t",
        ),
        (
            "SELECT min(v) FILTER (WHERE w) AS l, max(v) FILTER (WHERE w) AS h FROM t",
            "SELECT MIN(CASE WHEN w THEN v END) AS l, MAX(CASE WHEN w THEN v END) AS h FROM t",
        ),
        (
            "SELECT count(DISTINCT v) FILTER (WHERE v > 1) AS d FROM t",
            "SELECT COUNT(DISTINCT CASE WHEN v > 1 THEN v END) AS d FROM t",
        ),
        (  # a row the filter rejects has NULLs, which count(DISTINCT a, b) does not count
            "SELECT count(DISTINCT v, w) FILTER (WHERE v > 1) AS d FROM t",
            "SELECT COUNT(DISTINCT CASE WHEN v > 1 THEN v END, CASE WHEN v > 1 THEN w END) AS d "
            "FROM t",
        ),
    ],
)
def test_a_filter_is_a_case_inside_the_aggregate(sql: str, expected: str) -> None:
    assert _rewritten(filters_as_case, sql) == expected


@pytest.mark.parametrize(
    "sql",
    [
        "SELECT collect_list(v) FILTER (WHERE v > 1) AS l FROM t",
    ],
)
def test_a_filter_no_case_can_hold_stays(sql: str) -> None:
    assert _rewritten(filters_as_case, sql) == render(sqlglot.parse_one(sql, read=DIALECT))


@pytest.mark.parametrize(
    ("sql", "expected"),
    [
        (
            "SELECT window.start, window.end AS e, window, count(*) AS n FROM t "
            "GROUP BY window(ts, '1 hour') HAVING max(window.end) > 0 ORDER BY window.start",
            "SELECT WINDOW(ts, '1 hour').start AS `start`, WINDOW(ts, '1 hour').end AS e, "
            "WINDOW(ts, '1 hour') AS `window`, COUNT(*) AS n FROM t GROUP BY WINDOW(ts, '1 hour') "
            "HAVING MAX(WINDOW(ts, '1 hour').end) > 0 ORDER BY WINDOW(ts, '1 hour').start",
        ),
        (  # a sliding window, beside another key, inside an expression
            "SELECT k, unix_seconds(window.start) FROM t GROUP BY k, window(ts, '1 hour', '5 minutes')",
            "SELECT k, UNIX_SECONDS(WINDOW(ts, '1 hour', '5 minutes').start) AS "
            "`UNIX_SECONDS(window.start)` FROM t GROUP BY k, WINDOW(ts, '1 hour', '5 minutes')",
        ),
    ],
)
def test_a_time_window_is_read_through_its_grouping_key(sql: str, expected: str) -> None:
    assert _rewritten(time_window_keys, sql) == expected


@pytest.mark.parametrize(
    "sql",
    [
        "SELECT window.start FROM t AS window GROUP BY window(ts, '1 hour')",  # a relation
        "SELECT count(*) AS n FROM t GROUP BY window(ts, '1 hour'), window(ts, '2 hours')",
        "SELECT session_window.start FROM t GROUP BY session_window(ts, '1 hour')",
        "SELECT window.start FROM t",  # not grouped by a window
    ],
)
def test_a_window_not_grouped_by_one_call_stays(sql: str) -> None:
    assert _rewritten(time_window_keys, sql) == render(sqlglot.parse_one(sql, read=DIALECT))
