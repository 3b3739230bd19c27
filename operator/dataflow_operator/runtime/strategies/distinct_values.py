"""The values a ``count(DISTINCT a, b, …)`` counts, as one text each.

The core plans the aggregate's value as a struct of ``a``, ``b``, …, NULL when one of
them is (:data:`~dataflow_operator.core.incremental.DISTINCT_TUPLE`); the group totals
keep a multiset of values in state, keyed by Python values, which a struct is not (it
arrives as a dict). So the struct is kept as its JSON, with what Spark's DISTINCT takes
as one value written one way: a float's -0.0 as 0.0 (NaN is ``"NaN"`` whatever its bits).
"""

from __future__ import annotations

from pyspark.sql import Column
from pyspark.sql import functions as F  # noqa: N812 - Spark's convention
from pyspark.sql import types as T  # noqa: N812 - Spark's convention

from dataflow_operator.runtime.strategies.join import JSON_OPTIONS

__all__ = ["distinct_text"]


def distinct_text(column: Column, data_type: T.StructType) -> Column:
    """The JSON of struct ``column`` (NULL stays NULL), its float fields' -0.0 as 0.0."""
    fields = []
    for field in data_type.fields:
        value = column.getField(field.name)
        if isinstance(field.dataType, T.FloatType | T.DoubleType):
            value = F.when(value == 0, F.lit(0).cast(field.dataType)).otherwise(value)
        fields.append(value.alias(field.name))
    return F.when(column.isNull(), F.lit(None)).otherwise(
        F.to_json(F.struct(*fields), JSON_OPTIONS)
    )
