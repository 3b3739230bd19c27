""":class:`ControlServer`: the control API on its own thread and event loop.

The engine is synchronous (Spark); the server runs an aiohttp application on an event
loop in a daemon thread of its own, and calls into the engine through a small pool of
worker threads. The engine announces completed batches through its batch listener, which
hops onto the loop to wake the subscribers of that dataflow.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

from aiohttp import web

from dataflow_operator.api.protocol import DEFAULT_CONTROL_PORT
from dataflow_operator.logs import get_logger
from dataflow_operator.runtime.serve.routes import ControlApi, build_app
from dataflow_operator.runtime.serve.stream import Notifier, StreamLimits, StreamStats
from dataflow_operator.runtime.service import ReplicaService

__all__ = ["ControlServer", "parse_address"]

log = get_logger(__name__)
WORKERS = 8
"""Threads calling into the replica (apply, peek, report, changelog reads)."""


def parse_address(address: str | None, default_host: str = "0.0.0.0") -> tuple[str, int]:
    """``host:port``, ``:port``, ``port`` or ``host`` → ``(host, port)``.

    Missing parts default to ``default_host`` and :data:`DEFAULT_CONTROL_PORT`. Raises
    ``ValueError`` for a port that is not a number in 0…65535.
    """
    text = (address or "").strip()
    if not text:
        return default_host, DEFAULT_CONTROL_PORT
    if text.startswith("[") and "]" in text:  # [::1]:8765
        host, _, rest = text[1:].partition("]")
        port_text = rest.removeprefix(":")
    elif text.count(":") == 1:
        host, _, port_text = text.partition(":")
    elif text.isdigit():
        host, port_text = "", text
    else:
        host, port_text = text, ""
    if not port_text:
        port = DEFAULT_CONTROL_PORT
    elif port_text.isdigit() and int(port_text) <= 65535:
        port = int(port_text)
    else:
        raise ValueError(f"not a port: {port_text!r} in control address {address!r}")
    return host or default_host, port


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


def _bind(host: str, port: int) -> socket.socket:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, port))
        sock.listen(128)
        sock.setblocking(False)
    except OSError:
        sock.close()
        raise
    return sock


class ControlServer:
    """Serves a :class:`ReplicaService` over HTTP from a background thread.

    ``address`` is ``host:port`` (see :func:`parse_address`; port 0 picks a free one,
    read it back from :attr:`port`); the socket is bound here, so a port in use fails at
    construction. ``token``: the token every endpoint but the probes and metrics requires
    (:mod:`~dataflow_operator.runtime.serve.auth`). Use as a context manager, or
    :meth:`start` and :meth:`stop`.
    """

    def __init__(
        self,
        service: ReplicaService,
        address: str | None = None,
        *,
        clock: Callable[[], int] = _now_ms,
        labels: dict[str, str] | None = None,
        token: str | None = None,
        limits: StreamLimits | None = None,
    ) -> None:
        host, port = parse_address(address)
        self._socket = _bind(host, port)
        self._service = service
        self._loop = asyncio.new_event_loop()
        self._executor = ThreadPoolExecutor(WORKERS, thread_name_prefix="control-api")
        self._notifier = Notifier()
        self.stats = StreamStats()
        """Subscriber counters (:class:`StreamStats`)."""
        api = ControlApi(
            service=service,
            executor=self._executor,
            clock=clock,
            labels=dict(labels or {}),
            notifier=self._notifier,
            limits=limits or StreamLimits(),
            stats=self.stats,
        )
        self._runner = web.AppRunner(
            build_app(api, token), access_log=None, handle_signals=False, shutdown_timeout=1.0
        )
        self._thread: threading.Thread | None = None
        self._listening = False

    @property
    def host(self) -> str:
        """The address bound."""
        return str(self._socket.getsockname()[0])

    @property
    def port(self) -> int:
        """The port bound (the real one when 0 was asked)."""
        return int(self._socket.getsockname()[1])

    @property
    def url(self) -> str:
        """``http://host:port`` to reach the server from this machine."""
        host = self.host
        if host in {"0.0.0.0", "::", ""}:
            host = "127.0.0.1"
        elif ":" in host:
            host = f"[{host}]"
        return f"http://{host}:{self.port}"

    def start(self) -> ControlServer:
        """Serve in a daemon thread; returns self once the server accepts requests."""
        if self._thread is None:
            self._loop.run_until_complete(self._runner.setup())
            site = web.SockSite(self._runner, self._socket)
            self._loop.run_until_complete(site.start())
            self._service.add_batch_listener(self._on_batch)
            self._listening = True
            self._thread = threading.Thread(
                target=self._loop.run_forever, name="control-api", daemon=True
            )
            self._thread.start()
            log.info("control api serving", url=self.url)
        return self

    def _on_batch(self, name: str) -> None:
        """The engine's batch listener (engine thread): wake the loop's subscribers."""
        if self._listening:
            with contextlib.suppress(RuntimeError):  # the loop closed meanwhile
                self._loop.call_soon_threadsafe(self._notifier.notify, name)

    async def _shutdown(self) -> None:
        self._notifier.stop()
        await self._runner.cleanup()
        # Handlers still running past the runner's shutdown timeout: cancel and await them
        # here, so that none is left suspended in a closed loop.
        tasks = [task for task in asyncio.all_tasks() if task is not asyncio.current_task()]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    def stop(self, timeout: float = 5.0) -> None:
        """End the subscribers' streams, stop serving, close the socket."""
        self._listening = False
        if self._thread is not None:
            future = asyncio.run_coroutine_threadsafe(self._shutdown(), self._loop)
            try:
                future.result(timeout)
            except Exception as error:
                log.warning("control api did not stop cleanly", error=str(error))
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(timeout)
            self._thread = None
        elif not self._loop.is_running():
            self._loop.run_until_complete(self._shutdown())
        self._executor.shutdown(wait=False, cancel_futures=True)
        self._socket.close()
        if not self._loop.is_running():
            self._loop.close()

    def __enter__(self) -> ControlServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
