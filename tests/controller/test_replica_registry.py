"""The registry of Replica daemons: a cluster's replicas, as their specs assign them."""

from __future__ import annotations

import pytest

from dataflow_operator.api.protocol import DataflowReport, ReplicaPhase, ReplicaReport
from dataflow_operator.controller.shared.registry import AttemptLink, ReplicaRegistry

pytestmark = pytest.mark.asyncio  # asyncio.Event needs a loop on older Pythons


async def test_a_cluster_lists_the_replicas_assigned_to_it_until_they_move_or_close() -> None:
    registry = ReplicaRegistry()
    r1, r2, other = (registry.open("ns", n) for n in ("r1", "r2", "r3"))
    assert registry.of_cluster("ns", "c") == []  # opened, not yet assigned
    registry.assign("ns", "r1", "c")
    registry.assign("ns", "r2", "c")
    registry.assign("ns", "r3", "d")
    assert registry.of_cluster("ns", "c") == [("r1", r1), ("r2", r2)]
    assert registry.of_cluster("other-namespace", "c") == []
    registry.wake_cluster("ns", "c")
    assert r1.wake.is_set() and r2.wake.is_set() and not other.wake.is_set()
    registry.assign("ns", "r1", "d")  # its spec changed cluster
    assert registry.of_cluster("ns", "c") == [("r2", r2)]
    assert registry.of_cluster("ns", "d") == [("r3", other), ("r1", r1)]
    registry.close("ns", "r2")
    assert registry.of_cluster("ns", "c") == []
    registry.assign("ns", "r2", "c")  # closed: nothing to assign
    assert registry.of_cluster("ns", "c") == []


async def test_a_dataflow_is_looked_up_in_the_serving_driver_s_latest_report() -> None:
    registry = ReplicaRegistry()
    rt = registry.open("ns", "r1")
    assert rt.reported("a") is None  # no driver polled yet
    rt.serving = AttemptLink("r1-driver-1")
    assert rt.reported("a") is None  # polled, nothing reported yet
    first = ReplicaReport(
        start_time=1, phase=ReplicaPhase.RUNNING, dataflows=[DataflowReport(name="a")]
    )
    rt.serving.report = first
    assert rt.reported("a") == DataflowReport(name="a")
    assert rt.reported("b") is None
    rt.serving.report = first.model_copy(
        update={"dataflows": [DataflowReport(name="b", frontier=[5])]}
    )
    assert rt.reported("a") is None  # the index follows each new report
    assert rt.reported("b") == DataflowReport(name="b", frontier=[5])
