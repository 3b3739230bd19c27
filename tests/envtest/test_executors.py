"""A Replica with two executors on a real API server, its pods run by the test kubelet.

The real operator (as the chart's ServiceAccount) creates the driver pod; the driver,
unmodified, runs Spark on Kubernetes (``k8s://https://kubernetes.default.svc`` with its
own service-account token) and creates two executor pods from the operator's template;
the kubelet runs them all in their own network and mount namespaces. The state is a
``ReadWriteMany`` claim bound to a hostPath volume; the tables are a hostPath volume from
``spec.volumes``. A join + GROUP BY Dataflow must get Hydrated with the exact result
through ``peek``, with tasks run on both executors; an executor deleted is replaced and
the result stays exact; the Replica deleted, its driver stops cleanly (exit 0) and Spark
(not the garbage collector) deletes its executors. The executors' measured memory is
printed against their limits.
"""

from __future__ import annotations

import asyncio
import base64
import time
from collections import Counter
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, TypeVar

import aiohttp
import pytest

from dataflow_operator.controller.naming import (
    LABEL_REPLICA,
    LABEL_ROLE,
    ROLE_DRIVER,
    ROLE_EXECUTOR,
)
from dataflow_operator.runtime.cli.insert import insert_rows
from tests.envtest.api import Api
from tests.envtest.bootstrap import CHART_NAMESPACE, OPERATOR_ACCOUNT, REPLICA_ACCOUNT
from tests.envtest.cluster import EnvCluster
from tests.envtest.conftest import IMAGE
from tests.envtest.controllers import GarbageCollector
from tests.envtest.kubelet import TestKubelet
from tests.envtest.memory import MIB
from tests.envtest.network import KUBERNETES_SERVICE_IP
from tests.envtest.operator_process import OperatorProcess
from tests.jvm import TEST_SPARK_CONF

pytestmark = [
    pytest.mark.envtest,
    pytest.mark.spark,
    pytest.mark.slow,
    pytest.mark.asyncio,
    pytest.mark.timeout(1500),
]

T = TypeVar("T")
NS = "/api/v1/namespaces/default"
CUSTOM = "/apis/dataflow.dev/v1alpha1/namespaces/default"
CONTROL_PORT = 8765
GROUPS = 100
HYDRATION_TIMEOUT_S = 900.0
"""Spark on Kubernetes start-up (a driver and two executor JVMs) on a loaded 2-core machine."""
SETTINGS = {
    "DATAFLOW_REPLICA_IMAGE": IMAGE,
    "DATAFLOW_REPLICA_SERVICE_ACCOUNT": REPLICA_ACCOUNT,
    "DATAFLOW_DEFAULT_EXPIRATION_OFFSET": "0",
    "DATAFLOW_STATUS_POLL_INTERVAL": "1s",
    "DATAFLOW_RECONCILE_INTERVAL": "2s",
    "DATAFLOW_DELETE_TIMEOUT": "60s",
    "DATAFLOW_START_TIMEOUT": "15m",
    "DATAFLOW_READY_TIMEOUT": "15m",
}
SQL = (
    "SELECT d.name, count(*) AS n, sum(f.v) AS total "
    "FROM facts f JOIN dims d ON f.k = d.k GROUP BY d.name"
)


def _replica(data: Path) -> dict[str, Any]:
    return {
        "apiVersion": "dataflow.dev/v1alpha1",
        "kind": "Replica",
        "metadata": {"name": "r1", "namespace": "default"},
        "spec": {
            "cluster": "c",
            "executor": {"instances": 2, "cores": 1, "memory": "512Mi"},
            "storage": {"size": "1Gi", "accessModes": ["ReadWriteMany"]},
            "volumes": [{"name": "tables", "hostPath": {"path": str(data)}}],
            "volumeMounts": [{"name": "tables", "mountPath": "/data"}],
            # the tests' JVM options (C1 only: less CPU on a shared 2-core machine)
            "sparkConf": {"spark.sql.shuffle.partitions": "4", **TEST_SPARK_CONF},
        },
    }


def _dataflow() -> dict[str, Any]:
    return {
        "apiVersion": "dataflow.dev/v1alpha1",
        "kind": "Dataflow",
        "metadata": {"name": "df1", "namespace": "default"},
        "spec": {
            "cluster": "c",
            "kind": "Index",
            "sources": [
                {"name": "dims", "table": {"path": "/data/dims", "schema": "k INT, name STRING"}},
                {"name": "facts", "table": {"path": "/data/facts", "schema": "k INT, v BIGINT"}},
            ],
            "sql": SQL,
        },
    }


