"""Subqueries maintained on their own, read by the query around them as relations."""

from __future__ import annotations

from dataflow_operator.core.incremental import Strategy, plan_query

SOURCES = ["bid", "auction", "person"]

Q5 = (
    "SELECT AuctionBids.auction, AuctionBids.num FROM ("
    "SELECT auction, count(*) AS num, window.start AS starttime FROM bid "
    "GROUP BY auction, window(dateTime, '10 seconds', '2 seconds')) AS AuctionBids "
    "JOIN (SELECT max(CountBids.num) AS maxn, CountBids.starttime FROM ("
    "SELECT count(*) AS num, window.start AS starttime FROM bid "
    "GROUP BY auction, window(dateTime, '10 seconds', '2 seconds')) AS CountBids "
    "GROUP BY CountBids.starttime) AS MaxBids "
    "ON AuctionBids.starttime = MaxBids.starttime AND AuctionBids.num >= MaxBids.maxn"
)


def test_a_join_of_an_aggregate_and_an_aggregate_of_an_aggregate() -> None:
    maintenance = plan_query(Q5, SOURCES).maintenance
    assert maintenance.strategy is Strategy.JOIN
    assert maintenance.recompute_reason is None
    assert maintenance.snapshot_sql.startswith("SELECT AuctionBids.auction")  # as written
    first, second = maintenance.derived
    # Each subquery's relation stands where it stood, under its alias; numbered in the
    # order the query is classified (a subquery's own subqueries before it).
    assert (first.name, first.plan.strategy, first.plan.derived) == (
        "__mz_derived_0",
        Strategy.AGGREGATE,
        (),
    )
    assert (second.name, second.plan.strategy) == ("__mz_derived_2", Strategy.AGGREGATE)
    (nested,) = second.plan.derived
    assert (nested.name, nested.plan.strategy) == ("__mz_derived_1", Strategy.AGGREGATE)
    assert "FROM __mz_derived_1 AS CountBids" in second.plan.sql
    assert [s.sql for s in maintenance.join.sides] == [  # type: ignore[union-attr]
        "SELECT * FROM __mz_derived_0",
        "SELECT * FROM __mz_derived_2",
    ]
    assert maintenance.inputs >= {"bid", "__mz_derived_0", "__mz_derived_2"}


def test_a_linear_query_of_an_aggregate_keeps_its_own_sql() -> None:
    maintenance = plan_query(
        "SELECT k, n * 2 AS twice FROM (SELECT auction AS k, count(*) AS n FROM bid "
        "GROUP BY auction) AS c WHERE n > 1",
        SOURCES,
    ).maintenance
    assert maintenance.strategy is Strategy.LINEAR
    assert maintenance.sql == (
        "SELECT k, n * 2 AS twice, __time, __diff FROM __mz_derived_0 AS c WHERE n > 1"
    )


def test_a_recomputed_subquery_gives_its_reason_to_the_query() -> None:
    maintenance = plan_query(
        "SELECT a.id FROM auction a JOIN (SELECT auction, percentile(price, 0.5) AS p "
        "FROM bid GROUP BY auction) b ON a.id = b.auction",
        SOURCES,
    ).maintenance
    assert maintenance.strategy is Strategy.GENERAL
    assert maintenance.derived == ()
    assert maintenance.recompute_reason == (
        "the aggregate PERCENTILE(price, 0.5) (count, sum, avg, min and max are incremental)"
    )
