"""Operator at scale: N Replicas and 10·N Dataflows against the kmock emulator.

Measures, with the real operator process (``dataflow-operator operator``):

- **create → driver pod**: from each Replica's creation to its driver pod appearing
  (seen through a watch on pods);
- **status lag** (with ``--ready``): the bench acts as kubelet (pods → Running) and as
  every replica's control API; each replica's dataflows advance their frontier every
  ``--advance-every`` seconds, and the lag is the time from a frontier change on the
  replica to the Dataflow status showing it (seen through a watch on dataflows). It
  includes the operator's poll interval.
- **replica entries** (with ``--ready``): how many Dataflows show a replica entry in
  their status within 60 s of the Replicas' creation, and when the last one does.

Prints p50/p99/max. Against a real API server, pass ``--kubeconfig`` (pods will not be
made Running and the replicas' control API is not faked; only create → pod is measured).

    .venv/bin/python bench/operator_scale.py --replicas 1000
    .venv/bin/python bench/operator_scale.py --replicas 100 --ready
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import resource
import statistics
import sys
import tempfile
import time
import uuid
import zlib
from pathlib import Path
from typing import Any

import aiohttp
from aiohttp import web

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.controller.harness import (  # noqa: E402
    Emulator,
    Operator,
    declare_resources,
    running_status,
    write_kubeconfig,
)

from dataflow_operator.api.protocol import (  # noqa: E402
    DataflowReport,
    DesiredDataflows,
    InstallResult,
    ReleaseFrontiers,
    ReplicaPhase,
    ReplicaReport,
)
from dataflow_operator.controller.kube import KubeApi  # noqa: E402

NAMESPACE = "bench"


def percentiles(values: list[float]) -> str:
    if not values:
        return "n=0"
    ordered = sorted(values)
    p99 = ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))]
    return (
        f"n={len(ordered)} p50={statistics.median(ordered):.3f}s "
        f"p99={p99:.3f}s max={ordered[-1]:.3f}s"
    )


def deciles(times: dict[str, float], origin: float) -> str:
    """p10 … p100 of ``times`` after ``origin`` (negative: before it)."""
    if not times:
        return "n=0"
    ordered = sorted(at - origin for at in times.values())
    picks = [ordered[min(len(ordered) - 1, len(ordered) * k // 10)] for k in range(1, 10)]
    return f"n={len(ordered)} " + " ".join(
        f"p{k * 10}={v:.1f}s" for k, v in enumerate([*picks, ordered[-1]], start=1)
    )


class Replicas:
    """Every replica's control API at ``/r/{name}``, in one server."""

    def __init__(self, advance_every: float) -> None:
        self.installed: dict[str, set[str]] = {}
        self.advance_every = advance_every
        self.started = time.time()
        self.port = 0
        self._runner: web.AppRunner | None = None

    def frontier(self) -> int:
        """The current frontier: the last multiple of ``advance_every`` (epoch ms)."""
        now = time.time()
        step = self.advance_every
        return int((now - (now - self.started) % step) * 1000)

    async def start(self) -> None:
        app = web.Application()
        app.router.add_get("/r/{name}/status", self._status)
        app.router.add_put("/r/{name}/dataflows", self._put)
        app.router.add_put("/r/{name}/release", self._release)
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        self.port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]

    async def _status(self, request: web.Request) -> web.Response:
        frontier = self.frontier()
        names = sorted(self.installed.get(request.match_info["name"], ()))
        report = ReplicaReport(
            start_time=int(self.started * 1000),
            phase=ReplicaPhase.RUNNING,
            dataflows=[DataflowReport(name=n, frontier=[frontier], hydrated=True) for n in names],
        )
        return web.json_response(report.to_wire())

    async def _release(self, request: web.Request) -> web.Response:
        frontiers = ReleaseFrontiers.model_validate(await request.json())
        return web.json_response(frontiers.to_wire())  # a replica echoes what it took

    async def _put(self, request: web.Request) -> web.Response:
        desired = DesiredDataflows.model_validate(await request.json())
        self.installed[request.match_info["name"]] = {d.name for d in desired.dataflows}
        return web.json_response(InstallResult().to_wire())


async def watch(
    session: aiohttp.ClientSession, url: str, on_event: Any, stop: asyncio.Event
) -> None:
    async with session.get(url, params={"watch": "true"}, timeout=aiohttp.ClientTimeout()) as r:
        async for line in r.content:
            if stop.is_set():
                return
            if line.strip():
                await on_event(json.loads(line))


def replica_body(name: str, cluster: str, address: str | None) -> dict[str, Any]:
    annotations = {"dataflow.dev/control-address": address} if address else {}
    return {
        "apiVersion": "dataflow.dev/v1alpha1",
        "kind": "Replica",
        "metadata": {
            "name": name,
            "namespace": NAMESPACE,
            "uid": str(uuid.uuid4()),
            "resourceVersion": "1",
            "generation": 1,
            "annotations": annotations,
        },
        # Spark inside the driver: executors would need storage every pod reaches
        "spec": {"cluster": cluster, "expirationOffset": "1d", "executor": {"instances": 0}},
    }