class Facts:
    """The facts written so far, and the exact result they give."""

    def __init__(self, data: Path) -> None:
        self.data = data
        self.rows: list[dict[str, object]] = []
        insert_rows(data / "dims", [{"k": k, "name": f"g{k:03d}"} for k in range(GROUPS)])

    def add(self, count: int, seed: int) -> None:
        rows = [{"k": (i * 7 + seed) % GROUPS, "v": i + seed} for i in range(count)]
        insert_rows(self.data / "facts", rows)
        self.rows += rows

    def expected(self) -> set[tuple[str, int, int]]:
        counts: Counter[int] = Counter()
        totals: Counter[int] = Counter()
        for row in self.rows:
            counts[int(str(row["k"]))] += 1
            totals[int(str(row["k"]))] += int(str(row["v"]))
        return {(f"g{k:03d}", counts[k], totals[k]) for k in counts}


async def _until(
    probe: Callable[[], Awaitable[T | None]],
    what: str,
    timeout: float,
    why: Callable[[], Awaitable[str]],
) -> T:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if found := await probe():
            return found
        await asyncio.sleep(1.0)
    raise AssertionError(f"timed out after {timeout:.0f}s waiting for {what}\n{await why()}")


def _condition(obj: dict[str, Any] | None, type_: str) -> dict[str, Any]:
    for item in ((obj or {}).get("status") or {}).get("conditions") or []:
        if item["type"] == type_:
            return dict(item)
    return {}


class Scenario:
    """The objects of the scenario and what the test reads from them."""

    def __init__(self, admin: Api, kubelet: TestKubelet, operator: OperatorProcess) -> None:
        self.admin = admin
        self.kubelet = kubelet
        self.operator = operator

    async def pods(self, role: str) -> list[dict[str, Any]]:
        selector = f"{LABEL_REPLICA}=r1,{LABEL_ROLE}={role}"
        pods = await self.admin.list(f"{NS}/pods", labelSelector=selector)
        return sorted(pods, key=lambda p: p["metadata"]["name"])

    async def running(self, role: str) -> list[dict[str, Any]]:
        return [
            p for p in await self.pods(role)
            if (p.get("status") or {}).get("phase") == "Running"
            and not p["metadata"].get("deletionTimestamp")
        ]  # fmt: skip

    async def explain(self) -> str:
        """Everything a failure needs: objects, the operator's and every pod's output."""
        replica = await self.admin.get(f"{CUSTOM}/replicas/r1")
        dataflow = await self.admin.get(f"{CUSTOM}/dataflows/df1")
        pods = await self.admin.list(f"{NS}/pods")
        lines = [
            f"replica status: {(replica or {}).get('status')}",
            f"dataflow status: {(dataflow or {}).get('status')}",
            *(f"pod {p['metadata']['name']}: {p.get('status', {}).get('phase')} "
              f"{[c.get('state') for c in p.get('status', {}).get('containerStatuses', [])]}"
              for p in pods),
            f"--- operator ---\n{self.operator.output(3000)}",
        ]  # fmt: skip
        lines += [self.kubelet.output(*key.split("/"), tail=3000) for key in self.kubelet.logs]
        return "\n".join(lines)

    async def two_running(self) -> dict[str, Any] | None:
        """The Replica's status once it counts both executors running."""
        replica = await self.admin.get(f"{CUSTOM}/replicas/r1")
        status = (replica or {}).get("status") or {}
        counted = (status.get("executorsDesired"), status.get("executorsRunning"))
        return status if counted == (2, 2) and status.get("executors") == "2/2 running" else None

    async def hydrated(self) -> dict[str, Any] | None:
        """df1 once Hydrated; a failure at once if a driver ended (a crash loop)."""
        failed = {
            pod: exits for pod, exits in self.kubelet.exits.items()
            if pod.startswith("default/r1-driver-") and exits.get("driver", (0,))[0] != 0
        }  # fmt: skip
        if failed:
            raise AssertionError(f"a driver failed: {failed}\n{await self.explain()}")
        df = await self.admin.get(f"{CUSTOM}/dataflows/df1")
        return df if _condition(df, "Hydrated").get("status") == "True" else None

    async def control(self) -> tuple[str, dict[str, str]]:
        (driver,) = await self.running(ROLE_DRIVER)
        secret = await self.admin.get(f"{NS}/secrets/r1-control-token")
        assert secret is not None
        token = base64.b64decode(secret["data"]["token"]).decode()
        port = await self.kubelet.reach(driver["status"]["podIP"], CONTROL_PORT)
        return f"http://127.0.0.1:{port}", {"Authorization": f"Bearer {token}"}

    async def peek(self) -> set[tuple[str, int, int]]:
        url, headers = await self.control()
        async with (
            aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=30)) as session,
            session.get(f"{url}/dataflows/df1/peek", headers=headers) as answer,
        ):
            assert answer.status == 200, await answer.text()
            body = await answer.json()
        return {(str(r[0]), int(r[1]), int(r[2])) for r in body["rows"]}

    def executor_tasks(self, names: list[str]) -> dict[str, int]:
        """Tasks each executor started, as its own log says (Spark's ``Executor``, INFO)."""
        return {
            name: self.kubelet.output("default", name, tail=10**9).count("Running task ")
            for name in names
        }

    def memory_lines(self, names: list[str]) -> list[str]:
        lines = []
        for name in names:
            record = self.kubelet.memory[f"default/{name}"]
            limit = f"{record.limit / MIB:.0f} MiB" if record.limit else "none"
            lines.append(f"{name}: peak {record.peak}; limit {limit}")
        return lines


