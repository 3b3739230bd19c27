"""Two real operator processes with kopf peering on kmock: one works, the other waits.

The operators differ only in the image they give driver pods (``DATAFLOW_REPLICA_IMAGE``),
so every pod says which operator created it: before the active one dies, none is the
standby's; after a SIGKILL, the standby reconciles a new Replica within 30 s.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from pathlib import Path
from typing import Any

import kmock
import pytest

from tests.controller.conftest import FAST
from tests.controller.harness import Cluster, Operator, new_object, wait_for

pytestmark = [pytest.mark.kmock, pytest.mark.asyncio, pytest.mark.timeout(150)]

PEERING = "dataflow-operator"
PEERINGS = "/apis/kopf.dev/v1/clusterkopfpeerings"
SPEC = {"cluster": "c", "executor": {"instances": 0}}  # emptyDir state: driver only


def _image(pod: dict[str, Any]) -> str:
    return str(pod["spec"]["containers"][0]["image"])


async def _peers(cluster: Cluster) -> dict[str, Any]:
    peering = await cluster.api.get(f"{PEERINGS}/{PEERING}")
    return dict((peering or {}).get("status") or {})


@pytest.mark.slow
async def test_the_standby_takes_over_when_the_active_operator_dies(
    emulator: tuple[kmock.KubernetesEmulator, Path], cluster: Cluster, tmp_path: Path
) -> None:
    _, kubeconfig = emulator
    await cluster.api.create(
        PEERINGS,
        {
            "apiVersion": "kopf.dev/v1",
            "kind": "ClusterKopfPeering",
            "metadata": {"name": PEERING, "uid": str(uuid.uuid4()), "resourceVersion": "1"},
        },
    )
    operators = {
        name: Operator(
            kubeconfig,
            tmp_path / f"operator-{name}.log",
            peering=PEERING,
            **{**FAST, "DATAFLOW_REPLICA_IMAGE": f"example/dataflow:{name}"},
        )
        for name in ("active", "standby")
    }
    try:
        await operators["active"].start()
        await operators["active"].wait_ready(cluster.api)
        await operators["standby"].start()

        async def both_registered() -> dict[str, Any] | None:
            peers = await _peers(cluster)
            return peers if len(peers) == 2 else None

        peers = await wait_for(both_registered, timeout=30)
        assert {peer["lifetime"] for peer in peers.values()} == {15}
        assert len({peer["priority"] for peer in peers.values()}) == 2  # never equal

        await cluster.create("replicas", new_object("Replica", "r1", "default", SPEC))
        await wait_for(lambda: cluster.pod("r1-driver-1"), timeout=30)
        await asyncio.sleep(5)  # time for a standby that wrongly works to show itself
        images = {_image(p) for p in await cluster.pods()}
        assert images == {"example/dataflow:active"}, images

        await operators["active"].kill()
        killed = time.monotonic()
        await cluster.create("replicas", new_object("Replica", "r2", "default", SPEC))
        pod = await wait_for(lambda: cluster.pod("r2-driver-1"), timeout=30)
        took = time.monotonic() - killed
        assert _image(pod) == "example/dataflow:standby"
        assert took < 30
        # kopf starts a peered operator paused; the standby resumed only after the kill
        assert "Resuming operations" in (tmp_path / "operator-standby.log").read_text()
    finally:
        for operator in operators.values():
            await operator.stop()
