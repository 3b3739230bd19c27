"""The replica's control API: HTTP + JSON on ``host:port`` (default port 8765).

The operator (and a human with curl) talks to a running replica through these
endpoints; bodies are the versioned models of :mod:`dataflow_operator.api.protocol`:

==========================  ===================================================
``GET /status``             :class:`ReplicaReport` (cheap; poll it every second)
``PUT /dataflows``          :class:`DesiredDataflows` → :class:`InstallResult`
``GET /dataflows/{name}/peek``  :class:`PeekResult` of an Index dataflow
``GET /healthz``            200 while the process serves
``GET /readyz``             200 once the replica is ready, else 503
``GET /metrics``            Prometheus text (:mod:`dataflow_operator.runtime.metrics`)
==========================  ===================================================

Every error is an :class:`ErrorBody`: 400 for malformed JSON, a body that does not
validate, or a missing or other protocol ``version`` (also when a GET names another
version in ``?version=`` or the ``X-Dataflow-Protocol-Version`` header); 404 for an
unknown dataflow or path; 405 for a wrong method; 409 when peeking a dataflow that is not
an Index; 413 for a body over 16 MiB; 500 when the service fails.

:class:`ControlServer` serves a :class:`~dataflow_operator.runtime.service.ReplicaService`
from a background thread (stdlib ``ThreadingHTTPServer``) and shuts down cleanly.
"""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Callable
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, ClassVar
from urllib.parse import parse_qs, unquote, urlsplit

from pydantic import BaseModel, ValidationError

from dataflow_operator.api.manifests import error_lines
from dataflow_operator.api.protocol import (
    DEFAULT_CONTROL_PORT,
    PROTOCOL_VERSION,
    DesiredDataflows,
    ErrorBody,
)
from dataflow_operator.logs import get_logger
from dataflow_operator.runtime.metrics import CONTENT_TYPE, render_metrics
from dataflow_operator.runtime.service import NotAnIndex, ReplicaService, UnknownDataflow

__all__ = [
    "MAX_BODY_BYTES",
    "VERSION_HEADER",
    "ControlServer",
    "parse_address",
]

MAX_BODY_BYTES = 16 * 1024 * 1024
VERSION_HEADER = "X-Dataflow-Protocol-Version"
"""Optional request header naming the protocol version a client speaks."""

log = get_logger(__name__)


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


