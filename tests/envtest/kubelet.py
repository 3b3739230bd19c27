"""A test kubelet: runs the pods bound to its node as local processes, as a node would.

It registers a ``Node``, binds every unscheduled pod to it (the scheduler's part), and
for each of its pods: a network namespace with an address on the node's bridge, the
pod's volumes, each container's environment and command (image entrypoint semantics,
:mod:`.image`), the container started in its own mount namespace, the pod's status
patched (phase, pod IP, conditions, container states with exit code and reason), its
readiness probes run, its memory sampled (a container over its memory limit is killed,
``OOMKilled``), its ``/etc/hosts`` kept current. A pod being deleted gets SIGTERM, its
grace period, SIGKILL, then its deletion completes (``gracePeriodSeconds=0``).

Inside pods the API server is the ``kubernetes`` Service, ``10.0.0.1:443``, forwarded
from the node's namespace to the API server's loopback port; its CA is what the
``kube-root-ca.crt`` ConfigMap holds. Containers are not restarted (every pod here has
``restartPolicy: Never``: drivers and Spark's executors).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import socket
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import structlog

from tests.envtest.api import Api, ApiFailure
from tests.envtest.environment import PodFacts, PodSetupError, container_environment
from tests.envtest.forward import ForwarderThread
from tests.envtest.hosts import ServiceView, hosts_file
from tests.envtest.image import Image, container_argv
from tests.envtest.memory import Memory
from tests.envtest.netns import connected_socket, listening_socket
from tests.envtest.network import KUBERNETES_SERVICE_IP, NodeNetwork
from tests.envtest.node import bind, register_node
from tests.envtest.pod_run import PodRun, now_rfc3339
from tests.envtest.pod_status import running_status, waiting_status
from tests.envtest.probes import probe
from tests.envtest.volumes import container_mounts, make_volumes

__all__ = ["MemoryRecord", "TestKubelet"]

log = structlog.get_logger("envtest.kubelet")
SYNC_INTERVAL_S = 0.5
SAMPLE_INTERVAL_S = 1.0
RETRY_SETUP_S = 1.0


@dataclass
class MemoryRecord:
    """A pod's measured peak memory against its containers' summed limit."""

    pod: str
    limit: int | None
    peak: Memory


def _limit(pod: dict[str, Any]) -> int | None:
    from kubernetes.utils import parse_quantity

    limits = [
        ((c.get("resources") or {}).get("limits") or {}).get("memory")
        for c in pod["spec"]["containers"]
    ]
    if not limits or any(value is None for value in limits):
        return None
    return sum(int(parse_quantity(value)) for value in limits)


def _key(pod: dict[str, Any]) -> str:
    return f"{pod['metadata']['namespace']}/{pod['metadata']['name']}"


class TestKubelet:
    """``async with TestKubelet(...)``: the node runs until the block ends."""

    __test__ = False  # not a test class, whatever its name

    def __init__(
        self,
        api: Api,
        api_port: int,
        workdir: Path,
        images: dict[str, Image],
        node: str = "envtest-node",
        enforce_memory_limits: bool = True,
    ) -> None:
        self.api = api
        self.api_port = api_port
        self.workdir = workdir
        self.images = images
        self.node = node
        self.enforce_memory_limits = enforce_memory_limits
        self.network = NodeNetwork()
        self.runs: dict[str, PodRun] = {}
        """Pod uid → what runs here."""
        self.memory: dict[str, MemoryRecord] = {}
        """``namespace/name`` → peak memory, for every pod that ran here."""
        self.logs: dict[str, list[Path]] = {}
        """``namespace/name`` → its containers' logs (kept after the pod is gone)."""
        self.exits: dict[str, dict[str, tuple[int | None, str]]] = {}
        """``namespace/name`` → container → (exit code, reason) of every container that ended."""
        self._started: dict[str, str] = {}
        self._reported: dict[str, str] = {}
        self._setup_failed: dict[str, float] = {}
        self._deleting: dict[str, asyncio.Task[None]] = {}
        self._forwarders = ForwarderThread()
        self._tasks: list[asyncio.Task[None]] = []

    # -- lifecycle -----------------------------------------------------------------------

    async def __aenter__(self) -> TestKubelet:
        self.network.create()
        await register_node(self.api, self.node, self.network.gateway)
        listener = listening_socket(self.network.name, KUBERNETES_SERVICE_IP, 443)
        await self._forward(listener, lambda: asyncio.open_connection("127.0.0.1", self.api_port))
        self._tasks = [
            asyncio.create_task(self._loop(self._sync, SYNC_INTERVAL_S)),
            asyncio.create_task(self._loop(self._sample, SAMPLE_INTERVAL_S)),
            asyncio.create_task(self._loop(self._probe, 1.0)),
        ]
        return self

    async def __aexit__(self, *_: object) -> None:
        for task in [*self._tasks, *self._deleting.values()]:
            task.cancel()
        for task in [*self._tasks, *self._deleting.values()]:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        for run in list(self.runs.values()):
            await asyncio.to_thread(run.kill)
        self.runs.clear()
        self._forwarders.stop()
        self.network.delete()

    async def _forward(self, listener: socket.socket, connect: Any) -> int:
        return (await self._forwarders.add(listener, connect)).port

    async def reach(self, ip: str, port: int) -> int:
        """A port on the host's loopback that reaches ``ip:port`` on the pod network."""

        async def connect() -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
            sock = await asyncio.to_thread(connected_socket, self.network.name, ip, port)
            return await asyncio.open_connection(sock=sock)

        listener = socket.socket()
        listener.bind(("127.0.0.1", 0))
        listener.listen(16)
        listener.setblocking(False)
        return await self._forward(listener, connect)

    def output(self, namespace: str, name: str, tail: int = 4000) -> str:
        """The logs of a pod's containers (the last ``tail`` characters of each)."""
        parts = []
        for path in self.logs.get(f"{namespace}/{name}", []):
            text = path.read_text(errors="replace") if path.exists() else ""
            parts.append(f"--- {namespace}/{name} {path.stem} ---\n{text[-tail:]}")
        return "\n".join(parts)

    async def _loop(self, step: Any, interval: float) -> None:
        while True:
            try:
                await step()
            except asyncio.CancelledError:
                raise
            except Exception as error:  # the node keeps going, as a kubelet does
                log.warning("kubelet step failed", step=step.__name__, error=repr(error))
            await asyncio.sleep(interval)

    # -- the sync loop -------------------------------------------------------------------

    async def _sync(self) -> None:
        pods = await self.api.list("/api/v1/pods")
        live = {p["metadata"]["uid"]: p for p in pods}
        for pod in pods:
            spec, meta = pod["spec"], pod["metadata"]
            if not spec.get("nodeName") and not meta.get("deletionTimestamp"):
                with contextlib.suppress(ApiFailure):
                    await bind(self.api, pod, self.node)
                continue
            if spec.get("nodeName") != self.node:
                continue
            await self._sync_pod(pod)
        for uid in [u for u in self.runs if u not in live and u not in self._deleting]:
            run = self.runs.pop(uid)  # removed without us: stop what is left at once
            await asyncio.to_thread(run.kill)
            self.network.remove_pod(uid)
        await self._write_hosts(pods)

    async def _sync_pod(self, pod: dict[str, Any]) -> None:
        uid = pod["metadata"]["uid"]
        run = self.runs.get(uid)
        deleting = bool(pod["metadata"].get("deletionTimestamp"))
        phase = (pod.get("status") or {}).get("phase")
        if deleting:
            if uid not in self._deleting:
                self._deleting[uid] = asyncio.create_task(self._delete(pod, run))
            return
        if run is None:
            if phase in ("Succeeded", "Failed") or uid in self._started:
                return
            if time.monotonic() - self._setup_failed.get(uid, 0.0) >= RETRY_SETUP_S:
                await self._start(pod)
            return
        await self._report(pod, run)

    def _record_exits(self, run: PodRun) -> None:
        ended = {c.name: (c.exit_code, c.reason) for c in run.containers if c.poll() is not None}
        if ended:
            self.exits[_key(run.pod)] = ended

    async def _report(self, pod: dict[str, Any], run: PodRun) -> None:
        """Patch the pod's status when what runs here changed."""
        uid = pod["metadata"]["uid"]
        self._record_exits(run)
        status = running_status(run, self.network.gateway, self._started[uid])
        fingerprint = json.dumps(
            [status["phase"], status["containerStatuses"], status["conditions"][2]["status"]]
        )
        if self._reported.get(uid) == fingerprint:
            return
        with contextlib.suppress(ApiFailure):
            await self.api.merge_patch(self._path(pod) + "/status", {"status": status})
            self._reported[uid] = fingerprint

    @staticmethod
    def _path(pod: dict[str, Any]) -> str:
        meta = pod["metadata"]
        return f"/api/v1/namespaces/{meta['namespace']}/pods/{meta['name']}"

    # -- starting ------------------------------------------------------------------------

    async def _start(self, pod: dict[str, Any]) -> None:
        meta = pod["metadata"]
        uid, namespace = meta["uid"], meta["namespace"]
        images = [self.images.get(c.get("image", "")) for c in pod["spec"]["containers"]]
        if any(image is None for image in images):
            missing = next(
                c["image"]
                for c, i in zip(pod["spec"]["containers"], images, strict=True)
                if i is None
            )
            await self._waiting(pod, "ErrImagePull", f"image {missing!r} is not on this node")
            return
        network = await asyncio.to_thread(self.network.add_pod, uid)
        facts = PodFacts(network.address, self.network.gateway, KUBERNETES_SERVICE_IP)

        async def fetch(kind: str, name: str) -> dict[str, Any] | None:
            return await self.api.get(f"/api/v1/namespaces/{namespace}/{kind}/{name}")

        directory = self.workdir / f"{namespace}_{meta['name']}_{uid[:8]}"
        directory.mkdir(parents=True, exist_ok=True)
        try:
            volumes = await make_volumes(self.api, pod, facts, fetch, directory)
            prepared = []
            for container, image in zip(pod["spec"]["containers"], images, strict=True):
                assert image is not None
                env = await container_environment(pod, container, image.environment(), facts, fetch)
                argv = image.local(container_argv(image, container))
                workdir = container.get("workingDir") or image.workdir
                prepared.append(
                    (container, image, argv, env, container_mounts(container, volumes), workdir)
                )
        except (PodSetupError, ApiFailure) as error:
            self.network.remove_pod(uid)
            self._setup_failed[uid] = time.monotonic()
            await self._waiting(pod, "ContainerCreating", str(error))
            return
        run = PodRun(pod, network, directory)
        run.write_hosts(hosts_file(pod, network.address, self._view([pod], [])))
        for container, _, argv, env, mounts, workdir in prepared:
            run.launch(container["name"], container["image"], argv, env, mounts, workdir)
        for container in run.containers:
            spec = next(c for c in pod["spec"]["containers"] if c["name"] == container.name)
            container.ready = "readinessProbe" not in spec
        self.runs[uid] = run
        self._started[uid] = now_rfc3339()
        self.logs[_key(pod)] = [c.log for c in run.containers]
        self.memory[_key(pod)] = MemoryRecord(_key(pod), _limit(pod), Memory())
        log.info("pod started", pod=_key(pod), ip=network.address)
        await self._report(pod, run)

    async def _waiting(self, pod: dict[str, Any], reason: str, message: str) -> None:
        with contextlib.suppress(ApiFailure):
            await self.api.merge_patch(
                self._path(pod) + "/status", {"status": waiting_status(pod, reason, message)}
            )

    # -- deleting ------------------------------------------------------------------------

    async def _delete(self, pod: dict[str, Any], run: PodRun | None) -> None:
        """SIGTERM, the grace period, SIGKILL; then the deletion is confirmed."""
        uid = pod["metadata"]["uid"]
        if run is not None and not run.finished():
            grace = pod["metadata"].get("deletionGracePeriodSeconds")
            grace = 30 if grace is None else int(grace)
            run.terminate()
            deadline = time.monotonic() + grace
            while time.monotonic() < deadline and (not run.finished() or run.pids()):
                await asyncio.sleep(0.2)
            await asyncio.to_thread(run.kill, None)
            await self._report(pod, run)
        if run is not None:
            self._record_exits(run)
        with contextlib.suppress(ApiFailure):
            await self.api.delete(self._path(pod), gracePeriodSeconds="0")
        self.runs.pop(uid, None)
        self.network.remove_pod(uid)
        log.info("pod deleted", pod=_key(pod))

    # -- what runs: memory, probes, names --------------------------------------------------

    async def _sample(self) -> None:
        for run in list(self.runs.values()):
            if run.finished():
                continue
            now = await asyncio.to_thread(run.sample_memory)
            record = self.memory[_key(run.pod)]
            record.peak = run.peak
            if self.enforce_memory_limits and record.limit and now.pss_anon > record.limit:
                log.warning("pod over its memory limit", pod=record.pod, memory=str(now))
                await asyncio.to_thread(run.kill, "OOMKilled")

    async def _probe(self) -> None:
        for run in list(self.runs.values()):
            for container in run.containers:
                spec = next(c for c in run.pod["spec"]["containers"] if c["name"] == container.name)
                readiness = spec.get("readinessProbe")
                if readiness is None or container.exit_code is not None:
                    continue
                container.ready = await probe(
                    self.network.name, run.network.address, spec, readiness
                )

    def _view(self, pods: list[dict[str, Any]], services: list[dict[str, Any]]) -> ServiceView:
        addresses = {uid: run.network.address for uid, run in self.runs.items()}
        for pod in pods:
            uid = pod["metadata"]["uid"]
            if uid in self.network.pods:
                addresses[uid] = self.network.pods[uid].address
        return ServiceView(services, pods, addresses, KUBERNETES_SERVICE_IP)

    async def _write_hosts(self, pods: list[dict[str, Any]]) -> None:
        services = await self.api.list("/api/v1/services")
        view = self._view(pods, services)
        for run in self.runs.values():
            run.write_hosts(hosts_file(run.pod, run.network.address, view))
