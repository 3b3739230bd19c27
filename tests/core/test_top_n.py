"""Top-N per partition: the shapes recognised, and what the engine runs for them."""

from __future__ import annotations

import pytest

from dataflow_operator.core.incremental import Strategy, classify
from dataflow_operator.core.top_n import TopNPlan

SOURCES = ["bid", "users"]


def _plan(sql: str) -> TopNPlan:
    plan = classify(sql, SOURCES)
    assert plan.strategy is Strategy.TOP_N, (plan.strategy, plan.recompute_reason)
    assert plan.top_n is not None
    return plan.top_n


def _ranked(condition: str) -> str:
    return (
        "SELECT auction, price FROM (SELECT auction, price, ROW_NUMBER() OVER "
        f"(PARTITION BY auction ORDER BY price DESC) AS rn FROM bid) WHERE {condition}"
    )


def test_the_inner_query_becomes_a_changelog_with_its_partition_and_ordering_values() -> None:
    plan = _plan(
        "SELECT auction, price, rn FROM (SELECT *, ROW_NUMBER() OVER (PARTITION BY auction, "
        "bidder % 2 ORDER BY price DESC, dateTime) AS rn FROM bid WHERE price > 3) AS t "
        "WHERE rn <= 10 AND t.price < 100"
    )
    assert plan.input_sql == (
        "SELECT *, auction AS __topn_p0, bidder % 2 AS __topn_p1, price AS __topn_o0, "
        "dateTime AS __topn_o1 FROM bid WHERE price > 3"
    )  # the star carries __time and __diff
    assert (plan.partitions, plan.first, plan.last, plan.rank) == (2, 1, 10, "rn")
    # Spark's NULL order spelled out: last when descending, first when ascending.
    assert plan.order == ((True, False), (False, True))
    # The other conditions filter the ranked rows, read under the subquery's alias.
    assert plan.output_sql == (
        "SELECT auction, price, rn, __time, __diff FROM __mz_ranked AS t WHERE t.price < 100"
    )


def test_listed_items_get_time_and_diff_appended_and_a_star_outside_carries_them() -> None:
    plan = _plan(
        "SELECT * FROM (SELECT upper(url) AS u, ROW_NUMBER() OVER (ORDER BY price NULLS LAST) "
        "AS r FROM bid) WHERE r = 1"
    )
    assert plan.input_sql == "SELECT UPPER(url) AS u, price AS __topn_o0, __time, __diff FROM bid"
    assert plan.output_sql == "SELECT * FROM __mz_ranked"
    assert (plan.partitions, plan.order, plan.first, plan.last) == (0, ((False, False),), 1, 1)


@pytest.mark.parametrize(
    ("condition", "ranks"),
    [
        ("rn <= 3", (1, 3)),
        ("rn < 3", (1, 2)),
        ("rn = 2", (2, 2)),
        ("3 >= rn", (1, 3)),
        ("rn BETWEEN 2 AND 5", (2, 5)),
        ("rn > 1 AND rn <= 4", (2, 4)),
        ("(rn >= 2) AND rn < 9 AND rn <= 6", (2, 6)),
    ],
)
def test_the_ranks_kept_are_one_range(condition: str, ranks: tuple[int, int]) -> None:
    plan = _plan(_ranked(condition))
    assert (plan.first, plan.last) == ranks