def _number(name: str) -> int:
    return zlib.crc32(name.encode())


def dataflow_body(name: str, cluster: str) -> dict[str, Any]:
    return {
        "apiVersion": "dataflow.dev/v1alpha1",
        "kind": "Dataflow",
        "metadata": {
            "name": name,
            "namespace": NAMESPACE,
            "uid": str(uuid.uuid4()),
            "resourceVersion": "1",
            "generation": 1,
        },
        "spec": {
            "cluster": cluster,
            "kind": "Index",
            "sources": [{"name": "t", "table": {"path": f"data/{name}", "schema": "x INT"}}],
            # every query its own text, as distinct dataflows have (none planned twice)
            "sql": f"SELECT x, count(*) AS n FROM t WHERE x <> {_number(name)} GROUP BY x",
        },
    }


async def run(args: argparse.Namespace) -> None:  # noqa: PLR0915 - one linear script
    n = args.replicas
    clusters = max(1, n // args.replicas_per_cluster)
    print(
        f"{n} replicas, {n * args.dataflows_per_replica} dataflows, {clusters} clusters; "
        f"ready={args.ready}",
        flush=True,
    )
    stack = contextlib.AsyncExitStack()
    async with stack:
        tmp = Path(tempfile.mkdtemp(prefix="operator-scale-"))
        if args.kubeconfig:
            kubeconfig = Path(args.kubeconfig)
        else:
            import kmock

            handler = await stack.enter_async_context(Emulator())
            server = await stack.enter_async_context(kmock.Server(handler))
            declare_resources(handler)
            kubeconfig = write_kubeconfig(tmp / "kubeconfig", str(server.url).rstrip("/"))
        os.environ["KUBECONFIG"] = str(kubeconfig)
        api = await KubeApi.connect()
        stack.push_async_callback(api.close)
        replicas = Replicas(args.advance_every)
        if args.ready:
            await replicas.start()
        config = {
            "DATAFLOW_STATUS_POLL_INTERVAL": args.poll_interval,
            "DATAFLOW_LOG_LEVEL": args.operator_log_level,
            "DATAFLOW_REPLICA_IMAGE": "example/dataflow:bench",
            "DATAFLOW_STATUS_QPS": str(args.status_qps),
        }
        operator = Operator(kubeconfig, tmp / "operator.log", **config)
        await operator.start()
        stack.push_async_callback(operator.stop)
        await operator.wait_ready(api, timeout=120)

        session = aiohttp.ClientSession()
        stack.push_async_callback(session.close)
        stop = asyncio.Event()
        created: dict[str, float] = {}
        pod_seen: dict[str, float] = {}
        lags: list[float] = []
        seen_frontier: dict[str, int] = {}
        first_entry: dict[str, float] = {}
        """Dataflow → when its status first showed a replica entry."""
        first_status: dict[str, float] = {}
        """Dataflow → when it first had a status at all (validated, Ready written)."""
        kubelet_tasks: set[asyncio.Task[Any]] = set()

        async def on_pod(event: dict[str, Any]) -> None:
            obj = event.get("object") or {}
            labels = (obj.get("metadata") or {}).get("labels") or {}
            replica = labels.get("dataflow.dev/replica")
            if event.get("type") != "ADDED" or replica is None or replica in pod_seen:
                return
            pod_seen[replica] = time.monotonic()
            if args.ready:
                name = obj["metadata"]["name"]
                kubelet = asyncio.create_task(
                    api.merge_patch(
                        KubeApi.core(NAMESPACE, "pods", name) + "/status",
                        {"status": running_status()},
                    )
                )
                kubelet_tasks.add(kubelet)
                kubelet.add_done_callback(kubelet_tasks.discard)

        async def on_dataflow(event: dict[str, Any]) -> None:
            obj = event.get("object") or {}
            name = str((obj.get("metadata") or {}).get("name"))
            if obj.get("status") and name not in first_status:
                first_status[name] = time.monotonic()
            if (obj.get("status") or {}).get("replicas") and name not in first_entry:
                first_entry[name] = time.monotonic()
            for entry in (obj.get("status") or {}).get("replicas") or []:
                frontier = (entry.get("frontier") or [None])[0]
                key = f"{name}/{entry.get('replica')}"
                if frontier is not None and seen_frontier.get(key) != frontier:
                    seen_frontier[key] = frontier
                    if time.monotonic() > measure_from:
                        lags.append(time.time() - frontier / 1000)

        measure_from = float("inf")
        base = str(api.server)
        tasks = [
            asyncio.create_task(watch(session, f"{base}/api/v1/pods", on_pod, stop)),
            asyncio.create_task(
                watch(session, f"{base}/apis/dataflow.dev/v1alpha1/dataflows", on_dataflow, stop)
            ),
        ]
        semaphore = asyncio.Semaphore(32)

        done = [0]

        async def create(plural: str, body: dict[str, Any]) -> None:
            async with semaphore:
                if plural == "replicas":
                    created[body["metadata"]["name"]] = time.monotonic()
                await api.create(KubeApi.custom(NAMESPACE, plural), body)
                done[0] += 1
                if done[0] % 2000 == 0:
                    print(f"  {done[0]} {plural} created", flush=True)

        t0 = time.monotonic()
        bodies = []
        for i in range(n):
            cluster = f"c{i % clusters}"
            for j in range(args.dataflows_per_replica):
                bodies.append(("dataflows", dataflow_body(f"df-{i}-{j}", cluster)))
        await asyncio.gather(*(create(p, b) for p, b in bodies))
        print(f"created {len(bodies)} dataflows in {time.monotonic() - t0:.1f}s", flush=True)
        t1 = time.monotonic()
        address = f"http://127.0.0.1:{replicas.port}/r/" if args.ready else None
        await asyncio.gather(
            *(
                create(
                    "replicas",
                    replica_body(f"r{i}", f"c{i % clusters}", address and address + f"r{i}"),
                )
                for i in range(n)
            )
        )
        print(f"created {n} replicas in {time.monotonic() - t1:.1f}s", flush=True)
        deadline = time.monotonic() + args.timeout
        while len(pod_seen) < n and time.monotonic() < deadline:
            await asyncio.sleep(0.2)
        all_pods = time.monotonic() - t1
        to_pod = [pod_seen[r] - created[r] for r in pod_seen if r in created]
        print(f"driver pods: {len(pod_seen)}/{n} within {all_pods:.1f}s of the first create")
        print(f"create -> driver pod: {percentiles(to_pod)}", flush=True)
        if args.ready:
            await asyncio.sleep(args.settle)
            measure_from = time.monotonic()
            await asyncio.sleep(args.measure)
            print(
                f"status lag over {args.measure:.0f}s (frontier change on the replica -> "
                f"Dataflow status; poll interval {args.poll_interval}): {percentiles(lags)}"
            )
            expected = n * args.dataflows_per_replica * args.replicas_per_cluster
            print(f"status entries seen: {len(seen_frontier)} of {expected}", flush=True)
            total = n * args.dataflows_per_replica
            until = time.monotonic() + args.timeout
            while len(first_entry) < total and time.monotonic() < until:
                await asyncio.sleep(1)
            within = sum(1 for at in first_entry.values() if at - t1 <= 60)
            last = max(first_entry.values(), default=t1) - t1
            print(
                f"replica entries: {within} of {total} Dataflows within 60s of the Replicas' "
                f"creation; {len(first_entry)} after {last:.1f}s",
                flush=True,
            )
            print(f"first status (from the Replicas' creation): {deciles(first_status, t1)}")
            print(f"first replica entry (from the Replicas' creation): {deciles(first_entry, t1)}")
            listed = await api.list(KubeApi.custom(NAMESPACE, "dataflows"))
            with_entries = sum(1 for d in listed if (d.get("status") or {}).get("replicas"))
            installed = sum(len(v) for v in replicas.installed.values())
            missing: dict[str, int] = {}
            for d in listed:
                if not (d.get("status") or {}).get("replicas"):
                    cluster = d["spec"]["cluster"]
                    missing[cluster] = missing.get(cluster, 0) + 1
            if missing:
                without_status = sum(1 for d in listed if not d.get("status"))
                print(
                    f"{len(missing)} clusters have dataflows without replica entries; "
                    f"{without_status} dataflows have no status at all (not processed yet)"
                )
            print(
                f"listed: {with_entries} of {len(listed)} dataflows have replica entries; "
                f"{installed} installed on the fake replicas",
                flush=True,
            )
        stop.set()
        for task in tasks:
            task.cancel()
        with contextlib.suppress(BaseException):
            await asyncio.gather(*tasks)
        print(f"operator log: {tmp / 'operator.log'}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--replicas", type=int, default=100)
    parser.add_argument("--dataflows-per-replica", type=int, default=10)
    parser.add_argument("--replicas-per-cluster", type=int, default=1)
    parser.add_argument("--ready", action="store_true", help="fake kubelet + control API")
    parser.add_argument("--poll-interval", default="2s")
    parser.add_argument("--advance-every", type=float, default=5.0)
    parser.add_argument("--settle", type=float, default=15.0)
    parser.add_argument("--measure", type=float, default=30.0)
    parser.add_argument("--timeout", type=float, default=180.0)
    parser.add_argument("--operator-log-level", default="WARNING")
    parser.add_argument("--status-qps", type=float, default=500.0, help="DATAFLOW_STATUS_QPS")
    parser.add_argument("--kubeconfig", help="a real API server instead of the emulator")
    asyncio.run(run(parser.parse_args()))
    own = resource.getrusage(resource.RUSAGE_SELF)
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    print(
        f"cpu: emulator+bench {own.ru_utime + own.ru_stime:.1f}s, "
        f"operator {children.ru_utime + children.ru_stime:.1f}s"
    )


if __name__ == "__main__":
    main()
