"""Sockets in another network namespace, made from a short-lived thread that enters it.

A socket belongs to the network namespace it was created in, whatever thread uses it
later: a thread that ``setns``-es into a namespace, creates (and binds or connects) a
socket and ends, leaves a socket the event loop can use as any other. ``setns`` moves
only the calling thread, so the test process itself never changes namespace.
"""

from __future__ import annotations

import ctypes
import os
import socket
import threading
from collections.abc import Callable
from typing import TypeVar

__all__ = ["connected_socket", "in_netns", "listening_socket"]

CLONE_NEWNET = 0x40000000
T = TypeVar("T")


def in_netns(name: str, make: Callable[[], T]) -> T:
    """``make()`` run in a new thread inside ``ip netns`` namespace ``name``."""
    result: list[T] = []
    errors: list[BaseException] = []

    def run() -> None:
        try:
            libc = ctypes.CDLL(None, use_errno=True)
            fd = os.open(f"/run/netns/{name}", os.O_RDONLY)
            try:
                if libc.setns(fd, CLONE_NEWNET) != 0:
                    raise OSError(ctypes.get_errno(), f"setns into {name}")
            finally:
                os.close(fd)
            result.append(make())
        except BaseException as error:  # handed to the caller
            errors.append(error)

    thread = threading.Thread(target=run, name=f"netns-{name}")
    thread.start()
    thread.join()
    if errors:
        raise errors[0]
    return result[0]


def listening_socket(netns: str, host: str, port: int) -> socket.socket:
    """A non-blocking TCP listener on ``host:port`` inside ``netns``."""

    def make() -> socket.socket:
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, port))
        sock.listen(64)
        sock.setblocking(False)
        return sock

    return in_netns(netns, make)


def connected_socket(netns: str, host: str, port: int, timeout: float = 5.0) -> socket.socket:
    """A non-blocking TCP connection to ``host:port`` made inside ``netns``."""

    def make() -> socket.socket:
        sock = socket.create_connection((host, port), timeout=timeout)
        sock.setblocking(False)
        return sock

    return in_netns(netns, make)
