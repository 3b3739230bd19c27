"""Before a step moves a dataflow's clock, its kafka sources' next batches are read by the
executors (:class:`~dataflow_operator.runtime.sources.kafka_stage.BatchStager`).

Each kafka source's batch is staged from its offset in the last batch Spark logged (the
offset its reader is asked from next; a query with no batch yet starts from nothing
read), unless that offset was fetched at the step's time already. Staging is an
optimisation only: anything that goes wrong leaves the batch to the reader, which
fetches it in the driver and reports what it finds.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from dataflow_operator.core.time import Timestamp
from dataflow_operator.logs import get_logger
from dataflow_operator.runtime.engine.layout import last_offsets
from dataflow_operator.runtime.sources.frames import SourceInput
from dataflow_operator.runtime.sources.kafka_stage import BatchStager
from dataflow_operator.runtime.storage import Location
from dataflow_operator.runtime.token import Token

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

__all__ = ["KafkaStaging"]

log = get_logger(__name__)

NOTHING_READ: dict[str, Any] = {"seq": 0, "upper": 0}
"""A kafka reader's offset before its first batch (its ``initialOffset``'s position)."""


class KafkaStaging:
    """One dataflow's kafka sources, each with its :class:`BatchStager`."""

    def __init__(self, sources: Sequence[SourceInput]) -> None:
        self._lock = threading.Lock()  # a stop closes the clients only between stagings
        self._closed = False
        self._stagers = [
            (
                int(source.options.get("source_index", "0")),
                source.name,
                BatchStager(source.options, source.data_ddl),
            )
            for source in sources
        ]

    def stage(
        self, spark: SparkSession, checkpoint: Location, token: Token, step: Timestamp
    ) -> None:
        """Stage each source's next batch for clock time ``step``, under the dataflow's
        ``token`` (a drop cancels the job)."""
        with self._lock:
            if not self._closed:
                self._stage(spark, checkpoint, token, step)

    def _stage(
        self, spark: SparkSession, checkpoint: Location, token: Token, step: Timestamp
    ) -> None:
        last = last_offsets(checkpoint)
        logged = last[1] if last is not None else []
        for index, name, stager in self._stagers:
            start = next((o for o in logged if int(o.get("source", -1)) == index), NOTHING_READ)
            if start.get("fetched") == step:
                continue
            try:
                with token.scope(spark, f"{token.tag}: kafka source {name}"):
                    stager.stage(spark, dict(start), step)
            except Exception as error:
                log.debug("kafka batch not staged", source=name, error=str(error))

    def close(self) -> None:
        """Close the sources' Kafka clients (once a staging under way has ended: the
        dataflow's drop cancels its job)."""
        with self._lock:
            self._closed = True
            for _, _, stager in self._stagers:
                stager.close()
