"""Warming Spark up before a replica says it is ready, so its first dataflow hydrates fast.

A replica's first streaming query pays once for what every later query reuses: the
driver JVM compiling Spark's planning and state store paths, RocksDB's native library,
the Python workers and their imports, so a replica's first dataflow hydrates several
times slower than its second (figures in ``bench/RESULTS.md``). So before it attaches its
engine to the control API, a replica runs one small dataflow of its own, a temporal
filter over a one-row table (a ``transformWithStateInPandas`` operator, as every
incremental strategy runs), for :data:`STEPS` steps, then drops it and removes what it
wrote.

It runs in ``<state>/warm-up`` (beside ``dataflows/``; a Dataflow's name never reaches
this folder), because executors in other pods reach the state location and nothing
else. It never stops a start: a failure is a warning, and the replica goes on cold.
"""

from __future__ import annotations

import time

from pyspark.sql import SparkSession

from dataflow_operator.api.dataflow import DataflowSpec
from dataflow_operator.core.time import Timestamp, format_timestamp
from dataflow_operator.logs import get_logger
from dataflow_operator.runtime.engine.config import EngineConfig
from dataflow_operator.runtime.engine.engine import Engine, dataflows_from
from dataflow_operator.runtime.errors import one_line
from dataflow_operator.runtime.inserts import insert_rows
from dataflow_operator.runtime.storage import Location

__all__ = ["STEPS", "WARM_UP", "warm_up"]

log = get_logger(__name__)

WARM_UP = "warm-up"
"""The scratch folder in the replica's state location."""

STEPS = 6
"""The warm-up dataflow's steps: its first (complete: two batches), then one batch each.

Spark's JIT keeps compiling for the first queries and batches after the first one, so a
session warmed up with one step still hydrates the next few dataflows with more CPU than
one warmed up with six (``bench/RESULTS.md``); a step of this one-row dataflow is
cheap."""
_SQL = "SELECT id, ts FROM events WHERE mz_now() <= ts + INTERVAL '1 day'"


def _spec(table: Location) -> DataflowSpec:
    source = {"name": "events", "table": {"path": str(table), "schema": "id INT, ts TIMESTAMP"}}
    return DataflowSpec.model_validate(
        {"cluster": WARM_UP, "kind": "Subscribe", "sources": [source], "sql": _SQL}
    )


def warm_up(spark: SparkSession, state: Location, now: Timestamp) -> float | None:
    """Run the warm-up dataflow at ``now`` in ``state``'s scratch folder; its seconds,
    or ``None`` when it failed (logged as a warning)."""
    scratch = state.child(WARM_UP)
    began = time.monotonic()
    log.info("warming Spark up", folder=str(scratch))
    try:
        scratch.delete()  # what a replica killed while warming up left
        table = scratch.child("events")
        insert_rows(table, [{"id": 1, "ts": format_timestamp(now)}])
        engine = Engine(spark, EngineConfig(scratch.child("state"), start_time=now))
        try:
            failed = engine.apply(dataflows_from([(WARM_UP, _spec(table))])).failed
            if failed:
                raise RuntimeError(failed[WARM_UP])
            engine.step(now)  # its first step: complete, two batches
            for step in range(1, STEPS):
                engine.step(now + step, complete=False)  # one batch each, as on the wall clock
        finally:
            engine.close()
        scratch.delete()
    except Exception as error:
        log.warning("warm-up failed; the replica starts cold", error=one_line(error))
        return None
    seconds = time.monotonic() - began
    log.info("Spark warmed up", seconds=round(seconds, 1))
    return seconds
