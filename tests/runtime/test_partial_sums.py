"""An aggregate's terms summed per group and time before its operator (:mod:`.partial_sums`),
without Spark: what the operator would have added row by row, in fewer rows."""

from __future__ import annotations

import math
from collections import Counter

import pyarrow as pa
import pytest
from hypothesis import given
from hypothesis import strategies as st
from pyspark.sql import types as T  # noqa: N812 - Spark's convention

from dataflow_operator.runtime.strategies import partial_sums
from dataflow_operator.runtime.strategies.partial_sums import PartialSums, sums_exactly

SCHEMA = pa.schema(
    [
        ("__key_0", pa.string()),
        ("__time", pa.int64()),
        ("__sum_0", pa.int64()),  # a sum's term
        ("__sum_1", pa.int32()),  # a min's value
        ("__count", pa.int64()),
    ]
)
SUMS = PartialSums(grouped=("__key_0", "__time", "__sum_1"), summed=("__sum_0", "__count"))

Row = tuple[str | None, int, int | None, int | None, int]


def _batch(rows: list[Row], schema: pa.Schema = SCHEMA) -> pa.RecordBatch:
    return pa.RecordBatch.from_pylist(
        [dict(zip(schema.names, row, strict=True)) for row in rows], schema
    )


def _rows(batches: list[pa.RecordBatch]) -> list[tuple[object, ...]]:
    return [tuple(row.values()) for b in batches for row in b.to_pylist()]


def _totals(rows: list[tuple[object, ...]]) -> dict[tuple[object, ...], tuple[int, int]]:
    """Per (group, time, min value): the summed term and count, as the operator adds them."""
    totals: dict[tuple[object, ...], tuple[int, int]] = {}
    for key, time, term, value, count in rows:
        old = totals.get((key, time, value), (0, 0))
        totals[(key, time, value)] = (old[0] + (term or 0), old[1] + count)
    return totals


rows_strategy = st.lists(
    st.tuples(
        st.sampled_from(["a", "b", None]),
        st.integers(1, 3),
        st.integers(-5, 5),
        st.sampled_from([None, 1, 2]),
        st.sampled_from([-1, 1, 2]),
    ),
    max_size=40,
)


@given(st.lists(rows_strategy, max_size=4))
@pytest.mark.slow
def test_sums_per_group_time_and_value_are_what_the_operator_would_add(
    batches: list[list[Row]],
) -> None:
    given_rows = [row for batch in batches for row in batch]

    out = list(SUMS([_batch(batch) for batch in batches]))

    assert all(b.schema == SCHEMA for b in out)
    summed = _rows(out)
    assert len(summed) == len({(k, t, v) for k, t, _, v, _ in given_rows})  # one row each
    assert _totals(summed) == _totals(given_rows)


def test_a_task_sums_its_batches_again_once_they_hold_many_rows(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(partial_sums, "ROWS_AT_ONCE", 3)
    batches = [_batch([("a", 1, n, None, 1), ("b", 1, n, None, 1)]) for n in range(5)]

    out = _rows(list(SUMS(batches)))

    assert sorted(out, key=str) == [("a", 1, 10, None, 5), ("b", 1, 10, None, 5)]


def test_a_task_with_too_many_groups_to_gain_hands_them_on_and_starts_again(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(partial_sums, "ROWS_AT_ONCE", 2)
    batches = [_batch([(f"k{n}", 1, 1, None, 1)]) for n in range(5)]

    out = _rows(list(SUMS(batches)))

    assert Counter(out) == Counter(_rows(batches))


def test_a_nan_term_is_left_out_as_the_operator_leaves_it_out() -> None:
    schema = pa.schema(
        [("__key_0", pa.string()), ("__sum_0", pa.float64()), ("__count", pa.int64())]
    )
    sums = PartialSums(grouped=("__key_0",), summed=("__sum_0", "__count"))
    batch = _batch([("a", 1.5, 1), ("a", math.nan, 1), ("b", math.nan, 1)], schema)

    out = {row[0]: row[1:] for row in _rows(list(sums([batch])))}

    assert out == {"a": (1.5, 2), "b": (None, 1)}


def test_integer_terms_whose_sum_could_overflow_pass_unsummed() -> None:
    big = 2**62
    batch = _batch([("a", 1, big, None, 1), ("a", 1, big, None, 1)])

    out = _rows(list(SUMS([batch])))

    assert out == _rows([batch])


def test_narrow_sums_are_cast_back_and_fail_loudly_past_their_type() -> None:
    schema = pa.schema([("__key_0", pa.string()), ("__sum_0", pa.int8()), ("__count", pa.int64())])
    sums = PartialSums(grouped=("__key_0",), summed=("__sum_0", "__count"))

    assert _rows(list(sums([_batch([("a", 100, 1), ("a", 20, 1)], schema)]))) == [("a", 120, 2)]
    with pytest.raises(pa.ArrowInvalid):
        list(sums([_batch([("a", 100, 1), ("a", 100, 1)], schema)]))


def test_sums_only_where_grouping_and_adding_match_the_operator() -> None:
    assert sums_exactly(
        [T.StringType(), T.LongType(), T.DateType()], [T.LongType(), T.DoubleType()]
    )
    assert not sums_exactly([T.DoubleType()], [T.LongType()])  # NaN, -0.0 as keys
    assert not sums_exactly([T.ArrayType(T.LongType())], [T.LongType()])
    assert not sums_exactly([T.StringType()], [T.DecimalType(20, 2)])