async def _exact(scenario: Scenario, facts: Facts) -> set[tuple[str, int, int]] | None:
    try:
        rows = await scenario.peek()
    except (AssertionError, aiohttp.ClientError, TimeoutError, ValueError):
        return None
    return rows if rows == facts.expected() else None


async def test_a_replica_with_two_executors_runs_a_join_exactly_and_stops_cleanly(
    env_cluster: EnvCluster,
    admin: Api,
    kubelet: TestKubelet,
    garbage_collector: GarbageCollector,
    tmp_path: Path,
) -> None:
    began = time.monotonic()
    state, data = tmp_path / "state", tmp_path / "data"
    state.mkdir()
    data.mkdir()
    facts = Facts(data)
    facts.add(1000, seed=1)
    await admin.create("/api/v1/persistentvolumes", {
        "metadata": {"name": "state"},
        "spec": {"capacity": {"storage": "5Gi"}, "accessModes": ["ReadWriteMany"],
                 "hostPath": {"path": str(state)}},
    })  # fmt: skip
    server = f"https://{KUBERNETES_SERVICE_IP}:443"
    kubeconfig = await env_cluster.kubeconfig_for(CHART_NAMESPACE, OPERATOR_ACCOUNT, server)
    operator = OperatorProcess(
        kubelet.network.name, kubeconfig, tmp_path / "operator.log", **SETTINGS
    )
    scenario = Scenario(admin, kubelet, operator)
    operator.start()
    try:
        await admin.create(f"{CUSTOM}/replicas", _replica(data))
        await admin.create(f"{CUSTOM}/dataflows", _dataflow())

        await _until(scenario.hydrated, "df1 Hydrated", HYDRATION_TIMEOUT_S, scenario.explain)
        hydrated_after = time.monotonic() - began
        executors = await scenario.running(ROLE_EXECUTOR)
        assert len(executors) == 2, await scenario.explain()
        rows = await _until(
            lambda: _exact(scenario, facts), "the exact result", 120, scenario.explain
        )
        assert len(rows) == GROUPS
        first = [p["metadata"]["name"] for p in executors]
        for name in first:
            assert "Successfully registered with driver" in kubelet.output("default", name, 10**9)
        tasks = scenario.executor_tasks(first)
        assert all(count > 0 for count in tasks.values()), tasks  # both executors ran tasks
        for pod in executors:  # they run user SQL: no API token in them
            assert not [v for v in pod["spec"].get("volumes") or [] if "projected" in v], pod
        await _until(scenario.two_running, "2/2 executors in the Replica's status", 120,
                     scenario.explain)  # fmt: skip

        # an executor deleted: Spark replaces it; new facts are counted exactly
        await admin.delete(f"{NS}/pods/{first[0]}")

        async def replaced() -> list[dict[str, Any]] | None:
            now = await scenario.running(ROLE_EXECUTOR)
            names = {p["metadata"]["name"] for p in now}
            return now if len(now) == 2 and first[0] not in names else None

        after = await _until(replaced, "a replacement executor", 600, scenario.explain)
        facts.add(500, seed=2)
        await _until(lambda: _exact(scenario, facts), "the exact result after the replacement",
                     600, scenario.explain)  # fmt: skip
        replaced_after = time.monotonic() - began
        executor_names = sorted({*first, *(p["metadata"]["name"] for p in after)})
        tasks = scenario.executor_tasks(executor_names)
        (driver,) = await scenario.running(ROLE_DRIVER)
        driver_name = driver["metadata"]["name"]

        # the Replica deleted: its driver stops cleanly, Spark deletes its executors
        await admin.delete(f"{CUSTOM}/replicas/r1")

        async def all_gone() -> bool:
            return not await admin.list(f"{NS}/pods")

        await _until(all_gone, "every pod of r1 to go", 300, scenario.explain)
        assert kubelet.exits[f"default/{driver_name}"] == {"driver": (0, "Completed")}, (
            kubelet.output("default", driver_name)
        )
        collected = [d for d in garbage_collector.deleted if d.rpartition("/")[2] in executor_names]
        assert not collected, f"executors left for the garbage collector: {collected}"
    finally:
        await operator.stop()
    print(
        f"\nhydrated after {hydrated_after:.0f}s, replaced and exact after {replaced_after:.0f}s, "
        f"all done after {time.monotonic() - began:.0f}s; tasks per executor {tasks}\n"
        + "\n".join(scenario.memory_lines([driver_name, *executor_names]))
    )
