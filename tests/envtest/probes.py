"""Readiness probes from the node, as the kubelet runs them: ``httpGet`` and ``tcpSocket``.

The node reaches a pod at its IP from the node's network namespace; a probe succeeds on
a TCP connection (``tcpSocket``) or an HTTP answer from 200 to 399 (``httpGet``).
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

from tests.envtest.netns import connected_socket

__all__ = ["probe"]


def _port(container: dict[str, Any], port: int | str) -> int:
    if isinstance(port, int) or str(port).isdigit():
        return int(port)
    found = next(p for p in container.get("ports") or [] if p.get("name") == port)
    return int(found["containerPort"])


async def probe(node_netns: str, ip: str, container: dict[str, Any], spec: dict[str, Any]) -> bool:
    """One run of the probe ``spec`` of ``container`` at ``ip``."""
    action = spec.get("httpGet") or spec.get("tcpSocket")
    if action is None:
        return True  # exec probes: not run here, counted as passing
    port = _port(container, action["port"])
    timeout = float(spec.get("timeoutSeconds", 1))
    try:
        sock = await asyncio.to_thread(connected_socket, node_netns, ip, port, timeout)
    except OSError:
        return False
    reader, writer = await asyncio.open_connection(sock=sock)
    try:
        if "tcpSocket" in spec:
            return True
        path = action.get("path", "/")
        writer.write(f"GET {path} HTTP/1.0\r\nHost: {ip}:{port}\r\n\r\n".encode())
        await writer.drain()
        line = await asyncio.wait_for(reader.readline(), timeout)
        parts = line.split()
        return len(parts) >= 2 and 200 <= int(parts[1]) < 400
    except (OSError, TimeoutError, ValueError):
        return False
    finally:
        writer.close()
        with contextlib.suppress(Exception):
            await writer.wait_closed()
