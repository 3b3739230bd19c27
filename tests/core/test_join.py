"""Equi-join planning: which queries are joins, each side's SQL, keys and output SQL."""

from __future__ import annotations

import pytest

from dataflow_operator.core.incremental import Strategy, classify, plan_over_joined
from dataflow_operator.core.join import JoinPlan, JoinShape

SOURCES = ["orders", "customers", "events"]
ORDERS = ("id", "customer", "amount")
CUSTOMERS = ("id", "name", "region")


def _shape(sql: str) -> JoinShape:
    plan = classify(sql, SOURCES)
    assert plan.strategy is Strategy.JOIN, plan.strategy
    assert plan.join is not None
    return plan.join


def _plan(sql: str, *columns: tuple[str, ...]) -> JoinPlan:
    resolved = _shape(sql).resolve(columns or (ORDERS, CUSTOMERS))
    assert resolved is not None
    return resolved


@pytest.mark.parametrize(
    ("join", "kind"),
    [
        ("JOIN", "inner"),
        ("INNER JOIN", "inner"),
        ("LEFT JOIN", "left"),
        ("LEFT OUTER JOIN", "left"),
        ("RIGHT JOIN", "right"),
        ("RIGHT OUTER JOIN", "right"),
        ("FULL JOIN", "full"),
        ("FULL OUTER JOIN", "full"),
    ],
)
def test_join_kinds(join: str, kind: str) -> None:
    shape = _shape(f"SELECT o.amount FROM orders AS o {join} customers AS c ON o.customer = c.id")
    assert shape.kinds == (kind,)
    assert [(s.source, s.alias) for s in shape.sides] == [("orders", "o"), ("customers", "c")]


def test_a_comma_join_with_its_equality_in_where_is_an_inner_join() -> None:
    plan = _plan(
        "SELECT o.amount FROM orders o, customers c WHERE o.customer = c.id AND o.amount > 1"
    )
    direct = _plan(
        "SELECT o.amount FROM orders o JOIN customers c ON o.customer = c.id WHERE o.amount > 1"
    )
    assert plan == direct
    assert plan.steps[0].preserves == (False, False)


def test_outer_sides_are_preserved_by_kind() -> None:
    inner = _plan("SELECT * FROM orders o JOIN customers c ON customer = c.id")
    assert inner.steps[0].preserves == (False, False)
    sql = "SELECT * FROM orders o FULL JOIN customers c ON customer = c.id"
    assert _plan(sql).steps[0].preserves == (True, True)


@pytest.mark.parametrize(
    "sql",
    [
        "SELECT * FROM orders o JOIN customers c ON o.customer < c.id",
        "SELECT * FROM orders o JOIN customers c ON o.customer = c.id OR o.id = c.id",
        "SELECT * FROM orders o CROSS JOIN customers c",
        "SELECT * FROM orders o, customers c WHERE o.customer < c.id",
        "SELECT * FROM orders o JOIN customers c USING (id)",
        "SELECT * FROM orders o NATURAL JOIN customers c",
        "SELECT * FROM orders o LEFT SEMI JOIN customers c ON o.customer = c.id",
        "SELECT * FROM orders o LEFT ANTI JOIN customers c ON o.customer = c.id",
        "SELECT DISTINCT o.id FROM orders o JOIN customers c ON o.customer = c.id",
        "SELECT o.id, rand() FROM orders o JOIN customers c ON o.customer = c.id",
        "SELECT o.id FROM orders o JOIN customers c ON o.customer = c.id "
        "WHERE o.id IN (SELECT id FROM events)",
        "SELECT o.id FROM orders o JOIN customers c ON o.customer = c.id "
        "JOIN events e ON e.id > o.id",
        "SELECT o.id FROM orders o JOIN customers c ON o.customer = c.id CROSS JOIN events e",
        "SELECT o.id FROM orders o JOIN customers c ON o.customer = c.id "
        "JOIN orders c ON c.id = o.id",  # two sides with one alias
        "SELECT o.id FROM orders o JOIN (SELECT *, 1 AS one FROM customers) c ON o.customer = c.id",
        "SELECT o.id, ROW_NUMBER() OVER (ORDER BY o.id) FROM orders o "
        "JOIN customers c ON o.customer = c.id",
        "WITH c AS (SELECT * FROM customers) SELECT o.id FROM orders o JOIN c ON o.customer = c.id",
    ],
)
def test_other_shapes_stay_general(sql: str) -> None:
    assert classify(sql, SOURCES).strategy is Strategy.GENERAL


def test_a_limit_of_a_join_is_a_top_n_of_the_join_maintained_on_its_own() -> None:
    plan = classify(
        "SELECT o.id FROM orders o JOIN customers c ON o.customer = c.id ORDER BY o.id LIMIT 3",
        SOURCES,
    )
    assert plan.strategy is Strategy.TOP_N
    assert [d.plan.strategy for d in plan.derived] == [Strategy.JOIN]


def test_side_sql_is_linear_over_its_source() -> None:
    shape = _shape(
        "SELECT o.amount, c.name FROM orders AS o "
        "JOIN (SELECT id, upper(name) AS name FROM customers WHERE region = 'eu') AS c "
        "ON o.customer = c.id"
    )
    assert [s.sql for s in shape.sides] == [
        "SELECT * FROM orders",
        "SELECT id, UPPER(name) AS name, __time, __diff FROM customers WHERE region = 'eu'",
    ]
    star = _shape(
        "SELECT * FROM orders o JOIN (SELECT * FROM customers WHERE id > 1) c ON true = true"
    )
    assert star.sides[1].sql == "SELECT * FROM customers WHERE id > 1"


