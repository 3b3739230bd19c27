"""The operator's side of the replica control protocol (:mod:`dataflow_operator.api.protocol`).

Bodies are the protocol's pydantic models in both directions; a body of another protocol
version, or an error answer, becomes :class:`ControlError` with the replica's own reason.
"""

from __future__ import annotations

from typing import Any

import aiohttp
from pydantic import ValidationError

from dataflow_operator.api.protocol import (
    DesiredDataflows,
    ErrorBody,
    InstallResult,
    ReplicaReport,
)

__all__ = ["ControlClient", "ControlError"]


class ControlError(Exception):
    """The replica could not be reached, or answered with an error."""

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(f"{reason}: {message}")
        self.reason = reason
        self.message = message


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
    ) -> Any:
        try:
            async with self._session.request(
                method, url, json=body, timeout=timeout or self._timeout
            ) as response:
                payload = await response.json(content_type=None)
                if response.status >= 400:
                    try:
                        error = ErrorBody.model_validate(payload)
                    except ValidationError:
                        raise ControlError(f"HTTP{response.status}", str(payload)[:500]) from None
                    raise ControlError(error.error, error.message)
                return payload
        except (aiohttp.ClientError, TimeoutError, ValueError) as error:
            raise ControlError("Unreachable", f"{url}: {error or type(error).__name__}") from None

    async def status(self, address: str) -> ReplicaReport:
        """``GET /status``."""
        payload = await self._call("GET", f"{address}/status")
        try:
            return ReplicaReport.model_validate(payload)
        except ValidationError as error:
            raise ControlError("BadResponse", str(error)[:500]) from None

    async def put_dataflows(self, address: str, desired: DesiredDataflows) -> InstallResult:
        """``PUT /dataflows`` with the full desired set."""
        payload = await self._call(
            "PUT", f"{address}/dataflows", desired.to_wire(), timeout=self._install_timeout
        )
        try:
            return InstallResult.model_validate(payload)
        except ValidationError as error:
            raise ControlError("BadResponse", str(error)[:500]) from None
