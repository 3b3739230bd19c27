"""DISTINCT and set operations in Spark state (``transformWithStateInPandas``): running.

The core plans the query (:class:`dataflow_operator.core.multiset.MultisetPlan`). Here
:func:`multiset_changelog` matches the inputs by position (a positional union, so Spark
widens their types as the set operation would), turns each row into JSON, and groups the
updates into a few state keys by the row's hash;
:class:`~dataflow_operator.runtime.strategies.row_counts.RowCounts` (a module of its own,
light to import) keeps each row's multiplicity per input and emits the change of the
output multiplicity (:func:`~dataflow_operator.core.multiplicity.output_multiplicity`)
whenever it changes.

The inputs are not in step (one may deliver a time after the other delivered a later
one), so updates are held until the watermark (the inputs' frontier) reaches their time
and then applied in time order; the output is complete up to the watermark.
"""

from __future__ import annotations

from pyspark.sql import DataFrame
from pyspark.sql import functions as F  # noqa: N812 - Spark's convention
from pyspark.sql import types as T  # noqa: N812 - Spark's convention

from dataflow_operator.core.multiset import MultisetPlan
from dataflow_operator.runtime.changelog_store import DIFF, TIME
from dataflow_operator.runtime.strategies.buckets import bucket_of
from dataflow_operator.runtime.strategies.columns import BUCKET, ROW, SIDE
from dataflow_operator.runtime.strategies.join import JSON_OPTIONS
from dataflow_operator.runtime.strategies.row_counts import RowCounts

__all__ = ["multiset_changelog"]


def multiset_changelog(
    plan: MultisetPlan, inputs: list[DataFrame], *, until: int | None
) -> DataFrame:
    """The output changelog (the first input's column names, widened types, ``__time``,
    ``__diff``). Updates at or past ``until`` never enter the state."""
    width = len([c for c in inputs[0].columns if c not in (TIME, DIFF)])
    tagged = []
    for side, frame in enumerate(inputs):
        data = [c for c in frame.columns if c not in (TIME, DIFF)]
        tagged.append(
            frame.select(
                F.lit(side).alias(SIDE),
                *[F.col(f"`{c}`").alias(f"__c{i}") for i, c in enumerate(data)],
                F.col(TIME),
                F.col(DIFF),
            )
        )
    union = tagged[0]
    for frame in tagged[1:]:
        union = union.union(frame)  # by position: Spark widens the types
    if until is not None:
        union = union.filter(F.col(TIME) < F.lit(until))
    columns = [F.col(f"__c{i}") for i in range(width)]
    schema = T.StructType([union.schema[f"__c{i}"] for i in range(width)])
    row = F.to_json(F.struct(*columns), JSON_OPTIONS)
    arranged = union.select(
        F.col(SIDE),
        row.alias(ROW),
        F.col(TIME),
        F.col(DIFF),
        bucket_of([row]).alias(BUCKET),
    )
    output = T.StructType(
        [
            T.StructField(ROW, T.StringType()),
            T.StructField(TIME, T.LongType()),
            T.StructField(DIFF, T.LongType()),
        ]
    )
    counted = arranged.groupBy(BUCKET).transformWithStateInPandas(
        statefulProcessor=RowCounts(plan.operation),
        outputStructType=output,
        outputMode="Append",
        timeMode="EventTime",
    )
    names = [c for c in inputs[0].columns if c not in (TIME, DIFF)]
    parsed = counted.select(
        F.from_json(F.col(ROW), schema, JSON_OPTIONS).alias(ROW), F.col(TIME), F.col(DIFF)
    )
    return parsed.select(
        *[F.col(ROW).getField(f"__c{i}").alias(name) for i, name in enumerate(names)],
        F.col(TIME),
        F.col(DIFF),
    )
