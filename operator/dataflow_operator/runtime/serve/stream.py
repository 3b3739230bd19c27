"""``GET /dataflows/{name}/subscribe``: a dataflow's changelog as a chunked HTTP stream.

Parameters: ``asOf`` (epoch ms or RFC 3339; default: the latest complete time, the
dataflow's upper − 1; a future ``asOf`` waits until the dataflow reaches it),
``snapshot`` (``true``/``false``, default true) and ``progress`` (default false).

The body is UTF-8 text, one line per update, ``TIME<TAB>DIFF<TAB>col…`` exactly as
``dataflow-operator run`` prints a Subscribe: first (unless ``snapshot=false``) the
contents at ``asOf``, each distinct row once at time ``asOf`` with its count as DIFF;
then every update at a time after ``asOf``, in time order, once the dataflow's upper has
passed its time. Lines starting with ``#`` are the stream's own:

- ``#progress<TAB>T`` (with ``progress=true``): every update at a time ``<= T`` has been
  sent; it follows the snapshot and every later group of updates, and comes even when
  the dataflow emitted nothing, so a client always knows its resume point;
- ``#end<TAB>REASON<TAB>T<TAB>MESSAGE``: the replica ends the stream. REASON is
  ``SlowSubscriber``, ``DataflowDropped``, ``DataflowReinstalled``, ``ShuttingDown`` or
  ``ReadFailed``;
  ``T`` is the last complete time sent (``-`` before the snapshot).

Resuming: a client that has seen everything up to a complete time ``T`` (the time of a
``#progress`` or ``#end`` line, or any time followed by a line of a later time) reconnects
with ``asOf=T&snapshot=false`` and gets exactly the updates after ``T`` (the replica
never ends a stream in the middle of a time).

A slow client never makes the replica buffer without bound: each subscriber has a
bounded queue (:class:`StreamLimits`); the reader waits while it is full, and when it
stays full for ``stall_seconds`` the subscriber is dropped: the queue is discarded, the
``#end`` line with ``SlowSubscriber`` and the resume time is written, and the stream
closes. Data waits on the replica's storage (the changelog), never in memory. New
batches are announced by the engine's batch listener (:meth:`Notifier.notify`), so an
idle subscriber costs no polling.
"""

from __future__ import annotations

import asyncio
from collections import defaultdict
from collections.abc import Callable
from concurrent.futures import Executor
from dataclasses import dataclass
from http import HTTPStatus
from typing import Any, TypeVar

from aiohttp import web

from dataflow_operator.core.time import parse_timestamp
from dataflow_operator.logs import get_logger
from dataflow_operator.runtime.serve.changes import CHUNK_BYTES, ChangeReader, Chunk
from dataflow_operator.runtime.serve.errors import ApiError, unknown_dataflow
from dataflow_operator.runtime.service import ReplicaService, UnknownDataflow

__all__ = ["Notifier", "StreamLimits", "StreamStats", "SubscribeParams", "stream_changes"]

log = get_logger(__name__)
T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class StreamLimits:
    """How much a subscriber may have queued, and for how long, before it is dropped."""

    queue_chunks: int = 64
    """Chunks of about :data:`CHUNK_BYTES` (64 KiB) queued per subscriber: ~4 MiB."""
    stall_seconds: float = 30.0
    """How long the queue may stay full before the subscriber counts as too slow."""
    close_seconds: float = 5.0
    """How long the last line and the end of the stream may take to write."""


@dataclass
class StreamStats:
    """Counters over every subscriber of one server (read by tests and for metrics)."""

    active: int = 0
    peak_queued_bytes: int = 0
    dropped_slow: int = 0


@dataclass(frozen=True, slots=True)
class SubscribeParams:
    """The query of a subscribe request."""

    as_of: int | None
    snapshot: bool
    progress: bool

    @classmethod
    def parse(cls, query: Any) -> SubscribeParams:
        """From the query string; :class:`ApiError` (400) names a bad parameter."""
        as_of = None
        if "asOf" in query:
            try:
                as_of = parse_timestamp(query["asOf"])
            except ValueError as error:
                raise ApiError(
                    HTTPStatus.BAD_REQUEST, "InvalidParameter", f"asOf: {error}"
                ) from None
        return cls(as_of, _flag(query, "snapshot", True), _flag(query, "progress", False))


def _flag(query: Any, name: str, default: bool) -> bool:
    text = query.get(name)
    if text is None:
        return default
    if text.lower() in {"true", "1", ""}:
        return True
    if text.lower() in {"false", "0"}:
        return False
    raise ApiError(
        HTTPStatus.BAD_REQUEST, "InvalidParameter", f"{name}: expected true or false, got {text!r}"
    )


class Notifier:
    """Wakes the subscribers of a dataflow; lives on the server's event loop."""

    def __init__(self) -> None:
        self._events: defaultdict[str, set[asyncio.Event]] = defaultdict(set)
        self.stopping = False

    def register(self, name: str) -> asyncio.Event:
        """An event set whenever ``name`` completes batches (or the server stops)."""
        event = asyncio.Event()
        self._events[name].add(event)
        return event

    def unregister(self, name: str, event: asyncio.Event) -> None:
        """Stop waking ``event``."""
        self._events[name].discard(event)
        if not self._events[name]:
            del self._events[name]

    def notify(self, name: str) -> None:
        """``name`` completed batches (or was dropped or reinstalled)."""
        for event in self._events.get(name, ()):
            event.set()

    def stop(self) -> None:
        """Wake everyone to end their streams."""
        self.stopping = True
        for events in self._events.values():
            for event in events:
                event.set()


