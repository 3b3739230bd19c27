"""Every answer that is not a success is an :class:`ErrorBody`: the one place that says how.

:class:`ApiError` is what handlers raise; :func:`error_middleware` turns it, aiohttp's own
404/405/413, a replica that is not ready yet (503) and any unexpected exception into a
JSON :class:`ErrorBody` with the right status; :func:`version_middleware` refuses a GET
that asks for another protocol version.
"""

from __future__ import annotations

from http import HTTPStatus

from aiohttp import web
from aiohttp.typedefs import Handler
from pydantic import BaseModel

from dataflow_operator.api.protocol import PROTOCOL_VERSION, ErrorBody
from dataflow_operator.logs import get_logger
from dataflow_operator.runtime.service import NotReady

__all__ = [
    "VERSION_HEADER",
    "ApiError",
    "error_middleware",
    "json_response",
    "text_response",
    "unknown_dataflow",
    "version_middleware",
]

VERSION_HEADER = "X-Dataflow-Protocol-Version"
"""Optional request header naming the protocol version a client speaks."""

log = get_logger(__name__)


class ApiError(Exception):
    """An answer other than success: its status, CamelCase reason and message."""

    def __init__(self, status: HTTPStatus, error: str, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.body = ErrorBody(error=error, message=message)


def unknown_dataflow(name: str, error: LookupError) -> ApiError:
    """404 for a dataflow the replica does not run (peek and subscribe alike)."""
    return ApiError(HTTPStatus.NOT_FOUND, "UnknownDataflow", str(error) or f"no dataflow {name!r}")


def json_response(model: BaseModel, status: int = HTTPStatus.OK) -> web.Response:
    """A model as the JSON body of an answer."""
    body = model.model_dump_json(by_alias=True, exclude_none=True).encode()
    return web.Response(
        status=status,
        body=body,
        headers={"Content-Type": "application/json", "Cache-Control": "no-store"},
    )


def text_response(
    text: str, status: int = HTTPStatus.OK, content_type: str = "text/plain; charset=utf-8"
) -> web.Response:
    """A text answer (probes, metrics, peek as lines)."""
    return web.Response(
        status=status,
        body=text.encode(),
        headers={"Content-Type": content_type, "Cache-Control": "no-store"},
    )


_HTTP_REASONS = {
    HTTPStatus.NOT_FOUND: "NotFound",
    HTTPStatus.METHOD_NOT_ALLOWED: "MethodNotAllowed",
    HTTPStatus.REQUEST_ENTITY_TOO_LARGE: "BodyTooLarge",
}


@web.middleware
async def error_middleware(request: web.Request, handler: Handler) -> web.StreamResponse:
    """Map every failure to an :class:`ErrorBody` (the outermost middleware)."""
    try:
        response: web.StreamResponse = await handler(request)
        return response
    except ApiError as error:
        response = json_response(error.body, error.status)
    except NotReady as error:
        body = ErrorBody(error="NotReady", message=str(error) or "the replica is not ready")
        response = json_response(body, HTTPStatus.SERVICE_UNAVAILABLE)
    except web.HTTPException as error:
        if error.status < 400:
            raise
        status = HTTPStatus(error.status)
        if status is HTTPStatus.NOT_FOUND:
            message = f"no endpoint {request.path}"
        elif isinstance(error, web.HTTPMethodNotAllowed):
            message = (
                f"{request.method} {request.path}: use {', '.join(sorted(error.allowed_methods))}"
            )
        else:
            message = error.text or status.phrase
        reason = _HTTP_REASONS.get(status, status.phrase.title().replace(" ", ""))
        response = json_response(ErrorBody(error=reason, message=message), status)
    except Exception as error:
        log.exception("control request failed", method=request.method, path=request.path)
        body = ErrorBody(error="InternalError", message=f"{type(error).__name__}: {error}")
        response = json_response(body, HTTPStatus.INTERNAL_SERVER_ERROR)
    if request.method != "GET":
        response.force_close()  # a body may be left unread: do not reuse the connection
    return response


@web.middleware
async def version_middleware(request: web.Request, handler: Handler) -> web.StreamResponse:
    """400 when ``?version=`` or the version header names another protocol version."""
    asked = request.query.getall("version", [])
    header = request.headers.get(VERSION_HEADER)
    for version in [*asked, *([header] if header is not None else [])]:
        if version != PROTOCOL_VERSION:
            raise ApiError(
                HTTPStatus.BAD_REQUEST,
                "UnsupportedVersion",
                f"protocol version {version!r} is not supported; "
                f"this replica speaks {PROTOCOL_VERSION!r}",
            )
    answer: web.StreamResponse = await handler(request)
    return answer
