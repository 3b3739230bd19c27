"""The offline DDL parser (``core/ddl.py``) agrees with Spark's own.

For each schema, Spark's ``StructType.fromDDL`` (the parser behind a reader's
``.schema(ddl)`` and ``from_json``) and :func:`parse_schema` both accept or both
reject it; when accepted, the parser's canonical rendering is the same Spark type.
"""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pyspark.sql import SparkSession

from dataflow_operator.core.ddl import DdlError, parse_schema, render_schema

pytestmark = pytest.mark.spark

SCHEMAS = [
    "content STRING, event_ts TIMESTAMP",
    "content STRNG,, event_ts",
    "content STRNG",
    "a BOOLEAN, b TINYINT, c BYTE, d SMALLINT, e SHORT, f INT, g INTEGER, h BIGINT, i LONG",
    "a FLOAT, b REAL, c DOUBLE, d DATE, e TIMESTAMP_NTZ, f TIMESTAMP_LTZ, g BINARY",
    "a VOID, b VARIANT, c INTERVAL",
    "a DECIMAL, b DEC(5), c NUMERIC(10, 2), d decimal(38,38)",
    "a DECIMAL(39)",
    "a DECIMAL(3,4)",
    "a DECIMAL(1,2,3)",
    "a DECIMAL(0)",
    "a CHAR(3), b CHARACTER(4), c VARCHAR(10)",
    "a CHAR",
    "a VARCHAR",
    "a VARCHAR(1, 2)",
    "a STRING COLLATE UTF8_LCASE, b STRING COLLATE UNICODE_CI",
    "a TIME, b TIME(0), c TIME(6)",
    "a TIME(7)",
    "a TIME(1, 2)",
    "a INTERVAL YEAR, b INTERVAL YEAR TO MONTH, c INTERVAL MONTH",
    "a INTERVAL DAY TO SECOND, b INTERVAL HOUR TO MINUTE, c INTERVAL MINUTE TO SECOND",
    "a INTERVAL MONTH TO YEAR",
    "a INTERVAL SECOND TO HOUR",
    "a INTERVAL HOUR TO HOUR",
    "a ARRAY<INT>, b MAP<STRING, ARRAY<DOUBLE>>, c STRUCT<x: INT, y STRING NOT NULL>",
    "a STRUCT<>, b STRUCT<x: STRUCT<y: ARRAY<MAP<INT, DECIMAL(5,2)>>>>",
    "a ARRAY",
    "a MAP<INT>",
    "a ARRAY<INT",
    "a STRUCT<x>",
    "a ARRAY<>",
    "a INT NOT NULL, b STRING COMMENT 'the b', c INT NOT NULL COMMENT \"c\"",
    "a INT COMMENT",
    "a INT NOT",
    "a INT NULL",
    "a INT COMMENT b",
    "`a b` INT, `c``d` STRING, `` INT",
    "_x INT, x1 INT, 1x INT",
    "1 INT",
    "1d INT",
    "12L INT",
    "select INT, from STRING, table DATE",
    "struct<a: int, b: string>",
    "STRUCT<>",
    "struct<a int> extra",
    "a INT,",
    ",a INT",
    "",
    "a",
    "a INT b INT",
    "a INT, a STRING",
    "a: INT",
    "a INT, b STRUCT<c: INT, d: STRING COMMENT 'x'>",
    "a geometry",
    "a uuid",
    "a json",
    "a text",
    "a datetime",
]


def _spark_accepts(spark: SparkSession, ddl: str) -> str | None:
    """Spark's StructType for ``ddl`` as JSON, or None when Spark rejects it."""
    types = spark.sparkContext._jvm.org.apache.spark.sql.types  # type: ignore[union-attr]
    try:
        return str(types.StructType.fromDDL(ddl).json())
    except Exception:
        return None


NAMED_TWICE = "the column is named twice"
"""The one refusal stricter than Spark's by design: Spark's DDL accepts a column named
twice, but no dataflow can read such a source (every reference to it is ambiguous)."""


def _disagreement(spark: SparkSession, ddl: str) -> str | None:
    expected = _spark_accepts(spark, ddl)
    try:
        columns = parse_schema(ddl)
    except DdlError as error:
        if expected is None or NAMED_TWICE in str(error):
            return None
        return f"{ddl!r}: Spark accepts it, the parser says {error}"
    if expected is None:
        return f"{ddl!r}: the parser accepts it, Spark does not"
    rendered = render_schema(columns)
    if _spark_accepts(spark, rendered) != expected:
        return f"{ddl!r}: rendered as {rendered!r}, another type for Spark"
    return None


def test_a_column_named_twice_is_refused_though_spark_accepts_it(spark: SparkSession) -> None:
    for ddl in ("a INT, a STRING", "a INT, A INT"):
        assert _spark_accepts(spark, ddl) is not None, ddl
        with pytest.raises(DdlError, match="the column is named twice"):
            parse_schema(ddl)


def test_the_parser_agrees_with_spark(spark: SparkSession) -> None:
    found = [line for line in (_disagreement(spark, ddl) for ddl in SCHEMAS) if line]
    assert not found, "\n".join(found)


_TYPES = st.sampled_from(
    ["INT", "string", "DECIMAL(4,1)", "ARRAY<BIGINT>", "MAP<STRING,DATE>", "STRNG", "CHAR",
     "STRUCT<x:INT>", "interval day", "TIMESTAMP_NTZ", "VARCHAR(2)", "ARRAY<>", "BOOLEAN"]
)  # fmt: skip
_NAMES = st.sampled_from(["a", "b_1", "`c d`", "1", "x", "`e``f`"])
_COLUMNS = st.tuples(_NAMES, _TYPES, st.sampled_from(["", " NOT NULL", " COMMENT 'k'"]))


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(st.lists(_COLUMNS, max_size=4), st.sampled_from([", ", ",", " , ", ",, "]))
def test_generated_schemas_agree_with_spark(
    spark: SparkSession, columns: list[tuple[str, str, str]], separator: str
) -> None:
    ddl = separator.join(f"{n} {t}{rest}" for n, t, rest in columns)
    assert _disagreement(spark, ddl) is None
