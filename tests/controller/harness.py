"""The kmock Kubernetes emulator, the real operator as a subprocess, and a stand-in replica.

kmock (measured limits in the shared notes) sets no uid/resourceVersion, ignores label
selectors and needs resources declared in Python: objects created here get a uid and a
resourceVersion, the operator runs with ``-A``, and resources are declared from the same
CRDs that ``dataflow-operator crds`` writes.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import sys
import time
import uuid
from collections.abc import Awaitable, Callable, Coroutine
from pathlib import Path
from typing import Any, Self, TypeVar

import kmock
from aiohttp import web

from dataflow_operator.api.crds import all_crds
from dataflow_operator.api.protocol import (
    DataflowReport,
    DesiredDataflows,
    InstallResult,
    ReleaseFrontiers,
    ReplicaPhase,
    ReplicaReport,
)
from dataflow_operator.controller.kube import KubeApi

__all__ = [
    "Emulator",
    "FakeReplica",
    "Operator",
    "declare_resources",
    "new_object",
    "wait_for",
]

T = TypeVar("T")
ROOT = Path(__file__).resolve().parents[2]


class Emulator(kmock.KubernetesEmulator):
    """kmock's emulator plus what every API server does on create: ``generateName``.

    kopf posts its Events with ``generateName``; without this, every Event after the
    first would be a 409 here (and only here).

    It also looks named objects up by key instead of scanning them all, and forgets
    served requests: kmock matches each request against its whole
    request history (quadratic; ~20 ms per request after a few hundred), which made the
    emulator, not the operator, the bottleneck of any test or benchmark at scale. Tests
    here assert on objects, never on kmock's request log.
    """

    def _KubernetesEmulator__get_objs(self, request: Any, strict: bool) -> list[Any]:
        """kmock scans every object for every request; look named objects up directly."""
        if request.name is not None and (strict or request.namespace is not None):
            found = self._objects._objects.get((request.resource, request.namespace, request.name))
            return [found] if found is not None else []
        scan = kmock.KubernetesEmulator._KubernetesEmulator__get_objs  # type: ignore[attr-defined]
        result: list[Any] = scan(self, request, strict)
        return result

    async def _handle(self, request: Any) -> Any:
        del self._requests[:-1]
        for payload in self._payloads:
            payload._requests.clear()
        data = request.data
        if request.action == kmock.action.CREATE and isinstance(data, dict):
            metadata = data.setdefault("metadata", {})
            if not metadata.get("name") and metadata.get("generateName"):
                metadata["name"] = metadata["generateName"] + uuid.uuid4().hex[:10]
        return await super()._handle(request)


def declare_resources(emulator: kmock.KubernetesEmulator) -> None:
    """The operator's CRDs (from the models), pods, services and events."""
    for crd in all_crds().values():
        spec = crd["spec"]
        names = spec["names"]
        for version in spec["versions"]:
            emulator.resources[f"{spec['group']}/{version['name']}/{names['plural']}"] = (
                kmock.ResourceInfo(
                    kind=names["kind"],
                    singular=names["singular"],
                    namespaced=spec["scope"] == "Namespaced",
                    shortnames=set(names.get("shortNames", [])),
                    categories=set(names.get("categories", [])),
                    subresources=set(version.get("subresources", {})),
                    verbs={"get", "list", "watch", "create", "patch", "delete"},
                )
            )
    for plural, kind, subresources in (
        ("pods", "Pod", {"status"}),
        ("services", "Service", set()),
        ("events", "Event", set()),
        ("secrets", "Secret", set()),
    ):
        emulator.resources[f"v1/{plural}"] = kmock.ResourceInfo(
            kind=kind,
            namespaced=True,
            subresources=subresources,
            verbs={"get", "list", "watch", "create", "patch", "delete"},
        )
    # kopf waits for the CRD and namespace resources to be discoverable before it watches
    # anything (with -A it lists neither).
    emulator.resources["v1/namespaces"] = kmock.ResourceInfo(
        kind="Namespace", namespaced=False, verbs={"get", "list", "watch"}
    )
    # kopf's peering (the chart ships these CRDs): operators with --peering meet here
    emulator.resources["kopf.dev/v1/clusterkopfpeerings"] = kmock.ResourceInfo(
        kind="ClusterKopfPeering",
        namespaced=False,
        verbs={"get", "list", "watch", "create", "patch", "delete"},
    )
    emulator.resources["apiextensions.k8s.io/v1/customresourcedefinitions"] = kmock.ResourceInfo(
        kind="CustomResourceDefinition",
        namespaced=False,
        verbs={"get", "list", "watch", "create", "patch", "delete"},
    )
    emulator.resources["events.k8s.io/v1/events"] = kmock.ResourceInfo(
        kind="Event", namespaced=True, verbs={"get", "list", "watch", "create", "patch"}
    )