def test_keys_are_per_side_whichever_way_they_are_written() -> None:
    plan = _plan(
        "SELECT o.amount FROM orders o JOIN customers c "
        "ON c.id = o.customer AND (lower(o.id) = c.name)"
    )
    assert plan.steps[0].keys == (("`customer`", "LOWER(`id`)"), ("`id`", "`name`"))


def test_unqualified_columns_resolve_by_the_sides_columns() -> None:
    plan = _plan(
        "SELECT amount * 2 AS doubled, name, c.id FROM orders o JOIN customers c "
        "ON customer = c.id WHERE region = 'eu' AND amount > 1"
    )
    assert plan.output_sql == (
        "SELECT __mz_l2 * 2 AS doubled, __mz_r1 AS `name`, __mz_r0 AS `id`, __time, __diff "
        "FROM __mz_joined WHERE __mz_r2 = 'eu' AND __mz_l2 > 1"
    )


def test_stars_expand_to_both_sides_columns() -> None:
    plan = _plan("SELECT *, c.* FROM orders o JOIN customers c ON o.customer = c.id")
    assert plan.output_sql == (
        "SELECT __mz_l0 AS `id`, __mz_l1 AS `customer`, __mz_l2 AS `amount`, "
        "__mz_r0 AS `id`, __mz_r1 AS `name`, __mz_r2 AS `region`, "
        "__mz_r0 AS `id`, __mz_r1 AS `name`, __mz_r2 AS `region`, __time, __diff "
        "FROM __mz_joined"
    )


@pytest.mark.parametrize(
    "sql",
    [
        "SELECT id FROM orders o JOIN customers c ON o.customer = c.id",  # ambiguous
        "SELECT nothing FROM orders o JOIN customers c ON o.customer = c.id",  # unknown
        "SELECT o.name FROM orders o JOIN customers c ON o.customer = c.id",  # wrong side
        "SELECT o.id FROM orders o JOIN customers c ON o.customer = 1",  # a filter in ON
        "SELECT o.id FROM orders o JOIN customers c ON o.customer + c.id = o.id",
        "SELECT o.id FROM orders o JOIN customers c ON customer = amount",  # one side only
    ],
)
def test_unresolvable_names_give_no_plan(sql: str) -> None:
    assert _shape(sql).resolve((ORDERS, CUSTOMERS)) is None


def test_a_self_join_reads_one_source_twice() -> None:
    shape = _shape("SELECT a.id, b.id FROM orders a LEFT JOIN orders b ON a.customer = b.id")
    assert [s.source for s in shape.sides] == ["orders", "orders"]
    plan = shape.resolve((ORDERS, ORDERS))
    assert plan is not None
    assert plan.steps[0].keys == (("`customer`",), ("`id`",))


def test_an_aggregation_over_a_join_is_planned_over_the_joined_rows() -> None:
    plan = _plan(
        "SELECT c.name, count(*) AS n, sum(o.amount) FROM orders o JOIN customers c "
        "ON o.customer = c.id WHERE amount > 1 GROUP BY c.name HAVING count(*) > 1"
    )
    assert plan.aggregate
    assert plan.output_sql == (
        "SELECT __mz_r1, COUNT(*) AS n, SUM(__mz_l2) FROM __mz_joined WHERE __mz_l2 > 1 "
        "GROUP BY __mz_r1 HAVING COUNT(*) > 1"
    )
    over_joined = plan_over_joined(plan.output_sql)
    assert over_joined is not None and over_joined.aggregate is not None
    assert over_joined.aggregate.keys == ("__key_0",)
    assert over_joined.inputs == frozenset({"__mz_joined"})


def test_a_global_aggregate_over_joined_rows_has_no_plan() -> None:
    assert plan_over_joined("SELECT COUNT(*) FROM __mz_joined") is None


EVENTS = ("id", "order", "kind")


def test_a_join_of_three_inputs_is_a_chain_of_two_input_joins() -> None:
    """Each step joins the inputs so far (their keys over the joined columns after the
    first step) with the next input (its keys over its own columns)."""
    shape = _shape(
        "SELECT o.amount, c.name, e.kind FROM orders o JOIN customers c ON o.customer = c.id "
        "LEFT JOIN events e ON e.order = o.id AND c.region = e.kind WHERE amount > 1"
    )
    assert shape.kinds == ("inner", "left")
    assert [s.source for s in shape.sides] == ["orders", "customers", "events"]
    plan = shape.resolve((ORDERS, CUSTOMERS, EVENTS))
    assert plan is not None
    assert [step.keys for step in plan.steps] == [
        (("`customer`",), ("`id`",)),
        (("__mz_l0", "__mz_r2"), ("`order`", "`kind`")),
    ]
    assert [step.preserves for step in plan.steps] == [(False, False), (True, False)]
    assert plan.output_sql == (
        "SELECT __mz_l2 AS `amount`, __mz_r1 AS `name`, __mz_s2_2 AS `kind`, __time, __diff "
        "FROM __mz_joined WHERE __mz_l2 > 1"
    )


@pytest.mark.parametrize(
    "on",
    [
        "e.order = c.name AND e.id = 1",  # a filter in ON
        "o.id = c.id",  # no column of the next input
        "e.order = e.id",  # the next input alone
    ],
)
def test_a_later_join_must_compare_the_inputs_so_far_with_the_next(on: str) -> None:
    sql = f"SELECT o.id FROM orders o JOIN customers c ON o.customer = c.id JOIN events e ON {on}"
    assert _shape(sql).resolve((ORDERS, CUSTOMERS, EVENTS)) is None
