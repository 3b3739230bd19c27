"""A container's environment as the kubelet builds it, from nothing but the pod and API.

Order and rules as the kubelet's: the image's ENV, then the ``kubernetes`` Service's
variables, then ``envFrom`` (in order; later sources win), then ``env`` (in order), each
``value`` expanded with ``$(VAR)`` against what is defined so far (``$$(VAR)`` escapes;
an unknown reference stays as written). ``valueFrom`` reads ``fieldRef`` (metadata.name,
metadata.namespace, metadata.uid, metadata.labels['k'], metadata.annotations['k'],
spec.nodeName, spec.serviceAccountName, status.podIP, status.hostIP),
``resourceFieldRef`` (limits/requests of a container), ``secretKeyRef`` and
``configMapKeyRef``. Nothing of the test process's own environment is passed on.
"""

from __future__ import annotations

import base64
import math
import re
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from kubernetes.utils import parse_quantity

__all__ = ["PodFacts", "PodSetupError", "container_environment", "expand", "field_value"]

Fetch = Callable[[str, str], Awaitable[dict[str, Any] | None]]
"""(kind plural, name) → the object in the pod's namespace, or ``None``."""

_REFERENCE = re.compile(r"\$\$|\$\(([A-Za-z_][A-Za-z0-9_.-]*)\)")


@dataclass(frozen=True)
class PodFacts:
    """What ``fieldRef`` reads that is not in the pod object yet when it starts."""

    pod_ip: str
    host_ip: str
    service_host: str
    service_port: int = 443


class PodSetupError(Exception):
    """A reference the kubelet would refuse to start the container with."""


def expand(value: str, defined: dict[str, str]) -> str:
    """Kubernetes' ``$(VAR)`` expansion."""

    def one(match: re.Match[str]) -> str:
        if match.group(0) == "$$":
            return "$"
        name = match.group(1)
        return defined.get(name, match.group(0))

    return _REFERENCE.sub(one, value)


def field_value(pod: dict[str, Any], facts: PodFacts, path: str) -> str:
    metadata, spec = pod["metadata"], pod["spec"]
    simple = {
        "metadata.name": metadata.get("name", ""),
        "metadata.namespace": metadata.get("namespace", ""),
        "metadata.uid": metadata.get("uid", ""),
        "spec.nodeName": spec.get("nodeName", ""),
        "spec.serviceAccountName": spec.get("serviceAccountName", ""),
        "status.podIP": facts.pod_ip,
        "status.podIPs": facts.pod_ip,
        "status.hostIP": facts.host_ip,
    }
    if path in simple:
        return str(simple[path])
    found = re.fullmatch(r"metadata\.(labels|annotations)\['(.+)'\]", path)
    if found:
        return str((metadata.get(found.group(1)) or {}).get(found.group(2), ""))
    raise PodSetupError(f"fieldRef {path!r} is not supported")


def _resource(pod: dict[str, Any], default_container: str, ref: dict[str, Any]) -> str:
    name = ref.get("containerName") or default_container
    container = next(c for c in pod["spec"]["containers"] if c["name"] == name)
    section, _, resource = ref["resource"].partition(".")
    value = ((container.get("resources") or {}).get(section) or {}).get(resource)
    if value is None:
        return "0"
    divisor = Decimal(parse_quantity(ref.get("divisor", "1")))
    return str(math.ceil(Decimal(parse_quantity(value)) / divisor))


async def _key(fetch: Fetch, kind: str, ref: dict[str, Any]) -> str | None:
    obj = await fetch(kind, ref["name"])
    data = (obj or {}).get("data") or {}
    if ref["key"] not in data:
        if ref.get("optional"):
            return None
        raise PodSetupError(f"{kind} {ref['name']!r} has no key {ref['key']!r}")
    value: str = data[ref["key"]]
    return base64.b64decode(value).decode() if kind == "secrets" else value


async def container_environment(
    pod: dict[str, Any],
    container: dict[str, Any],
    image_env: dict[str, str],
    facts: PodFacts,
    fetch: Fetch,
) -> dict[str, str]:
    """The container's whole environment."""
    env = dict(image_env)
    port = str(facts.service_port)
    env |= {
        "KUBERNETES_SERVICE_HOST": facts.service_host,
        "KUBERNETES_SERVICE_PORT": port,
        "KUBERNETES_SERVICE_PORT_HTTPS": port,
        "KUBERNETES_PORT": f"tcp://{facts.service_host}:{port}",
        f"KUBERNETES_PORT_{port}_TCP": f"tcp://{facts.service_host}:{port}",
        f"KUBERNETES_PORT_{port}_TCP_PROTO": "tcp",
        f"KUBERNETES_PORT_{port}_TCP_PORT": port,
        f"KUBERNETES_PORT_{port}_TCP_ADDR": facts.service_host,
    }
    for source in container.get("envFrom") or []:
        kind, ref = (
            ("secrets", source["secretRef"])
            if "secretRef" in source
            else ("configmaps", source["configMapRef"])
        )
        obj = await fetch(kind, ref["name"])
        if obj is None:
            if ref.get("optional"):
                continue
            raise PodSetupError(f"envFrom: {kind} {ref['name']!r} not found")
        for key, value in (obj.get("data") or {}).items():
            decoded = base64.b64decode(value).decode() if kind == "secrets" else value
            env[source.get("prefix", "") + key] = decoded
    for item in container.get("env") or []:
        name = item["name"]
        if "valueFrom" not in item:
            env[name] = expand(item.get("value", ""), env)
            continue
        source = item["valueFrom"]
        value: str | None
        if "fieldRef" in source:
            value = field_value(pod, facts, source["fieldRef"]["fieldPath"])
        elif "resourceFieldRef" in source:
            value = _resource(pod, container["name"], source["resourceFieldRef"])
        elif "secretKeyRef" in source:
            value = await _key(fetch, "secrets", source["secretKeyRef"])
        else:
            value = await _key(fetch, "configmaps", source["configMapKeyRef"])
        if value is not None:
            env[name] = value
    return env
