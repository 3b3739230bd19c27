"""The operator's Kubernetes API client: objects by path, on ``kubernetes_asyncio``.

kopf brings its own client for watching and for its bookkeeping; the operator's own
writes (driver pods and services, claims, Secrets, status patches) go through this one,
so that a daemon per Replica can act without threads. Credentials, TLS, token refresh
and exec plugins are the library's (``kubernetes_asyncio``): a service account in a pod,
else the kubeconfig (``KUBECONFIG``, else ``~/.kube/config``). What is left here is the
path-based surface the operator uses — create, get, list, merge-patch, delete — and one
error type.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
import urllib.request
from collections.abc import Mapping
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import kopf
from kubernetes_asyncio import client, config
from kubernetes_asyncio.client.exceptions import ApiException
from kubernetes_asyncio.config import kube_config

from dataflow_operator.api.meta import GROUP, VERSION

__all__ = ["MERGE_PATCH", "ApiError", "KubeApi"]

MERGE_PATCH = "application/merge-patch+json"
CONNECTIONS = 64
"""Parallel connections to the API server (the status writer's concurrency and more)."""
TIMEOUT_S = 10.0
_AS_JSON = {status: "object" for status in (200, 201, 202)}


class ApiError(Exception):
    """A non-2xx answer of the API server."""

    def __init__(self, status: int, reason: str, message: str) -> None:
        super().__init__(f"{status} {reason}: {message}")
        self.status = status
        self.reason = reason
        self.message = message

    @classmethod
    def of(cls, error: ApiException) -> ApiError:
        """The API server's own reason and message (its ``Status`` body) when it sent one."""
        try:
            payload = json.loads(error.body or "{}")
        except ValueError:
            payload = {}
        payload = payload if isinstance(payload, dict) else {}
        return cls(
            int(error.status or 0),
            str(payload.get("reason") or error.reason or ""),
            str(payload.get("message") or ""),
        )


class KubeApi:
    """Create, get, list, patch and delete objects by API path."""

    def __init__(self, api: client.ApiClient, key_directory: str | None = None) -> None:
        self._api = api
        self._key_directory = key_directory
        self.server = str(api.configuration.host or "").rstrip("/")

    @classmethod
    async def connect(cls) -> KubeApi:
        """Log in with a pod's service account, else with the kubeconfig.

        Client keys given as data in a kubeconfig are written by the library to files;
        they go to a private directory that :meth:`close` removes.
        """
        configuration = client.Configuration()
        key_directory: str | None = None
        try:
            config.load_incluster_config(client_configuration=configuration)  # type: ignore[no-untyped-call]
        except config.ConfigException:
            kubeconfig = os.environ.get("KUBECONFIG") or "~/.kube/config"
            if not any(Path(p).expanduser().is_file() for p in kubeconfig.split(os.pathsep)):
                raise kopf.PermanentError(
                    "no Kubernetes credentials: not in a pod (no service account) and no "
                    f"kubeconfig at {kubeconfig} (set KUBECONFIG)"
                ) from None
            key_directory = tempfile.mkdtemp(prefix="dataflow-operator-")
            try:
                await config.load_kube_config(
                    config_file=kubeconfig,
                    client_configuration=configuration,
                    temp_file_path=key_directory,
                )
            except Exception as error:  # the library fails on malformed files in many ways
                _forget_keys(key_directory)
                raise kopf.PermanentError(
                    f"the kubeconfig {kubeconfig} cannot be used: {error}"
                ) from error
        configuration.connection_pool_maxsize = CONNECTIONS
        configuration.proxy = configuration.proxy or _environment_proxy(configuration.host)
        api = client.ApiClient(configuration)
        # With trust_env, aiohttp looks up ~/.netrc and the proxy variables in a thread
        # on every request (a large share of the operator's time at scale:
        # bench/RESULTS.md). The proxy is resolved once above, and no API server
        # authenticates by netrc.
        api.rest_client.pool_manager._trust_env = False
        return cls(api, key_directory)

    async def close(self) -> None:
        """Close the HTTP session; remove the client keys the login wrote."""
        await self._api.close()
        if self._key_directory is not None:
            _forget_keys(self._key_directory)
            self._key_directory = None

    async def _request(
        self,
        method: str,
        path: str,
        *,
        body: Any = None,
        content_type: str = "application/json",
        params: Mapping[str, str] | None = None,
    ) -> Any:
        headers = {"Accept": "application/json"}
        if body is not None:
            headers["Content-Type"] = content_type
        try:
            return await self._api.call_api(
                path,
                method,
                query_params=list((params or {}).items()),
                header_params=headers,
                body=body,
                response_types_map=_AS_JSON,
                auth_settings=["BearerToken"],
                _return_http_data_only=True,
                _request_timeout=TIMEOUT_S,
            )
        except ApiException as error:
            raise ApiError.of(error) from None

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


def _environment_proxy(server: str | None) -> str | None:
    """The proxy that ``HTTPS_PROXY``/``HTTP_PROXY`` (and ``NO_PROXY``) choose for ``server``."""
    parts = urlsplit(server or "")
    if not parts.hostname or urllib.request.proxy_bypass(parts.hostname):
        return None
    return urllib.request.getproxies().get(parts.scheme)


def _forget_keys(directory: str) -> None:
    """Remove the key files; the library's cache of them must not point at removed ones."""
    shutil.rmtree(directory, ignore_errors=True)
    cache: dict[str, str] = kube_config._temp_files
    for content, path in list(cache.items()):
        if path.startswith(directory + os.sep):
            del cache[content]
