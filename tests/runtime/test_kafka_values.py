"""Kafka JSON values parsed by Arrow at once are exactly what parsing them one by one
gives, and every value Arrow would read otherwise is left to the one-by-one parsing."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pyspark.sql.types import BooleanType, DoubleType, FloatType, IntegerType, LongType, StringType

from dataflow_operator.runtime.sources.ingested import updates_table
from dataflow_operator.runtime.sources.kafka import record_values
from dataflow_operator.runtime.sources.kafka_client import KafkaRecord
from dataflow_operator.runtime.sources.kafka_values import arrow_values
from dataflow_operator.runtime.sources.options import SourceOptions

FIELDS: list[tuple[str, Any]] = [
    ("k", StringType()),
    ("n", LongType()),
    ("i", IntegerType()),
    ("x", DoubleType()),
    ("f", FloatType()),
    ("ok", BooleanType()),
]
OPTIONS = SourceOptions({"kind": "kafka", "log_dir": "/nowhere", "topic": "t", "format": "json"})


def _one_by_one(values: list[bytes]) -> list[dict[str, Any]]:
    records = [KafkaRecord(0, offset, 0, value) for offset, value in enumerate(values)]
    rows = [(*record_values(OPTIONS, FIELDS, r), 0, 1) for r in records]
    return updates_table(FIELDS, rows).drop_columns(["__time", "__diff"]).to_pylist()


objects = st.fixed_dictionaries(
    {},
    optional={
        "k": st.one_of(st.none(), st.text(max_size=8)),
        "n": st.one_of(st.none(), st.integers(-(2**63), 2**63 - 1)),
        "i": st.integers(-(2**31), 2**31 - 1),
        "x": st.floats(allow_nan=False, allow_infinity=False),
        "f": st.floats(-1e30, 1e30),
        "ok": st.booleans(),
        "extra": st.integers(),
    },
)


@given(st.lists(objects, min_size=1, max_size=20))
@pytest.mark.slow
def test_what_arrow_reads_is_what_the_values_parse_to_one_by_one(
    rows: list[dict[str, Any]],
) -> None:
    values = [json.dumps(row).encode() for row in rows]
    parsed = arrow_values(FIELDS, values, "json")
    assert parsed is not None
    assert parsed.to_pylist() == _one_by_one(values)


@pytest.mark.parametrize(
    "value",
    [
        b'{"n": "12"}',  # a string in an integer column: converted one by one
        b'{"n": 1.5}',
        b'{"k": {"nested": 1}}',
        b"[1, 2]",  # not an object: an error that names the record
        b"not json",
        b'{"k": "a\nb"}'.replace(b"\\n", b"\n"),
        b'{"K": "upper"}',  # differs from a column only by case
        b"",  # a row of nulls one by one; Arrow would skip it
        b'{"k": "\xff"}',  # not UTF-8
    ],
)
def test_values_arrow_would_read_otherwise_are_left_to_the_one_by_one_parsing(value: bytes) -> None:
    assert arrow_values(FIELDS, [b'{"k": "fine"}', value], "json") is None


@pytest.mark.parametrize("blank", [b"", b"  ", b"\t"])
def test_a_value_of_two_objects_beside_a_blank_one_is_left_to_the_one_by_one_parsing(
    blank: bytes,
) -> None:
    """Arrow reads two rows from the one and none from the other: as many rows as
    values, yet not one row per value."""
    assert arrow_values(FIELDS, [b'{"k": "a"} {"k": "b"}', blank], "json") is None
    assert arrow_values(FIELDS, [b'{"k": "a"}\n{"k": "b"}', blank], "json") is None


def test_values_that_are_one_object_only_together_are_left_to_the_one_by_one_parsing() -> None:
    """Arrow reads an object across line breaks: two values that are not JSON alone must
    not become one row, made up for by a value of two objects."""
    values = [b'{"k":', b'"a"}', b'{"k": "b"} {"k": "c"}']
    assert arrow_values(FIELDS, values, "json") is None
    with pytest.raises(ValueError, match="offset 0"):
        _one_by_one(values)


def test_values_are_read_whatever_whitespace_is_around_them() -> None:
    values = [b' {"k": "a"}\n', b'\t{"k": "b", "n": 2}\r\n ']
    parsed = arrow_values(FIELDS, values, "json")
    assert parsed is not None
    assert parsed.to_pylist() == _one_by_one(values)


def test_a_value_over_several_lines_is_left_to_the_one_by_one_parsing() -> None:
    values = [b'{"k": "a"}', b'{"k":\r\n "b"}']
    assert arrow_values(FIELDS, values, "json") is None
    assert [row["k"] for row in _one_by_one(values)] == ["a", "b"]


def test_csv_values_and_columns_of_other_types_are_left_to_the_one_by_one_parsing() -> None:
    assert arrow_values(FIELDS, [b"a,1"], "csv") is None
    from pyspark.sql.types import DateType

    assert arrow_values([("d", DateType())], [b'{"d": "2026-01-01"}'], "json") is None


ZONED = b'"2026-01-01T00:00:00Z"'


@pytest.mark.parametrize(
    ("first", "second", "by_arrow"),
    [
        (ZONED, b'"2026-01-01 05:30:00.25+05:30"', True),
        (ZONED, b"null", True),
        (b'"2026-01-01T00:00:00"', b'"2026-01-02 00:00:00.5"', True),  # no zone: UTC
        (ZONED, b'"2026-01-01T00:00:00"', False),  # with and without a zone: one by one
        (ZONED, b'" 2026-01-01T00:00:00Z"', False),  # spaces around
        (ZONED, b"1767225600000", False),  # milliseconds
    ],
)
def test_text_timestamps_arrow_reads_exactly_are_the_values_parsed_one_by_one(
    first: bytes, second: bytes, by_arrow: bool
) -> None:
    from pyspark.sql.types import TimestampType

    fields = [("t", TimestampType())]
    values = [b'{"t": ' + first + b"}", b'{"t": ' + second + b"}"]
    parsed = arrow_values(fields, values, "json")
    assert (parsed is not None) == by_arrow
    records = [KafkaRecord(0, offset, 0, value) for offset, value in enumerate(values)]
    one_by_one = updates_table(
        fields, [(*record_values(OPTIONS, fields, r), 0, 1) for r in records]
    )
    if parsed is not None:
        assert parsed.to_pylist() == one_by_one.drop_columns(["__time", "__diff"]).to_pylist()
