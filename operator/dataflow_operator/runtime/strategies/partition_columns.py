"""The columns of an operator that keeps rows per partition (a top-N, a session window).

Their plans (:mod:`dataflow_operator.core.top_n`, :mod:`dataflow_operator.core.session`)
hand the operator its input with helper columns named by a prefix and a number; the
operator keys its state by the partition's values as JSON, which must be equal where SQL
groups values as one.
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F  # noqa: N812 - Spark's convention
from pyspark.sql import types as T  # noqa: N812 - Spark's convention

__all__ = ["numbered", "partition_value", "quoted"]


def numbered(frame: DataFrame, prefix: str) -> list[str]:
    """The frame's columns named ``prefix<i>``, in order of ``i``."""
    found = [c for c in frame.columns if c.startswith(prefix)]
    return sorted(found, key=lambda c: int(c[len(prefix) :]))


def quoted(name: str) -> Column:
    """The column ``name``, whatever characters it has."""
    return F.col(f"`{name.replace('`', '``')}`")


def partition_value(frame: DataFrame, name: str) -> Column:
    """A partition's value as SQL groups it: -0.0 is 0.0."""
    column = F.col(name)
    if isinstance(frame.schema[name].dataType, T.FloatType | T.DoubleType):
        column = F.when(column == 0, F.lit(0).cast(frame.schema[name].dataType)).otherwise(column)
    return column.alias(name)
