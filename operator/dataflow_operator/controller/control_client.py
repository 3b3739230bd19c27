"""The operator's side of the replica control protocol (:mod:`dataflow_operator.api.protocol`).

Bodies are the protocol's pydantic models in both directions; a body of another protocol
version, or an error answer, becomes :class:`ControlError` with the replica's own reason.
Every request carries the replica's control token (from its Secret), as
``Authorization: Bearer <token>`` and ``X-Dataflow-Token: <token>``.
"""

from __future__ import annotations

from typing import Any

import aiohttp
from pydantic import ValidationError

from dataflow_operator.api.protocol import (
    DesiredDataflows,
    ErrorBody,
    InstallResult,
    ReleaseFrontiers,
    ReplicaReport,
)

__all__ = ["TOKEN_HEADER", "ControlClient", "ControlError", "auth_headers"]

TOKEN_HEADER = "X-Dataflow-Token"


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
        body: dict[str, Any] | None = None,
        timeout: aiohttp.ClientTimeout | None = None,
        token: str | None = None,
    ) -> Any:
        try:
            async with self._session.request(
                method,
                url,
                json=body,
                timeout=timeout or self._timeout,
                headers=auth_headers(token),
            ) as response:
                status = response.status
                try:
                    payload = await response.json(content_type=None)
                except ValueError:
                    if status < 400:
                        raise
                    payload = (await response.text())[:500]
                if status >= 400:
                    try:
                        error = ErrorBody.model_validate(payload)
                    except ValidationError:
                        raise ControlError(f"HTTP{status}", str(payload)[:500], status) from None
                    raise ControlError(error.error, error.message, status)
                return payload
        except (aiohttp.ClientError, TimeoutError, ValueError) as error:
            raise ControlError("Unreachable", f"{url}: {error or type(error).__name__}") from None

    async def status(self, address: str, token: str | None = None) -> ReplicaReport:
        """``GET /status``."""
        payload = await self._call("GET", f"{address}/status", token=token)
        try:
            return ReplicaReport.model_validate(payload)
        except ValidationError as error:
            raise ControlError("BadResponse", str(error)[:500]) from None

    async def put_release(
        self, address: str, frontiers: ReleaseFrontiers, token: str | None = None
    ) -> None:
        """``PUT /release`` with the cluster's listing frontiers."""
        await self._call("PUT", f"{address}/release", frontiers.to_wire(), token=token)

    async def put_dataflows(
        self, address: str, desired: DesiredDataflows, token: str | None = None
    ) -> InstallResult:
        """``PUT /dataflows`` with the full desired set."""
        payload = await self._call(
            "PUT",
            f"{address}/dataflows",
            desired.to_wire(),
            timeout=self._install_timeout,
            token=token,
        )
        try:
            return InstallResult.model_validate(payload)
        except ValidationError as error:
            raise ControlError("BadResponse", str(error)[:500]) from None
