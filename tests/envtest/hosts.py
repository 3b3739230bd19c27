"""Cluster DNS as a per-pod ``/etc/hosts``: what CoreDNS would answer for Services and pods.

The names a pod can look up: itself (its hostname, and ``hostname.subdomain.ns.svc`` when
a headless Service names its subdomain), the ``kubernetes`` Service, every headless
Service by its selected pods' addresses (every running pod with
``publishNotReadyAddresses``, else the ready ones), with the short forms a pod's search
path (``<ns>.svc.cluster.local svc.cluster.local``) would complete in its own namespace.
"""

from __future__ import annotations

from typing import Any

__all__ = ["ServiceView", "hosts_file"]

DOMAIN = "cluster.local"


def _names(name: str, namespace: str, own_namespace: str) -> list[str]:
    """``name.ns.svc.cluster.local``, ``name.ns.svc`` and, in its own namespace, more."""
    full = [f"{name}.{namespace}.svc.{DOMAIN}", f"{name}.{namespace}.svc"]
    if namespace == own_namespace:
        full += [f"{name}.{namespace}", name]
    return full


def _selected(service: dict[str, Any], pod: dict[str, Any]) -> bool:
    selector = (service.get("spec") or {}).get("selector") or {}
    labels = pod["metadata"].get("labels") or {}
    same = service["metadata"]["namespace"] == pod["metadata"]["namespace"]
    return bool(selector) and same and all(labels.get(k) == v for k, v in selector.items())


def _ready(pod: dict[str, Any]) -> bool:
    conditions = (pod.get("status") or {}).get("conditions") or []
    return any(c["type"] == "Ready" and c["status"] == "True" for c in conditions)


class ServiceView:
    """Services and the addresses of the pods running here, at one moment."""

    def __init__(
        self,
        services: list[dict[str, Any]],
        pods: list[dict[str, Any]],
        addresses: dict[str, str],
        kubernetes_ip: str,
    ) -> None:
        self.services = [s for s in services if (s.get("spec") or {}).get("clusterIP") == "None"]
        self.pods = pods
        self.addresses = addresses
        """Pod uid → its IP."""
        self.kubernetes_ip = kubernetes_ip

    def _ip(self, pod: dict[str, Any]) -> str | None:
        return self.addresses.get(pod["metadata"]["uid"])

    def lines(self, namespace: str) -> list[str]:
        """Every Service-derived line, as seen from a pod in ``namespace``."""
        lines = [f"{self.kubernetes_ip}\t{' '.join(_names('kubernetes', 'default', namespace))}"]
        for service in self.services:
            meta = service["metadata"]
            every = (service.get("spec") or {}).get("publishNotReadyAddresses")
            for pod in self.pods:
                ip = self._ip(pod)
                if ip and _selected(service, pod) and (every or _ready(pod)):
                    lines.append(
                        f"{ip}\t{' '.join(_names(meta['name'], meta['namespace'], namespace))}"
                    )
                    spec = pod["spec"]
                    if spec.get("hostname") and spec.get("subdomain") == meta["name"]:
                        host = f"{spec['hostname']}.{meta['name']}"
                        lines.append(
                            f"{ip}\t{' '.join(_names(host, meta['namespace'], namespace))}"
                        )
        return lines


def hosts_file(pod: dict[str, Any], ip: str, view: ServiceView) -> str:
    """The ``/etc/hosts`` of ``pod``, whose address is ``ip``."""
    meta, spec = pod["metadata"], pod["spec"]
    hostname = spec.get("hostname") or meta["name"]
    own = [hostname]
    if spec.get("subdomain"):
        own.insert(0, f"{hostname}.{spec['subdomain']}.{meta['namespace']}.svc.{DOMAIN}")
    head = [
        "127.0.0.1\tlocalhost",
        "::1\tlocalhost ip6-localhost ip6-loopback",
        f"{ip}\t{' '.join(own)}",
    ]
    return "\n".join([*head, *view.lines(meta["namespace"])]) + "\n"