class _ApiError(Exception):
    def __init__(self, status: HTTPStatus, error: str, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.body = ErrorBody(error=error, message=message)


class _Handler(BaseHTTPRequestHandler):
    """One request; the server carries the service."""

    server: _Server
    protocol_version = "HTTP/1.1"
    server_version = "dataflow-replica"
    routes: ClassVar[dict[str, tuple[str, ...]]] = {
        "/status": ("GET",),
        "/dataflows": ("PUT",),
        "/healthz": ("GET",),
        "/readyz": ("GET",),
        "/metrics": ("GET",),
    }

    def do_GET(self) -> None:
        self._dispatch("GET")

    def do_PUT(self) -> None:
        self._dispatch("PUT")

    def do_POST(self) -> None:
        self._dispatch("POST")

    def do_DELETE(self) -> None:
        self._dispatch("DELETE")

    def log_message(self, format: str, *args: Any) -> None:
        log.debug("http", request=format % args)

    def _dispatch(self, method: str) -> None:
        started = time.perf_counter()
        url = urlsplit(self.path)
        status = HTTPStatus.INTERNAL_SERVER_ERROR
        try:
            status = self._route(method, url.path, parse_qs(url.query))
        except _ApiError as error:
            status = error.status
            if method != "GET":  # a body may be left unread: do not reuse the connection
                self.close_connection = True
            self._send_model(error.status, error.body)
        except Exception as error:
            log.exception("control request failed", method=method, path=url.path)
            status = HTTPStatus.INTERNAL_SERVER_ERROR
            body = ErrorBody(error="InternalError", message=f"{type(error).__name__}: {error}")
            self._send_model(status, body)
        finally:
            log.debug(
                "control request",
                method=method,
                path=url.path,
                status=int(status),
                ms=round((time.perf_counter() - started) * 1000, 1),
            )

    def _route(self, method: str, path: str, query: dict[str, list[str]]) -> HTTPStatus:
        path = path.rstrip("/") or "/"
        parts = path.split("/")
        allowed = self.routes.get(path)
        if allowed is None and len(parts) == 4 and parts[1] == "dataflows" and parts[3] == "peek":
            allowed = ("GET",)
        if allowed is None:
            raise _ApiError(HTTPStatus.NOT_FOUND, "NotFound", f"no endpoint {path}")
        if method not in allowed:
            raise _ApiError(
                HTTPStatus.METHOD_NOT_ALLOWED,
                "MethodNotAllowed",
                f"{method} {path}: use {', '.join(allowed)}",
            )
        self._check_requested_version(query)
        service = self.server.service
        if path == "/healthz":
            return self._send_text(HTTPStatus.OK, "ok\n")
        if path == "/readyz":
            ready = service.ready()
            return self._send_text(
                HTTPStatus.OK if ready else HTTPStatus.SERVICE_UNAVAILABLE,
                "ready\n" if ready else "not ready\n",
            )
        if path == "/status":
            return self._send_model(HTTPStatus.OK, service.report())
        if path == "/metrics":
            text = render_metrics(service.report(), self.server.clock(), self.server.labels)
            return self._send_text(HTTPStatus.OK, text, CONTENT_TYPE)
        if path == "/dataflows":
            desired = self._read_desired()
            return self._send_model(HTTPStatus.OK, service.apply(desired))
        name = unquote(parts[2])
        try:
            return self._send_model(HTTPStatus.OK, service.peek(name))
        except UnknownDataflow as error:
            raise _ApiError(
                HTTPStatus.NOT_FOUND, "UnknownDataflow", str(error) or f"no dataflow {name!r}"
            ) from None
        except NotAnIndex as error:
            raise _ApiError(
                HTTPStatus.CONFLICT, "NotAnIndex", str(error) or f"{name!r} is not an Index"
            ) from None

    def _check_requested_version(self, query: dict[str, list[str]]) -> None:
        asked = query.get("version", []) + [
            v for v in [self.headers.get(VERSION_HEADER)] if v is not None
        ]
        for version in asked:
            if version != PROTOCOL_VERSION:
                raise _ApiError(
                    HTTPStatus.BAD_REQUEST,
                    "UnsupportedVersion",
                    f"protocol version {version!r} is not supported; "
                    f"this replica speaks {PROTOCOL_VERSION!r}",
                )

    def _read_desired(self) -> DesiredDataflows:
        length_text = self.headers.get("Content-Length")
        if length_text is None or not length_text.isdigit():
            raise _ApiError(
                HTTPStatus.LENGTH_REQUIRED, "LengthRequired", "send a Content-Length header"
            )
        length = int(length_text)
        if length > MAX_BODY_BYTES:
            self.close_connection = True
            raise _ApiError(
                HTTPStatus.REQUEST_ENTITY_TOO_LARGE,
                "BodyTooLarge",
                f"body of {length} bytes exceeds {MAX_BODY_BYTES}",
            )
        raw = self.rfile.read(length)
        try:
            document = json.loads(raw)
        except (json.JSONDecodeError, UnicodeDecodeError) as error:
            raise _ApiError(
                HTTPStatus.BAD_REQUEST, "MalformedJson", f"body is not JSON: {error}"
            ) from None
        if not isinstance(document, dict):
            raise _ApiError(
                HTTPStatus.BAD_REQUEST,
                "InvalidBody",
                f"body must be a JSON object, got {type(document).__name__}",
            )
        version = document.get("version")
        if version != PROTOCOL_VERSION:
            said = "has no 'version'" if version is None else f"has version {version!r}"
            raise _ApiError(
                HTTPStatus.BAD_REQUEST,
                "UnsupportedVersion",
                f"body {said}; this replica speaks protocol version {PROTOCOL_VERSION!r}",
            )
        try:
            return DesiredDataflows.model_validate(document)
        except ValidationError as error:
            problems = "; ".join(f"{path}: {reason}" for path, reason in error_lines(error))
            raise _ApiError(HTTPStatus.BAD_REQUEST, "InvalidBody", problems) from None

    def _send_model(self, status: HTTPStatus, model: BaseModel) -> HTTPStatus:
        body = model.model_dump_json(by_alias=True, exclude_none=True).encode()
        return self._send(status, body, "application/json")

    def _send_text(
        self, status: HTTPStatus, text: str, content_type: str = "text/plain; charset=utf-8"
    ) -> HTTPStatus:
        return self._send(status, text.encode(), content_type)

    def _send(self, status: HTTPStatus, body: bytes, content_type: str) -> HTTPStatus:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Cache-Control", "no-store")
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)
        return status


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True

    def __init__(
        self,
        address: tuple[str, int],
        service: ReplicaService,
        clock: Callable[[], int],
        labels: dict[str, str],
    ) -> None:
        if ":" in address[0]:
            self.address_family = socket.AF_INET6
        super().__init__(address, _Handler)
        self.service = service
        self.clock = clock
        self.labels = labels


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


class ControlServer:
    """Serves a :class:`ReplicaService` over HTTP from a background thread.

    ``address`` is ``host:port`` (see :func:`parse_address`; port 0 picks a free one,
    read it back from :attr:`port`). Use as a context manager, or :meth:`start` and
    :meth:`stop`.
    """

    def __init__(
        self,
        service: ReplicaService,
        address: str | None = None,
        *,
        clock: Callable[[], int] = _now_ms,
        labels: dict[str, str] | None = None,
    ) -> None:
        host, port = parse_address(address)
        self._server = _Server((host, port), service, clock, dict(labels or {}))
        self._thread: threading.Thread | None = None

    @property
    def host(self) -> str:
        """The address bound."""
        return str(self._server.server_address[0])

    @property
    def port(self) -> int:
        """The port bound (the real one when 0 was asked)."""
        return int(self._server.server_address[1])

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
        """Serve in a daemon thread; returns self."""
        if self._thread is None:
            self._thread = threading.Thread(
                target=self._server.serve_forever,
                kwargs={"poll_interval": 0.2},
                name="control-api",
                daemon=True,
            )
            self._thread.start()
            log.info("control api serving", url=self.url)
        return self

    def stop(self, timeout: float = 5.0) -> None:
        """Stop accepting requests, wait for the serving thread, close the socket."""
        if self._thread is not None:
            self._server.shutdown()
            self._thread.join(timeout)
            self._thread = None
        self._server.server_close()

    def __enter__(self) -> ControlServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
