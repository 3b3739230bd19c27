"""A TCP forwarder between network namespaces: a listener here, connections made there.

Used both ways: the API server (the host's loopback) offered inside the node's namespace
as the ``kubernetes`` Service (10.0.0.1:443), and a pod's port offered to the test on the
host's loopback.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
from collections.abc import Awaitable, Callable

__all__ = ["Forwarder"]

Connect = Callable[[], Awaitable[tuple[asyncio.StreamReader, asyncio.StreamWriter]]]


class Forwarder:
    """Accepts on ``listener``; pipes each connection to one that ``connect`` opens."""

    def __init__(self, listener: socket.socket, connect: Connect) -> None:
        self.listener = listener
        self.connect = connect
        self._server: asyncio.Server | None = None

    @property
    def port(self) -> int:
        port: int = self.listener.getsockname()[1]
        return port

    async def start(self) -> Forwarder:
        self._server = await asyncio.start_server(self._serve, sock=self.listener)
        return self

    async def stop(self) -> None:
        if self._server is not None:
            self._server.close()
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self._server.wait_closed(), 2)

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            far_reader, far_writer = await self.connect()
        except OSError:
            writer.close()
            return
        await asyncio.gather(_pipe(reader, far_writer), _pipe(far_reader, writer))


async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        while data := await reader.read(65536):
            writer.write(data)
            await writer.drain()
    except (OSError, asyncio.CancelledError):
        pass
    finally:
        with contextlib.suppress(Exception):
            writer.close()
