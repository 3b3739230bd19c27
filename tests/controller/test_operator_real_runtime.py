"""The real operator against the kmock emulator, with a real replica runtime as the driver.

The emulator has no kubelet: the test plays it. It reads the driver pod the operator
created, starts ``python -m dataflow_operator replica`` with that pod's environment
(Spark in local mode instead of ``k8s://``, the control API on a loopback port that the
Replica's ``dataflow.dev/control-address`` annotation points the operator at) and marks
the pod Running. From there on everything is real: the operator installs the Dataflow
through ``PUT /dataflows``, the runtime runs it on Spark, and hydration flows from the
runtime's ``GET /status`` into ``status.replicas[].nodes``.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import aiohttp
import pytest
import pytest_asyncio

from dataflow_operator.api import injection
from dataflow_operator.api.protocol import ReplicaPhase, ReplicaReport
from dataflow_operator.controller.control_client import auth_headers
from dataflow_operator.controller.kube import KubeApi
from dataflow_operator.core.durations import parse_duration
from dataflow_operator.runtime.inserts import insert_rows
from tests.controller.harness import Cluster, new_object, running_status, wait_for
from tests.jvm import TEST_SPARK_CONF

pytestmark = [
    pytest.mark.kmock,
    pytest.mark.spark,
    pytest.mark.asyncio,
    pytest.mark.timeout(400),
]

Start = Callable[..., Any]

OFFSET = "21d"
STARTUP_TIMEOUT = 180.0
"""Spark start-up plus a first batch: 60–90 s on a loaded 2-core machine; twice that."""
STOP_TIMEOUT = 60.0
"""How long a SIGTERMed replica gets to stop its queries and Spark before SIGKILL."""


class RealReplica:
    """``python -m dataflow_operator replica`` started with a driver pod's environment.

    It runs in a new session (its own process group) so that stopping it also stops the
    Spark JVM that PySpark launches as its child, whatever state it is in.
    """

    def __init__(self, env: dict[str, str], log: Path) -> None:
        self.env = env
        self.log = log
        self.port = int(env[injection.ENV_CONTROL_ADDRESS].rpartition(":")[2])
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def headers(self) -> dict[str, str]:
        """The control token the operator sends too (the runtime may require it)."""
        return auth_headers(Path(self.env[injection.ENV_CONTROL_TOKEN_FILE]).read_text())

    def start(self) -> None:
        with self.log.open("ab") as out:
            self.process = subprocess.Popen(
                [sys.executable, "-m", "dataflow_operator", "replica"],
                env=self.env,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )

    def output(self) -> str:
        """The replica's log so far (for failure messages)."""
        return self.log.read_text(errors="replace")[-6000:] if self.log.exists() else ""

    async def report(self) -> ReplicaReport | None:
        """``GET /status``; ``None`` while it does not answer yet."""
        timeout = aiohttp.ClientTimeout(total=5)
        try:
            async with (
                aiohttp.ClientSession(timeout=timeout) as session,
                session.get(f"{self.url}/status", headers=self.headers) as response,
            ):
                if response.status != 200:
                    return None
                return ReplicaReport.model_validate(await response.json())
        except (aiohttp.ClientError, TimeoutError):
            return None

    async def peek(self, name: str) -> dict[str, Any]:
        """``GET /dataflows/{name}/peek``."""
        async with (
            aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=10)) as session,
            session.get(f"{self.url}/dataflows/{name}/peek", headers=self.headers) as response,
        ):
            assert response.status == 200, await response.text()
            body: dict[str, Any] = await response.json()
            return body

    def alive(self) -> bool:
        return self.process is not None and self.process.poll() is None

    async def stop(self) -> int | None:
        """SIGTERM, SIGKILL after :data:`STOP_TIMEOUT`; then no process of its group is left.

        Returns the replica's exit code (``None`` if it was never started).
        """
        process = self.process
        if process is None:
            return None
        group = process.pid
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)
            deadline = time.monotonic() + STOP_TIMEOUT
            while process.poll() is None and time.monotonic() < deadline:
                await asyncio.sleep(0.2)
            if process.poll() is None:
                _kill_group(group)
                process.wait(10)
        # The JVM exits when the Python driver's pipe closes; give it a moment, then make sure.
        deadline = time.monotonic() + 15
        while _group_members(group) and time.monotonic() < deadline:
            await asyncio.sleep(0.2)
        left = _group_members(group)
        if left:
            _kill_group(group)
        assert not left, f"processes of the replica left behind: {left}"
        return process.returncode


