"""The node's network: a bridge in a namespace of its own, and one namespace per pod.

Nothing here touches the host's own network: the bridge, its gateway address, the
``kubernetes`` Service address (10.0.0.1) and every pod address live in namespaces this
module creates (``ip netns``) and deletes. The node namespace has no route out, so pods
reach each other, the Service address and nothing else; a pod's IP is real (a process
bound to ``0.0.0.0`` is reached at its pod IP, never at ``0.0.0.0``).
"""

from __future__ import annotations

import ipaddress
import shutil
import subprocess
import uuid
from dataclasses import dataclass, field

__all__ = ["IP", "KUBERNETES_SERVICE_IP", "NodeNetwork", "PodNetwork"]

IP = shutil.which("ip") or "/usr/sbin/ip"
"""iproute2's ``ip``, by its full path (processes here start with an empty PATH)."""

KUBERNETES_SERVICE_IP = "10.0.0.1"
"""The ``kubernetes`` Service's cluster IP (the first of the API server's service range)."""
POD_SUBNET = ipaddress.ip_network("10.244.0.0/24")


def ip(*args: str) -> None:
    """Run ``ip ARGS``; an error names the command."""
    done = subprocess.run([IP, *args], check=False, capture_output=True, text=True)
    if done.returncode != 0:
        raise RuntimeError(f"ip {' '.join(args)}: {done.stderr.strip()}")


@dataclass(frozen=True)
class PodNetwork:
    """One pod's namespace and address."""

    netns: str
    address: str


@dataclass
class NodeNetwork:
    """The node's bridge namespace; :meth:`add_pod` / :meth:`remove_pod` per pod."""

    name: str = field(default_factory=lambda: f"dfe-{uuid.uuid4().hex[:6]}")
    pods: dict[str, PodNetwork] = field(default_factory=dict)
    _hosts: list[str] = field(default_factory=list)

    @property
    def gateway(self) -> str:
        return str(POD_SUBNET.network_address + 1)

    def create(self) -> NodeNetwork:
        ip("netns", "add", self.name)
        ip("-n", self.name, "link", "set", "lo", "up")
        ip("-n", self.name, "link", "add", "br0", "type", "bridge")
        ip("-n", self.name, "addr", "add", f"{self.gateway}/{POD_SUBNET.prefixlen}", "dev", "br0")
        ip("-n", self.name, "addr", "add", f"{KUBERNETES_SERVICE_IP}/32", "dev", "br0")
        ip("-n", self.name, "link", "set", "br0", "up")
        self._hosts = [str(h) for h in list(POD_SUBNET.hosts())[1:]]
        return self

    def add_pod(self, key: str) -> PodNetwork:
        """A namespace for pod ``key`` with the next free address, wired to the bridge."""
        used = {p.address for p in self.pods.values()}
        address = next(h for h in self._hosts if h not in used)
        index = self._hosts.index(address)
        netns, veth = f"{self.name}-p{index}", f"{self.name}p{index}"[-15:]
        ip("netns", "add", netns)
        ip("-n", netns, "link", "set", "lo", "up")
        ip(
            "-n",
            self.name,
            "link",
            "add",
            veth,
            "type",
            "veth",
            "peer",
            "name",
            "eth0",
            "netns",
            netns,
        )
        ip("-n", self.name, "link", "set", veth, "master", "br0", "up")
        ip("-n", netns, "addr", "add", f"{address}/{POD_SUBNET.prefixlen}", "dev", "eth0")
        ip("-n", netns, "link", "set", "eth0", "up")
        ip("-n", netns, "route", "add", "default", "via", self.gateway)
        self.pods[key] = PodNetwork(netns, address)
        return self.pods[key]

    def remove_pod(self, key: str) -> None:
        """Delete the pod's namespace (its veth goes with it)."""
        pod = self.pods.pop(key, None)
        if pod is not None:
            subprocess.run([IP, "netns", "del", pod.netns], check=False, capture_output=True)

    def delete(self) -> None:
        for key in list(self.pods):
            self.remove_pod(key)
        subprocess.run([IP, "netns", "del", self.name], check=False, capture_output=True)
