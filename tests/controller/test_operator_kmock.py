"""The real operator process against the kmock emulator, with a stand-in replica."""

from __future__ import annotations

import asyncio
import json
import socket
from collections.abc import Callable
from typing import Any

import aiohttp
import pytest

from dataflow_operator.api import injection
from dataflow_operator.api.dataflow import NodeStatus
from dataflow_operator.api.protocol import DataflowReport
from dataflow_operator.api.replica import ReplicaStatus
from dataflow_operator.controller.kube import KubeApi
from dataflow_operator.core.timelines import MULTIPLE_TIMELINES_MESSAGE
from tests.controller.harness import (
    Cluster,
    FakeReplica,
    new_object,
    running_status,
    terminated_status,
    wait_for,
    waiting_status,
)

pytestmark = [pytest.mark.kmock, pytest.mark.asyncio, pytest.mark.timeout(90)]

Start = Callable[..., Any]
TABLE = {
    "name": "events",
    "table": {"path": "data/events", "schema": "content STRING, ts TIMESTAMP"},
}


def replica_body(name: str = "r1", address: str | None = None, **spec: Any) -> dict[str, Any]:
    annotations = {"dataflow.dev/control-address": address} if address else {}
    spec = {"cluster": "c", "executor": {"instances": 0}, **spec}  # emptyDir: driver only
    return new_object("Replica", name, "default", spec, annotations=annotations)


def dataflow_body(name: str, sources: list[dict[str, Any]], sql: str) -> dict[str, Any]:
    return new_object(
        "Dataflow",
        name,
        "default",
        {"cluster": "c", "kind": "Index", "sources": sources, "sql": sql},
    )


def env_of(pod: dict[str, Any]) -> dict[str, str]:
    return {e["name"]: e.get("value") for e in pod["spec"]["containers"][0]["env"]}


def condition(obj: dict[str, Any] | None, type_: str) -> dict[str, Any]:
    for item in ((obj or {}).get("status") or {}).get("conditions") or []:
        if item["type"] == type_:
            return dict(item)
    return {}


async def driver_pods(cluster: Cluster) -> list[str]:
    pods = await cluster.pods()
    return sorted(p["metadata"]["name"] for p in pods if not p["metadata"].get("deletionTimestamp"))


async def make_ready(cluster: Cluster, pod: str) -> None:
    await wait_for(lambda: cluster.pod(pod))
    await cluster.set_pod_status(pod, running_status())


@pytest.mark.slow
async def test_driver_pod_carries_the_injected_start_time_and_offset(
    cluster: Cluster, start_operator: Start
) -> None:
    await start_operator(DATAFLOW_DEFAULT_EXPIRATION_OFFSET="21d")
    await cluster.create("replicas", replica_body())
    pod = await wait_for(lambda: cluster.pod("r1-driver-1"))
    replica = await wait_for(lambda: cluster.get("replicas", "r1"))
    status = replica["status"]
    env = env_of(pod)
    assert env[injection.ENV_START_TIME_MS] == str(status["startTimeMs"])
    assert env[injection.ENV_START_TIME] == status["startTime"]
    assert env[injection.ENV_EXPIRATION_OFFSET] == "21d"
    conf = json.loads(env[injection.ENV_SPARK_CONF])
    assert conf[injection.CONF_START_TIME_MS] == str(status["startTimeMs"])
    assert conf[injection.CONF_EXPIRATION_OFFSET] == "21d"
    assert pod["spec"]["containers"][0]["image"] == "example/dataflow:test"
    assert pod["metadata"]["ownerReferences"][0]["uid"] == replica["metadata"]["uid"]
    assert status["attempt"] == 1 and status["driverPod"] == "r1-driver-1"
    assert status["expiresAt"] is not None and status["observedGeneration"] == 1
    service = await cluster.api.get(KubeApi.core("default", "services", "r1-driver"))
    assert service is not None and service["spec"]["selector"]["dataflow.dev/attempt"] == "1"
    assert await cluster.api.get(KubeApi.core("default", "services", "r1-attempts"))
    assert status["serviceName"] == "r1-driver"
    # kopf's bookkeeping lives under our prefix, in annotations; never in status
    assert replica["metadata"]["finalizers"] == ["dataflow.dev/finalizer"]
    assert not [k for k in replica["metadata"].get("annotations", {}) if "kopf" in k]
    ours = {field.alias or name for name, field in ReplicaStatus.model_fields.items()}
    assert set(status) <= ours


