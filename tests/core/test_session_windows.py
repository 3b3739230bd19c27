"""Session-window queries split into a sessionizer and a GROUP BY over its output."""

from __future__ import annotations

import pytest
import sqlglot

from dataflow_operator.core.incremental import Strategy, plan_query
from dataflow_operator.core.session import gap_micros, session_shape
from dataflow_operator.core.sql import DIALECT
from dataflow_operator.core.sql_shape import render

SECOND = 1_000_000


@pytest.mark.parametrize(
    ("text", "micros"),
    [
        ("10 seconds", 10 * SECOND),
        ("1 second", SECOND),
        ("1 minute 30 seconds", 90 * SECOND),
        ("interval 2 hours", 7_200 * SECOND),
        ("INTERVAL 1 HOUR 1 MICROSECOND", 3_600 * SECOND + 1),
        ("1.5 seconds", 1_500_000),
        ("500 milliseconds", 500_000),
        ("-1 seconds", -SECOND),
        ("1 day", None),  # its length depends on the time zone
        ("1 month", None),
        ("1.5 minutes", None),
        ("10", None),
        ("", None),
        ("10 fortnights", None),
    ],
)
def test_a_gap_is_read_in_microseconds_when_it_has_a_fixed_length(
    text: str, micros: int | None
) -> None:
    assert gap_micros(text) == micros


def _shape(sql: str) -> tuple[str, int, int, str] | None:
    shape = session_shape(sqlglot.parse_one(sql, read=DIALECT), "sessions")
    if shape is None:
        return None
    plan = shape.plan
    return plan.input_sql, plan.partitions, plan.gap, render(shape.outer)


def test_the_query_becomes_a_group_by_of_the_sessions_bounds() -> None:
    assert _shape(
        "SELECT bidder, count(*) AS n, session_window.start AS s, session_window.end "
        "FROM bid WHERE price > 1 GROUP BY bidder, session_window(dateTime, '10 seconds') "
        "HAVING count(*) > 2"
    ) == (
        # only the columns read above the sessions are kept with each row
        "SELECT `bidder`, __time, __diff, bidder AS __session_p0, dateTime AS __session_t "
        "FROM bid WHERE price > 1",
        1,
        10 * SECOND,
        "SELECT bidder, COUNT(*) AS n, __session_start AS s, __session_end AS `end` "
        "FROM sessions AS bid GROUP BY bidder, __session_start, __session_end "
        "HAVING COUNT(*) > 2",
    )


def test_the_window_as_a_struct_and_through_its_call() -> None:
    shape = _shape(
        "SELECT session_window, session_window(b.t, '1 second').end AS e, max(v) FROM events b "
        "GROUP BY session_window(b.t, '1 second')"
    )
    assert shape is not None
    assert shape[:3] == (
        "SELECT `v`, __time, __diff, b.t AS __session_t FROM events AS b",
        0,
        SECOND,
    )
    assert shape[3] == (
        "SELECT NAMED_STRUCT('start', __session_start, 'end', __session_end) AS `session_window`, "
        "__session_end AS e, MAX(v) FROM sessions AS b GROUP BY __session_start, __session_end"
    )


@pytest.mark.parametrize(
    "sql",
    [
        "SELECT k, count(*) FROM t GROUP BY k",  # no session window
        "SELECT k, count(*) FROM t GROUP BY k, session_window(ts, '1 day')",
        "SELECT k, count(*) FROM t GROUP BY k, session_window(ts, k)",
        "SELECT k, count(*) FROM t GROUP BY k, session_window(ts, '0 seconds')",
        "SELECT k, count(*) FROM t GROUP BY session_window(ts, '1 second'), "
        "session_window(ts, '2 seconds'), k",
        "SELECT t.k, count(*) FROM t JOIN u ON t.k = u.k GROUP BY t.k, "
        "session_window(t.ts, '1 second')",
        "SELECT k, count(*) FROM (SELECT * FROM t) AS s GROUP BY k, session_window(ts, '1 second')",
        "SELECT k AS j, count(*) FROM t GROUP BY 1, session_window(ts, '1 second')",  # a position
        "SELECT v AS k, count(*) FROM t GROUP BY k, session_window(ts, '1 second')",  # an output
        "SELECT session_window.duration FROM t GROUP BY session_window(ts, '1 second')",
        "SELECT count(*) FROM t GROUP BY session_window(ts, '1 second') ORDER BY 1 LIMIT 3",
    ],
)
def test_what_is_not_a_session_windows_shape(sql: str) -> None:
    assert _shape(sql) is None


def test_a_session_window_query_is_an_aggregate_over_its_sessionizer() -> None:
    plan = plan_query(
        "SELECT k, count(*) AS n FROM t WHERE mz_now() < ts + INTERVAL 1 DAY "
        "GROUP BY k, session_window(ts, '1 second')",
        ["t"],
    ).maintenance
    assert plan.strategy is Strategy.AGGREGATE
    (derived,) = plan.derived
    assert derived.plan.strategy is Strategy.SESSION
    assert derived.plan.session is not None
    assert derived.plan.session.input_sql == (
        "SELECT `k`, __time, __diff, k AS __session_p0, ts AS __session_t FROM __mz_filtered AS t"
    )
    assert plan.inputs == {"__mz_filtered", derived.name}