def _kill_group(group: int) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(group, signal.SIGKILL)


def _group_members(group: int) -> list[str]:
    """Live (non-zombie) processes of process group ``group``: ``pid command`` each."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            command = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode()[:120]
        except OSError:
            continue
        # pid (comm) state ppid pgrp …; comm may hold spaces and parentheses
        fields = stat[stat.rindex(")") + 2 :].split()
        if int(fields[2]) == group and fields[0] != "Z":
            found.append(f"{entry.name} {command}")
    return found


@pytest_asyncio.fixture()
async def real_replicas() -> AsyncIterator[list[RealReplica]]:
    """Replicas the test starts; every one is stopped (and its JVM gone) at the end."""
    started: list[RealReplica] = []
    yield started
    for replica in started:
        await replica.stop()


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def _condition(obj: dict[str, Any] | None, type_: str) -> dict[str, Any]:
    for item in ((obj or {}).get("status") or {}).get("conditions") or []:
        if item["type"] == type_:
            return dict(item)
    return {}


def _driver_env(pod: dict[str, Any]) -> dict[str, str]:
    """The driver container's environment, which the operator writes as plain values."""
    env = pod["spec"]["containers"][0]["env"]
    assert all("value" in item for item in env), env
    return {item["name"]: item["value"] for item in env}


def _local_env(
    pod_env: dict[str, str], port: int, state_dir: Path, token_file: Path
) -> dict[str, str]:
    """The pod's environment for a replica on this machine: Spark local, loopback only.

    ``DATAFLOW_SPARK_CONF`` (it names the driver Service as the driver host) gives way to
    the tests' JVM options; the state and the control token (the Secret the pod mounts)
    move to local files. The start time and offset stay as the operator injected.
    """
    env = {**os.environ, **pod_env}
    env[injection.ENV_SPARK_CONF] = json.dumps(TEST_SPARK_CONF)
    env.pop("KUBECONFIG", None)
    env |= {
        injection.ENV_CONTROL_ADDRESS: f"127.0.0.1:{port}",
        injection.ENV_SPARK_MASTER: "local[2]",
        injection.ENV_STATE_DIR: str(state_dir),
        injection.ENV_STATE_URI: state_dir.as_uri(),
        injection.ENV_CONTROL_TOKEN_FILE: str(token_file),
        "PYSPARK_PYTHON": sys.executable,
        "PYSPARK_DRIVER_PYTHON": sys.executable,
        "SPARK_LOCAL_IP": "127.0.0.1",
        "DATAFLOW_LOG_FORMAT": "json",
    }
    return env


async def _poll(
    probe: Callable[[], Any], what: str, replica: RealReplica, timeout: float = STARTUP_TIMEOUT
) -> Any:
    """:func:`wait_for` that fails at once, with the replica's log, if the replica dies."""

    async def checked() -> Any:
        if not replica.alive():
            raise AssertionError(
                f"the replica exited while waiting for {what}:\n{replica.output()}"
            )
        return await probe()

    try:
        return await wait_for(checked, timeout=timeout, interval=0.5)
    except AssertionError as error:
        raise AssertionError(f"{what}: {error}\n--- replica log ---\n{replica.output()}") from None


