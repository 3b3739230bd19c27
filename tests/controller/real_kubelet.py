"""A kubelet that runs real replica runtimes for the driver pods on kmock, and a client
of the driver Service; shared by the real handover test and ``bench/handover.py``.

Each driver pod's runtime listens on its own loopback address (127.0.0.<attempt + 1>,
announced as the pod's IP) with its state where the pod's ``DATAFLOW_STATE_URI`` puts it,
so a predecessor and its successor run side by side. The reader follows the driver
Service's selector, as a client resolving its name would.
"""

from __future__ import annotations

import asyncio
import base64
import json
import time
from collections import Counter
from collections.abc import Coroutine
from pathlib import Path
from typing import Any

import aiohttp

from dataflow_operator.api import injection
from dataflow_operator.api.protocol import ReplicaReport
from dataflow_operator.controller.control_client import auth_headers
from dataflow_operator.controller.kube import KubeApi
from dataflow_operator.controller.manifests import LOCAL_STATE_URI
from tests.controller.harness import Background, Cluster, running_status
from tests.controller.test_operator_real_runtime import RealReplica, _driver_env, _local_env

__all__ = ["RealKubelet", "ServiceReader", "Writer"]


class RealKubelet(Background):
    """Starts a real runtime for every driver pod of ``r1``, stops it when the pod goes."""

    def __init__(self, cluster: Cluster, port: int, root: Path) -> None:
        self.cluster = cluster
        self.port = port
        self.root = root
        self.replicas: dict[str, RealReplica] = {}
        self.most_pods = 0
        self.stopping: list[asyncio.Task[int | None]] = []

    def loops(self) -> list[Coroutine[Any, Any, None]]:
        return [self._loop()]

    async def close(self) -> None:
        await asyncio.gather(*(r.stop() for r in self.replicas.values()), *self.stopping)

    def host(self, attempt: str | int) -> str:
        return f"127.0.0.{int(attempt) + 1}"

    async def _loop(self) -> None:
        while True:
            pods = {p["metadata"]["name"]: p for p in await self.cluster.pods()}
            self.most_pods = max(self.most_pods, len(pods))
            for name, pod in pods.items():
                if name not in self.replicas:
                    await self._run(name, pod)
            for name in [n for n in self.replicas if n not in pods]:
                gone = self.replicas.pop(name)  # the kubelet's SIGTERM, in the background
                self.stopping.append(asyncio.create_task(gone.stop()))
            await asyncio.sleep(0.2)

    async def _run(self, name: str, pod: dict[str, Any]) -> None:
        attempt = pod["metadata"]["labels"]["dataflow.dev/attempt"]
        pod_env = _driver_env(pod)
        secret = await self.cluster.api.get(KubeApi.core("default", "secrets", "r1-control-token"))
        assert secret is not None
        token_file = self.root / f"token-{attempt}"
        token_file.write_bytes(base64.b64decode(secret["data"]["token"]))
        relative = pod_env[injection.ENV_STATE_URI].removeprefix(LOCAL_STATE_URI).strip("/")
        state = self.root / "state" / relative
        env = _local_env(pod_env, self.port, state, token_file)
        env[injection.ENV_CONTROL_ADDRESS] = f"{self.host(attempt)}:{self.port}"
        replica = RealReplica(env, self.root / f"{name}.log")
        replica.start()
        self.replicas[name] = replica
        await self.cluster.set_pod_status(name, {**running_status(), "podIP": self.host(attempt)})

    def logs(self) -> str:
        return "\n".join(
            f"--- {name} ---\n{replica.output()}" for name, replica in self.replicas.items()
        )


