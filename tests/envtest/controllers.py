"""The controller-manager's parts the tests need: garbage collection and claim binding.

:class:`GarbageCollector` deletes an object once none of its owners exists any more
(background propagation, as ``kubectl delete`` asks by default), and remembers what it
deleted, so a test can tell its deletions from the ones it expects of someone else.
:class:`ClaimBinder` binds each pending claim to an available ``hostPath`` volume whose
access modes and size fit, as the volume controller does.
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

from kubernetes.utils import parse_quantity

from tests.envtest.api import Api, ApiFailure

__all__ = ["ClaimBinder", "GarbageCollector"]

OWNED = ("pods", "services", "secrets", "configmaps", "persistentvolumeclaims")
OWNERS = {"Pod": "/api/v1/pods", "Replica": "/apis/dataflow.dev/v1alpha1/replicas"}


def _path(kind_plural: str, obj: dict[str, Any]) -> str:
    meta = obj["metadata"]
    return f"/api/v1/namespaces/{meta['namespace']}/{kind_plural}/{meta['name']}"


class GarbageCollector:
    """Deletes dependents whose owners are gone; :attr:`deleted` lists ``kind/ns/name``."""

    def __init__(self, api: Api) -> None:
        self.api = api
        self.deleted: list[str] = []

    async def run(self, interval: float = 2.0) -> None:
        while True:
            with contextlib.suppress(ApiFailure):
                await self.collect()
            await asyncio.sleep(interval)

    async def collect(self) -> None:
        owners: set[str] = set()
        for path in OWNERS.values():
            owners |= {o["metadata"]["uid"] for o in await self.api.list(path)}
        for plural in OWNED:
            for obj in await self.api.list(f"/api/v1/{plural}"):
                refs = obj["metadata"].get("ownerReferences") or []
                known = [r for r in refs if r.get("kind") in OWNERS]
                if known and not any(r["uid"] in owners for r in known):
                    if obj["metadata"].get("deletionTimestamp"):
                        continue
                    if await self.api.delete(_path(plural, obj)):
                        meta = obj["metadata"]
                        self.deleted.append(f"{plural}/{meta['namespace']}/{meta['name']}")


def _fits(pv: dict[str, Any], pvc: dict[str, Any]) -> bool:
    spec, wanted = pv["spec"], pvc["spec"]
    if (pv.get("status") or {}).get("phase") not in (None, "Pending", "Available") or spec.get(
        "claimRef"
    ):
        return False
    if not set(wanted.get("accessModes") or []) <= set(spec.get("accessModes") or []):
        return False
    if (wanted.get("storageClassName") or "") != (spec.get("storageClassName") or ""):
        return False
    request = ((wanted.get("resources") or {}).get("requests") or {}).get("storage", "0")
    return bool(parse_quantity(spec["capacity"]["storage"]) >= parse_quantity(request))


class ClaimBinder:
    """Binds pending claims to available volumes."""

    def __init__(self, api: Api) -> None:
        self.api = api

    async def run(self, interval: float = 1.0) -> None:
        while True:
            with contextlib.suppress(ApiFailure):
                await self.bind_pending()
            await asyncio.sleep(interval)

    async def bind_pending(self) -> None:
        volumes = await self.api.list("/api/v1/persistentvolumes")
        for pvc in await self.api.list("/api/v1/persistentvolumeclaims"):
            if (pvc.get("status") or {}).get("phase") == "Bound":
                continue
            pv = next((v for v in volumes if _fits(v, pvc)), None)
            if pv is None:
                continue
            meta = pvc["metadata"]
            claim_ref = {"kind": "PersistentVolumeClaim", "namespace": meta["namespace"],
                         "name": meta["name"], "uid": meta["uid"]}  # fmt: skip
            pv_path = f"/api/v1/persistentvolumes/{pv['metadata']['name']}"
            await self.api.merge_patch(pv_path, {"spec": {"claimRef": claim_ref}})
            await self.api.merge_patch(pv_path + "/status", {"status": {"phase": "Bound"}})
            claim = _path("persistentvolumeclaims", pvc)
            await self.api.merge_patch(claim, {"spec": {"volumeName": pv["metadata"]["name"]}})
            await self.api.merge_patch(
                claim + "/status",
                {"status": {"phase": "Bound", "accessModes": pv["spec"]["accessModes"],
                            "capacity": pv["spec"]["capacity"]}},
            )  # fmt: skip
            pv["spec"]["claimRef"] = claim_ref
