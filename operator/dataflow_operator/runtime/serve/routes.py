"""The control API's routes: one handler per endpoint, and the application that holds them.

Every call into the replica (apply, peek, report, reading a changelog) runs in the
server's worker threads, never on the event loop: an install that takes seconds blocks
neither ``/healthz`` nor the subscribers' streams.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from concurrent.futures import Executor
from dataclasses import dataclass
from http import HTTPStatus
from typing import Any, TypeVar

from aiohttp import web
from aiohttp.typedefs import Middleware
from pydantic import ValidationError

from dataflow_operator.api.dataflow import DataflowKindField
from dataflow_operator.api.loading import error_lines
from dataflow_operator.api.meta import ApiModel
from dataflow_operator.api.protocol import PROTOCOL_VERSION, DesiredDataflows, ReleaseFrontiers
from dataflow_operator.runtime.serve.auth import token_middleware
from dataflow_operator.runtime.serve.changes import ChangeReader
from dataflow_operator.runtime.serve.errors import (
    ApiError,
    error_middleware,
    json_response,
    text_response,
    unknown_dataflow,
    version_middleware,
)
from dataflow_operator.runtime.serve.metrics import CONTENT_TYPE, render_metrics
from dataflow_operator.runtime.serve.stream import (
    Notifier,
    StreamLimits,
    StreamStats,
    stream_changes,
)
from dataflow_operator.runtime.service import NotAnIndex, ReplicaService, UnknownDataflow

__all__ = ["MAX_BODY_BYTES", "ControlApi", "build_app"]

MAX_BODY_BYTES = 16 * 1024 * 1024
T = TypeVar("T")
M = TypeVar("M", bound=ApiModel)


@dataclass
class ControlApi:
    """What the handlers serve: the replica, and how the server around it is set up."""

    service: ReplicaService
    executor: Executor
    clock: Callable[[], int]
    labels: dict[str, str]
    notifier: Notifier
    limits: StreamLimits
    stats: StreamStats

    async def blocking(self, function: Callable[..., T], *args: Any) -> T:
        """``function(*args)`` in a worker thread."""
        return await asyncio.get_running_loop().run_in_executor(self.executor, function, *args)

    async def healthz(self, _: web.Request) -> web.Response:
        """200 while the process serves."""
        return text_response("ok\n")

    async def readyz(self, _: web.Request) -> web.Response:
        """200 once the replica is ready, else 503."""
        if self.service.ready():
            return text_response("ready\n")
        return text_response("not ready\n", HTTPStatus.SERVICE_UNAVAILABLE)

    async def status(self, _: web.Request) -> web.Response:
        """The :class:`ReplicaReport`."""
        return json_response(await self.blocking(self.service.report))

    async def metrics(self, _: web.Request) -> web.Response:
        """Prometheus text."""
        report = await self.blocking(self.service.report)
        return text_response(render_metrics(report, self.clock(), self.labels), 200, CONTENT_TYPE)

    async def put_dataflows(self, request: web.Request) -> web.Response:
        """Converge to the desired set in the body."""
        desired = await _read_body(request, DesiredDataflows)
        return json_response(await self.blocking(self.service.apply, desired))

    async def put_release(self, request: web.Request) -> web.Response:
        """Take the cluster's listing frontiers (:class:`ReleaseFrontiers`); echoes them."""
        frontiers = await _read_body(request, ReleaseFrontiers)
        await self.blocking(self.service.release, frontiers)
        return json_response(frontiers)  # what it took

    async def peek(self, request: web.Request) -> web.Response:
        """An Index's contents: :class:`PeekResult`, or with ``?format=lines`` the lines
        ``TIME<TAB>COUNT<TAB>col…`` a subscribe stream starts with."""
        name = request.match_info["name"]
        lines = request.query.get("format") == "lines"
        try:
            if lines:
                return text_response(await self.blocking(self._peek_lines, name))
            return json_response(await self.blocking(self.service.peek, name))
        except UnknownDataflow as error:
            raise unknown_dataflow(name, error) from None
        except NotAnIndex as error:
            raise ApiError(
                HTTPStatus.CONFLICT, "NotAnIndex", str(error) or f"{name!r} is not an Index"
            ) from None

    def _peek_lines(self, name: str) -> str:
        changelog = self.service.changelog(name)
        if changelog.kind is not DataflowKindField.INDEX:
            raise NotAnIndex(f"{name!r} is not an Index")
        chunks = ChangeReader(changelog.store, None).snapshot() or []
        return "".join(chunk.text for chunk in chunks)

    async def subscribe(self, request: web.Request) -> web.StreamResponse:
        """The changelog stream (:mod:`dataflow_operator.runtime.serve.stream`)."""
        return await stream_changes(
            request,
            service=self.service,
            notifier=self.notifier,
            executor=self.executor,
            limits=self.limits,
            stats=self.stats,
        )


async def _read_body(request: web.Request, model: type[M]) -> M:
    length = request.content_length
    if length is None:
        raise ApiError(HTTPStatus.LENGTH_REQUIRED, "LengthRequired", "send a Content-Length header")
    if length > MAX_BODY_BYTES:
        raise ApiError(
            HTTPStatus.REQUEST_ENTITY_TOO_LARGE,
            "BodyTooLarge",
            f"body of {length} bytes exceeds {MAX_BODY_BYTES}",
        )
    raw = await request.read()
    try:
        document = json.loads(raw)
    except (json.JSONDecodeError, UnicodeDecodeError) as error:
        raise ApiError(
            HTTPStatus.BAD_REQUEST, "MalformedJson", f"body is not JSON: {error}"
        ) from None
    if not isinstance(document, dict):
        raise ApiError(
            HTTPStatus.BAD_REQUEST,
            "InvalidBody",
            f"body must be a JSON object, got {type(document).__name__}",
        )
    version = document.get("version")
    if version != PROTOCOL_VERSION:
        said = "has no 'version'" if version is None else f"has version {version!r}"
        raise ApiError(
            HTTPStatus.BAD_REQUEST,
            "UnsupportedVersion",
            f"body {said}; this replica speaks protocol version {PROTOCOL_VERSION!r}",
        )
    try:
        return model.model_validate(document)
    except ValidationError as error:
        problems = "; ".join(f"{path}: {reason}" for path, reason in error_lines(error))
        raise ApiError(HTTPStatus.BAD_REQUEST, "InvalidBody", problems) from None


def build_app(api: ControlApi, token: str | None = None) -> web.Application:
    """The aiohttp application: middlewares (errors, token, version) and the routes."""
    middlewares: list[Middleware] = [error_middleware]
    if token is not None:
        middlewares.append(token_middleware(token))
    middlewares.append(version_middleware)
    app = web.Application(middlewares=middlewares, client_max_size=MAX_BODY_BYTES)
    app.add_routes(
        [
            web.get("/healthz", api.healthz),
            web.get("/readyz", api.readyz),
            web.get("/metrics", api.metrics),
            web.get("/status", api.status),
            web.put("/dataflows", api.put_dataflows),
            web.put("/release", api.put_release),
            web.get("/dataflows/{name}/peek", api.peek),
            web.get("/dataflows/{name}/subscribe", api.subscribe),
        ]
    )
    return app