@pytest.mark.slow
async def test_hydration_from_a_real_runtime_reaches_dataflow_status(
    cluster: Cluster, start_operator: Start, real_replicas: list[RealReplica], tmp_path: Path
) -> None:
    began = time.monotonic()
    await start_operator(
        DATAFLOW_DEFAULT_EXPIRATION_OFFSET=OFFSET,
        DATAFLOW_STATUS_POLL_INTERVAL="500ms",
        DATAFLOW_DELETE_TIMEOUT="90s",  # the real replica confirms the drop well before
    )
    port = _free_port()
    await cluster.create(
        "replicas",
        new_object(
            "Replica",
            "r1",
            "default",
            {"cluster": "c", "executor": {"instances": 0}},
            annotations={"dataflow.dev/control-address": f"127.0.0.1:{port}"},
        ),
    )
    replica, start_ms = await _run_driver(cluster, port, tmp_path)
    real_replicas.append(replica)
    replica.start()
    await cluster.set_pod_status("r1-driver-1", running_status())
    # created while Spark still starts: the operator installs it once the replica answers
    await cluster.create("dataflows", _dataflow(tmp_path / "events"))

    replica_status = await _poll(
        lambda: _when_status(
            cluster.get("replicas", "r1"),
            lambda s: _condition({"status": s}, "Ready").get("status") == "True",
        ),
        "the Replica's Ready condition",
        replica,
    )
    ready_after = time.monotonic() - began
    assert _condition(replica_status, "Ready")["reason"] == "DriverReady"
    report = await replica.report()
    assert report is not None
    assert report.start_time == start_ms  # the runtime runs on the injected start time
    assert report.expiration == start_ms + parse_duration(OFFSET).millis

    df = await _poll(
        lambda: _when_status(cluster.get("dataflows", "df1"), _hydrated_everywhere),
        "hydration in the Dataflow's status",
        replica,
    )
    hydrated_after = time.monotonic() - began
    entry = df["status"]["replicas"][0]
    nodes = entry["nodes"]
    assert entry["replica"] == "r1"
    assert nodes and all(node["hydrated"] is True for node in nodes), nodes
    assert [node["id"] for node in nodes] == sorted({node["id"] for node in nodes})
    assert entry["hydrationTime"]
    assert entry["frontier"] and entry["frontier"][0] > start_ms
    assert entry["expiration"] == start_ms + parse_duration(OFFSET).millis
    assert _condition(df, "Hydrated")["status"] == "True"
    assert _condition(df, "Ready")["status"] == "True"
    assert df["status"]["frontier"]
    await _agrees_with_the_replica(replica, entry)
    await _edit_and_rehydrate(cluster, replica)
    edited_after = time.monotonic() - began

    await _delete_and_confirm(cluster, replica)
    code = await replica.stop()
    assert code == injection.EXIT_OK, replica.output()
    assert "Traceback" not in replica.output()
    print(
        f"Ready after {ready_after:.1f}s, hydrated in status after {hydrated_after:.1f}s, "
        f"edit rehydrated after {edited_after:.1f}s, all done after "
        f"{time.monotonic() - began:.1f}s"
    )


async def _run_driver(cluster: Cluster, port: int, tmp_path: Path) -> tuple[RealReplica, int]:
    """The kubelet's part: the driver pod's command with its environment, on this machine.

    Returns the replica (not started yet) and the start time the operator injected.
    """
    pod = await wait_for(lambda: cluster.pod("r1-driver-1"))
    created = await wait_for(
        lambda: _when_status(cluster.get("replicas", "r1"), lambda s: "startTimeMs" in s)
    )
    pod_env = _driver_env(pod)
    status = created["status"]
    assert pod_env[injection.ENV_START_TIME_MS] == str(status["startTimeMs"])
    assert pod_env[injection.ENV_START_TIME] == status["startTime"]
    assert pod_env[injection.ENV_EXPIRATION_OFFSET] == OFFSET
    assert (pod_env[injection.ENV_REPLICA], pod_env[injection.ENV_ATTEMPT]) == ("r1", "1")
    assert pod["spec"]["containers"][0]["command"] == ["dataflow-operator", "replica"]
    secret = await wait_for(
        lambda: cluster.api.get(KubeApi.core("default", "secrets", "r1-control-token"))
    )
    token_file = tmp_path / "control-token"
    token_file.write_bytes(base64.b64decode(secret["data"]["token"]))
    env = _local_env(pod_env, port, tmp_path / "state", token_file)
    return RealReplica(env, tmp_path / "replica.log"), int(status["startTimeMs"])


def _dataflow(table: Path) -> dict[str, Any]:
    """Dataflow ``df1``: an Index over a table that already holds three rows."""
    insert_rows(
        table,
        [
            {"content": "a", "ts": "2026-01-01T00:00:00Z"},
            {"content": "b", "ts": "2026-01-02T00:00:00Z"},
            {"content": "c", "ts": "2026-01-03T00:00:00Z"},
        ],
    )
    source = {
        "name": "events",
        "table": {"path": str(table), "schema": "content STRING, ts TIMESTAMP"},
    }
    spec = {
        "cluster": "c",
        "kind": "Index",
        "sources": [source],
        "sql": "SELECT content FROM events WHERE content <> 'b'",
    }
    return new_object("Dataflow", "df1", "default", spec)