def new_object(
    kind: str, name: str, namespace: str, spec: dict[str, Any], **meta: Any
) -> dict[str, Any]:
    """A custom resource body with what the API server would set (uid, resourceVersion)."""
    return {
        "apiVersion": "dataflow.dev/v1alpha1",
        "kind": kind,
        "metadata": {
            "name": name,
            "namespace": namespace,
            "uid": str(uuid.uuid4()),
            "resourceVersion": "1",
            "generation": 1,
            **meta,
        },
        "spec": spec,
    }


def one_table_spec(cluster: str) -> dict[str, Any]:
    """The spec of an Index over one declared table: a valid dataflow of ``cluster``."""
    source = {"name": "e", "table": {"path": "data/e", "schema": "x INT"}}
    return {"cluster": cluster, "kind": "Index", "sources": [source], "sql": "SELECT x FROM e"}


async def wait_for(
    probe: Callable[[], Awaitable[T | None]], timeout: float = 20.0, interval: float = 0.1
) -> T:
    """Poll ``probe`` until it returns something truthy; fail after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    last: T | None = None
    while time.monotonic() < deadline:
        last = await probe()
        if last:
            return last
        await asyncio.sleep(interval)
    raise AssertionError(f"timed out after {timeout}s; last value: {last!r}")


def write_kubeconfig(path: Path, server: str) -> Path:
    path.write_text(
        f"""apiVersion: v1
