"""One test session's cluster: the control plane, bootstrapped, and its credentials."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from pathlib import Path

from tests.envtest.api import Api
from tests.envtest.bootstrap import write_kubeconfig
from tests.envtest.control_plane import ADMIN_TOKEN, ControlPlane

__all__ = ["NAMESPACES", "EnvCluster", "service_account_token"]

NAMESPACES = ["default", "operator-probe"]
"""Namespaces the chart is told about (its Replica RoleBindings) and tests use."""


@dataclass
class EnvCluster:
    """The running control plane and what a test needs to talk to it."""

    plane: ControlPlane
    workdir: Path
    admin_kubeconfig: Path

    def admin(self) -> Api:
        return Api(self.plane.url, ADMIN_TOKEN, self.plane.ca_file)

    async def kubeconfig_for(self, namespace: str, account: str, server: str | None = None) -> Path:
        """A kubeconfig authenticating as ServiceAccount ``namespace/account``."""
        async with self.admin() as api:
            token = await service_account_token(api, namespace, account)
        path = self.workdir / f"{namespace}.{account}.{abs(hash(server))}.kubeconfig"
        return write_kubeconfig(path, server or self.plane.url, token, self.plane.ca_file)


async def service_account_token(api: Api, namespace: str, account: str, seconds: int = 7200) -> str:
    """A token of the ServiceAccount (TokenRequest API, not bound to any object)."""
    answer = await api.create(
        f"/api/v1/namespaces/{namespace}/serviceaccounts/{account}/token",
        {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest",
         "spec": {"expirationSeconds": seconds}},
    )  # fmt: skip
    return str(answer["status"]["token"])


async def clean_namespace(api: Api, namespace: str) -> None:
    """Remove what tests leave: custom resources (finalizers dropped), pods, the rest."""
    for plural in ("dataflows", "replicas"):
        base = f"/apis/dataflow.dev/v1alpha1/namespaces/{namespace}/{plural}"
        for obj in await api.list(base):
            path = f"{base}/{obj['metadata']['name']}"
            await api.merge_patch(path, {"metadata": {"finalizers": None}})
            await api.delete(path)
    for plural in ("pods", "services", "secrets", "persistentvolumeclaims", "events"):
        base = f"/api/v1/namespaces/{namespace}/{plural}"
        for obj in await api.list(base):
            if plural == "persistentvolumeclaims":
                await api.merge_patch(
                    f"{base}/{obj['metadata']['name']}", {"metadata": {"finalizers": None}}
                )
            await api.delete(f"{base}/{obj['metadata']['name']}", gracePeriodSeconds="0")
    for volume in await api.list("/api/v1/persistentvolumes"):
        path = f"/api/v1/persistentvolumes/{volume['metadata']['name']}"
        await api.merge_patch(path, {"metadata": {"finalizers": None}})
        await api.delete(path)
    for obj in await api.list(f"/api/v1/namespaces/{namespace}/configmaps"):
        if obj["metadata"]["name"] != "kube-root-ca.crt":
            await api.delete(f"/api/v1/namespaces/{namespace}/configmaps/{obj['metadata']['name']}")
    await asyncio.sleep(0)