@dataclass
class _Written:
    complete: int | None = None
    queued_bytes: int = 0


async def _write_queue(
    queue: asyncio.Queue[Chunk], response: web.StreamResponse, written: _Written, progress: bool
) -> None:
    while True:
        chunk = await queue.get()
        written.queued_bytes -= len(chunk.text)
        text = chunk.text + (f"#progress\t{chunk.complete}\n" if progress else "")
        # Noted before the write: aiohttp hands the bytes to the transport before its
        # first await, so a writer cancelled while draining has sent this chunk whole.
        written.complete = chunk.complete
        if text:
            await response.write(text.encode())


async def stream_changes(
    request: web.Request,
    *,
    service: ReplicaService,
    notifier: Notifier,
    executor: Executor,
    limits: StreamLimits,
    stats: StreamStats,
) -> web.StreamResponse:
    """Serve one subscriber until it leaves or the replica ends its stream."""
    loop = asyncio.get_running_loop()

    async def blocking(function: Callable[..., T], *args: Any) -> T:
        return await loop.run_in_executor(executor, function, *args)

    name = request.match_info["name"]
    params = SubscribeParams.parse(request.query)
    try:
        changelog = await blocking(service.changelog, name)
    except UnknownDataflow as error:
        raise unknown_dataflow(name, error) from None
    reader = ChangeReader(changelog.store, params.as_of, snapshot=params.snapshot)
    response = web.StreamResponse(
        headers={"Content-Type": "text/plain; charset=utf-8", "Cache-Control": "no-store"}
    )
    response.enable_chunked_encoding()
    await response.prepare(request)
    queue: asyncio.Queue[Chunk] = asyncio.Queue(limits.queue_chunks)
    written = _Written()
    wake = notifier.register(name)
    writer = asyncio.create_task(_write_queue(queue, response, written, params.progress))
    writer.add_done_callback(lambda _: wake.set())
    stats.active += 1
    end: tuple[str, str] | None = None
    try:
        while end is None and not writer.done():
            wake.clear()
            first = reader.sent is None
            try:
                chunks = await blocking(reader.snapshot if first else reader.advance) or []
            except Exception as error:  # the headers are sent: end the stream instead
                log.exception("reading the changelog failed", dataflow=name)
                end = ("ReadFailed", f"reading the changelog failed: {type(error).__name__}")
                break
            for chunk in chunks:
                written.queued_bytes += len(chunk.text)  # counted before the writer takes it
                stats.peak_queued_bytes = max(stats.peak_queued_bytes, written.queued_bytes)
                try:
                    await asyncio.wait_for(queue.put(chunk), limits.stall_seconds)
                except TimeoutError:
                    end = ("SlowSubscriber", _slow_message(limits))
                    break
            if end is None:
                await wake.wait()
                end = await blocking(_ended, service, notifier, name, changelog.store)
    finally:
        notifier.unregister(name, wake)
        stats.active -= 1
    if end is None:  # the client went away
        writer.cancel()
        await asyncio.gather(writer, return_exceptions=True)
        return response
    await _finish(
        request,
        response,
        queue=queue,
        writer=writer,
        written=written,
        end=end,
        limits=limits,
        stats=stats,
    )
    return response


def _ended(
    service: ReplicaService, notifier: Notifier, name: str, store: object
) -> tuple[str, str] | None:
    """Why the stream must end now, if it must."""
    if notifier.stopping:
        return ("ShuttingDown", "the replica is stopping")
    try:
        current = service.changelog(name)
    except UnknownDataflow:
        return ("DataflowDropped", f"dataflow {name!r} was dropped from the replica")
    if current.store is not store:
        return ("DataflowReinstalled", f"dataflow {name!r} was reinstalled; subscribe again")
    return None


def _slow_message(limits: StreamLimits) -> str:
    size = limits.queue_chunks * CHUNK_BYTES // (1024 * 1024) or 1
    return (
        f"the subscriber read too slowly: its queue ({limits.queue_chunks} chunks, about "
        f"{size} MiB) stayed full for {limits.stall_seconds:g}s"
    )


async def _finish(
    request: web.Request,
    response: web.StreamResponse,
    *,
    queue: asyncio.Queue[Chunk],
    writer: asyncio.Task[None],
    written: _Written,
    end: tuple[str, str],
    limits: StreamLimits,
    stats: StreamStats,
) -> None:
    """Write what may still be written, the ``#end`` line, and close the stream."""
    reason, message = end
    try:
        if reason != "SlowSubscriber":
            async with asyncio.timeout(limits.close_seconds):
                while not queue.empty() and not writer.done():
                    await asyncio.sleep(0.01)
        else:
            stats.dropped_slow += 1
        writer.cancel()
        await asyncio.gather(writer, return_exceptions=True)
        resume = "-" if written.complete is None else str(written.complete)
        if written.complete is not None:
            message += f"; reconnect with asOf={resume}&snapshot=false to resume"
        log.warning("subscriber stream ended", reason=reason, dataflow=request.match_info["name"])
        async with asyncio.timeout(limits.close_seconds):
            await response.write(f"#end\t{reason}\t{resume}\t{message}\n".encode())
            await response.write_eof()
    except (TimeoutError, ConnectionError):
        if request.transport is not None:
            request.transport.abort()  # the client reads nothing: drop the connection
