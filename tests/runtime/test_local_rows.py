"""The oracles' tables of SQL literals hold the rows ``createDataFrame`` would."""

from __future__ import annotations

import math

import pytest
from pyspark.sql import SparkSession
from tests.runtime.local_rows import local_frame

pytestmark = pytest.mark.spark

SCHEMA = "k INT, n BIGINT, s STRING, d DOUBLE, b BOOLEAN"
ROWS = [
    (1, 2**40, "plain", 1.5, True),
    (None, None, None, None, None),
    (-7, -(2**62), 'it\'s "quoted" \\ back\\slashed\nand $ unicode: ü 🙂', -0.0, False),
    (0, 0, "", math.inf, None),
    (2**31 - 1, 1, "x", -math.inf, True),
    (3, 3, "nan", math.nan, False),
]


def _key(row: tuple[object, ...]) -> tuple[str, ...]:
    """A row comparable whatever its NaN, and -0.0 told from 0.0."""
    return tuple(repr(value) for value in row)


def test_the_literals_give_the_rows_and_types_of_create_data_frame(spark: SparkSession) -> None:
    got = local_frame(spark, SCHEMA, ROWS)
    expected = spark.createDataFrame(ROWS, SCHEMA)
    assert got.schema == expected.schema
    assert sorted(map(_key, got.collect())) == sorted(map(_key, expected.collect()))
    assert "LocalTableScan" in got._jdf.queryExecution().executedPlan().toString()


def test_no_rows_is_an_empty_table_of_the_schema(spark: SparkSession) -> None:
    empty = local_frame(spark, SCHEMA, [])
    assert empty.schema == spark.createDataFrame([], SCHEMA).schema
    assert empty.collect() == []


def test_a_value_without_a_literal_is_refused_by_its_type(spark: SparkSession) -> None:
    with pytest.raises(TypeError, match="no SQL literal for a bytes"):
        local_frame(spark, "b BINARY", [(b"raw",)])
