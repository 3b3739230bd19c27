"""The operator's side of the replica control protocol (:mod:`dataflow_operator.api.protocol`).

Bodies are the protocol's pydantic models in both directions; a body of another protocol
version, or an error answer, becomes :class:`ControlError` with the replica's own reason.
Every request carries the replica's control token (from its Secret), as
``Authorization: Bearer <token>`` and ``X-Dataflow-Token: <token>``.
"""

from __future__ import annotations

from typing import Any, TypeVar

import aiohttp
from pydantic import BaseModel, ValidationError

from dataflow_operator.api.protocol import (
    DesiredDataflows,
    ErrorBody,
    InstallResult,
    ReleaseFrontiers,
    ReplicaReport,
)

__all__ = ["TOKEN_HEADER", "ControlClient", "ControlError", "auth_headers"]

TOKEN_HEADER = "X-Dataflow-Token"
Answer = TypeVar("Answer", bound=BaseModel)


class ControlError(Exception):
    """The replica could not be reached, or answered with an error (``status``: HTTP)."""

    def __init__(self, reason: str, message: str, status: int | None = None) -> None:
        super().__init__(f"{reason}: {message}")
        self.reason = reason
        self.message = message
        self.status = status


def auth_headers(token: str | None) -> dict[str, str]:
    """The headers that carry a replica's control token (none without one)."""
    if not token:
        return {}
    return {"Authorization": f"Bearer {token}", TOKEN_HEADER: token}


class ControlClient:
    """Talks to replicas at ``http://host:port`` addresses.

    ``GET /status`` is cheap and polled often, so it gets a short timeout;
    ``PUT /dataflows`` answers once the replica has started every new dataflow's Spark
    query, which takes seconds each, so it gets a long one.
    """

    def __init__(
        self, timeout_seconds: float = 3.0, install_timeout_seconds: float = 180.0
    ) -> None:
        self._timeout = aiohttp.ClientTimeout(total=timeout_seconds)
        self._session = aiohttp.ClientSession(
            timeout=self._timeout, connector=aiohttp.TCPConnector(limit=256)
        )
        self._install_timeout = aiohttp.ClientTimeout(total=install_timeout_seconds)

    async def close(self) -> None:
        """Close the HTTP session."""
        await self._session.close()

    async def _call(
        self,
        method: str,
        url: str,
        answer: type[Answer],
        *,
        body: dict[str, Any] | None = None,
        timeout: aiohttp.ClientTimeout | None = None,
        token: str | None = None,
    ) -> Answer:
        """One request; the answer's body parsed straight from its bytes into ``answer``
        (a poll of a replica with hundreds of dataflows is parsed many times a second)."""
        try:
            async with self._session.request(
                method,
                url,
                json=body,
                timeout=timeout or self._timeout,
                headers=auth_headers(token),
            ) as response:
                status, raw = response.status, await response.read()
        except (aiohttp.ClientError, TimeoutError) as error:
            raise ControlError("Unreachable", f"{url}: {error or type(error).__name__}") from None
        if status >= 400:
            try:
                error_body = ErrorBody.model_validate_json(raw)
            except ValidationError:
                text = raw.decode(errors="replace")[:500]
                raise ControlError(f"HTTP{status}", text, status) from None
            raise ControlError(error_body.error, error_body.message, status)
        try:
            return answer.model_validate_json(raw)
        except ValidationError as error:
            raise ControlError("BadResponse", str(error)[:500]) from None

    async def status(self, address: str, token: str | None = None) -> ReplicaReport:
        """``GET /status``."""
        return await self._call("GET", f"{address}/status", ReplicaReport, token=token)

    async def put_release(
        self, address: str, frontiers: ReleaseFrontiers, token: str | None = None
    ) -> None:
        """``PUT /release`` with the cluster's listing frontiers (the replica echoes them)."""
        await self._call(
            "PUT", f"{address}/release", ReleaseFrontiers, body=frontiers.to_wire(), token=token
        )

    async def put_dataflows(
        self, address: str, desired: DesiredDataflows, token: str | None = None
    ) -> InstallResult:
        """``PUT /dataflows`` with the full desired set."""
        return await self._call(
            "PUT",
            f"{address}/dataflows",
            InstallResult,
            body=desired.to_wire(),
            timeout=self._install_timeout,
            token=token,
        )