@pytest.mark.parametrize(
    "sql",
    [
        _ranked("rn > 3"),  # no highest rank: every row but the first three
        _ranked("rn <= price"),  # not a constant
        _ranked("rn <= 3 OR price > 1"),
        _ranked("rn < 1"),  # nothing
        _ranked("rn <= 100000"),  # the whole partition read at every change: recomputed
        "SELECT * FROM (SELECT auction, RANK() OVER (ORDER BY price) AS r FROM bid) WHERE r = 1",
        "SELECT * FROM (SELECT auction, ROW_NUMBER() OVER (PARTITION BY auction) AS r "
        "FROM bid) WHERE r = 1",  # no ORDER BY: any row
        "SELECT * FROM (SELECT auction, ROW_NUMBER() OVER (ORDER BY rand()) AS r FROM bid) "
        "WHERE r = 1",
        "SELECT * FROM (SELECT auction, ROW_NUMBER() OVER (ORDER BY price) AS r FROM bid "
        "WHERE price IN (SELECT price FROM users)) WHERE r = 1",  # over a recomputed query
        "SELECT * FROM (SELECT auction, ROW_NUMBER() OVER (ORDER BY price) AS r, "
        "ROW_NUMBER() OVER (ORDER BY auction) AS s FROM bid) WHERE r = 1",
        "SELECT count(*) FROM (SELECT auction, ROW_NUMBER() OVER (ORDER BY price) AS r "
        "FROM bid) WHERE r <= 3",  # an aggregate of the top-N
        "SELECT auction, ROW_NUMBER() OVER (ORDER BY price) AS r FROM bid",  # no rank bound
    ],
)
def test_other_rankings_are_recomputed_for_their_window_function(sql: str) -> None:
    plan = classify(sql, SOURCES)
    assert plan.strategy is Strategy.GENERAL
    assert plan.top_n is None


def test_a_top_n_of_a_join_reads_the_join_maintained_on_its_own() -> None:
    # Nexmark's q9: the highest bid of each auction, ranked over a join.
    plan = classify(
        "SELECT id, price FROM (SELECT a.id, b.price, ROW_NUMBER() OVER (PARTITION BY a.id "
        "ORDER BY b.price DESC, b.bidder) AS rn FROM auction AS a, bid AS b "
        "WHERE a.id = b.auction) WHERE rn <= 1",
        ["auction", "bid"],
    )
    assert plan.strategy is Strategy.TOP_N
    assert plan.top_n is not None
    (join,) = plan.derived
    assert join.plan.strategy is Strategy.JOIN
    assert plan.top_n.input_sql == f"SELECT * FROM {join.name}"
    assert join.plan.snapshot_sql == (
        "SELECT a.id, b.price, a.id AS __topn_p0, b.price AS __topn_o0, b.bidder AS __topn_o1 "
        "FROM auction AS a JOIN bid AS b ON a.id = b.auction"
    )


def test_order_by_limit_is_a_top_n_without_partitions_of_the_ranks_after_the_offset() -> None:
    plan = _plan(
        "SELECT price AS p, auction FROM bid WHERE price > 3 ORDER BY p DESC, 2 LIMIT 3 OFFSET 2"
    )
    # an alias and a position name outputs: their expressions order the input's rows
    assert plan.input_sql == (
        "SELECT price AS p, auction, price AS __topn_o0, auction AS __topn_o1, __time, __diff "
        "FROM bid WHERE price > 3"
    )
    assert (plan.partitions, plan.first, plan.last) == (0, 3, 5)
    assert plan.order == ((True, False), (False, True))
    assert (plan.rank, plan.output_sql) == (None, None)  # the ranked rows are the output


def test_order_by_limit_of_an_aggregate_reads_the_aggregate_maintained_on_its_own() -> None:
    plan = classify(
        "SELECT auction, count(*) AS n FROM bid GROUP BY auction ORDER BY n DESC, auction LIMIT 5",
        SOURCES,
    )
    assert plan.strategy is Strategy.TOP_N
    (derived,) = plan.derived
    assert derived.plan.strategy is Strategy.AGGREGATE
    assert plan.top_n is not None and plan.top_n.input_sql == f"SELECT * FROM {derived.name}"


@pytest.mark.parametrize(
    "sql",
    [
        "SELECT price FROM bid LIMIT 3",  # which rows is not defined
        "SELECT price FROM bid ORDER BY price LIMIT 10001",
        "SELECT price FROM bid ORDER BY price LIMIT 0",
        "SELECT * FROM bid ORDER BY 1 LIMIT 3",  # a position of a star
        "SELECT count(*) AS n FROM bid ORDER BY n LIMIT 1",  # one row even over no input
    ],
)
def test_limits_left_to_recompute(sql: str) -> None:
    assert classify(sql, SOURCES).strategy is Strategy.GENERAL