@pytest.mark.slow
async def test_metrics_and_liveness_endpoints(
    cluster: Cluster, start_operator: Start, fake_replica: FakeReplica
) -> None:
    metrics_port, liveness_port = _free_port(), _free_port()
    await start_operator(
        "--liveness", f"http://127.0.0.1:{liveness_port}/healthz",
        DATAFLOW_METRICS_PORT=str(metrics_port),
        DATAFLOW_EXPIRATION_LEAD_TIME="1s",
    )  # fmt: skip
    await cluster.create(
        "replicas", replica_body(address=fake_replica.address, expirationOffset="1h")
    )
    await make_ready(cluster, "r1-driver-1")
    await wait_for(
        lambda: _when(
            cluster.get("replicas", "r1"), lambda r: condition(r, "Ready").get("status") == "True"
        )
    )
    async with aiohttp.ClientSession() as session:
        async with session.get(f"http://127.0.0.1:{liveness_port}/healthz") as response:
            assert response.status == 200
        async with session.get(f"http://127.0.0.1:{metrics_port}/metrics") as response:
            text = await response.text()
    assert 'dataflow_operator_replicas{condition="Ready",status="True"} 1.0' in text
    assert (
        'dataflow_operator_replica_seconds_until_expiration{namespace="default",replica="r1"}'
        in text
    )
    assert "dataflow_operator_reconcile_duration_seconds_bucket" in text
    assert "dataflow_operator_status_lag_seconds" in text


