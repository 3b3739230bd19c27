"""Hydration: nodes hydrate stage by stage, then the dataflow, with a time."""

from __future__ import annotations

import itertools
import json
import time
from pathlib import Path

import pytest
from pyspark.sql import DataFrame, SparkSession

from dataflow_operator.core.hydration import ROOT_GROUP, Progress, hydrated_nodes, stage_groups
from dataflow_operator.core.plan import PlanTree, RawNode, number_plan
from dataflow_operator.core.time import Frontier
from dataflow_operator.runtime.hydration.dataflow import DataflowHydration
from dataflow_operator.runtime.hydration.monitor import HydrationMonitor, shared_monitor
from dataflow_operator.runtime.hydration.probe import StreamingQueryProbe
from dataflow_operator.runtime.hydration.tracker import HydrationStatus, HydrationTracker


def _tree() -> PlanTree:
    """Agg <- Exchange <- Join(Scan, BroadcastExchange <- Scan2); UnionLoop under the join."""
    scan = RawNode("FileSourceScanExec", "Scan")
    loop = RawNode(
        "UnionLoopExec",
        "UnionLoop",
        children=(RawNode("Project", "Project", children=(RawNode("UnionLoopRef", "Ref"),)),),
    )
    broadcast = RawNode(
        "BroadcastExchangeExec", "BroadcastExchange", children=(RawNode("RangeExec", "Range"),)
    )
    join = RawNode("BroadcastHashJoinExec", "Join", children=(scan, broadcast))
    union = RawNode("UnionExec", "Union", children=(join, loop))
    exchange = RawNode("ShuffleExchangeExec", "Exchange", children=(union,))
    root = RawNode("HashAggregateExec", "Agg", children=(exchange,))
    tree, _ = number_plan(root)
    return tree


def test_stage_groups_follow_the_exchanges() -> None:
    tree = _tree()
    ids = {node.operator: node.node_id for node in tree}
    groups = stage_groups(tree)
    assert groups[ids["Agg"]] == ROOT_GROUP
    assert groups[ids["Exchange"]] == ids["Exchange"]
    assert groups[ids["Scan"]] == groups[ids["Join"]] == groups[ids["Union"]] == ids["Exchange"]
    assert groups[ids["BroadcastExchange"]] == groups[ids["Range"]] == ids["BroadcastExchange"]


def test_nodes_hydrate_by_stage_inputs_with_consumers_recursion_last() -> None:
    tree = _tree()
    ids = {node.operator: node.node_id for node in tree}
    # the broadcast was built: its group only
    got = hydrated_nodes(tree, {ids["BroadcastExchange"]}, recursion_done=False)
    assert got == {ids["BroadcastExchange"], ids["Range"]}
    # the map stage finished but the recursion is not: everything below the exchange
    # except the recursive part
    got = hydrated_nodes(tree, {ids["Exchange"]}, recursion_done=False)
    assert ids["Scan"] in got and ids["BroadcastExchange"] in got and ids["Agg"] not in got
    assert not {ids["UnionLoop"], ids["Project"], ids["Ref"]} & got
    got = hydrated_nodes(tree, {ids["Exchange"]}, recursion_done=True)
    assert {ids["UnionLoop"], ids["Ref"]} <= got
    everything = hydrated_nodes(tree, (), recursion_done=False, everything=True)
    assert everything == {node.node_id for node in tree}


def test_tracker_follows_progress_then_frontier() -> None:
    now = [1000]
    tracker = HydrationTracker("f", Frontier.at(5), clock=lambda: now[0])
    tree = _tree()
    ids = {node.operator: node.node_id for node in tree}
    assert tracker.status() == HydrationStatus(False, None, ())
    tracker.observe_progress(Progress(tree, frozenset({ids["BroadcastExchange"]})))
    first = tracker.status()
    assert not first.hydrated and 0 < sum(n.hydrated for n in first.nodes) < len(first.nodes)
    tracker.observe_frontier(Frontier.at(5))  # not strictly beyond as_of
    assert not tracker.hydrated
    now[0] = 3500
    tracker.observe_frontier(Frontier.at(6))
    final = tracker.status()
    assert final.hydrated and final.hydration_time_ms == 2500
    assert all(node.hydrated for node in final.nodes)
    tracker.observe_frontier(Frontier.at(5))  # frontiers never go back
    assert tracker.status() == final


