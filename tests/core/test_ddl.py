"""The offline Spark DDL parser: what it accepts, and errors naming column and problem.

Agreement with Spark itself: tests/runtime/test_ddl_matches_spark.py.
"""

from __future__ import annotations

import pytest

from dataflow_operator.core.ddl import Column, DdlError, parse_schema, render_schema


def test_columns_with_nested_types_comments_and_quoted_names() -> None:
    columns = parse_schema(
        "`a b` decimal(10, 2) NOT NULL COMMENT 'money', "
        "m MAP<string, ARRAY<STRUCT<x: int, `y``z` varchar(3)>>>, t interval day to second"
    )
    assert columns == [
        Column("a b", "DECIMAL(10,2)", nullable=False, comment="'money'"),
        Column("m", "MAP<STRING, ARRAY<STRUCT<`x`: INT, `y``z`: VARCHAR(3)>>>"),
        Column("t", "INTERVAL DAY TO SECOND"),
    ]
    assert parse_schema(render_schema(columns)) == columns


@pytest.mark.parametrize(
    ("ddl", "message"),
    [
        ("content STRNG,, event_ts", 'column "content": unknown type "STRNG"'),
        ("content STRING,, event_ts", 'expected a column name, got ","'),
        (
            "content STRING, event_ts",
            'column "event_ts": expected a type, got the end of the schema',
        ),
        ("a CHAR", 'column "a": type "CHAR" needs a length, e.g. CHAR(10)'),
        ("a INT(3)", 'column "a": type "INT" takes no parameters (3,)'),
        ("a ARRAY", 'column "a": type "ARRAY" needs its element types, e.g. ARRAY<…>'),
        ("a STRUCT<b: STRUCT<c FOO>>", 'column "a.b.c": unknown type "FOO"'),
        ("a DECIMAL(39)", 'column "a": DECIMAL(39,0): the precision must be at most 38'),
        ("a INTERVAL SECOND TO HOUR", 'column "a": invalid interval "INTERVAL SECOND TO HOUR"'),
        ("a INT b INT", 'column "a": unexpected "b"; columns are separated by ","'),
        ("a INT,", "the schema ends with a comma"),
        ("   ", "the schema is empty"),
        ("1d DOUBLE", 'expected a column name, got "1d"'),
        ("a INT COMMENT b", 'column "a": expected a quoted comment, got "b"'),
    ],
)
def test_errors_name_the_column_and_the_problem(ddl: str, message: str) -> None:
    with pytest.raises(DdlError) as caught:
        parse_schema(ddl)
    assert caught.value.message.startswith(message), caught.value.message
