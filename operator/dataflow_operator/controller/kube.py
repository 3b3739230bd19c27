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


def _decoded(data: str | bytes) -> bytes:
    """Credential data as kubeconfigs carry it (base64) or as it is (PEM)."""
    raw = data.encode() if isinstance(data, str) else data
    try:
        return base64.b64decode(raw, validate=True)
    except ValueError:
        return raw


def _ssl_context(info: kopf.ConnectionInfo) -> ssl.SSLContext | bool:
    """TLS for the API server; in-memory credentials never outlive their loading."""
    if not info.server.startswith("https"):
        return False
    if info.insecure:
        return False
    if info.ca_data:
        context = ssl.create_default_context(cadata=_decoded(info.ca_data).decode())
    else:
        context = ssl.create_default_context(cafile=info.ca_path or None)
    if info.certificate_data or info.certificate_path:
        # load_cert_chain reads files only: in-memory data goes through a private
        # directory that is removed as soon as the context holds the key
        with tempfile.TemporaryDirectory(prefix="dataflow-operator-") as directory:
            cert, key = info.certificate_path, info.private_key_path
            if info.certificate_data:
                cert = str(Path(directory) / "client.crt")
                Path(cert).write_bytes(_decoded(info.certificate_data))
            if info.private_key_data:
                key = str(Path(directory) / "client.key")
                Path(key).write_bytes(_decoded(info.private_key_data))
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
