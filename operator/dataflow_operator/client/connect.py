"""How a command reaches a replica's control API: its options, the request, the errors.

:func:`open_endpoint` sends ``GET /dataflows/{name}/{endpoint}`` either to ``--address``
directly or through the Kubernetes API server's service proxy (:mod:`.kube`), with the
control token in ``Authorization: Bearer`` and ``X-Dataflow-Token`` directly, and only in
``X-Dataflow-Token`` through the service proxy (there ``Authorization`` authenticates the
user to the API server, which does not pass it on). Every failure is a
:class:`~dataflow_operator.client.control_http.ClientError` whose message is the one
line the command prints.
"""

from __future__ import annotations

import argparse
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import quote, urlencode

import urllib3

from dataflow_operator.client.control_http import ClientError, auth_headers, check
from dataflow_operator.client.kube import open_via_service_proxy
from dataflow_operator.core.names import replica_name_problem, subdomain_problem
from dataflow_operator.core.time import parse_timestamp

__all__ = ["add_arguments", "iter_lines", "open_endpoint"]


def _timestamp(text: str) -> int:
    try:
        return parse_timestamp(text)
    except ValueError as error:
        raise argparse.ArgumentTypeError(str(error)) from None


def _name(text: str) -> str:
    """A Dataflow's name as the API server and the replica take it (DNS-1123 subdomain)."""
    problem = subdomain_problem(text)
    if problem is not None:
        raise argparse.ArgumentTypeError(problem)
    return text


def _replica(text: str) -> str:
    """A Replica's name (it names the driver Service reached)."""
    problem = replica_name_problem(text)
    if problem is not None:
        raise argparse.ArgumentTypeError(problem)
    return text


def add_arguments(parser: argparse.ArgumentParser, *, as_of: bool = False) -> None:
    """The options shared by ``subscribe`` and ``peek``."""
    parser.add_argument("name", metavar="NAME", type=_name, help="the Dataflow's name")
    parser.add_argument(
        "-n", "--namespace", help="the Dataflow's namespace (default: the kubeconfig context's)"
    )
    parser.add_argument(
        "--replica",
        type=_replica,
        help="the Replica to read from (default: the first that reports it hydrated)",
    )
    parser.add_argument(
        "--address",
        metavar="HOST:PORT",
        help="talk to this control API directly instead of through the Kubernetes API server",
    )
    parser.add_argument(
        "--token-file",
        type=Path,
        help="the control token (default: the Replica's Secret <replica>-control-token)",
    )
    if as_of:
        parser.add_argument(
            "--as-of",
            type=_timestamp,
            metavar="T",
            help="start at time T (epoch ms or RFC 3339; default: the latest complete time)",
        )


def _read_token(path: Path) -> str:
    try:
        token = path.read_text(encoding="utf-8").strip()
    except OSError as error:
        raise ClientError(f"reading the token file {path}: {error.strerror or error}") from None
    if not token:
        raise ClientError(f"the token file {path} is empty")
    return token


TIMEOUT = urllib3.Timeout(connect=10.0, read=None)
"""Connecting gives up after 10 s; reading never does: a subscribe stream is quiet until
the dataflow's first batch completes, and then as long as nothing changes."""


def open_endpoint(
    args: argparse.Namespace, endpoint: str, query: dict[str, str]
) -> urllib3.BaseHTTPResponse:
    """``GET /dataflows/{args.name}/{endpoint}?query`` on the replica; a 2xx response, its
    body not read yet. Raises :class:`ClientError`."""
    token = _read_token(args.token_file) if args.token_file is not None else None
    path = f"dataflows/{quote(args.name, safe='')}/{endpoint}"
    if args.address:
        where = f"the control API at {args.address}"
        url = f"http://{args.address}/{path}" + (f"?{urlencode(query)}" if query else "")
        try:
            response = urllib3.request(
                "GET",
                url,
                headers=auth_headers(token),
                preload_content=False,
                retries=False,
                timeout=TIMEOUT,
            )
        except urllib3.exceptions.HTTPError as error:
            raise ClientError(f"cannot reach {where}: {_reason(error)}") from None
    else:
        response, where = open_via_service_proxy(args, path, query, token)
    check(response, where)
    return response


def _reason(error: Exception) -> str:
    reason = getattr(error, "reason", None)
    return str(reason or error)


def iter_lines(response: urllib3.BaseHTTPResponse) -> Iterator[str]:
    """The body's lines as they arrive (without their newline)."""
    chunks = (
        response.read_chunked(decode_content=True)
        if getattr(response, "chunked", False)
        else response.stream(1 << 14, decode_content=True)
    )
    pending = b""
    for chunk in chunks:
        pending += chunk
        *lines, pending = pending.split(b"\n")
        for line in lines:
            yield line.decode()
    if pending:
        yield pending.decode()
