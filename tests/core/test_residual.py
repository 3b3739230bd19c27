"""The WHERE comparisons a join's matched pairs are tested with before they are emitted."""

from __future__ import annotations

from decimal import Decimal

import pytest
import sqlglot
from sqlglot import exp

from dataflow_operator.core.incremental import Strategy, classify
from dataflow_operator.core.residual import Comparison, Operand, residual_comparisons

COLUMNS = {"a": (0, 0), "b": (1, 0), "c": (1, 1), "s": (0, 1)}


def _locate(column: exp.Column) -> tuple[int, int]:
    return COLUMNS[column.name]  # KeyError: a column that cannot be placed


def _comparisons(where: str) -> tuple[Comparison, ...]:
    return residual_comparisons(sqlglot.parse_one(where, read="spark"), _locate)


def col(name: str) -> Operand:
    return Operand(column=COLUMNS[name])


def lit(value: int | Decimal | str) -> Operand:
    return Operand(literal=value)


@pytest.mark.parametrize(
    ("where", "expected"),
    [
        ("a >= b", [Comparison(col("a"), ">=", col("b"))]),
        (
            "a = b AND b <> c",
            [Comparison(col("a"), "=", col("b")), Comparison(col("b"), "<>", col("c"))],
        ),
        (
            "(a < b) AND ((c <= 3))",
            [Comparison(col("a"), "<", col("b")), Comparison(col("c"), "<=", lit(3))],
        ),
        (
            "a BETWEEN b AND c",
            [Comparison(col("a"), ">=", col("b")), Comparison(col("a"), "<=", col("c"))],
        ),
        ("-2 > a", [Comparison(lit(-2), ">", col("a"))]),
        ("a > 2.50", [Comparison(col("a"), ">", lit(Decimal("2.50")))]),
        ("a > -.5", [Comparison(col("a"), ">", lit(Decimal("-0.5")))]),
        ("s = 'x y'", [Comparison(col("s"), "=", lit("x y"))]),
    ],
)
def test_comparisons_of_columns_and_plain_literals_are_found(
    where: str, expected: list[Comparison]
) -> None:
    assert list(_comparisons(where)) == expected


@pytest.mark.parametrize(
    "where",
    [
        "a > b OR a < c",  # only conjuncts
        "NOT a > b",
        "a + 1 > b",  # an expression
        "a > 10L",  # a typed literal (Spark's BIGINT suffix)
        "a > 1e3",  # a DOUBLE in Spark
        "a > 1.5D",
        "s = 'it''s'",  # Spark reads adjacent literals as one
        "s = 'a\\\\b'",  # an escape
        "a NOT BETWEEN b AND c",
        "1 < 2",  # no column
        "a <=> b",  # null-safe equality: true for two NULLs
        "a IN (1, 2)",
        "unknown > a",  # a column the caller cannot place
    ],
)
def test_other_conjuncts_are_left_to_spark(where: str) -> None:
    assert _comparisons(where) == ()


def test_the_simple_conjuncts_of_a_where_are_kept_beside_the_others() -> None:
    found = _comparisons("a > b OR c = 1 AND a < 3 AND upper(s) = 'X' AND unknown = b")
    # AND binds tighter than OR: the whole is one disjunction
    assert found == ()
    found = _comparisons("(a > b OR c = 1) AND a < 3 AND upper(s) = 'X' AND unknown = b")
    assert found == (Comparison(col("a"), "<", lit(3)),)


def test_no_where_no_comparisons() -> None:
    assert residual_comparisons(None, _locate) == ()


def test_a_join_plan_carries_its_wheres_comparisons_after_the_rewrites() -> None:
    sql = (
        "SELECT A.auction, A.num FROM counts A JOIN maxima M "
        "ON A.start = M.start AND A.num >= M.maxn WHERE A.num BETWEEN 1 AND 9"
    )
    plan = classify(sql, ["counts", "maxima"])
    assert plan.strategy is Strategy.JOIN and plan.join is not None
    resolved = plan.join.resolve([("auction", "num", "start"), ("maxn", "start")])
    assert resolved is not None
    num, maxn = Operand(column=(0, 1)), Operand(column=(1, 0))
    assert set(resolved.residual) == {
        Comparison(num, ">=", maxn),
        Comparison(num, ">=", lit(1)),
        Comparison(num, "<=", lit(9)),
    }


def test_a_join_without_where_has_none() -> None:
    plan = classify("SELECT * FROM l JOIN r ON l.k = r.k", ["l", "r"])
    assert plan.join is not None
    resolved = plan.join.resolve([("k", "v"), ("k", "w")])
    assert resolved is not None and resolved.residual == ()
