"""The control token and the storage rules through the real operator process on kmock."""

from __future__ import annotations

import base64
from collections.abc import Callable
from typing import Any

import pytest

from dataflow_operator.api import injection
from dataflow_operator.controller.kube import KubeApi
from tests.controller.harness import (
    Cluster,
    FakeReplica,
    new_object,
    one_table_spec,
    running_status,
    wait_for,
)

pytestmark = [pytest.mark.kmock, pytest.mark.asyncio, pytest.mark.timeout(90)]

Start = Callable[..., Any]
SECRET = KubeApi.core("default", "secrets", "r1-control-token")


def replica_body(address: str | None = None, **spec: Any) -> dict[str, Any]:
    annotations = {"dataflow.dev/control-address": address} if address else {}
    return new_object("Replica", "r1", "default", {"cluster": "c", **spec}, annotations=annotations)


def condition(obj: dict[str, Any] | None, type_: str) -> dict[str, Any]:
    for item in ((obj or {}).get("status") or {}).get("conditions") or []:
        if item["type"] == type_:
            return dict(item)
    return {}


@pytest.mark.slow
async def test_the_driver_mounts_the_replicas_token_and_every_request_carries_it(
    cluster: Cluster, start_operator: Start, fake_replica: FakeReplica
) -> None:
    await start_operator()
    replica = await cluster.create(
        "replicas", replica_body(fake_replica.address, executor={"instances": 0})
    )
    pod = await wait_for(lambda: cluster.pod("r1-driver-1"))
    secret = await cluster.api.get(SECRET)
    assert secret is not None
    assert secret["metadata"]["ownerReferences"][0]["uid"] == replica["metadata"]["uid"]
    token = base64.b64decode(secret["data"]["token"]).decode()
    assert len(token) >= 32
    (volume,) = [v for v in pod["spec"]["volumes"] if v.get("secret")]
    assert volume["secret"]["secretName"] == "r1-control-token"
    container = pod["spec"]["containers"][0]
    (mount,) = [m for m in container["volumeMounts"] if m["name"] == volume["name"]]
    assert mount["readOnly"] is True
    env = {e["name"]: e.get("value") for e in container["env"]}
    assert env[injection.ENV_CONTROL_TOKEN_FILE] == f"{mount['mountPath']}/token"

    await cluster.set_pod_status("r1-driver-1", running_status())
    await wait_for(lambda: _ready(cluster))
    await cluster.create(
        "dataflows",
        new_object("Dataflow", "d1", "default", one_table_spec("c")),
    )
    await wait_for(lambda: _async(bool(fake_replica.installed)))
    methods = {call for call, _, _ in fake_replica.auth}
    assert {"GET /status", "PUT /dataflows"} <= methods
    assert set(fake_replica.auth) == {
        (call, f"Bearer {token}", token) for call in methods
    }  # every request, both headers


@pytest.mark.slow
async def test_a_token_left_by_a_crash_is_kept_and_used(
    cluster: Cluster, start_operator: Start, fake_replica: FakeReplica
) -> None:
    # as if an operator had created the Secret and died before the driver pod
    left = new_object("Replica", "r1-control-token", "default", {})
    left.update(apiVersion="v1", kind="Secret")
    del left["spec"]
    left["data"] = {"token": base64.b64encode(b"from-before-the-crash").decode()}
    await cluster.api.create(KubeApi.core("default", "secrets"), left)
    await start_operator()
    await cluster.create("replicas", replica_body(fake_replica.address, executor={"instances": 0}))
    await wait_for(lambda: cluster.pod("r1-driver-1"))
    await cluster.set_pod_status("r1-driver-1", running_status())
    await wait_for(lambda: _ready(cluster))
    secret = await cluster.api.get(SECRET)
    assert secret is not None and secret["data"] == left["data"]
    assert fake_replica.auth
    assert {token for _, _, token in fake_replica.auth} == {"from-before-the-crash"}


@pytest.mark.slow
async def test_executors_on_read_write_once_storage_are_refused_before_any_pod(
    cluster: Cluster, start_operator: Start
) -> None:
    await start_operator()
    await cluster.create(
        "replicas", replica_body(storage={"size": "1Gi"}, executor={"instances": 2})
    )

    async def degraded() -> dict[str, Any] | None:
        found = condition(await cluster.get("replicas", "r1"), "Degraded")
        return found if found.get("reason") == "InvalidSpec" else None

    found = await wait_for(degraded)
    assert found["status"] == "True"
    assert found["message"].startswith("spec.storage.accessModes: [ReadWriteOnce] lacks")

    async def warned() -> list[dict[str, Any]]:
        return [
            e
            for e in await cluster.events()
            if e.get("type") == "Warning" and e.get("reason") == "InvalidSpec"
        ]

    (event,) = await wait_for(warned)
    assert "spec.storage.accessModes" in event["message"]
    assert event["involvedObject"]["name"] == "r1"
    assert await cluster.pods() == []
    assert await cluster.api.get(SECRET) is None


async def _ready(cluster: Cluster) -> bool:
    return condition(await cluster.get("replicas", "r1"), "Ready").get("status") == "True"


async def _async(value: bool) -> bool:
    return value
