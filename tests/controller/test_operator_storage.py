"""The state claim through the real operator process and the kmock emulator."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import kmock
import pytest

from dataflow_operator.api import injection
from dataflow_operator.controller.kube import KubeApi
from dataflow_operator.controller.manifests import LOCAL_STATE_URI
from tests.controller.harness import Cluster, new_object, running_status, wait_for

pytestmark = [pytest.mark.kmock, pytest.mark.asyncio, pytest.mark.timeout(90)]

Start = Callable[..., Any]
CLAIMS = KubeApi.core("default", "persistentvolumeclaims")


@pytest.fixture()
def with_claims(emulator: tuple[kmock.KubernetesEmulator, Path]) -> None:
    """PersistentVolumeClaims, which the shared harness does not declare."""
    handler, _ = emulator
    handler.resources["v1/persistentvolumeclaims"] = kmock.ResourceInfo(
        kind="PersistentVolumeClaim",
        namespaced=True,
        subresources={"status"},
        verbs={"get", "list", "watch", "create", "patch", "delete"},
    )


def replica_body(**storage: Any) -> dict[str, Any]:
    spec = {"cluster": "c", "storage": storage, "executor": {"instances": 0}}
    return new_object("Replica", "r1", "default", spec)


def persistent_state(replica: dict[str, Any] | None) -> dict[str, Any]:
    for item in ((replica or {}).get("status") or {}).get("conditions") or []:
        if item["type"] == "PersistentState":
            return dict(item)
    return {}


@pytest.mark.usefixtures("with_claims")
@pytest.mark.slow
async def test_the_claim_exists_before_the_driver_that_mounts_it(
    cluster: Cluster, start_operator: Start
) -> None:
    await start_operator()
    replica = await cluster.create("replicas", replica_body(size="1Gi"))
    pod = await wait_for(lambda: cluster.pod("r1-driver-1"))
    claim = await cluster.api.get(KubeApi.core("default", "persistentvolumeclaims", "r1-state"))
    assert claim is not None
    assert claim["spec"]["resources"]["requests"]["storage"] == "1Gi"
    assert claim["metadata"]["ownerReferences"][0]["uid"] == replica["metadata"]["uid"]
    volumes = {v["name"]: v for v in pod["spec"]["volumes"]}
    assert volumes["state"]["persistentVolumeClaim"] == {"claimName": "r1-state"}
    env = {e["name"]: e.get("value") for e in pod["spec"]["containers"][0]["env"]}
    assert env[injection.ENV_STATE_URI] == LOCAL_STATE_URI
    status = (await wait_for(lambda: cluster.get("replicas", "r1")))["status"]
    assert status["stateClaim"] == "r1-state"


@pytest.mark.usefixtures("with_claims")
@pytest.mark.slow
async def test_a_claim_left_by_a_crash_is_reused_and_a_shrink_is_rejected(
    cluster: Cluster, start_operator: Start
) -> None:
    # as if an operator had created the claim and died before the pod
    left = new_object("Replica", "r1-state", "default", {})
    left.update(apiVersion="v1", kind="PersistentVolumeClaim")
    left["spec"] = {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "2Gi"}}}
    await cluster.api.create(CLAIMS, left)
    await start_operator()
    await cluster.create("replicas", replica_body(size="1Gi"))
    await wait_for(lambda: cluster.pod("r1-driver-1"))
    await cluster.set_pod_status("r1-driver-1", running_status())

    async def rejected() -> dict[str, Any] | None:
        condition = persistent_state(await cluster.get("replicas", "r1"))
        return condition if condition.get("reason") == "StorageChangeRejected" else None

    condition = await wait_for(rejected)
    assert "size 1Gi (the claim has 2Gi)" in condition["message"]
    claims = [c["metadata"]["name"] for c in await cluster.api.list(CLAIMS)]
    assert claims == ["r1-state"]
    assert [p["metadata"]["name"] for p in await cluster.pods()] == ["r1-driver-1"]