@pytest.mark.slow
async def test_ready_replica_installs_dataflows_and_reports_hydration(
    cluster: Cluster, start_operator: Start, fake_replica: FakeReplica
) -> None:
    await start_operator()
    await cluster.create("replicas", replica_body(address=fake_replica.address))
    await make_ready(cluster, "r1-driver-1")
    replica = await wait_for(
        lambda: _when(
            cluster.get("replicas", "r1"), lambda r: condition(r, "Ready").get("status") == "True"
        )
    )
    assert condition(replica, "Ready")["reason"] == "DriverReady"
    await cluster.create("dataflows", dataflow_body("df1", [TABLE], "SELECT content FROM events"))
    await wait_for(lambda: _value("df1" in fake_replica.installed))
    nodes = [
        NodeStatus(id=1, operator="Scan", hydrated=True),
        NodeStatus(id=2, operator="Project", hydrated=False),
    ]
    fake_replica.reports["df1"] = DataflowReport(
        name="df1", frontier=[1_767_225_600_000], nodes=nodes
    )
    df = await wait_for(
        lambda: _when(cluster.get("dataflows", "df1"), lambda d: len(_nodes(d)) == 2)
    )
    assert _nodes(df) == [
        {"id": 1, "operator": "Scan", "hydrated": True},
        {"id": 2, "operator": "Project", "hydrated": False},
    ]
    assert condition(df, "Hydrated")["status"] == "False"
    assert condition(df, "Ready")["status"] == "True"
    fake_replica.reports["df1"] = DataflowReport(
        name="df1", frontier=[1_767_225_600_001], hydrated=True, hydration_time_ms=2500,
        nodes=[n.model_copy(update={"hydrated": True}) for n in nodes], strategy="Incremental",
    )  # fmt: skip
    df = await wait_for(
        lambda: _when(
            cluster.get("dataflows", "df1"),
            lambda d: condition(d, "Hydrated").get("status") == "True",
        )
    )
    entry = df["status"]["replicas"][0]
    assert (entry["replica"], entry["hydrated"], entry["hydrationTime"]) == ("r1", True, "2s500ms")
    # the status writer announces the flip it wrote, once, about this very object
    (hydrated,) = await wait_for(lambda: _events(cluster, "df1", "Hydrated"))
    assert (hydrated["type"], hydrated["message"]) == ("Normal", "hydrated on r1")
    assert hydrated["involvedObject"]["uid"] == df["metadata"]["uid"]
    assert hydrated["source"]["component"] == "dataflow-operator"
    await wait_for(lambda: _events(cluster, "df1", "Accepted"))
    assert df["status"]["strategy"] == "Incremental"
    # kopf keeps no diff base on the object: nothing reads it (see handlers.NoDiffBase)
    df = await cluster.get("dataflows", "df1")
    assert df is not None and df["metadata"]["finalizers"] == ["dataflow.dev/finalizer"]
    assert not (df["metadata"].get("annotations") or {})
    assert not await _events(cluster, "df1", "Recompute")
    # editing a dataflow reinstalls it; the replica is not restarted. This edit makes it a
    # recomputed query: the replica's report, then the status and an Event say so and why.
    ranked = "SELECT ts, row_number() OVER (ORDER BY ts) AS n FROM events"
    await cluster.api.merge_patch(
        KubeApi.custom("default", "dataflows", "df1"), {"spec": {"sql": ranked}}
    )
    await wait_for(lambda: _value(fake_replica.installed.get("df1", {}).get("sql") == ranked))
    why = "a window function (ROW_NUMBER() OVER (ORDER BY ts))"
    fake_replica.reports["df1"] = DataflowReport(
        name="df1", frontier=[1_767_225_600_002], strategy="Recompute", strategy_reason=why
    )
    (event,) = await wait_for(lambda: _events(cluster, "df1", "Recompute"))
    assert (event["type"], event["message"].split(";")[0]) == (
        "Normal",
        f"maintained by recompute: {why}",
    )
    df = await wait_for(
        lambda: _when(
            cluster.get("dataflows", "df1"),
            lambda d: d["status"].get("strategy") == "Recompute",
        )
    )
    assert df["status"]["strategyReason"] == why
    replica = await cluster.get("replicas", "r1")
    assert replica is not None and replica["status"]["attempt"] == 1
    # deleting waits for the replica to drop it, then the object goes
    await cluster.api.delete(KubeApi.custom("default", "dataflows", "df1"))
    await wait_for(lambda: _none(cluster.get("dataflows", "df1")))
    assert "df1" not in fake_replica.installed


@pytest.mark.slow
async def test_invalid_dataflow_gets_the_exact_timeline_message_and_is_never_sent(
    cluster: Cluster, start_operator: Start, fake_replica: FakeReplica
) -> None:
    await start_operator()
    await cluster.create("replicas", replica_body(address=fake_replica.address))
    await make_ready(cluster, "r1-driver-1")
    erp = {
        "name": "orders",
        "table": {"path": "data/o", "schema": "content STRING"},
        "timeline": {"external": "erp"},
    }
    await cluster.create(
        "dataflows",
        dataflow_body("mixed", [TABLE, erp], "SELECT * FROM events JOIN orders USING (content)"),
    )
    df = await wait_for(
        lambda: _when(cluster.get("dataflows", "mixed"), lambda d: bool(condition(d, "Ready")))
    )
    ready = condition(df, "Ready")
    assert (ready["status"], ready["reason"]) == ("False", "MultipleTimelines")
    assert ready["message"].splitlines()[0] == MULTIPLE_TIMELINES_MESSAGE
    events = await wait_for(lambda: _events(cluster, "mixed", "MultipleTimelines"))
    assert events[0]["type"] == "Warning"
    assert events[0]["message"] == ready["message"]
    await wait_for(lambda: _value(len(fake_replica.puts) > 0))
    await asyncio.sleep(1)
    assert all("mixed" not in [d.name for d in put.dataflows] for put in fake_replica.puts)


