"""The parser is not stricter than Spark: SQL that Spark runs parses here."""

from __future__ import annotations

import pytest

from dataflow_operator.core.errors import InvalidSql
from dataflow_operator.core.sql import parse_sql


@pytest.mark.parametrize(
    ("sql", "rendered_group"),
    [
        (
            "SELECT max(price) AS m FROM bid GROUP BY window(dateTime, '10 seconds')",
            "GROUP BY WINDOW(dateTime, '10 seconds')",
        ),
        (
            "SELECT count(*) FROM bid GROUP BY window(dateTime, '10 seconds', '5 seconds'), a",
            "GROUP BY WINDOW(dateTime, '10 seconds', '5 seconds'), a",
        ),
        (
            "SELECT a, count(*) FROM bid GROUP BY a, window(dateTime, '10 seconds')",
            "GROUP BY a, WINDOW(dateTime, '10 seconds')",
        ),
    ],
)
def test_a_window_call_may_lead_the_group_by(sql: str, rendered_group: str) -> None:
    parsed = parse_sql(sql, ["bid"])
    assert rendered_group in parsed.tree.sql(dialect="spark")


def test_the_named_window_clause_still_parses_after_a_group_by() -> None:
    sql = "SELECT a, sum(b) OVER w FROM bid GROUP BY a, b WINDOW w AS (PARTITION BY a)"
    rendered = parse_sql(sql, ["bid"]).tree.sql(dialect="spark")
    assert rendered.endswith("GROUP BY a, b WINDOW w AS (PARTITION BY a)")


def test_a_broken_group_by_is_still_refused_with_its_position() -> None:
    with pytest.raises(InvalidSql, match=r"SQL does not parse: .* at line 1"):
        parse_sql("SELECT a FROM bid GROUP BY window(", ["bid"])
