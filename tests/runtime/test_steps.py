"""A step on the wall clock is at most one Spark batch per dataflow, and none for one with
nothing to do (a complete step neither); a complete step also fires what is due.

A batch runs with the watermark of the batch before it, so a temporal filter's
retraction due at a step's time comes out of the next batch; a complete step (simulated
clocks, a plan's end) settles it with one more round of the clock at the same time, and
so does a wall step at or past the time of an update the dataflow's state holds. A new
dataflow's first batch needs no such round: it holds nothing from before.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from dataflow_operator.api.protocol import DesiredDataflows
from dataflow_operator.runtime.engine import quiet
from dataflow_operator.runtime.engine.config import EngineConfig
from dataflow_operator.runtime.engine.engine import Engine
from dataflow_operator.runtime.engine.running import BatchOutput, RunningDataflow
from dataflow_operator.runtime.inserts import insert_rows

pytestmark = [pytest.mark.spark, pytest.mark.timeout(300)]

START = 1_767_225_600_000  # 2026-01-01T00:00:00Z
DAY = 86_400_000


def _engine(spark: SparkSession, tmp_path: Path) -> tuple[Engine, list[BatchOutput]]:
    """An engine at START, and the list its outputs go to."""
    outputs: list[BatchOutput] = []
    config = EngineConfig(state_dir=tmp_path / "state", start_time=START)
    return Engine(spark, config, outputs.append), outputs


def _one_day_filter(engine: Engine, events: Path) -> RunningDataflow:
    """Subscribe ``s``: the rows of table ``events`` for a day after their ``event_ts``
    (one row in it, at START)."""
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
    return running


def _quiet_filter(
    spark: SparkSession, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> tuple[Engine, list[BatchOutput], Path, RunningDataflow]:
    """:func:`_one_day_filter` on a new engine whose stateful dataflows go quiet at once
    after their last input, not a while later: ``(engine, outputs, events, running)``."""
    monkeypatch.setattr(quiet, "QUIET_AFTER", 0.0)
    engine, outputs = _engine(spark, tmp_path)
    events = tmp_path / "events"
    return engine, outputs, events, _one_day_filter(engine, events)


@pytest.mark.slow
def test_a_simulated_run_walks_quiet_steps_without_batches_and_each_step_is_complete(
    spark: SparkSession, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    engine, outputs, events, running = _quiet_filter(spark, tmp_path, monkeypatch)
    hour = DAY // 24

    def state() -> tuple[int, int, list[tuple[int, int, tuple[object, ...]]]]:
        """(batches, frontier, updates) after a step."""
        (report,) = engine.report().dataflows
        assert report.last_error is None, report.last_error
        updates = [u for output in outputs for u in output.updates]
        return len(running.query.recentProgress), report.frontier[0], updates

    try:
        engine.step(START, complete=True)
        assert state() == (1, START + 1, [(START, 1, ("hello",))])
        # The hours before the retraction: no batch, each step's output complete.
        for hours in range(1, 25):
            engine.step(START + hours * hour, complete=True)
            assert state()[:2] == (1, START + hours * hour + 1)
        # The step past it: a batch at its time and the settle, the retraction out in it.
        engine.step(START + DAY + hour, complete=True)
        batches, frontier, updates = state()
        assert (batches, frontier) == (3, START + DAY + hour + 1)
        assert updates[-1] == (START + DAY + 1, -1, ("hello",))
        # New input: its batch and the settle in the same step, then quiet again.
        insert_rows(events, [{"content": "again", "event_ts": "2026-01-02T02:00:00Z"}])
        engine.step(START + DAY + 2 * hour, complete=True)
        batches, frontier, updates = state()
        assert frontier == START + DAY + 2 * hour + 1 and batches in (4, 5)
        assert updates[-1] == (START + DAY + 2 * hour, 1, ("again",))
        engine.step(START + DAY + 3 * hour, complete=True)
        assert state()[:2] == (batches, START + DAY + 3 * hour + 1)
    finally:
        engine.close()


@pytest.mark.slow
def test_a_wall_step_runs_a_batch_only_for_new_input_or_a_due_update(
    spark: SparkSession, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    engine, outputs, events, running = _quiet_filter(spark, tmp_path, monkeypatch)

    def frontier() -> int:
        (report,) = engine.report().dataflows
        assert report.last_error is None, report.last_error
        return report.frontier[0]

    def updates() -> list[tuple[int, int, tuple[object, ...]]]:
        return [u for output in outputs for u in output.updates]

    def batches() -> int:
        return len(running.query.recentProgress)

    try:
        engine.step(START, complete=False)  # a new dataflow's first step is complete…
        assert updates() == [(START, 1, ("hello",))]  # due now: out at once
        assert engine.report().dataflows[0].hydrated  # …so it hydrates in it
        assert batches() == 1  # its tasks knew the inputs' frontier: nothing left to settle
        # Nothing new and nothing due: no batch, and the frontier moves up to the
        # retraction's time (START + DAY + 1 ms), not past it.
        engine.step(START + DAY, complete=False)
        assert (batches(), frontier()) == (1, START + DAY + 1)
        # A wall clock wakes for it, rather than at its next tick.
        assert engine.next_due() == START + DAY + 1
        # The retraction is due: the step runs the batch and settles it (a batch runs
        # with the watermark of the one before), so it comes out in this step.
        engine.step(START + 2 * DAY, complete=False)
        assert batches() == 3
        assert updates()[-1] == (START + DAY + 1, -1, ("hello",))
        assert frontier() == START + 2 * DAY + 1
        # New input: one batch, which emits the row at once; the frontier trails by a
        # step (the batch ran with the watermark of the one before)…
        later = "2026-01-03T00:00:00Z"
        insert_rows(events, [{"content": "again", "event_ts": later}])
        engine.step(START + 3 * DAY, complete=False)
        assert batches() == 4
        assert updates()[-1] == (START + 3 * DAY, 1, ("again",))
        assert frontier() == START + 2 * DAY + 1
        # …so the next step completes that batch: one more round at its time, not a
        # batch at the new time (which would trail again)…
        engine.step(START + 3 * DAY + 1000, complete=False)
        assert (batches(), frontier()) == (5, START + 3 * DAY + 1)
        # …the row leaves at START + 3 DAY + 1 ms: due, its batch and a settle…
        engine.step(START + 3 * DAY + 2000, complete=False)
        assert batches() == 7
        assert updates()[-1] == (START + 3 * DAY + 1, -1, ("again",))
        assert frontier() == START + 3 * DAY + 2001
        # …and then nothing is held: the frontier follows the clock without a batch.
        engine.step(START + 3 * DAY + 3000, complete=False)
        assert (batches(), frontier()) == (7, START + 3 * DAY + 3001)
        (report,) = engine.report().dataflows
        assert (report.strategy, report.strategy_reason) == ("Incremental", None)
    finally:
        engine.close()


@pytest.mark.slow
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


@pytest.mark.slow
def test_idle_wall_steps_move_a_chain_of_dataflows_without_batches(
    spark: SparkSession, tmp_path: Path
) -> None:
    engine, outputs = _engine(spark, tmp_path)
    events = tmp_path / "events"
    insert_rows(events, [{"kind": "a", "amount": 1}])
    source = {"name": "events", "table": {"path": str(events), "schema": "kind STRING, amount INT"}}
    totals = {
        "cluster": "default",
        "kind": "Index",
        "sources": [source],
        "sql": "SELECT kind, sum(amount) AS total FROM events GROUP BY kind",
    }
    big = {
        "cluster": "default",
        "kind": "Subscribe",
        "sources": [{"name": "totals", "dataflow": {"name": "totals"}}],
        "sql": "SELECT kind, total FROM totals WHERE total > 2",
    }
    desired = {"dataflows": [{"name": "totals", "spec": totals}, {"name": "big", "spec": big}]}
    engine.apply(DesiredDataflows.model_validate(desired))
    queries = {name: engine.running(name) for name in ("totals", "big")}

    def batches() -> dict[str, int]:
        return {n: len(r.query.recentProgress) for n, r in queries.items() if r is not None}

    def frontiers() -> dict[str, int]:
        return {r.name: r.frontier[0] for r in engine.report().dataflows}

    def printed() -> list[tuple[int, int, tuple[object, ...]]]:
        return [u for output in outputs if output.dataflow == "big" for u in output.updates]

    try:
        engine.step(START, complete=False)
        ran = batches()
        for second in (1, 2, 3):  # nothing new upstream: no batch anywhere
            engine.step(START + second * 1000, complete=False)
            assert batches() == ran
            assert frontiers() == {
                "totals": START + second * 1000 + 1,
                "big": START + second * 1000 + 1,
            }
        insert_rows(events, [{"kind": "a", "amount": 2}])  # the total passes 2
        engine.step(START + 4000, complete=False)
        assert all(batches()[name] > ran[name] for name in ran)
        assert printed() == [(START + 4000, 1, ("a", 3))]
        assert frontiers() == {"totals": START + 4001, "big": START + 4001}
        ran = batches()
        engine.step(START + 5000, complete=False)
        assert (batches(), frontiers()) == (ran, {"totals": START + 5001, "big": START + 5001})
    finally:
        engine.close()


@pytest.mark.slow
def test_a_stateful_dataflow_goes_quiet_only_a_while_after_its_last_input(
    spark: SparkSession, tmp_path: Path
) -> None:
    engine, _ = _engine(spark, tmp_path)
    running = _one_day_filter(engine, tmp_path / "events")
    try:
        engine.step(START, complete=False)
        began = time.monotonic()
        engine.step(START + 1000, complete=False)  # just installed: it runs as a busy one
        assert len(running.query.recentProgress) == 2
        time.sleep(max(0.0, quiet.QUIET_AFTER - (time.monotonic() - began)))
        engine.step(START + 2000, complete=False)  # a settle, then quiet: no more batches
        engine.step(START + 3000, complete=False)
        engine.step(START + 4000, complete=False)
        assert len(running.query.recentProgress) == 3
        (report,) = engine.report().dataflows
        assert report.frontier == [START + 4001]
    finally:
        engine.close()
