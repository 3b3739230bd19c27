"""A join's early test of its matched pairs: what it drops, and all it must keep."""

from __future__ import annotations

import json
import pickle
from decimal import Decimal

import pytest
from pyspark.sql import types as T  # noqa: N812 - Spark's convention

from dataflow_operator.core.residual import Comparison, Operand
from dataflow_operator.runtime.strategies.pair_filter import (
    FieldComparison,
    Kind,
    PairFilter,
    Side,
)
from dataflow_operator.runtime.strategies.residual_filter import kind_of, pair_filter_of

L, R = Side(0, "x"), Side(1, "y")


def _json(value: object) -> str:
    """``value`` in JSON as Spark writes it: a decimal as its digits."""
    return str(value) if isinstance(value, Decimal) else json.dumps(value)


def _keeps(kind: Kind, op: str, x: object, y: object, *, missing: bool = False) -> bool:
    pairs = PairFilter((FieldComparison(L, op, R, kind),))
    right = "{}" if missing else f'{{"y": {_json(y)}}}'
    return pairs.keeps(f'{{"x": {_json(x)}}}', right)


@pytest.mark.parametrize(
    ("kind", "x", "op", "y", "kept"),
    [
        ("number", 3, ">=", 3, True),
        ("number", 2, ">=", 3, False),
        ("number", 2**63 - 1, ">", 2**63 - 2, True),
        ("number", 1, "=", Decimal("1.000"), True),
        ("number", Decimal("0.1"), "<", Decimal("0.10"), False),
        ("number", 1, "<>", 1, False),
        ("number", None, "=", 1, False),  # NULL: not true
        ("string", "b", ">", "a", True),
        ("string", "é", ">", "z", True),  # code points, as UTF-8 bytes order
        ("string", "a", "=", "b", False),
        ("timestamp", "2026-03-08T06:59:59.999999Z", "<", "2026-03-08T07:00:00.000000Z", True),
        ("timestamp", "2026-01-01T00:00:00.000000Z", ">", "2026-01-01T00:00:00.000001Z", False),
        ("timestamp_ntz", "2026-01-01T00:00:00.000001", ">", "2026-01-01T00:00:00.000000", True),
        ("date", "2026-01-02", "<=", "2026-01-01", False),
    ],
)
def test_a_pair_is_dropped_only_when_the_comparison_is_not_true(
    kind: Kind, x: object, op: str, y: object, kept: bool
) -> None:
    assert _keeps(kind, op, x, y) is kept


@pytest.mark.parametrize(
    ("kind", "x", "y"),
    [
        ("double", "NaN", "1.0"),  # Spark writes NaN and the infinities as strings
        ("double", "Infinity", "1.0"),
        ("number", True, 1),
        ("string", "\ufffd", "a"),  # bytes that were not UTF-8: not the bytes Spark compares
        ("timestamp", "2026-01-01T00:00:00.000000", "2026-01-01T00:00:00.000000Z"),
        # another zone's offset, written to the minute: not known to the second
        ("timestamp", "1800-01-01T00:00:00.000000-04:56", "1800-01-01T04:56:02.000000Z"),
        ("timestamp_ntz", "2026-01-01T00:00:00Z", "2026-01-01T00:00:00"),
        ("timestamp", "+10000-01-01T00:00:00Z", "2026-01-01T00:00:00Z"),
        ("date", "2026-1-1", "2026-01-02"),
    ],
)
def test_what_it_cannot_read_as_spark_would_it_keeps(kind: Kind, x: object, y: object) -> None:
    for op in ("=", "<>", "<", ">"):
        assert _keeps(kind, op, x, y), (kind, op, x, y)


def test_a_field_it_does_not_find_is_left_to_spark() -> None:
    assert _keeps("number", "=", 1, 2, missing=True)


def test_doubles_compare_as_the_decimal_text_spark_writes() -> None:
    pairs = PairFilter((FieldComparison(L, "<", R, "double"),))
    assert pairs.keeps('{"x": 1.0E-5}', '{"y": 2.0E-5}')
    assert not pairs.keeps('{"x": 0.30000000000000004}', '{"y": 0.3}')
    equal = PairFilter((FieldComparison(L, "=", R, "double"),))
    assert equal.keeps('{"x": -0.0}', '{"y": 0.0}')  # equal in SQL too