def test_recursive_nodes_wait_for_the_recursion() -> None:
    tree = _tree()
    ids = {node.operator: node.node_id for node in tree}
    recursive = {ids["UnionLoop"], ids["Project"], ids["Ref"]}

    def hydrated_after(progress: Progress) -> set[int]:
        tracker = HydrationTracker("rec", Frontier.at(5))
        tracker.observe_progress(progress)
        return {n.id for n in tracker.status().nodes if n.hydrated}

    # the engine says the recursion for as_of is still iterating
    still = hydrated_after(Progress(tree, frozenset({ids["Exchange"]}), recursion_done=False))
    assert ids["Scan"] in still and not recursive & still
    # by default the loop is done once the stage reading its output is
    assert recursive <= hydrated_after(Progress(tree, frozenset({ids["Exchange"]})))
    early = hydrated_after(Progress(tree, frozenset({ids["BroadcastExchange"]})))
    assert not recursive & early


def test_constant_dataflow_is_hydrated_at_once() -> None:
    tracker = HydrationTracker("const", Frontier.empty(), clock=lambda: 7)
    status = tracker.status()
    assert status.hydrated and status.hydration_time_ms == 0
    monitor = HydrationMonitor()
    monitor.watch(tracker, probe=None)
    assert not monitor.watched()


def test_dataflow_hydration_counts_from_installation_and_only_after_a_batch() -> None:
    now = [1000]
    hydration = DataflowHydration("d", HydrationMonitor(), clock=lambda: now[0])
    assert hydration.status() == HydrationStatus(False, None, ())
    now[0] = 4000
    hydration.begin(None, Frontier.at(5))  # the first step, 3 s after installation
    assert not hydration.status().hydrated
    now[0] = 6000
    hydration.observe_frontier(Frontier.at(6))  # the snapshot batch completed
    assert hydration.status() == HydrationStatus(True, 5000, ())
    hydration.begin(None, Frontier.at(9))  # a later step does not begin again
    assert hydration.status().hydrated


def test_dataflow_that_never_began_hydrates_with_its_first_batch() -> None:
    now = [0]
    hydration = DataflowHydration("refreshed", HydrationMonitor(), clock=lambda: now[0])
    now[0] = 250
    hydration.observe_frontier(Frontier.at(1))
    assert hydration.status() == HydrationStatus(True, 250, ())


def test_a_dataflow_waiting_for_its_first_refresh_is_hydrated_with_what_it_has() -> None:
    hydration = DataflowHydration("refreshed", HydrationMonitor(), clock=lambda: 40)
    hydration.wait(Frontier.minimum())
    assert hydration.status() == HydrationStatus(True, 0, ())


def test_the_empty_first_batch_before_the_first_step_does_not_hydrate() -> None:
    # Spark runs a new query's first batch at once; run before the engine's first step,
    # it ends at the initial offset and leaves the frontier at the minimum.
    now = [0]
    hydration = DataflowHydration("early", HydrationMonitor(), clock=lambda: now[0])
    hydration.observe_frontier(Frontier.minimum())
    assert not hydration.status().hydrated
    hydration.begin(None, Frontier.at(5000))  # the first step: the snapshot time
    hydration.observe_frontier(Frontier.at(5000))
    assert not hydration.status().hydrated
    now[0] = 900
    hydration.observe_frontier(Frontier.at(5001))
    assert hydration.status() == HydrationStatus(True, 900, ())


@pytest.mark.spark
def test_constant_query_with_plan_is_hydrated_at_once(spark: SparkSession) -> None:
    from dataflow_operator.runtime.hydration.plan import live_plan

    frame = spark.sql("SELECT 1 AS x UNION ALL SELECT 2")
    tracker = HydrationTracker("const", Frontier.empty())
    tree = live_plan(frame._jdf.queryExecution().executedPlan()).tree
    tracker.observe_progress(Progress(tree))
    status = tracker.status()
    assert status.hydrated and status.hydration_time_ms is not None
    assert status.nodes and all(node.hydrated for node in status.nodes)


def _count(batch: DataFrame, _: int) -> None:
    batch.count()


def _write_snapshot(directory: Path, files: int, rows: int) -> None:
    directory.mkdir(parents=True)
    for index in range(files):
        with (directory / f"part-{index}.json").open("w") as out:
            for i in range(rows):
                out.write(json.dumps({"k": i % 97, "v": i, "pad": "x" * 40}) + "\n")


