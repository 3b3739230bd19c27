"""A small asynchronous Kubernetes API client on aiohttp.

kopf brings its own client for watching and for its bookkeeping; the operator's own
writes (driver pods and services, status patches) go through this one, so that a daemon
per Replica can act without threads. Credentials come from kopf's login functions (a
service account in a pod, else the kubeconfig).
"""

from __future__ import annotations

import base64
import logging
import ssl
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import aiohttp
import kopf

from dataflow_operator.api.meta import GROUP, VERSION

__all__ = ["MERGE_PATCH", "ApiError", "KubeApi"]

MERGE_PATCH = "application/merge-patch+json"


class ApiError(Exception):
    """A non-2xx answer of the API server."""

    def __init__(self, status: int, reason: str, message: str) -> None:
        super().__init__(f"{status} {reason}: {message}")
        self.status = status
        self.reason = reason
        self.message = message


def _file(data: str | bytes, directory: Path, name: str) -> str:
    raw = data.encode() if isinstance(data, str) else data
    try:
        decoded = base64.b64decode(raw, validate=True)
    except ValueError:
        decoded = raw
    path = directory / name
    path.write_bytes(decoded)
    return str(path)


def _ssl_context(info: kopf.ConnectionInfo) -> ssl.SSLContext | bool:
    if not info.server.startswith("https"):
        return False
    if info.insecure:
        return False
    directory = Path(tempfile.mkdtemp(prefix="dataflow-operator-"))
    ca = _file(info.ca_data, directory, "ca.crt") if info.ca_data else info.ca_path
    context = ssl.create_default_context(cafile=str(ca) if ca else None)
    cert = (
        _file(info.certificate_data, directory, "client.crt")
        if info.certificate_data
        else info.certificate_path
    )
    key = (
        _file(info.private_key_data, directory, "client.key")
        if info.private_key_data
        else info.private_key_path
    )
    if cert:
        context.load_cert_chain(str(cert), str(key) if key else None)
    return context


class KubeApi:
    """Create, get, list, patch and delete objects by API path."""

    def __init__(self, server: str, headers: Mapping[str, str], ssl_context: Any) -> None:
        self.server = server.rstrip("/")
        connector = aiohttp.TCPConnector(ssl=ssl_context, limit=64)
        self._session = aiohttp.ClientSession(
            connector=connector,
            headers=dict(headers),
            timeout=aiohttp.ClientTimeout(total=10),
        )

    @classmethod
    def from_kopf_login(cls, logger: logging.Logger | Any) -> KubeApi:
        """Log in as kopf does without client libraries: service account, else kubeconfig."""
        settings = kopf.OperatorSettings()
        info = kopf.login_with_service_account(settings=settings, logger=logger)
        if info is None:
            info = kopf.login_with_kubeconfig(settings=settings, logger=logger)
        if info is None:
            raise kopf.PermanentError(
                "no Kubernetes credentials: no service account, no kubeconfig"
            )
        return cls(info.server, info.as_http_headers(), _ssl_context(info))

    async def close(self) -> None:
        """Close the HTTP session."""
        await self._session.close()

    async def _request(
        self,
        method: str,
        path: str,
        *,
        body: Any = None,
        content_type: str = "application/json",
        params: Mapping[str, str] | None = None,
    ) -> Any:
        headers = {"Content-Type": content_type} if body is not None else {}
        async with self._session.request(
            method, self.server + path, json=body, headers=headers, params=params
        ) as response:
            if response.status >= 400:
                try:
                    payload = await response.json(content_type=None)
                except (ValueError, aiohttp.ContentTypeError):
                    payload = {}
                payload = payload if isinstance(payload, dict) else {}
                raise ApiError(
                    response.status,
                    str(payload.get("reason") or response.reason),
                    str(payload.get("message") or ""),
                )
            return await response.json(content_type=None)

    async def create(self, path: str, body: Mapping[str, Any]) -> dict[str, Any]:
        """POST ``body`` to a collection path."""
        result: dict[str, Any] = await self._request("POST", path, body=body)
        return result

    async def get(self, path: str) -> dict[str, Any] | None:
        """GET an object; ``None`` if it does not exist."""
        try:
            result: dict[str, Any] = await self._request("GET", path)
        except ApiError as error:
            if error.status == 404:
                return None
            raise
        return result

    async def list(self, path: str, label_selector: str | None = None) -> list[dict[str, Any]]:
        """The items of a collection (filter them yourself too: not every server does)."""
        params = {"labelSelector": label_selector} if label_selector else None
        result = await self._request("GET", path, params=params)
        return list(result.get("items") or [])

    async def merge_patch(self, path: str, patch: Mapping[str, Any]) -> dict[str, Any]:
        """PATCH with ``application/merge-patch+json``."""
        result: dict[str, Any] = await self._request(
            "PATCH", path, body=patch, content_type=MERGE_PATCH
        )
        return result

    async def delete(self, path: str) -> bool:
        """DELETE an object; ``False`` if it was already gone."""
        try:
            await self._request("DELETE", path)
        except ApiError as error:
            if error.status == 404:
                return False
            raise
        return True

    @staticmethod
    def core(namespace: str, plural: str, name: str | None = None) -> str:
        """Path of a core/v1 collection or object."""
        base = f"/api/v1/namespaces/{namespace}/{plural}"
        return f"{base}/{name}" if name else base

    @staticmethod
    def custom(namespace: str, plural: str, name: str | None = None, status: bool = False) -> str:
        """Path of one of the operator's resources (optionally its status subresource)."""
        base = f"/apis/{GROUP}/{VERSION}/namespaces/{namespace}/{plural}"
        if name is None:
            return base
        return f"{base}/{name}/status" if status else f"{base}/{name}"