def test_literals_and_every_comparison_must_hold() -> None:
    pairs = PairFilter(
        (
            FieldComparison(L, ">", 10, "number"),
            FieldComparison("m", "<=", Side(1, "s"), "string"),
        )
    )
    assert pairs.keeps('{"x": 11}', '{"s": "n"}')
    assert not pairs.keeps('{"x": 10}', '{"s": "n"}')
    assert not pairs.keeps('{"x": 11}', '{"s": "a"}')


def test_it_travels_pickled_without_its_parsed_rows() -> None:
    pairs = PairFilter((FieldComparison(L, "<", R, "number"),))
    assert pairs.keeps('{"x": 1}', '{"y": 2}')
    copy = pickle.loads(pickle.dumps(pairs))
    assert copy.comparisons == pairs.comparisons and copy._rows == {}
    assert not copy.keeps('{"x": 3}', '{"y": 2}')


@pytest.mark.parametrize(
    ("data_type", "kind"),
    [
        (T.ByteType(), "number"),
        (T.LongType(), "number"),
        (T.DecimalType(38, 18), "number"),
        (T.DoubleType(), "double"),
        (T.FloatType(), "float"),
        (T.StringType(), "string"),
        (T.StringType("UTF8_LCASE"), None),  # Spark's order is not the code points'
        (T.TimestampType(), "timestamp"),
        (T.TimestampNTZType(), "timestamp_ntz"),
        (T.DateType(), "date"),
        (T.BooleanType(), None),
        (T.BinaryType(), None),
        (T.ArrayType(T.LongType()), None),
    ],
)
def test_the_kind_of_each_type(data_type: T.DataType, kind: Kind | None) -> None:
    assert kind_of(data_type) == kind


def _schema(ddl: str) -> T.StructType:
    fields = [part.strip().split(" ") for part in ddl.split(",")]
    types = {
        "BIGINT": T.LongType(),
        "INT": T.IntegerType(),
        "DOUBLE": T.DoubleType(),
        "FLOAT": T.FloatType(),
        "STRING": T.StringType(),
        "DECIMAL": T.DecimalType(10, 2),
        "DATE": T.DateType(),
    }
    return T.StructType(
        [T.StructField(name, types[kind]) for name, kind in fields]
        + [T.StructField("__time", T.LongType()), T.StructField("__diff", T.LongType())]
    )


def test_columns_are_named_as_the_last_steps_rows_name_them() -> None:
    # inputs 0 (a, b) and 1 (c) joined so far, as joined columns; input 2 (d, e) last
    left = _schema("__mz_l0 BIGINT, __mz_l1 STRING, __mz_r0 DECIMAL")
    right = _schema("d INT, e STRING")
    comparisons = [
        Comparison(Operand(column=(2, 0)), ">", Operand(column=(1, 0))),
        Comparison(Operand(column=(0, 1)), "<>", Operand(column=(2, 1))),
        Comparison(Operand(column=(0, 0)), "<", Operand(literal=Decimal("2.5"))),
    ]
    pairs = pair_filter_of(comparisons, (left, right), [2, 1, 2])
    assert pairs is not None
    assert pairs.comparisons == (
        FieldComparison(Side(1, "d"), ">", Side(0, "__mz_r0"), "number"),
        FieldComparison(Side(0, "__mz_l1"), "<>", Side(1, "e"), "string"),
        FieldComparison(Side(0, "__mz_l0"), "<", Decimal("2.5"), "number"),
    )


@pytest.mark.parametrize(
    ("left", "right", "literal"),
    [
        ("x BIGINT", "y DOUBLE", None),  # Spark compares them as doubles
        ("x FLOAT", "y DOUBLE", None),
        ("x DATE", "y STRING", None),
        ("x STRING", "y BIGINT", None),
        ("x DOUBLE", "y DOUBLE", 1),  # a number literal with a double: cast by Spark
        ("x BIGINT", "y BIGINT", "1"),  # a string literal with a number
    ],
)
def test_comparisons_spark_would_cast_are_left_to_spark(
    left: str, right: str, literal: int | str | None
) -> None:
    other = Operand(column=(1, 0)) if literal is None else Operand(literal=literal)
    comparison = Comparison(Operand(column=(0, 0)), "<", other)
    assert pair_filter_of([comparison], (_schema(left), _schema(right)), [1, 1]) is None


def test_a_name_twice_in_a_row_is_left_to_spark() -> None:
    left = _schema("x BIGINT, x BIGINT")
    comparison = Comparison(Operand(column=(0, 0)), "<", Operand(column=(1, 0)))
    assert pair_filter_of([comparison], (left, _schema("y BIGINT")), [2, 1]) is None
