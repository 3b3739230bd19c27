"""A kafka source's next batch, read by the executors before the clock moves.

:meth:`BatchStager.stage` runs in the driver, in the engine's step (the streaming query is
between batches). From the source's last logged offset it asks Kafka for the partitions
and their high watermarks (:meth:`~.kafka.KafkaIngest.plan`), cuts what waits into offset
ranges (:func:`~dataflow_operator.core.kafka.plan_ranges`: at most ``maxRecordsPerBatch``,
every task slot of the application given work), and runs one Spark job whose tasks read
the ranges (:func:`~.kafka_tasks.read_range`) and write their parts of the ingested
collection. It puts their reads together (:func:`~dataflow_operator.core.kafka.merge_ranges`),
removes the parts of ranges not kept, and records the outcome (:class:`~.kafka_staged.StagedBatch`):
the reader takes it up when the clock moves, so Spark logs the batch's offset only once
its records are written, as when the driver fetches them itself.

Nothing here is needed for correctness: when the job fails (Kafka out of reach, a value
that does not parse), when records wait but no task could read one, or when the reader's
offset is not the one staged from, nothing is taken up and the reader fetches the batch
itself, reporting what went wrong as it does.
"""

from __future__ import annotations

from collections.abc import Mapping
from functools import partial
from typing import Any

from pyspark.sql import SparkSession
from pyspark.sql.types import StructType, _parse_datatype_string

from dataflow_operator.core.kafka import merge_ranges, plan_ranges
from dataflow_operator.logs import get_logger
from dataflow_operator.runtime.sources.ingested import resume_base
from dataflow_operator.runtime.sources.kafka import (
    KafkaIngest,
    discard_unlogged,
    parse_positions,
)
from dataflow_operator.runtime.sources.kafka_client import KafkaFailure
from dataflow_operator.runtime.sources.kafka_staged import StagedBatch
from dataflow_operator.runtime.sources.kafka_tasks import read_range
from dataflow_operator.runtime.sources.options import SourceOptions

__all__ = ["BatchStager"]

log = get_logger(__name__)


class BatchStager:
    """Stages one kafka source's batches; its Kafka client (for the partitions and their
    high watermarks) is kept from one step to the next."""

    def __init__(self, options: Mapping[str, str], data_ddl: str) -> None:
        self.options = dict(options)
        self.source = SourceOptions(self.options)
        schema = _parse_datatype_string(data_ddl)
        assert isinstance(schema, StructType)
        self.fields = [(field.name, field.dataType) for field in schema.fields]
        self.ingest = KafkaIngest(self.source, self.fields)

    def close(self) -> None:
        """Close the Kafka client."""
        self.ingest.close()

    def stage(self, spark: SparkSession, start: dict[str, Any], step: int) -> StagedBatch | None:
        """Have the executors read the batch after offset ``start`` for clock time
        ``step``, and record it; ``None`` (nothing staged) when the driver is to fetch it
        instead."""
        source = self.source
        base = resume_base(start, source.ingested)
        try:
            positions, floor, highs = self.ingest.plan(start, base)
        except KafkaFailure:
            self.ingest.close()  # a new connection next time
            return None  # the reader finds it out again, and reports it
        logged = max(int(start["seq"]), base)
        discard_unlogged(source.ingested, logged)
        StagedBatch.clear(source.log_dir)
        slots = spark.sparkContext.defaultParallelism
        ranges = plan_ranges(positions, highs, source.max_records, slots)
        reads, readers = [], set()
        if ranges:
            task = partial(read_range, self.options, self.fields, logged + 1, floor)
            try:
                done = spark.sparkContext.parallelize(ranges, len(ranges)).map(task).collect()
            except Exception as error:
                log.debug(
                    "kafka ranges not read by the executors", topic=source.topic, error=str(error)
                )
                discard_unlogged(source.ingested, logged)
                return None
            reads = [read for read, _ in done]
            readers = {pid for _, pid in done}
        merged = merge_ranges(positions, highs, ranges, reads)
        if ranges and merged.positions == positions and merged.held is None:
            # records wait, yet no task read any (a client that cannot reach the broker
            # from the executors): the driver fetches the batch, and reports what it finds
            discard_unlogged(source.ingested, logged)
            return None
        for offsets in ranges:
            if offsets.index not in merged.kept:
                part = source.ingested.part(logged + 1, offsets.index)
                if part.exists():
                    part.delete()
        staged = StagedBatch(
            start_seq=int(start["seq"]),
            start_upper=int(start["upper"]),
            start_positions=parse_positions(start.get("partitions")),
            base=base,
            step=step,
            expiration=source.expiration,
            floor=floor,
            positions=merged.positions,
            highs=highs,
            reads=merged.reads,
            held=merged.held,
            readers=len(readers),
        )
        staged.write(source.log_dir)
        return staged
