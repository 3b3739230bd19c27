"""A TCP forwarder between network namespaces: a listener here, connections made there.

Used both ways: the API server (the host's loopback) offered inside the node's namespace
as the ``kubernetes`` Service (10.0.0.1:443), and a pod's port offered to the test on the
host's loopback.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import threading
from collections.abc import Awaitable, Callable

__all__ = ["Forwarder", "ForwarderThread"]

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


class ForwarderThread:
    """Forwarders on an event loop of their own, in a thread: whatever else the test's
    loop is busy with (starting pods, sampling memory), connections keep flowing."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(
            target=self.loop.run_forever, name="forwarders", daemon=True
        )
        self._forwarders: list[Forwarder] = []
        self._thread.start()

    async def add(self, listener: socket.socket, connect: Connect) -> Forwarder:
        """Start forwarding ``listener`` (from any loop)."""
        forwarder = Forwarder(listener, connect)
        started = asyncio.run_coroutine_threadsafe(forwarder.start(), self.loop)
        await asyncio.wrap_future(started)
        self._forwarders.append(forwarder)
        return forwarder

    def stop(self) -> None:
        for forwarder in self._forwarders:
            asyncio.run_coroutine_threadsafe(forwarder.stop(), self.loop).result(5)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(5)
        self.loop.close()
