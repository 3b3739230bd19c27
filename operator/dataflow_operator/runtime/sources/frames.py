"""Each source of a dataflow as a streaming DataFrame: a changelog with a watermark.

Every kind of source, Kafka topics included, is read by :class:`~.reader.ChangelogSource`
(format ``dataflow_changelog``): the frame has the source's data columns, ``__time`` and
``__diff``, and an event-time watermark on the batch time that is the source's frontier
(the heartbeat row of each batch moves it, then is dropped).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from pyspark.errors import AnalysisException
from pyspark.sql import DataFrame, SparkSession

from dataflow_operator.runtime.sources.options import (
    BATCH_TIME,
    HEARTBEAT,
    RUNTIME_COLUMNS,
    SOURCE_FORMAT,
)
from dataflow_operator.runtime.sources.reader import ChangelogSource

__all__ = ["SourceInput", "register_source_format", "source_frame"]

_registered: set[int] = set()


@dataclass(frozen=True, slots=True)
class SourceInput:
    """One input of a dataflow, as the reader's options and its data columns' DDL."""

    name: str
    data_ddl: str
    options: Mapping[str, str]


def register_source_format(spark: SparkSession) -> None:
    """Register the source format once per session (sessions may share a registry)."""
    if id(spark) in _registered:
        return
    try:
        spark.dataSource.register(ChangelogSource)
    except AnalysisException as error:
        if "DATA_SOURCE_ALREADY_EXISTS" not in str(error):
            raise
    _registered.add(id(spark))


def source_frame(spark: SparkSession, source: SourceInput) -> DataFrame:
    """``source`` as a streaming changelog (data columns, ``__time``, ``__diff``) whose
    event-time watermark is the source's frontier."""
    ddl = f"{source.data_ddl}, {RUNTIME_COLUMNS}" if source.data_ddl else RUNTIME_COLUMNS
    frame = (
        spark.readStream.format(SOURCE_FORMAT)
        .options(**{**source.options, "schema": ddl})
        .load()
        .withWatermark(BATCH_TIME, "0 seconds")
    )
    # The filter names the event-time column, so the optimizer cannot push it below the
    # watermark: heartbeats must reach the watermark, then they are dropped.
    return frame.filter(f"NOT ({HEARTBEAT} AND {BATCH_TIME} IS NOT NULL)").drop(
        HEARTBEAT, BATCH_TIME
    )
