"""A small JSON client of the API server (aiohttp), for the test's kubelet and setup.

Every call raises :class:`ApiFailure` on a non-2xx answer except where a 404 is an
expected outcome (:meth:`Api.get` and :meth:`Api.delete` return ``None``/``False``).
"""

from __future__ import annotations

import ssl
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import aiohttp

__all__ = ["Api", "ApiFailure"]

MERGE_PATCH = "application/merge-patch+json"


class ApiFailure(Exception):
    """A non-2xx answer: status, and the API server's message."""

    def __init__(self, status: int, method: str, path: str, message: str) -> None:
        super().__init__(f"{method} {path}: {status} {message}")
        self.status = status


class Api:
    """Bearer-token requests to one API server, verified against its CA."""

    def __init__(self, server: str, token: str, ca_file: Path) -> None:
        self.server = server.rstrip("/")
        self.token = token
        self._ssl = ssl.create_default_context(cafile=str(ca_file))
        self._session: aiohttp.ClientSession | None = None

    async def __aenter__(self) -> Api:
        return self

    async def __aexit__(self, *_: object) -> None:
        await self.close()

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None

    async def request(
        self,
        method: str,
        path: str,
        body: Any = None,
        *,
        params: Mapping[str, str] | None = None,
        content_type: str = "application/json",
    ) -> Any:
        if self._session is None:
            self._session = aiohttp.ClientSession(
                headers={"Authorization": f"Bearer {self.token}"},
                timeout=aiohttp.ClientTimeout(total=30),
                connector=aiohttp.TCPConnector(ssl=self._ssl),
            )
        headers = {"Content-Type": content_type} if body is not None else {}
        async with self._session.request(
            method, self.server + path, json=body, params=params, headers=headers
        ) as answer:
            payload = await answer.json(content_type=None) if answer.content_length != 0 else {}
            if answer.status >= 300:
                message = payload.get("message", "") if isinstance(payload, dict) else ""
                raise ApiFailure(answer.status, method, path, message)
            return payload

    async def get(self, path: str) -> dict[str, Any] | None:
        try:
            found: dict[str, Any] = await self.request("GET", path)
        except ApiFailure as failure:
            if failure.status == 404:
                return None
            raise
        return found

    async def list(self, path: str, **params: str) -> list[dict[str, Any]]:
        return list((await self.request("GET", path, params=params)).get("items") or [])

    async def create(self, path: str, body: Mapping[str, Any]) -> dict[str, Any]:
        created: dict[str, Any] = await self.request("POST", path, body)
        return created

    async def apply(self, path: str, body: Mapping[str, Any]) -> dict[str, Any]:
        """Create the object at collection ``path``; if it exists, leave it."""
        try:
            return await self.create(path, body)
        except ApiFailure as failure:
            if failure.status != 409:
                raise
        found = await self.get(f"{path}/{body['metadata']['name']}")
        return found or {}

    async def merge_patch(self, path: str, patch: Mapping[str, Any]) -> dict[str, Any]:
        patched: dict[str, Any] = await self.request("PATCH", path, patch, content_type=MERGE_PATCH)
        return patched

    async def delete(self, path: str, **params: str) -> bool:
        try:
            await self.request("DELETE", path, params=params)
        except ApiFailure as failure:
            if failure.status == 404:
                return False
            raise
        return True
