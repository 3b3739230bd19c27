"""A pod's volumes made into host paths, and its containers' mounts of them.

``secret``, ``configMap``, ``downwardAPI`` and ``projected`` volumes (service-account
tokens through the TokenRequest API, bound to the pod) are written as files into the
pod's own directory; an ``emptyDir`` is a directory there; a ``persistentVolumeClaim``
is the ``hostPath`` of the PersistentVolume it is bound to (an unbound claim keeps the
pod waiting, as on a node); a ``hostPath`` is itself.
"""

from __future__ import annotations

import base64
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tests.envtest.api import Api
from tests.envtest.environment import PodFacts, PodSetupError, field_value

__all__ = ["Mount", "container_mounts", "make_volumes"]

Fetch = Callable[[str, str], Awaitable[dict[str, Any] | None]]
DEFAULT_MODE = 0o644
TOKEN_SECONDS = 3607


@dataclass(frozen=True)
class Mount:
    """A bind mount: ``source`` on this machine at ``target`` in the pod."""

    source: str
    target: str
    read_only: bool


def _write(directory: Path, files: dict[str, bytes], mode: int) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    for relative, content in files.items():
        path = directory / relative
        if not path.resolve().is_relative_to(directory.resolve()):
            raise PodSetupError(f"volume item path {relative!r} leaves its volume")
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(content)
        path.chmod(mode)


async def _keyed(
    fetch: Fetch, kind: str, name: str, items: list[dict[str, Any]] | None, optional: bool
) -> dict[str, bytes]:
    obj = await fetch(kind, name)
    if obj is None:
        if optional:
            return {}
        raise PodSetupError(f"{kind} {name!r} not found")
    data = {
        key: base64.b64decode(value) if kind == "secrets" else value.encode()
        for key, value in (obj.get("data") or {}).items()
    }
    if not items:
        return data
    missing = [i["key"] for i in items if i["key"] not in data]
    if missing and not optional:
        raise PodSetupError(f"{kind} {name!r} has no key {missing[0]!r}")
    return {i["path"]: data[i["key"]] for i in items if i["key"] in data}


async def _token(api: Api, pod: dict[str, Any], source: dict[str, Any]) -> bytes:
    metadata = pod["metadata"]
    account = pod["spec"].get("serviceAccountName") or "default"
    spec: dict[str, Any] = {
        "expirationSeconds": source.get("expirationSeconds", TOKEN_SECONDS),
        "boundObjectRef": {
            "apiVersion": "v1",
            "kind": "Pod",
            "name": metadata["name"],
            "uid": metadata["uid"],
        },
    }
    if source.get("audience"):
        spec["audiences"] = [source["audience"]]
    answer = await api.create(
        f"/api/v1/namespaces/{metadata['namespace']}/serviceaccounts/{account}/token",
        {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": spec},
    )
    return str(answer["status"]["token"]).encode()


def _downward(
    pod: dict[str, Any], facts: PodFacts, items: list[dict[str, Any]]
) -> dict[str, bytes]:
    return {i["path"]: field_value(pod, facts, i["fieldRef"]["fieldPath"]).encode() for i in items}


async def _projected(
    api: Api, pod: dict[str, Any], facts: PodFacts, fetch: Fetch, sources: list[dict[str, Any]]
) -> dict[str, bytes]:
    files: dict[str, bytes] = {}
    for source in sources:
        if "serviceAccountToken" in source:
            token = source["serviceAccountToken"]
            files[token["path"]] = await _token(api, pod, token)
        elif "downwardAPI" in source:
            files |= _downward(pod, facts, source["downwardAPI"].get("items") or [])
        else:
            kind = "secrets" if "secret" in source else "configmaps"
            ref = source.get("secret") or source["configMap"]
            files |= await _keyed(
                fetch, kind, ref["name"], ref.get("items"), bool(ref.get("optional"))
            )
    return files


async def _claim_path(api: Api, namespace: str, claim: str) -> str:
    pvc = await api.get(f"/api/v1/namespaces/{namespace}/persistentvolumeclaims/{claim}")
    if pvc is None:
        raise PodSetupError(f"persistentvolumeclaim {claim!r} not found")
    volume = (pvc.get("spec") or {}).get("volumeName")
    if not volume or (pvc.get("status") or {}).get("phase") != "Bound":
        raise PodSetupError(f"persistentvolumeclaim {claim!r} is not bound")
    pv = await api.get(f"/api/v1/persistentvolumes/{volume}")
    host_path = ((pv or {}).get("spec") or {}).get("hostPath") or {}
    if not host_path.get("path"):
        raise PodSetupError(f"persistentvolume {volume!r} is not a hostPath volume")
    return str(host_path["path"])


async def make_volumes(
    api: Api, pod: dict[str, Any], facts: PodFacts, fetch: Fetch, directory: Path
) -> dict[str, str]:
    """Every volume of the pod as a host path, by volume name."""
    paths: dict[str, str] = {}
    for volume in pod["spec"].get("volumes") or []:
        name = volume["name"]
        own = directory / "volumes" / name
        if "emptyDir" in volume:
            own.mkdir(parents=True, exist_ok=True)
        elif "hostPath" in volume:
            paths[name] = volume["hostPath"]["path"]
            continue
        elif "persistentVolumeClaim" in volume:
            namespace = pod["metadata"]["namespace"]
            claim = volume["persistentVolumeClaim"]["claimName"]
            paths[name] = await _claim_path(api, namespace, claim)
            continue
        elif "secret" in volume or "configMap" in volume:
            kind = "secrets" if "secret" in volume else "configmaps"
            ref = volume.get("secret") or volume["configMap"]
            ref_name = ref.get("secretName") or ref.get("name")
            files = await _keyed(fetch, kind, ref_name, ref.get("items"), bool(ref.get("optional")))
            _write(own, files, ref.get("defaultMode", DEFAULT_MODE))
        elif "projected" in volume:
            projected = volume["projected"]
            files = await _projected(api, pod, facts, fetch, projected.get("sources") or [])
            _write(own, files, projected.get("defaultMode", DEFAULT_MODE))
        elif "downwardAPI" in volume:
            _write(
                own, _downward(pod, facts, volume["downwardAPI"].get("items") or []), DEFAULT_MODE
            )
        else:
            raise PodSetupError(f"volume {name!r}: this kubelet does not support its type")
        paths[name] = str(own)
    return paths


def container_mounts(container: dict[str, Any], volumes: dict[str, str]) -> list[Mount]:
    """The container's ``volumeMounts`` (``subPath`` included) as bind mounts."""
    mounts = []
    for mount in container.get("volumeMounts") or []:
        if mount["name"] not in volumes:
            raise PodSetupError(f"volumeMount {mount['name']!r} names no volume of the pod")
        source = Path(volumes[mount["name"]])
        if sub := mount.get("subPath"):
            source = source / sub
            if not source.exists():
                source.mkdir(parents=True)
        mounts.append(Mount(str(source), mount["mountPath"], bool(mount.get("readOnly"))))
    return mounts
