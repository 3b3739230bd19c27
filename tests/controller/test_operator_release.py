"""The operator collects each replica's reading of a releasing source and sends the
cluster's meet back (``PUT /release``); the Dataflow's status shows each source."""

from __future__ import annotations

from typing import Any

import pytest

from dataflow_operator.api.dataflow import SourceStatus
from dataflow_operator.api.protocol import DataflowReport
from tests.controller.harness import Cluster, FakeReplica, wait_for
from tests.controller.test_operator_kmock import (
    Start,
    _value,
    _when,
    condition,
    dataflow_body,
    make_ready,
    replica_body,
)

pytestmark = [pytest.mark.kmock, pytest.mark.asyncio, pytest.mark.timeout(90)]

DROPS = {
    "name": "drops",
    "files": {
        "path": "/data/drops",
        "format": "json",
        "schema": "content STRING",
        "cleanSource": "Delete",
    },
}


def _sources(df: dict[str, Any]) -> list[dict[str, Any]]:
    replicas = (df.get("status") or {}).get("replicas") or []
    return list(replicas[0].get("sources") or []) if replicas else []


@pytest.mark.slow
async def test_the_cluster_meet_goes_back_to_the_replica(
    cluster: Cluster, start_operator: Start, fake_replica: FakeReplica
) -> None:
    await start_operator()
    await cluster.create("replicas", replica_body(address=fake_replica.address))
    await make_ready(cluster, "r1-driver-1")
    await cluster.create("dataflows", dataflow_body("df1", [DROPS], "SELECT content FROM drops"))
    await wait_for(lambda: _value("df1" in fake_replica.installed))
    assert all(not r.sources for r in fake_replica.releases)  # nothing read: nothing to send

    read = SourceStatus(name="drops", resumption_frontier=[5], offset=2, listed=1_000)
    fake_replica.reports["df1"] = DataflowReport(name="df1", frontier=[5], sources=[read])
    await wait_for(lambda: _value(any(r.sources for r in fake_replica.releases)))
    (sent,) = [r for r in fake_replica.releases if r.sources][-1].sources
    assert (sent.dataflow, sent.source, sent.listed) == ("df1", "drops", 1_000)
    df = await wait_for(lambda: _when(cluster.get("dataflows", "df1"), _sources))
    assert _sources(df)[0]["listed"] == 1_000
    assert _sources(df)[0]["offset"] == 2
    released = await wait_for(
        lambda: _when(
            cluster.get("dataflows", "df1"),
            lambda d: condition(d, "InputReleased").get("status") == "True",
        )
    )
    assert condition(released, "InputReleased")["reason"] == "Releasing"