@pytest.mark.slow
async def test_expiration_restarts_at_the_lead_time_and_on_the_expired_exit_code(
    cluster: Cluster, start_operator: Start, fake_replica: FakeReplica
) -> None:
    await start_operator(DATAFLOW_EXPIRATION_LEAD_TIME="2s")
    await cluster.create(
        "replicas", replica_body(address=fake_replica.address, expirationOffset="5s")
    )
    await make_ready(cluster, "r1-driver-1")
    first = await wait_for(lambda: cluster.get("replicas", "r1"))
    # restarted 2 s before the 5 s expiration, as a new attempt with a new start time
    second = await wait_for(lambda: cluster.pod("r1-driver-2"), timeout=15)
    replica = await cluster.get("replicas", "r1")
    assert replica is not None
    started_ms = int(env_of(second)[injection.ENV_START_TIME_MS])
    assert started_ms - first["status"]["startTimeMs"] >= 2_500
    assert {r["reason"]: r["count"] for r in replica["status"]["restarts"]} == {"Expired": 1}
    assert replica["status"]["consecutiveFailures"] == 0
    assert await driver_pods(cluster) == ["r1-driver-2"]
    await wait_for(lambda: _events(cluster, "r1", "Expired"))
    # the runtime stops at its expiration with the expired exit code: restarted at once
    await cluster.set_pod_status("r1-driver-2", terminated_status(injection.EXIT_EXPIRED))
    await wait_for(lambda: cluster.pod("r1-driver-3"), timeout=5)
    replica = await cluster.get("replicas", "r1")
    assert replica is not None
    assert {r["reason"]: r["count"] for r in replica["status"]["restarts"]}["Expired"] == 2
    assert replica["status"]["consecutiveFailures"] == 0


@pytest.mark.slow
async def test_crash_loop_backs_off_then_ends_degraded(
    cluster: Cluster, start_operator: Start
) -> None:
    await start_operator()
    policy = {"maxAttempts": 3, "backoff": {"initial": "500ms", "multiplier": 2}}
    await cluster.create("replicas", replica_body(restartPolicy=policy))
    times = []
    for attempt in (1, 2, 3):
        await wait_for(lambda a=attempt: cluster.pod(f"r1-driver-{a}"), timeout=15)
        times.append(asyncio.get_running_loop().time())
        await cluster.set_pod_status(f"r1-driver-{attempt}", terminated_status(1, "Error"))
    replica = await wait_for(
        lambda: _when(cluster.get("replicas", "r1"), lambda r: r["status"].get("phase") == "Failed")
    )
    degraded = condition(replica, "Degraded")
    assert (degraded["status"], degraded["reason"]) == ("True", "Error")
    assert "gave up after 3 consecutive failures" in degraded["message"]
    assert replica["status"]["consecutiveFailures"] == 3
    assert {r["reason"]: r["count"] for r in replica["status"]["restarts"]} == {"DriverFailed": 2}
    assert times[2] - times[1] > times[1] - times[0]  # the backoff grew
    await wait_for(lambda: _events(cluster, "r1", "Error"))


@pytest.mark.slow
async def test_image_that_never_pulls_ends_degraded_with_its_reason(
    cluster: Cluster, start_operator: Start
) -> None:
    await start_operator(DATAFLOW_START_TIMEOUT="2s")
    await cluster.create("replicas", replica_body(restartPolicy={"type": "Never"}, image="nope:1"))
    await wait_for(lambda: cluster.pod("r1-driver-1"))
    await cluster.set_pod_status(
        "r1-driver-1", waiting_status("ImagePullBackOff", 'Back-off pulling image "nope:1"')
    )
    replica = await wait_for(
        lambda: _when(cluster.get("replicas", "r1"), lambda r: r["status"].get("phase") == "Failed")
    )
    degraded = condition(replica, "Degraded")
    assert (degraded["status"], degraded["reason"]) == ("True", "ImagePullBackOff")
    assert "nope:1" in degraded["message"] and "restartPolicy is Never" in degraded["message"]


