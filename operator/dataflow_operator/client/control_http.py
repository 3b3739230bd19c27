"""What every request to a replica's control API shares, however it goes there.

The token's headers (:func:`auth_headers`), the check of an answer (:func:`check`) and
the one error every failure becomes (:class:`ClientError`), for a request sent directly
(:mod:`.connect`) or through the Kubernetes API server's service proxy (:mod:`.kube`).
"""

from __future__ import annotations

import json

import urllib3

from dataflow_operator.api.protocol import CONTROL_TOKEN_HEADER

__all__ = ["ClientError", "auth_headers", "check"]


class ClientError(Exception):
    """What failed, in one line; ``status``: the HTTP status that said so, if one did."""

    def __init__(self, message: str, status: int | None = None) -> None:
        super().__init__(message)
        self.status = status


def auth_headers(token: str | None, *, bearer: bool = True) -> dict[str, str]:
    """The token in the headers the control API accepts; ``bearer=False`` when
    ``Authorization`` carries the user's credentials for the Kubernetes API server."""
    if token is None:
        return {}
    headers = {CONTROL_TOKEN_HEADER: token}
    if bearer:
        headers["Authorization"] = f"Bearer {token}"
    return headers


def check(response: urllib3.BaseHTTPResponse, where: str) -> None:
    """Raise a :class:`ClientError` naming ``where`` unless the response is a success."""
    if response.status < 400:
        return
    text = response.data.decode(errors="replace")
    try:
        body = json.loads(text)
        detail = f"{body['error']}: {body['message']}"
    except (ValueError, KeyError, TypeError):
        detail = text.strip().splitlines()[0] if text.strip() else response.reason or ""
    raise ClientError(f"{where} answered {response.status}: {detail}", response.status)