async def _agrees_with_the_replica(replica: RealReplica, entry: dict[str, Any]) -> None:
    """The replica's own ``GET /status`` (and contents) match what landed in the CR."""
    report = await replica.report()
    assert report is not None and report.phase is ReplicaPhase.RUNNING
    reported = {d.name: d for d in report.dataflows}
    assert set(reported) == {"df1"}
    mine = reported["df1"]
    assert mine.last_error is None and mine.hydrated and mine.hydration_time_ms is not None
    assert [(n.id, n.operator) for n in sorted(mine.nodes, key=lambda n: n.id)] == [
        (node["id"], node["operator"]) for node in entry["nodes"]
    ]
    assert all(n.hydrated for n in mine.nodes)
    assert min(mine.frontier) >= entry["frontier"][0]  # it only moves on
    peek = await replica.peek("df1")
    assert sorted(row[0] for row in peek["rows"]) == ["a", "c"]


async def _edit_and_rehydrate(cluster: Cluster, replica: RealReplica) -> None:
    """An edit reinstalls ``df1`` on the same replica; Hydrated is never claimed early.

    Until the replica has hydrated the new spec, the Dataflow's status must not say
    ``Hydrated=True`` for the new generation on the strength of the old spec's report.
    """
    # kmock leaves metadata.generation alone; an API server bumps it on a spec change
    await cluster.api.merge_patch(
        KubeApi.custom("default", "dataflows", "df1"),
        {
            "metadata": {"generation": 2},
            "spec": {"sql": "SELECT upper(content) AS content FROM events WHERE content <> 'a'"},
        },
    )
    deadline = time.monotonic() + STARTUP_TIMEOUT
    while True:
        assert replica.alive(), replica.output()
        assert time.monotonic() < deadline, "the edited Dataflow never got Hydrated again"
        df = await cluster.get("dataflows", "df1")
        status = (df or {}).get("status") or {}
        hydrated = _condition(df, "Hydrated").get("status") == "True"
        if status.get("observedGeneration") == 2 and hydrated:
            break
        await asyncio.sleep(0.05)
    report = await replica.report()
    assert report is not None
    mine = next(d for d in report.dataflows if d.name == "df1")
    # what the CR claims, the replica has: generation 2, hydrated
    assert (mine.generation, mine.hydrated) == (2, True), (status, mine)
    assert status["replicas"][0]["hydrated"] is True
    peek = await replica.peek("df1")
    assert sorted(row[0] for row in peek["rows"]) == ["B", "C"]
    replica_now = await cluster.get("replicas", "r1")
    assert replica_now is not None and replica_now["status"]["attempt"] == 1  # not restarted


async def _delete_and_confirm(cluster: Cluster, replica: RealReplica) -> None:
    """Delete ``df1``: the finalizer drops it from the replica, which confirms; it goes."""
    await cluster.api.delete(KubeApi.custom("default", "dataflows", "df1"))
    await _poll(
        lambda: _absent(cluster.get("dataflows", "df1")),
        "the deleted Dataflow to go",
        replica,
        timeout=120,
    )
    report = await replica.report()
    assert report is not None and [d.name for d in report.dataflows] == []
    reasons = {
        e.get("reason")
        for e in await cluster.events()
        if (e.get("involvedObject") or {}).get("name") == "df1"
    }
    assert "Dropped" in reasons and "DropTimedOut" not in reasons, reasons
    replica_now = await cluster.get("replicas", "r1")
    assert replica_now is not None and replica_now["status"]["attempt"] == 1
    assert _condition(replica_now, "Ready")["status"] == "True"


def _hydrated_everywhere(status: dict[str, Any]) -> bool:
    replicas = status.get("replicas") or []
    hydrated = _condition({"status": status}, "Hydrated").get("status") == "True"
    return bool(
        hydrated
        and replicas
        and replicas[0].get("hydrated")
        and replicas[0].get("nodes")
        and all(node.get("hydrated") for node in replicas[0]["nodes"])
    )


async def _when_status(fetch: Any, check: Callable[[dict[str, Any]], bool]) -> Any:
    obj = await fetch
    status = (obj or {}).get("status")
    return obj if status and check(status) else None


async def _absent(fetch: Any) -> bool:
    return await fetch is None
