"""The control API's token: every endpoint but the probes and metrics requires it.

When the replica is given a token (``dataflow-operator replica`` reads the file named by
:data:`~dataflow_operator.api.injection.ENV_CONTROL_TOKEN_FILE` at start), a request must
carry it as ``Authorization: Bearer <token>`` or as ``X-Dataflow-Token: <token>``. The
second header exists because a request that goes through the Kubernetes API server's
service proxy (``/api/v1/namespaces/NS/services/SVC:PORT/proxy/…``) loses its
``Authorization`` header: kube-apiserver's authentication filter deletes it once it has
authenticated the user with it. Tokens are compared in constant time. Without a token
(``run``, local tests) the API is open.
"""

from __future__ import annotations

import hmac
from http import HTTPStatus
from pathlib import Path

from aiohttp import web
from aiohttp.typedefs import Handler, Middleware

from dataflow_operator.api.protocol import CONTROL_TOKEN_HEADER, ErrorBody
from dataflow_operator.runtime.serve.errors import json_response

__all__ = ["OPEN_PATHS", "read_token", "token_middleware"]

OPEN_PATHS = frozenset({"/healthz", "/readyz", "/metrics"})
"""Open to kubelet probes and Prometheus, token or not."""


def read_token(path: Path) -> str:
    """The token in ``path`` (surrounding whitespace stripped). Raises ``ValueError`` when
    the file is empty, ``OSError`` when it cannot be read."""
    token = path.read_text(encoding="utf-8").strip()
    if not token:
        raise ValueError(f"control token file {path} is empty")
    return token


def _supplied(request: web.Request) -> str | None:
    scheme, _, credentials = request.headers.get("Authorization", "").partition(" ")
    if scheme.lower() == "bearer" and credentials.strip():
        return credentials.strip()
    return request.headers.get(CONTROL_TOKEN_HEADER)


def token_middleware(token: str) -> Middleware:
    """A middleware answering 401 to a request without ``token``."""
    expected = token.encode()

    @web.middleware
    async def middleware(request: web.Request, handler: Handler) -> web.StreamResponse:
        supplied = _supplied(request)
        required = request.path.rstrip("/") not in OPEN_PATHS
        if required and (supplied is None or not hmac.compare_digest(supplied.encode(), expected)):
            said = "no token" if supplied is None else "a wrong token"
            body = ErrorBody(
                error="Unauthorized",
                message=f"the request carries {said}: send 'Authorization: Bearer <token>' "
                f"or '{CONTROL_TOKEN_HEADER}: <token>' with the replica's control token",
            )
            refused = json_response(body, HTTPStatus.UNAUTHORIZED)
            refused.headers["WWW-Authenticate"] = 'Bearer realm="dataflow-replica"'
            return refused
        response: web.StreamResponse = await handler(request)
        return response

    return middleware