@pytest.mark.spark
def test_large_snapshot_hydrates_stage_by_stage(spark: SparkSession, tmp_path: Path) -> None:
    _write_snapshot(tmp_path / "in", files=4, rows=60_000)
    spark.range(97).selectExpr(
        "CAST(id AS INT) AS k", "CAST(id AS STRING) AS name"
    ).createOrReplaceTempView("hydration_dims")
    events = spark.readStream.schema("k INT, v BIGINT, pad STRING").json(str(tmp_path / "in"))
    events.createOrReplaceTempView("hydration_events")
    frame = spark.sql(
        "SELECT d.name, count(*) AS c, sum(e.v) AS s "
        "FROM hydration_events e JOIN hydration_dims d ON e.k = d.k GROUP BY d.name"
    )
    tracker = HydrationTracker("big", Frontier.at(0))
    monitor = HydrationMonitor(interval=0.05)
    query = (
        frame.writeStream.outputMode("update")
        .foreachBatch(_count)
        .option("checkpointLocation", str(tmp_path / "checkpoint"))
        .start()
    )
    seen: list[HydrationStatus] = []
    try:
        monitor.watch(tracker, StreamingQueryProbe(query))
        deadline = time.monotonic() + 240
        while time.monotonic() < deadline:
            progress = query.lastProgress
            if progress is not None and progress["batchId"] >= 0:
                tracker.observe_frontier(Frontier.at(1))  # batch 0 committed: beyond as_of 0
            status = tracker.status()
            seen.append(status)
            if status.hydrated:
                break
            time.sleep(0.05)
    finally:
        query.stop()
        monitor.stop()

    final = seen[-1]
    assert final.hydrated, final
    assert final.hydration_time_ms is not None and final.hydration_time_ms > 0
    assert final.nodes and all(node.hydrated for node in final.nodes)
    counts = [sum(node.hydrated for node in status.nodes) for status in seen]
    partial = [
        status
        for status, count in zip(seen, counts, strict=True)
        if not status.hydrated and 0 < count < len(final.nodes)
    ]
    assert partial, f"no intermediate state among {counts}"
    # node hydration only grows, and every node is hydrated when the dataflow is
    for earlier, later in itertools.pairwise(seen):
        before = {n.id for n in earlier.nodes if n.hydrated}
        after = {n.id for n in later.nodes if n.hydrated}
        assert before <= after
    operators = {n.id: n.operator for n in final.nodes}
    first = {operators[n.id] for n in partial[0].nodes if n.hydrated}
    assert first and len(first) < len(operators)


@pytest.mark.spark
def test_engine_reports_nodes_hydrating_before_the_dataflow(
    spark: SparkSession, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Through the replica engine's report: some nodes, then all, then the dataflow.

    The monitor polls every 20 ms here, not every half second: on an idle machine this
    snapshot's last stage can end within one default poll, and then no report is partial."""
    import threading

    from dataflow_operator.api.dataflow import DataflowSpec
    from dataflow_operator.runtime.engine.config import EngineConfig
    from dataflow_operator.runtime.engine.engine import Engine, dataflows_from
    from dataflow_operator.runtime.inserts import insert_rows

    events = tmp_path / "events"
    for chunk in range(4):
        insert_rows(
            events, [{"k": i % 50, "v": i} for i in range(chunk * 10_000, (chunk + 1) * 10_000)]
        )
    spec = DataflowSpec.model_validate(
        {
            "cluster": "default",
            "kind": "Index",
            "sources": [
                {"name": "events", "table": {"path": str(events), "schema": "k INT, v BIGINT"}}
            ],
            "sql": "SELECT k, sum(v) AS s, count(*) AS c FROM events GROUP BY k",
        }
    )
    monkeypatch.setattr(shared_monitor(), "interval", 0.02)
    start = int(time.time() * 1000)
    engine = Engine(spark, EngineConfig(state_dir=tmp_path / "state", start_time=start))
    seen = []
    try:
        assert not engine.apply(dataflows_from([("totals", spec)])).failed
        step = threading.Thread(target=engine.step, args=(start,), daemon=True)
        step.start()
        deadline = time.monotonic() + 240
        while time.monotonic() < deadline:
            (report,) = engine.report().dataflows
            seen.append(report)
            if report.hydrated or report.last_error or not step.is_alive():
                break
            time.sleep(0.02)
        step.join(timeout=240)
        (final,) = engine.report().dataflows
    finally:
        engine.close()
    assert final.last_error is None
    assert final.hydrated and final.hydration_time_ms is not None and final.hydration_time_ms > 0
    assert final.nodes and all(node.hydrated for node in final.nodes)
    partial = [
        r for r in seen if not r.hydrated and 0 < sum(n.hydrated for n in r.nodes) < len(r.nodes)
    ]
    assert partial, [[n.hydrated for n in r.nodes] for r in seen]
