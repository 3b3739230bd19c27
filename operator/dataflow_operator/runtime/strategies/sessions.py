"""Session windows in Spark state (``transformWithStateInPandas``): the sessionizer.

The core plans the query (:mod:`dataflow_operator.core.session`): a GROUP BY over the
sessionizer's output, which :func:`session_changelog` builds. It turns each update of
the rows to sessionize into its partition (JSON of the other ``GROUP BY`` values, -0.0
read as 0.0 as SQL groups them), its row (JSON of the input's columns) and its time in
µs, leaves out rows without a time (Spark puts them in no session), and groups the
updates into a few state keys by the partition's hash; :class:`~.session_rows.SessionRows`
keeps each partition's rows and emits the change of their sessions. The result is the
input's columns, ``__session_start``, ``__session_end`` (of the time's type),
``__time`` and ``__diff``.

Updates are held until the watermark (the input's frontier) reaches their time and then
applied in time order, as a top-N's are: the output is complete up to the watermark.
"""

from __future__ import annotations

from pyspark.sql import DataFrame
from pyspark.sql import functions as F  # noqa: N812 - Spark's convention
from pyspark.sql import types as T  # noqa: N812 - Spark's convention

from dataflow_operator.core.session import (
    PARTITION_PREFIX,
    SESSION_END,
    SESSION_START,
    SESSION_TIME,
    SessionPlan,
)
from dataflow_operator.runtime.changelog_store import DIFF, TIME
from dataflow_operator.runtime.strategies.columns import BUCKET, ROW
from dataflow_operator.runtime.strategies.partition_columns import arranged, parsed_rows
from dataflow_operator.runtime.strategies.session_rows import SessionRows

__all__ = ["session_changelog", "unsessioned_type"]

EVENT = "__event"
"""A row's time in its session, µs since the epoch."""
_START, _END = "__start", "__end"


def unsessioned_type(frame: DataFrame) -> str | None:
    """The type of the session window's time in ``frame`` (the plan's input) when the
    sessionizer cannot take it (only a TIMESTAMP: its µs are the same in every time
    zone), or ``None``."""
    data_type = frame.schema[SESSION_TIME].dataType
    return None if isinstance(data_type, T.TimestampType) else data_type.simpleString()


def session_changelog(plan: SessionPlan, frame: DataFrame, *, until: int | None) -> DataFrame:
    """The sessioned rows' changelog of the plan's input ``frame``. Updates at or past
    ``until`` never enter the state. The time must be of a type :func:`unsessioned_type`
    accepts."""
    data = [
        c
        for c in frame.columns
        if c not in (TIME, DIFF, SESSION_TIME) and not c.startswith(PARTITION_PREFIX)
    ]
    if until is not None:
        frame = frame.filter(F.col(TIME) < F.lit(until))
    frame = frame.filter(F.col(SESSION_TIME).isNotNull())
    event = F.unix_micros(F.col(SESSION_TIME)).alias(EVENT)
    rows = arranged(frame, PARTITION_PREFIX, data, event)
    output = T.StructType(
        [
            T.StructField(ROW, T.StringType()),
            T.StructField(_START, T.LongType()),
            T.StructField(_END, T.LongType()),
            T.StructField(TIME, T.LongType()),
            T.StructField(DIFF, T.LongType()),
        ]
    )
    sessioned = rows.groupBy(BUCKET).transformWithStateInPandas(
        statefulProcessor=SessionRows(plan.gap),
        outputStructType=output,
        outputMode="Append",
        timeMode="EventTime",
    )
    schema = T.StructType([frame.schema[c] for c in data])
    bounds = [
        F.timestamp_micros(F.col(_START)).alias(SESSION_START),
        F.timestamp_micros(F.col(_END)).alias(SESSION_END),
    ]
    return parsed_rows(sessioned, schema, bounds)