@pytest.mark.slow
async def test_operator_killed_mid_restart_converges_to_exactly_one_driver(
    cluster: Cluster, start_operator: Start
) -> None:
    operator = await start_operator()
    await cluster.create("replicas", replica_body(expirationOffset="1h"))
    await make_ready(cluster, "r1-driver-1")
    await wait_for(
        lambda: _when(
            cluster.get("replicas", "r1"), lambda r: r["status"].get("phase") == "Running"
        )
    )
    await operator.kill()
    # as if killed right after recording attempt 2, before touching any pod
    replica = await cluster.get("replicas", "r1")
    assert replica is not None
    intent = {**replica["status"], "attempt": 2, "driverPod": "r1-driver-2", "phase": "Creating"}
    await cluster.api.merge_patch(
        KubeApi.custom("default", "replicas", "r1", status=True), {"status": intent}
    )
    await start_operator()
    await wait_for(lambda: _pods_are(cluster, ["r1-driver-2"]))
    await asyncio.sleep(2)
    assert await driver_pods(cluster) == ["r1-driver-2"]
    replica = await cluster.get("replicas", "r1")
    assert replica is not None and replica["status"]["attempt"] == 2


@pytest.mark.slow
async def test_killed_repeatedly_during_restarts_never_leaves_two_drivers(
    cluster: Cluster, start_operator: Start, operator_log: Callable[[], str]
) -> None:
    """Kill the operator at varying moments while a short expiration keeps restarting
    break-before-make (make-before-break: tests/controller/test_operator_handover.py)."""
    body = replica_body(expirationOffset="2s", restartStrategy="BreakBeforeMake")
    await cluster.create("replicas", body)
    for delay in (0.3, 0.7, 1.1, 1.6, 0.2):
        operator = await start_operator(DATAFLOW_EXPIRATION_LEAD_TIME="1s")
        await asyncio.sleep(delay)
        for pod in await driver_pods(cluster):
            await cluster.set_pod_status(pod, running_status())
        assert len(await driver_pods(cluster)) <= 1
        await operator.kill()
    await start_operator(DATAFLOW_EXPIRATION_LEAD_TIME="1s")
    try:
        await wait_for(lambda: _len(driver_pods(cluster), 1), timeout=40)
    except AssertionError:
        replica = await cluster.get("replicas", "r1")
        raise AssertionError(
            f"{await driver_pods(cluster)}; {replica and replica.get('status')}\n{operator_log()[-6000:]}"
        ) from None
    # stop the restart loop (a spec change restarts once more), then compare
    await cluster.api.merge_patch(
        KubeApi.custom("default", "replicas", "r1"), {"spec": {"expirationOffset": "1h"}}
    )
    await wait_for(
        lambda: _when(
            cluster.get("replicas", "r1"), lambda r: r["status"]["expirationOffset"] == "1h"
        )
    )
    await wait_for(lambda: _converged(cluster))
    await asyncio.sleep(1)
    assert await _converged(cluster)


@pytest.mark.slow
async def test_delete_waits_for_the_replica_then_times_out_with_an_event(
    cluster: Cluster, start_operator: Start, fake_replica: FakeReplica
) -> None:
    await start_operator(DATAFLOW_DELETE_TIMEOUT="2s")
    await cluster.create("replicas", replica_body(address=fake_replica.address))
    await make_ready(cluster, "r1-driver-1")
    await cluster.create("dataflows", dataflow_body("stuck", [TABLE], "SELECT content FROM events"))
    await wait_for(lambda: _value("stuck" in fake_replica.installed))
    created = await cluster.get("dataflows", "stuck")
    assert created is not None and created["metadata"]["finalizers"] == ["dataflow.dev/finalizer"]
    fake_replica.keep.add("stuck")  # the replica never confirms the drop
    await cluster.api.delete(KubeApi.custom("default", "dataflows", "stuck"))
    await asyncio.sleep(1)
    assert await cluster.get("dataflows", "stuck") is not None  # still waiting
    await wait_for(lambda: _none(cluster.get("dataflows", "stuck")), timeout=15)
    events = await wait_for(lambda: _events(cluster, "stuck", "DropTimedOut"))
    assert "r1" in events[0]["message"]


