"""The test node as the API server sees it, and the scheduler's one act: a Binding."""

from __future__ import annotations

from typing import Any

from tests.envtest.api import Api

__all__ = ["bind", "register_node"]


async def register_node(api: Api, name: str, address: str) -> None:
    """A Ready ``Node`` (pods bound to a node are deleted gracefully, not at once)."""
    capacity = {"cpu": "2", "memory": "16Gi", "pods": "110"}
    await api.apply(
        "/api/v1/nodes",
        {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}},
        },
    )
    await api.merge_patch(
        f"/api/v1/nodes/{name}/status",
        {
            "status": {
                "capacity": capacity,
                "allocatable": capacity,
                "addresses": [{"type": "InternalIP", "address": address}],
                "conditions": [
                    {
                        "type": "Ready",
                        "status": "True",
                        "reason": "KubeletReady",
                        "message": "test kubelet",
                    }
                ],
            }
        },
    )


async def bind(api: Api, pod: dict[str, Any], node: str) -> None:
    """What the scheduler does: bind ``pod`` to ``node``."""
    meta = pod["metadata"]
    await api.create(
        f"/api/v1/namespaces/{meta['namespace']}/pods/{meta['name']}/binding",
        {
            "apiVersion": "v1",
            "kind": "Binding",
            "metadata": {"name": meta["name"], "namespace": meta["namespace"], "uid": meta["uid"]},
            "target": {"apiVersion": "v1", "kind": "Node", "name": node},
        },
    )
