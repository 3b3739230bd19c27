"""Top-N per partition in Spark state (``transformWithStateInPandas``): running.

The core plans the query (:class:`dataflow_operator.core.top_n.TopNPlan`). Here
:func:`top_n_changelog` turns each update of the inner query into its partition (JSON of
the ``PARTITION BY`` values, -0.0 read as 0.0 as SQL compares them), its row (JSON of the
inner query's columns) and its ordering values (JSON, each in a form that sorts as Spark
sorts it), and groups the updates into a few state keys by the partition's hash;
:class:`~.top_n_rows.TopNRows` keeps each partition's rows and emits the change of its
ranked rows whenever it changes. The result is the relation ``__mz_ranked`` (the inner
query's columns, the rank, ``__time``, ``__diff``), which the plan's ``output_sql`` reads.

Updates are held until the watermark (the input's frontier) reaches their time and then
applied in time order, as a set operation's are: the output is complete up to the
watermark.
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F  # noqa: N812 - Spark's convention
from pyspark.sql import types as T  # noqa: N812 - Spark's convention

from dataflow_operator.core.top_n import ORDER_PREFIX, PARTITION_PREFIX, TopNPlan
from dataflow_operator.runtime.changelog_store import DIFF, TIME
from dataflow_operator.runtime.strategies.columns import BUCKET, ROW
from dataflow_operator.runtime.strategies.join import JSON_OPTIONS
from dataflow_operator.runtime.strategies.partition_columns import (
    arranged,
    numbered,
    parsed_rows,
)
from dataflow_operator.runtime.strategies.top_n_rows import OrderKey, TopNRows

__all__ = ["ORDER", "RANK", "top_n_changelog", "unordered_type"]

ORDER = "__order"
"""A row's ordering values, as JSON."""
RANK = "__rank"
"""A ranked row's rank."""

_ORDERED_AS_JSON = (
    T.NumericType,
    T.StringType,
    T.BooleanType,
    T.DateType,
    T.TimestampNTZType,
)
"""Types whose JSON sorts as Spark sorts them (a date's and a TIMESTAMP_NTZ's text is
fixed-width, a string's compares by code point as Spark's binary collation compares its
bytes; NaN and the infinities of a float are handled by :class:`~.top_n_rows.OrderKey`)."""


def unordered_type(plan: TopNPlan, frame: DataFrame) -> str | None:
    """The type of the first ``ORDER BY`` value of ``frame`` (the plan's input) that the
    top-N cannot sort as Spark does, or ``None``."""
    for name in numbered(frame, ORDER_PREFIX):
        data_type = frame.schema[name].dataType
        collated = isinstance(data_type, T.StringType) and data_type.collation != "UTF8_BINARY"
        if collated or not isinstance(
            data_type, (*_ORDERED_AS_JSON, T.TimestampType, T.BinaryType)
        ):
            return data_type.simpleString()
    return None


def top_n_changelog(plan: TopNPlan, frame: DataFrame, *, until: int | None) -> DataFrame:
    """The ranked rows' changelog (``__mz_ranked``; without the rank for ``ORDER BY …
    LIMIT``) of the plan's input ``frame``.
    Updates at or past ``until`` never enter the state. Every ``ORDER BY`` value must be
    of a type :func:`unordered_type` accepts."""
    data = [
        c
        for c in frame.columns
        if c not in (TIME, DIFF) and not c.startswith((PARTITION_PREFIX, ORDER_PREFIX))
    ]
    if until is not None:
        frame = frame.filter(F.col(TIME) < F.lit(until))
    orders = numbered(frame, ORDER_PREFIX)
    values = [_sortable(frame, name).alias(str(i)) for i, name in enumerate(orders)]
    order = F.to_json(F.struct(*values), JSON_OPTIONS).alias(ORDER)
    rows = arranged(frame, PARTITION_PREFIX, data, order)
    floating = [isinstance(frame.schema[n].dataType, T.FloatType | T.DoubleType) for n in orders]
    keys = [
        OrderKey(descending, nulls_first, is_float)
        for (descending, nulls_first), is_float in zip(plan.order, floating, strict=True)
    ]
    output = T.StructType(
        [
            T.StructField(ROW, T.StringType()),
            T.StructField(RANK, T.LongType()),
            T.StructField(TIME, T.LongType()),
            T.StructField(DIFF, T.LongType()),
        ]
    )
    ranked = rows.groupBy(BUCKET).transformWithStateInPandas(
        statefulProcessor=TopNRows(keys, plan.first, plan.last),
        outputStructType=output,
        outputMode="Append",
        timeMode="EventTime",
    )
    schema = T.StructType([frame.schema[c] for c in data])
    rank = [] if plan.rank is None else [F.col(RANK).cast("int").alias(plan.rank)]
    return parsed_rows(ranked, schema, rank)


def _sortable(frame: DataFrame, name: str) -> Column:
    """An ``ORDER BY`` value in a form whose JSON sorts as Spark sorts the value: a
    TIMESTAMP as its microseconds since the epoch (its text carries a zone offset), a
    BINARY as hexadecimal (its JSON is base64); others as they are."""
    column = F.col(name)
    data_type = frame.schema[name].dataType
    if isinstance(data_type, T.TimestampType):
        return F.unix_micros(column)
    if isinstance(data_type, T.BinaryType):
        return F.hex(column)
    return column
