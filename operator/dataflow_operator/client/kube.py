"""Reaching a replica through the Kubernetes API server, with the user's kubeconfig.

No port-forward: the request goes to the API server's service proxy,
``/api/v1/namespaces/{ns}/services/{driver-service}:control/proxy/dataflows/…``, which
forwards it to the replica's driver Service
(:func:`~dataflow_operator.api.naming.driver_service_name`).
Which replica: ``--replica``, else the first one the Dataflow's status reports hydrated.
The token: ``--token-file``, else the Replica's Secret ``<replica>-control-token`` (key
``token``); a Replica without that Secret is asked without a token. The user needs
``get`` on the Dataflow and that Secret, and ``get`` on ``services/proxy``.
"""

from __future__ import annotations

import argparse
import base64
import binascii
import json
from typing import Any
from urllib.parse import quote

import urllib3
from pydantic import ValidationError

from dataflow_operator.api.dataflow import Dataflow
from dataflow_operator.api.meta import GROUP, VERSION
from dataflow_operator.api.naming import (
    CONTROL_PORT_NAME,
    CONTROL_TOKEN_KEY,
    control_token_secret_name,
    driver_service_name,
)
from dataflow_operator.api.protocol import DEFAULT_CONTROL_PORT
from dataflow_operator.client.control_http import ClientError, auth_headers, check

__all__ = ["open_via_service_proxy", "pick_replica", "proxy_path"]


def proxy_path(namespace: str, replica: str, path: str) -> str:
    """The API server path that proxies ``path`` to the replica's control port."""
    service = driver_service_name(replica)
    return (
        f"/api/v1/namespaces/{quote(namespace, safe='')}/services/"
        f"{service}:{CONTROL_PORT_NAME}/proxy/{path}"
    )


def pick_replica(dataflow: Dataflow) -> str:
    """The first replica that reports the dataflow hydrated. Raises :class:`ClientError`."""
    status = dataflow.status
    for replica in status.replicas if status is not None else []:
        if replica.hydrated:
            return replica.replica
    name = f"{dataflow.metadata.namespace or ''}/{dataflow.metadata.name}".lstrip("/")
    raise ClientError(f"no replica reports Dataflow {name} hydrated yet; name one with --replica")


def _first_line(error: BaseException) -> str:
    return next((line.strip() for line in str(error).splitlines() if line.strip()), "")


class _Kube:
    """The user's API client and the requests made with it."""

    def __init__(self) -> None:
        from kubernetes import config
        from kubernetes.config.config_exception import ConfigException

        try:
            self.api = config.new_client_from_config()  # type: ignore[no-untyped-call]
            _, current = config.list_kube_config_contexts()  # type: ignore[no-untyped-call]
        except (ConfigException, OSError, TypeError, ValueError) as error:
            raise ClientError(
                f"loading the kubeconfig: {_first_line(error)}; without Kubernetes, reach the "
                f"replica's control API directly with --address HOST:PORT (a local "
                f"`dataflow-operator replica` listens on 127.0.0.1:{DEFAULT_CONTROL_PORT})"
            ) from None
        self.host = str(self.api.configuration.host)
        self.namespace = str((current or {}).get("context", {}).get("namespace") or "default")

    def get(
        self, path: str, query: dict[str, str] | None = None, headers: dict[str, str] | None = None
    ) -> urllib3.BaseHTTPResponse:
        method, url, header_params, _, _ = self.api.param_serialize(
            "GET",
            path,
            query_params=list((query or {}).items()),
            header_params=dict(headers or {}),
            auth_settings=["BearerToken"],
        )
        try:
            response = self.api.call_api(method, url, header_params=header_params)
        except urllib3.exceptions.HTTPError as error:
            reason = getattr(error, "reason", None) or error
            raise ClientError(
                f"cannot reach the Kubernetes API server at {self.host}: {reason}"
            ) from None
        raw: urllib3.BaseHTTPResponse = response.response
        return raw

    def get_json(self, path: str, what: str) -> dict[str, Any] | None:
        """The object at ``path``; ``None`` when it does not exist."""
        response = self.get(path)
        if response.status == 404:
            return None
        check(response, f"reading {what}: the Kubernetes API server")
        document = json.loads(response.data)
        if not isinstance(document, dict):
            raise ClientError(f"reading {what}: the API server answered no object")
        return document


def _dataflow(kube: _Kube, namespace: str, name: str) -> Dataflow:
    what = f"Dataflow {namespace}/{name}"
    path = f"/apis/{GROUP}/{VERSION}/namespaces/{quote(namespace, safe='')}/dataflows/" + quote(
        name, safe=""
    )
    document = kube.get_json(path, what)
    if document is None:
        raise ClientError(f"{what} not found")
    try:
        return Dataflow.model_validate(document)
    except ValidationError as error:
        raise ClientError(f"{what} does not parse: {error.errors()[0]['msg']}") from None


def _secret_token(kube: _Kube, namespace: str, replica: str) -> str | None:
    secret = control_token_secret_name(replica)
    what = f"Secret {namespace}/{secret}"
    document = kube.get_json(
        f"/api/v1/namespaces/{quote(namespace, safe='')}/secrets/{quote(secret, safe='')}", what
    )
    if document is None:
        return None
    encoded = (document.get("data") or {}).get(CONTROL_TOKEN_KEY)
    if not encoded:
        raise ClientError(f"{what} has no key {CONTROL_TOKEN_KEY!r}")
    try:
        return base64.b64decode(encoded, validate=True).decode().strip()
    except (binascii.Error, UnicodeDecodeError):
        raise ClientError(f"{what}: key {CONTROL_TOKEN_KEY!r} is not base64 text") from None


def open_via_service_proxy(
    args: argparse.Namespace, path: str, query: dict[str, str], token: str | None
) -> tuple[urllib3.BaseHTTPResponse, str]:
    """GET ``path`` on the replica through the service proxy; the response (unchecked)
    and a description of where it went, for error messages."""
    kube = _Kube()
    namespace = args.namespace or kube.namespace
    replica = args.replica or pick_replica(_dataflow(kube, namespace, args.name))
    args.replica = replica  # a command that reconnects reaches the same replica again
    if token is None:
        token = _secret_token(kube, namespace, replica)
    where = f"Replica {namespace}/{replica} (through the API server's service proxy)"
    response = kube.get(
        proxy_path(namespace, replica, path), query, auth_headers(token, bearer=False)
    )
    return response, where
