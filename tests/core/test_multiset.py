"""DISTINCT and set operations: recognised shapes and the per-row multiplicity rule."""

from __future__ import annotations

import pytest

from dataflow_operator.core.incremental import Strategy, classify
from dataflow_operator.core.multiset import MultisetPlan, output_multiplicity

SOURCES = ["events", "users"]


def _plan(sql: str) -> MultisetPlan:
    plan = classify(sql, SOURCES)
    assert plan.strategy is Strategy.SET, plan.strategy
    assert plan.multiset is not None
    return plan.multiset


@pytest.mark.parametrize(
    ("sql", "operation"),
    [
        ("SELECT DISTINCT a, b + 1 FROM events WHERE a > 1", "distinct"),
        ("SELECT a FROM events UNION SELECT a FROM users", "union"),
        ("SELECT a FROM events EXCEPT SELECT a FROM users", "except"),
        ("SELECT a FROM events MINUS SELECT a FROM users", "except"),
        ("SELECT a FROM events EXCEPT ALL SELECT a FROM users", "except_all"),
        ("SELECT a FROM events INTERSECT SELECT a FROM users", "intersect"),
        ("SELECT a FROM events INTERSECT ALL SELECT a FROM users", "intersect_all"),
    ],
)
def test_operations(sql: str, operation: str) -> None:
    assert _plan(sql).operation == operation


def test_inputs_are_linear_changelogs_in_order() -> None:
    plan = _plan("SELECT upper(a) AS a FROM events WHERE b > 1 EXCEPT SELECT * FROM users")
    assert plan.inputs == (
        "SELECT UPPER(a) AS a, __time, __diff FROM events WHERE b > 1",
        "SELECT * FROM users",
    )
    assert _plan("SELECT DISTINCT a FROM events").inputs == (
        "SELECT a, __time, __diff FROM events",
    )


@pytest.mark.parametrize(
    "sql",
    [
        "SELECT DISTINCT a, COUNT(*) FROM events GROUP BY a",
        "SELECT DISTINCT *, 1 AS one FROM events",
        "SELECT a FROM events UNION SELECT a FROM users ORDER BY a LIMIT 2",
        "SELECT a FROM events UNION SELECT COUNT(*) FROM users",
        "(SELECT a FROM events UNION SELECT a FROM users) EXCEPT SELECT a FROM events",
    ],
)
def test_other_shapes_stay_general(sql: str) -> None:
    assert classify(sql, SOURCES).strategy is Strategy.GENERAL


def test_a_limit_of_a_distinct_is_a_top_n_of_the_distinct_maintained_on_its_own() -> None:
    plan = classify("SELECT DISTINCT a FROM events ORDER BY a LIMIT 1", SOURCES)
    assert plan.strategy is Strategy.TOP_N
    assert [d.plan.strategy for d in plan.derived] == [Strategy.SET]


@pytest.mark.parametrize(
    ("operation", "expected"),
    [
        ("distinct", [0, 1, 1, 0, 1, 1, 0, 1, 1]),
        ("union", [0, 1, 1, 1, 1, 1, 1, 1, 1]),
        ("except", [0, 1, 1, 0, 0, 0, 0, 0, 0]),
        ("except_all", [0, 1, 2, 0, 0, 1, 0, 0, 0]),
        ("intersect", [0, 0, 0, 0, 1, 1, 0, 1, 1]),
        ("intersect_all", [0, 0, 0, 0, 1, 1, 0, 1, 2]),
    ],
)
def test_output_multiplicity(operation: str, expected: list[int]) -> None:
    pairs = [(a, b) for b in (0, 1, 2) for a in (0, 1, 2)]
    assert [output_multiplicity(operation, a, b) for a, b in pairs] == expected  # type: ignore[arg-type]
