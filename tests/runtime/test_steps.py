"""A step on the wall clock is one Spark batch; a complete step also fires what is due.

A batch runs with the watermark of the batch before it, so a temporal filter's
retraction due at a step's time comes out of the next batch: on the wall clock (a step
every fraction of a second) that is the next step's, while a complete step (simulated
clocks, a plan's end) settles it with one more round of the clock at the same time. A new
dataflow's first batch needs no such round: it holds nothing from before.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from dataflow_operator.api.protocol import DesiredDataflows
from dataflow_operator.runtime.engine.config import EngineConfig
from dataflow_operator.runtime.engine.engine import Engine
from dataflow_operator.runtime.engine.running import BatchOutput
from dataflow_operator.runtime.inserts import insert_rows

pytestmark = [pytest.mark.spark, pytest.mark.timeout(300)]

START = 1_767_225_600_000  # 2026-01-01T00:00:00Z
DAY = 86_400_000


def _engine(spark: SparkSession, tmp_path: Path) -> tuple[Engine, list[BatchOutput]]:
    """An engine at START, and the list its outputs go to."""
    outputs: list[BatchOutput] = []
    config = EngineConfig(state_dir=tmp_path / "state", start_time=START)
    return Engine(spark, config, outputs.append), outputs


def test_a_wall_step_is_one_batch_and_its_due_updates_follow_in_the_next(
    spark: SparkSession, tmp_path: Path
) -> None:
    engine, outputs = _engine(spark, tmp_path)
    events = tmp_path / "events"
    insert_rows(events, [{"content": "hello", "event_ts": "2026-01-01T00:00:00Z"}])
    source = {
        "name": "events",
        "table": {"path": str(events), "schema": "content STRING, event_ts TIMESTAMP"},
    }
    sql = "SELECT content FROM events WHERE mz_now() <= event_ts + INTERVAL '1 day'"
    spec = {"cluster": "default", "kind": "Subscribe", "sources": [source], "sql": sql}
    engine.apply(DesiredDataflows.model_validate({"dataflows": [{"name": "s", "spec": spec}]}))
    running = engine.running("s")
    assert running is not None

    def frontier() -> int:
        (report,) = engine.report().dataflows
        assert report.last_error is None, report.last_error
        return report.frontier[0]

    def updates() -> list[tuple[int, int, tuple[object, ...]]]:
        return [u for output in outputs for u in output.updates]

    try:
        engine.step(START, complete=False)  # a new dataflow's first step is complete…
        assert updates() == [(START, 1, ("hello",))]  # due now: out at once
        assert engine.report().dataflows[0].hydrated  # …so it hydrates in it
        batches = len(running.query.recentProgress)
        assert batches == 1  # its tasks knew the inputs' frontier: nothing left to settle
        engine.step(START + DAY, complete=False)
        engine.step(START + 2 * DAY, complete=False)
        assert len(running.query.recentProgress) == batches + 2  # one Spark batch a step
        # The retraction is due at START + DAY + 1 ms: the third batch ran with the
        # watermark of the second (START + DAY), so it is not out yet, and the frontier
        # says so (complete up to START + DAY, not beyond).
        assert (-1 not in [d for _, d, _ in updates()], frontier()) == (True, START + DAY + 1)
        engine.step(START + 2 * DAY)  # complete: one more round at the same time
        assert len(running.query.recentProgress) == batches + 3
        assert updates()[-1] == (START + DAY + 1, -1, ("hello",))
        assert frontier() == START + 2 * DAY + 1
        (report,) = engine.report().dataflows
        assert (report.strategy, report.strategy_reason) == ("Incremental", None)
    finally:
        engine.close()


def test_a_new_join_is_complete_and_hydrated_after_one_batch(
    spark: SparkSession, tmp_path: Path
) -> None:
    engine, outputs = _engine(spark, tmp_path)
    orders, customers = tmp_path / "orders", tmp_path / "customers"
    insert_rows(orders, [{"customer": 1, "amount": 5}, {"customer": 1, "amount": 7}])
    insert_rows(orders, [{"customer": 2, "amount": 1}, {"customer": 3, "amount": 4}])
    insert_rows(customers, [{"id": 1, "name": "ann"}, {"id": 2, "name": "bob"}])
    sources = [
        {"name": "orders", "table": {"path": str(orders), "schema": "customer INT, amount INT"}},
        {"name": "customers", "table": {"path": str(customers), "schema": "id INT, name STRING"}},
    ]
    sql = (
        "SELECT c.name, sum(o.amount) AS total FROM orders o "
        "JOIN customers c ON o.customer = c.id GROUP BY c.name"
    )
    spec = {"cluster": "default", "kind": "Subscribe", "sources": sources, "sql": sql}
    engine.apply(DesiredDataflows.model_validate({"dataflows": [{"name": "j", "spec": spec}]}))
    running = engine.running("j")
    assert running is not None
    try:
        engine.step(START)
        (report,) = engine.report().dataflows
        assert report.last_error is None, report.last_error
        # Without the inputs' frontier, the join would hold its output for a second batch.
        assert len(running.query.recentProgress) == 1
        assert report.hydrated and report.frontier == [START + 1]
        updates = sorted(u for output in outputs for u in output.updates)
        assert updates == [(START, 1, ("ann", 12)), (START, 1, ("bob", 1))]
    finally:
        engine.close()