class ServiceReader(Background):
    """What a client of the driver Service sees: ``GET /status`` and the Subscribe stream."""

    def __init__(self, cluster: Cluster, kubelet: RealKubelet, token: str) -> None:
        self.cluster = cluster
        self.kubelet = kubelet
        self.headers = auth_headers(token)
        self.served_by: list[str] = []
        self.unserved: list[str] = []
        self.gaps: list[float] = []
        """Each unserved window: from the first unserved poll to the next served one (s)."""
        self._unserved_since: float | None = None
        self.updates: list[tuple[int, int, str]] = []
        self.complete = -1
        self.connections: list[str] = []

    def loops(self) -> list[Coroutine[Any, Any, None]]:
        return [self._status(), self._stream()]

    async def address(self) -> tuple[str, str] | None:
        service = await self.cluster.api.get(KubeApi.core("default", "services", "r1-driver"))
        attempt = (((service or {}).get("spec") or {}).get("selector") or {}).get(
            "dataflow.dev/attempt"
        )
        if attempt is None:
            return None
        return attempt, f"http://{self.kubelet.host(attempt)}:{self.kubelet.port}"

    async def _status(self) -> None:
        timeout = aiohttp.ClientTimeout(total=3)
        async with aiohttp.ClientSession(timeout=timeout) as session:
            while True:
                found = await self.address()
                why = "no Service"
                if found is not None:
                    attempt, url = found
                    try:
                        async with session.get(f"{url}/status", headers=self.headers) as response:
                            report = ReplicaReport.model_validate(await response.json())
                        hydrated = report.dataflows and all(d.hydrated for d in report.dataflows)
                        why = "" if hydrated else f"attempt {attempt} not hydrated"
                    except (aiohttp.ClientError, TimeoutError, ValueError) as error:
                        why = f"attempt {attempt}: {type(error).__name__}"
                    if not why and (not self.served_by or self.served_by[-1] != attempt):
                        self.served_by.append(attempt)
                if why and self.served_by:
                    self.unserved.append(why)
                    self._unserved_since = self._unserved_since or time.monotonic()
                elif not why and self._unserved_since is not None:
                    self.gaps.append(time.monotonic() - self._unserved_since)
                    self._unserved_since = None
                await asyncio.sleep(0.25)

    async def _stream(self) -> None:
        timeout = aiohttp.ClientTimeout(total=None, sock_connect=3)
        async with aiohttp.ClientSession(timeout=timeout) as session:
            while True:
                found = await self.address()
                if found is None or not self.served_by:
                    await asyncio.sleep(0.25)
                    continue
                attempt, url = found
                query = "progress=true"
                if self.complete >= 0:
                    query += f"&asOf={self.complete}&snapshot=false"
                self.connections.append(f"{attempt}:{query}")
                try:
                    async with session.get(
                        f"{url}/dataflows/sub/subscribe?{query}", headers=self.headers
                    ) as response:
                        if response.status != 200:
                            await asyncio.sleep(0.25)
                            continue
                        async for raw in response.content:
                            self._line(raw.decode().rstrip("\n"))
                except (aiohttp.ClientError, TimeoutError):
                    pass
                await asyncio.sleep(0.1)

    def _line(self, line: str) -> None:
        fields = line.split("\t")
        if fields[0] in ("#progress", "#end"):
            if len(fields) > 2 and fields[0] == "#end" and fields[2] != "-":
                self.complete = max(self.complete, int(fields[2]))
            elif fields[0] == "#progress":
                self.complete = max(self.complete, int(fields[1]))
            return
        if line and not line.startswith("#"):
            self.updates.append((int(fields[0]), int(fields[1]), fields[2]))

    def contents(self) -> Counter[str]:
        counts: Counter[str] = Counter()
        for _, diff, value in self.updates:
            counts[value] += diff
        return +counts


class Writer(Background):
    """Appends one changelog file a second, each update at the wall-clock time of writing."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.written: list[tuple[int, str]] = []

    def write(self) -> None:
        """One more file with one update, now."""
        now = int(time.time() * 1000)
        value = f"v{len(self.written)}"
        self.path.mkdir(parents=True, exist_ok=True)
        name = f"{len(self.written):06d}.json"
        (self.path / f".{name}").write_text(json.dumps({"v": value, "time": now, "diff": 1}))
        (self.path / f".{name}").rename(self.path / name)
        self.written.append((now, value))

    def loops(self) -> list[Coroutine[Any, Any, None]]:
        return [self._every_second()]

    async def _every_second(self) -> None:
        while True:
            self.write()
            await asyncio.sleep(1.0)
