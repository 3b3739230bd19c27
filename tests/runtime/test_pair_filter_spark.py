"""The join's early test of its pairs against Spark's own comparisons, value by value.

Each case puts edge values of one kind side by side in a DataFrame, asks Spark for each
comparison, writes the values as the join writes its rows (:data:`~.join.JSON_OPTIONS`)
and checks :class:`~.pair_filter.PairFilter`: it keeps every pair Spark finds true, and
drops every pair Spark finds false or NULL that it can decide.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Iterator
from contextlib import contextmanager
from decimal import Decimal

import pytest
from pyspark.sql import SparkSession
from pyspark.sql import functions as F  # noqa: N812 - Spark's convention

from dataflow_operator.core.residual import Comparison, ComparisonOp, Operand
from dataflow_operator.runtime.strategies.join import JSON_OPTIONS
from dataflow_operator.runtime.strategies.residual_filter import pair_filter_of

pytestmark = pytest.mark.spark

OPS: tuple[ComparisonOp, ...] = ("=", "<>", "<", "<=", ">", ">=")

VALUES = {
    "numbers": (
        "BIGINT",
        "DECIMAL(22,3)",
        [
            "NULL",
            "0",
            "-1",
            "1",
            "9223372036854775807",
            "-9223372036854775808",
            "1.000",
            "0.999",
            "-0.001",
            "999999999999999999.999",
        ],
    ),
    "doubles": (
        "DOUBLE",
        "DOUBLE",
        [
            "NULL",
            "0.0",
            "-0.0",
            "0.1",
            "0.1 + 0.2",
            "0.3",
            "1e-320",
            "4.9e-324",
            "1.7976931348623157e308",
            "-1e22",
            "double('NaN')",
            "double('Infinity')",
            "double('-Infinity')",
            "100.0",
            "1e2",
        ],
    ),
    "floats": (
        "FLOAT",
        "FLOAT",
        ["NULL", "0.1", "0.1000001", "-0.0", "0.0", "3.4028235e38", "1.4e-45", "16777217"],
    ),
    "strings": (
        "STRING",
        "STRING",
        [
            "NULL",
            "''",
            "'a'",
            "'ab'",
            "'b'",
            "'é'",
            "'z'",
            "'\uff41'",
            "'\U0001d11e'",
            "CAST(X'C3' AS STRING)",
            "CAST(X'E282' AS STRING)",
            "' a'",
        ],
    ),
    "timestamps": (
        "TIMESTAMP",
        "TIMESTAMP",
        [
            "NULL",
            "TIMESTAMP'2026-03-08 01:59:59.999999'",
            "TIMESTAMP'2026-03-08 03:00:00'",
            "TIMESTAMP'2026-11-01 01:30:00-04:00'",
            "TIMESTAMP'2026-11-01 01:30:00-05:00'",
            "TIMESTAMP'1900-01-01 00:00:00'",
            "TIMESTAMP'0001-01-01 00:00:00Z'",
            "TIMESTAMP'9999-12-31 23:59:59.999999Z'",
        ],
    ),
    "local_timestamps": (
        "TIMESTAMP_NTZ",
        "TIMESTAMP_NTZ",
        ["NULL", "TIMESTAMP_NTZ'2026-01-01 00:00:00'", "TIMESTAMP_NTZ'2026-01-01 00:00:00.000001'"],
    ),
    "dates": (
        "DATE",
        "DATE",
        ["NULL", "DATE'2026-01-01'", "DATE'2026-01-02'", "DATE'0001-01-01'", "DATE'9999-12-31'"],
    ),
}


@contextmanager
def _time_zone(spark: SparkSession, zone: str) -> Iterator[None]:
    before = spark.conf.get("spark.sql.session.timeZone")
    spark.conf.set("spark.sql.session.timeZone", zone)
    try:
        yield
    finally:
        spark.conf.set("spark.sql.session.timeZone", before or "UTC")


@pytest.mark.parametrize("zone", ["UTC", "America/New_York"])
@pytest.mark.parametrize("case", sorted(VALUES))
def test_it_keeps_what_spark_keeps_and_drops_what_it_can_decide(
    spark: SparkSession, case: str, zone: str
) -> None:
    left_type, right_type, values = VALUES[case]
    pairs = [
        f"(CAST({a} AS {left_type}), CAST({b} AS {right_type}))"
        for a, b in itertools.product(values, values)
    ]
    outcomes = [f"x {op} y" for op in OPS]
    with _time_zone(spark, zone):
        frame = spark.sql(f"SELECT * FROM VALUES {', '.join(pairs)} AS t(x, y)")
        rows = frame.select(
            F.to_json(F.struct("x"), JSON_OPTIONS).alias("l"),
            F.to_json(F.struct("y"), JSON_OPTIONS).alias("r"),
            *[F.expr(f"coalesce({o}, false)").alias(f"o{i}") for i, o in enumerate(outcomes)],
        ).collect()
        schemas = (frame.select("x").schema, frame.select("y").schema)
    for index, op in enumerate(OPS):
        comparison = Comparison(Operand(column=(0, 0)), op, Operand(column=(1, 0)))
        pairs_filter = pair_filter_of([comparison], schemas, [1, 1])
        assert pairs_filter is not None, (case, op)
        for row in rows:
            kept = pairs_filter.keeps(row["l"], row["r"])
            spark_keeps = row[f"o{index}"]
            if _readable(row["l"]) and _readable(row["r"]):
                assert kept == spark_keeps, (case, op, row["l"], row["r"])
            else:
                assert kept, (case, op, row["l"], row["r"])


def _readable(row: str) -> bool:
    """Whether the filter reads this row's value as Spark has it: not NULL (a field
    Spark leaves out), not NaN or an infinity, no bytes that were not UTF-8, a point in
    time written in UTC (an offset of another zone may have lost its seconds)."""
    if row == "{}" or _ZONED.search(row):
        return False
    return not any(s in row for s in ('"NaN"', 'Infinity"', "\ufffd", "\\ufffd"))


_ZONED = re.compile(r"T[0-9:.]+[+-][0-9]{2}:[0-9]{2}")


def test_a_literal_against_a_column(spark: SparkSession) -> None:
    rows = spark.sql(
        "SELECT to_json(struct(x)) AS l, x > 2.5 AS big, x = 3 AS three "
        "FROM VALUES (CAST(2 AS BIGINT)), (3), (NULL) AS t(x)"
    ).collect()
    schema = spark.sql("SELECT CAST(1 AS BIGINT) AS x").schema
    literals: list[tuple[ComparisonOp, int | Decimal, str]] = [
        (">", Decimal("2.5"), "big"),
        ("=", 3, "three"),
    ]
    for op, literal, column in literals:
        comparison = Comparison(Operand(column=(0, 0)), op, Operand(literal=literal))
        pairs = pair_filter_of([comparison], (schema, schema), [1, 1])
        assert pairs is not None
        kept = [pairs.keeps(row["l"], "{}") for row in rows]
        assert kept == [bool(row[column]) or not _readable(row["l"]) for row in rows]