kind: Config
clusters: [{{name: kmock, cluster: {{server: "{server}"}}}}]
users: [{{name: kmock, user: {{token: kmock}}}}]
contexts: [{{name: kmock, context: {{cluster: kmock, user: kmock, namespace: default}}}}]
current-context: kmock
"""
    )
    return path


class Operator:
    """``dataflow-operator operator -A --standalone`` (or ``--peering NAME``) as a subprocess."""

    def __init__(
        self,
        kubeconfig: Path,
        log: Path,
        *,
        args: tuple[str, ...] = (),
        peering: str | None = None,
        **config: str,
    ) -> None:
        self.args = args
        self.peering = ("--peering", peering) if peering else ("--standalone",)
        self.kubeconfig = kubeconfig
        self.log = log
        self.config = config
        self.process: asyncio.subprocess.Process | None = None

    async def start(self) -> None:
        env = {
            **os.environ,
            "KUBECONFIG": str(self.kubeconfig),
            "DATAFLOW_LOG_FORMAT": "json",
            "DATAFLOW_METRICS_PORT": "0",
            **self.config,
        }
        env.pop("KUBERNETES_SERVICE_HOST", None)
        handle = self.log.open("ab")
        profile = os.environ.get("DATAFLOW_OPERATOR_PROFILE")  # a cProfile output path
        prefix = ["-m", "cProfile", "-o", profile] if profile else []
        self.process = await asyncio.create_subprocess_exec(
            sys.executable,
            *prefix,
            "-m",
            "dataflow_operator",
            "operator",
            "-A",
            *self.peering,
            *self.args,
            env=env,
            stdout=handle,
            stderr=handle,
            cwd=ROOT,
        )
        handle.close()

    async def wait_ready(self, api: KubeApi, timeout: float = 30.0) -> None:
        """Until the operator handles objects: a probe Dataflow gets its status.

        kmock replays existing objects when a watch connects and only then subscribes to
        new events, so objects created while kopf connects can be missed; waiting for
        a probe closes that window.
        """
        namespace = "operator-probe"
        name = f"probe-{uuid.uuid4().hex[:8]}"
        body = new_object(
            "Dataflow",
            name,
            namespace,
            one_table_spec("probe"),
        )
        await api.create(KubeApi.custom(namespace, "dataflows"), body)

        async def probed() -> bool:
            obj = await api.get(KubeApi.custom(namespace, "dataflows", name))
            return bool(obj and (obj.get("status") or {}).get("conditions"))

        await wait_for(probed, timeout=timeout, interval=0.2)

    async def kill(self) -> None:
        """SIGKILL: no cleanup, as a crash."""
        if self.process is not None and self.process.returncode is None:
            self.process.send_signal(signal.SIGKILL)
            await self.process.wait()

    async def stop(self) -> None:
        """SIGTERM, then SIGKILL after 10 s."""
        if self.process is None or self.process.returncode is not None:
            return
        self.process.send_signal(signal.SIGTERM)
        try:
            await asyncio.wait_for(self.process.wait(), 10)
        except TimeoutError:
            await self.kill()


class FakeReplica:
    """A replica's control API serving the real protocol models, with a scripted state.

    Stands in for the runtime until ``runtime/control_api.py`` lands.
    """

    def __init__(self, host: str = "127.0.0.1", port: int = 0) -> None:
        self.host = host
        self.installed: dict[str, Any] = {}
        self.puts: list[DesiredDataflows] = []
        self.releases: list[ReleaseFrontiers] = []
        self.phase = ReplicaPhase.RUNNING
        self.reports: dict[str, DataflowReport] = {}
        self.start_time = int(time.time() * 1000)
        self.keep: set[str] = set()
        """Names it refuses to drop (to test the delete timeout)."""
        self.auth: list[tuple[str, str | None, str | None]] = []
        """(method path, Authorization, X-Dataflow-Token) of every request."""
        self._runner: web.AppRunner | None = None
        self.port = port

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"

    async def start(self) -> None:
        app = web.Application(middlewares=[self._record_auth])
        app.router.add_get("/status", self._status)
        app.router.add_put("/dataflows", self._put)
        app.router.add_put("/release", self._release)
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, self.host, self.port)
        await site.start()
        self.port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()

    @web.middleware
    async def _record_auth(self, request: web.Request, handler: Any) -> web.StreamResponse:
        self.auth.append(
            (
                f"{request.method} {request.path}",
                request.headers.get("Authorization"),
                request.headers.get("X-Dataflow-Token"),
            )
        )
        response: web.StreamResponse = await handler(request)
        return response

    async def _status(self, _: web.Request) -> web.Response:
        dataflows = [
            self.reports.get(name, DataflowReport(name=name)) for name in sorted(self.installed)
        ]
        report = ReplicaReport(start_time=self.start_time, phase=self.phase, dataflows=dataflows)
        return web.json_response(report.to_wire())

    async def _release(self, request: web.Request) -> web.Response:
        frontiers = ReleaseFrontiers.model_validate(await request.json())
        self.releases.append(frontiers)
        return web.json_response(frontiers.to_wire())

    async def _put(self, request: web.Request) -> web.Response:
        desired = DesiredDataflows.model_validate(await request.json())
        self.puts.append(desired)
        wanted = {d.name: d.spec.to_wire() for d in desired.dataflows}
        result = InstallResult(
            installed=sorted(set(wanted) - set(self.installed)),
            dropped=sorted(set(self.installed) - set(wanted) - self.keep),
            unchanged=sorted(n for n in wanted if self.installed.get(n) == wanted[n]),
            reinstalled=sorted(
                n for n in wanted if n in self.installed and self.installed[n] != wanted[n]
            ),
        )
        self.installed = {
            **{n: self.installed[n] for n in self.keep if n in self.installed},
            **wanted,
        }
        return web.json_response(result.to_wire())


class Background:
    """Loops that run while the object is entered (``async with``): :meth:`loops` names
    them; leaving cancels them, then :meth:`close` releases what they used."""

    _tasks: list[asyncio.Task[None]]

    def loops(self) -> list[Coroutine[Any, Any, None]]:
        """The coroutines to run in the background."""
        raise NotImplementedError

    async def close(self) -> None:
        """Release what the loops used, after they stopped."""

    async def __aenter__(self) -> Self:
        self._tasks = [asyncio.create_task(loop) for loop in self.loops()]
        return self

    async def __aexit__(self, *_: object) -> None:
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task
        await self.close()


class Cluster:
    """Convenience calls against the emulator through the operator's own client."""

    def __init__(self, api: KubeApi, namespace: str = "default") -> None:
        self.api = api
        self.namespace = namespace

    async def create(self, plural: str, body: dict[str, Any]) -> dict[str, Any]:
        return await self.api.create(KubeApi.custom(self.namespace, plural), body)

    async def get(self, plural: str, name: str) -> dict[str, Any] | None:
        return await self.api.get(KubeApi.custom(self.namespace, plural, name))

    async def pods(self) -> list[dict[str, Any]]:
        items = await self.api.list(KubeApi.core(self.namespace, "pods"))
        return [p for p in items if (p.get("metadata") or {}).get("namespace") == self.namespace]

    async def pod(self, name: str) -> dict[str, Any] | None:
        return await self.api.get(KubeApi.core(self.namespace, "pods", name))

    async def set_pod_status(self, name: str, status: dict[str, Any]) -> None:
        """What the kubelet would do."""
        await self.api.merge_patch(
            KubeApi.core(self.namespace, "pods", name) + "/status", {"status": status}
        )

    async def events(self) -> list[dict[str, Any]]:
        return await self.api.list(KubeApi.core(self.namespace, "events"))


def running_status(ready: bool = True) -> dict[str, Any]:
    return {
        "phase": "Running",
        "containerStatuses": [{"name": "driver", "ready": ready, "state": {"running": {}}}],
    }


def terminated_status(code: int, reason: str = "Error") -> dict[str, Any]:
    return {
        "phase": "Failed" if code else "Succeeded",
        "containerStatuses": [
            {
                "name": "driver",
                "ready": False,
                "state": {"terminated": {"exitCode": code, "reason": reason}},
            }
        ],
    }


def waiting_status(reason: str, message: str = "") -> dict[str, Any]:
    return {
        "phase": "Pending",
        "containerStatuses": [
            {
                "name": "driver",
                "ready": False,
                "state": {"waiting": {"reason": reason, "message": message}},
            }
        ],
    }
