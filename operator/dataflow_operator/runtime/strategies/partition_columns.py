"""The input and output of an operator that keeps rows per partition (a top-N, a session
window) around its processor.

Their plans (:mod:`dataflow_operator.core.top_n`, :mod:`dataflow_operator.core.session`)
hand the operator its input with helper columns named by a prefix and a number.
:func:`arranged` turns each update into what the processor takes (its partition's values
as JSON, equal where SQL groups values as one; its row as JSON; the value the processor
orders it by); :func:`parsed_rows` turns the processor's rows back into columns.
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F  # noqa: N812 - Spark's convention
from pyspark.sql import types as T  # noqa: N812 - Spark's convention

from dataflow_operator.runtime.changelog_store import DIFF, TIME
from dataflow_operator.runtime.strategies.buckets import bucket_of
from dataflow_operator.runtime.strategies.columns import BUCKET, KEY, ROW
from dataflow_operator.runtime.strategies.join import JSON_OPTIONS

__all__ = ["arranged", "numbered", "parsed_rows"]


def numbered(frame: DataFrame, prefix: str) -> list[str]:
    """The frame's columns named ``prefix<i>``, in order of ``i``."""
    found = [c for c in frame.columns if c.startswith(prefix)]
    return sorted(found, key=lambda c: int(c[len(prefix) :]))


def arranged(frame: DataFrame, partitions: str, data: list[str], value: Column) -> DataFrame:
    """``frame``'s updates as a processor takes them: ``__key`` (the JSON of the columns
    named ``partitions<i>``, -0.0 read as 0.0), ``__row`` (the JSON of ``data``),
    ``value``, ``__time``, ``__diff`` and ``__bucket`` (by the partition)."""
    partition = [_partition_value(frame, name) for name in numbered(frame, partitions)]
    return frame.select(
        (F.to_json(F.struct(*partition), JSON_OPTIONS) if partition else F.lit("")).alias(KEY),
        F.to_json(F.struct(*[_quoted(c) for c in data]), JSON_OPTIONS).alias(ROW),
        value,
        F.col(TIME),
        F.col(DIFF),
        bucket_of(partition).alias(BUCKET),
    )


def parsed_rows(processed: DataFrame, schema: T.StructType, extra: list[Column]) -> DataFrame:
    """A processor's output (``__row`` first, ``__time`` and ``__diff`` last) as the row's
    columns (``schema``), then ``extra`` (over the processor's other columns), ``__time``
    and ``__diff``."""
    parsed = processed.select(
        F.from_json(F.col(ROW), schema, JSON_OPTIONS).alias(ROW), *processed.columns[1:]
    )
    return parsed.select(
        *[F.col(ROW).getField(f.name).alias(f.name) for f in schema.fields],
        *extra,
        F.col(TIME),
        F.col(DIFF),
    )


def _quoted(name: str) -> Column:
    return F.col(f"`{name.replace('`', '``')}`")


def _partition_value(frame: DataFrame, name: str) -> Column:
    """A partition's value as SQL groups it: -0.0 is 0.0."""
    column = F.col(name)
    if isinstance(frame.schema[name].dataType, T.FloatType | T.DoubleType):
        column = F.when(column == 0, F.lit(0).cast(frame.schema[name].dataType)).otherwise(column)
    return column.alias(name)
