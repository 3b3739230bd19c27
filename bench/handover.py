"""Expiration restarts as a reader sees them: make-before-break against break-before-make.

Runs the real operator against the kmock emulator with real replica runtimes as driver
pods (``tests/controller/real_kubelet.py`` plays the kubelet: each pod's runtime on its
own loopback address). A Replica with a short expiration offset goes through
``--restarts`` expiration restarts under each strategy while a reader follows the driver
Service (``GET /status`` every 250 ms and the Subscribe stream, resumed after each
cutover at the last complete time). Prints, per restart:

- **unserved**: how long the Service's driver did not answer with every dataflow
  hydrated (0 when the cutover worked);
- **overlap**: how long the successor ran beside its predecessor (make-before-break);
- the operator's own record (``status.lastHandover``) of each cutover;

and whether the stream, consolidated, equals the changelog written meanwhile.

    .venv/bin/python bench/handover.py [--restarts 3] [--offset 150s] [--lead 60s]
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import os
import socket
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

import kmock

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.controller.harness import (  # noqa: E402
    Cluster,
    Emulator,
    Operator,
    declare_resources,
    new_object,
    wait_for,
    write_kubeconfig,
)
from tests.controller.real_kubelet import RealKubelet, ServiceReader, Writer  # noqa: E402

from dataflow_operator.controller.kube import KubeApi  # noqa: E402


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


async def _status(cluster: Cluster) -> dict[str, Any]:
    replica = await cluster.get("replicas", "r1")
    return dict((replica or {}).get("status") or {})


async def run(strategy: str, args: argparse.Namespace, work: Path) -> None:
    port = _free_port()
    async with Emulator() as handler, kmock.Server(handler) as server:
        declare_resources(handler)
        kubeconfig = write_kubeconfig(work / "kubeconfig", str(server.url).rstrip("/"))
        os.environ["KUBECONFIG"] = str(kubeconfig)
        api = await KubeApi.connect()
        cluster = Cluster(api)
        operator = Operator(
            kubeconfig,
            work / "operator.log",
            DATAFLOW_CONTROL_PORT=str(port),
            DATAFLOW_EXPIRATION_LEAD_TIME=args.lead,
            DATAFLOW_STATUS_POLL_INTERVAL="500ms",
            DATAFLOW_RECONCILE_INTERVAL="1s",
            DATAFLOW_REPLICA_IMAGE="example/dataflow:bench",
        )
        await operator.start()
        try:
            await operator.wait_ready(api)
            feed = work / "feed"
            writer = Writer(feed)
            writer.write()
            source = {
                "name": "feed",
                "changelog": {"path": str(feed), "format": "json", "schema": "v STRING"},
            }
            spec = {
                "cluster": "c", "kind": "Subscribe", "sources": [source],
                "sql": "SELECT v FROM feed",
            }  # fmt: skip
            await cluster.create("dataflows", new_object("Dataflow", "sub", "default", spec))
            body = {
                "cluster": "c", "executor": {"instances": 0},
                "expirationOffset": args.offset, "restartStrategy": strategy,
            }  # fmt: skip
            await cluster.create("replicas", new_object("Replica", "r1", "default", body))
            secret = await wait_for(
                lambda: api.get(KubeApi.core("default", "secrets", "r1-control-token"))
            )
            token = base64.b64decode(secret["data"]["token"]).decode()
            handovers: list[dict[str, Any]] = []
            async with (
                RealKubelet(cluster, port, work) as kubelet,
                writer,
                ServiceReader(cluster, kubelet, token) as reader,
            ):
                deadline = time.monotonic() + args.timeout
                while time.monotonic() < deadline:
                    status = await _status(cluster)
                    record = status.get("lastHandover")
                    if record and (not handovers or handovers[-1]["at"] != record["at"]):
                        handovers.append(record)
                    restarts = sum(
                        r["count"] for r in status.get("restarts", []) if r["reason"] == "Expired"
                    )
                    if restarts >= args.restarts and reader.served_by[-1:] == [
                        str(status.get("attempt"))
                    ]:
                        break
                    await asyncio.sleep(1)
                await asyncio.sleep(3)
                complete = reader.complete
                oracle = Counter(v for t, v in writer.written if t <= complete)
                exact = reader.contents() == oracle and all(d == 1 for _, d, _ in reader.updates)
                _report(strategy, reader, kubelet.most_pods, handovers, exact)
        finally:
            await operator.stop()
            await api.close()


def _report(
    strategy: str,
    reader: ServiceReader,
    most: int,
    handovers: list[dict[str, Any]],
    exact: bool,
) -> None:
    served, unserved = reader.served_by, reader.gaps
    print(f"{strategy}: served by attempts {', '.join(served)}; at most {most} driver pods")
    for number in range(1, len(served)):
        window = unserved[number - 1] if number - 1 < len(unserved) else 0.0
        line = f"  restart {number}: unserved {window:.1f}s"
        if strategy == "MakeBeforeBreak" and number - 1 < len(handovers):
            record = handovers[number - 1]
            line += f", overlap {record['overlapSeconds']:.1f}s ({record['outcome']})"
        print(line, flush=True)
    if len(unserved) > len(served) - 1:
        print(f"  unserved windows: {[round(w, 1) for w in unserved]}")
    print(
        f"  subscribe stream: {len(reader.updates)} updates over {len(reader.connections)} "
        f"connections; consolidated it {'equals' if exact else 'DIFFERS FROM'} the changelog "
        "written up to its last complete time",
        flush=True,
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--restarts", type=int, default=3)
    parser.add_argument("--offset", default="150s", help="the Replica's expirationOffset")
    parser.add_argument("--lead", default="60s", help="the operator's expiration lead time")
    parser.add_argument("--timeout", type=float, default=1200, help="per strategy, seconds")
    parser.add_argument(
        "--strategy", choices=["MakeBeforeBreak", "BreakBeforeMake"], action="append"
    )
    args = parser.parse_args()
    for strategy in args.strategy or ["MakeBeforeBreak", "BreakBeforeMake"]:
        with tempfile.TemporaryDirectory(prefix="handover-") as work:
            asyncio.run(run(strategy, args, Path(work)))


if __name__ == "__main__":
    main()