@pytest.mark.slow
async def test_delete_waits_while_the_replica_reports_dropping_then_completes(
    cluster: Cluster, start_operator: Start, fake_replica: FakeReplica
) -> None:
    await start_operator(DATAFLOW_DELETE_TIMEOUT="60s")
    await cluster.create("replicas", replica_body(address=fake_replica.address))
    await make_ready(cluster, "r1-driver-1")
    await cluster.create("dataflows", dataflow_body("slow", [TABLE], "SELECT content FROM events"))
    await wait_for(lambda: _value("slow" in fake_replica.installed))
    # Dropped, but its Spark work is still stopping: the replica reports it as dropping.
    fake_replica.keep.add("slow")
    fake_replica.reports["slow"] = DataflowReport(name="slow", dropping=True)
    await cluster.api.delete(KubeApi.custom("default", "dataflows", "slow"))
    await wait_for(
        lambda: _value(len(fake_replica.puts) >= 2 and not fake_replica.puts[-1].dataflows)
    )
    await asyncio.sleep(3)
    assert await cluster.get("dataflows", "slow") is not None  # "dropping" is not "gone"
    assert await _events(cluster, "slow", "Dropped") == []
    fake_replica.keep.discard("slow")  # its last task ended: it leaves the report
    fake_replica.installed.pop("slow", None)
    await wait_for(lambda: _none(cluster.get("dataflows", "slow")), timeout=15)
    assert await wait_for(lambda: _events(cluster, "slow", "Dropped"))
    assert await _events(cluster, "slow", "DropTimedOut") == []


@pytest.mark.slow
async def test_new_replica_gets_every_dataflow_and_a_deleted_one_leaves_status(
    cluster: Cluster, start_operator: Start, fake_replica: FakeReplica
) -> None:
    await start_operator()
    await cluster.create("dataflows", dataflow_body("df1", [TABLE], "SELECT content FROM events"))
    await cluster.create("dataflows", dataflow_body("df2", [TABLE], "SELECT ts FROM events"))
    other = FakeReplica()
    await other.start()
    try:
        for name, fake in (("r1", fake_replica), ("r2", other)):
            await cluster.create("replicas", replica_body(name, address=fake.address))
            await make_ready(cluster, f"{name}-driver-1")
        await wait_for(lambda: _value(set(other.installed) == {"df1", "df2"}))
        await wait_for(
            lambda: _when(cluster.get("dataflows", "df1"), lambda d: _replicas(d) == ["r1", "r2"])
        )
        await cluster.api.delete(KubeApi.custom("default", "replicas", "r2"))
        await wait_for(
            lambda: _when(cluster.get("dataflows", "df1"), lambda d: _replicas(d) == ["r1"])
        )
    finally:
        await other.stop()


# -- small probes -------------------------------------------------------------------------


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


async def _value(value: Any) -> Any:
    return value


async def _when(fetch: Any, check: Callable[[Any], bool]) -> Any:
    obj = await fetch
    return obj if obj is not None and obj.get("status") is not None and check(obj) else None


async def _none(fetch: Any) -> bool:
    return await fetch is None


async def _len(fetch: Any, size: int) -> Any:
    items = await fetch
    return items if len(items) == size else None


async def _converged(cluster: Cluster) -> bool:
    """Exactly one driver pod, and it is the one the status names."""
    replica = await cluster.get("replicas", "r1")
    expected = [replica["status"]["driverPod"]] if replica and replica.get("status") else None
    return await driver_pods(cluster) == expected


async def _pods_are(cluster: Cluster, names: list[str]) -> bool:
    return await driver_pods(cluster) == names


async def _events(cluster: Cluster, name: str, reason: str) -> list[dict[str, Any]]:
    return [
        e
        for e in await cluster.events()
        if e.get("reason") == reason and (e.get("involvedObject") or {}).get("name") == name
    ]


def _nodes(df: dict[str, Any]) -> list[dict[str, Any]]:
    replicas = (df.get("status") or {}).get("replicas") or []
    return list(replicas[0].get("nodes") or []) if replicas else []


def _replicas(df: dict[str, Any]) -> list[str]:
    return [r["replica"] for r in (df.get("status") or {}).get("replicas") or []]
