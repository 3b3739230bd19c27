"""The control API's token: 401 without it, either header accepted, probes stay open."""

from __future__ import annotations

import http.client
import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from tests.runtime.fake_replica import FakeReplica

from dataflow_operator.runtime.serve import ControlServer, read_token

TOKEN = "s3cr3t-token"


@pytest.fixture
def server(tmp_path: Path) -> Iterator[ControlServer]:
    with ControlServer(FakeReplica(tmp_path), "127.0.0.1:0", token=TOKEN) as running:
        yield running


def get(server: ControlServer, path: str, headers: dict[str, str] | None = None) -> tuple[int, str]:
    connection = http.client.HTTPConnection("127.0.0.1", server.port, timeout=10)
    try:
        connection.request("GET", path, headers=headers or {})
        response = connection.getresponse()
        return response.status, response.read().decode()
    finally:
        connection.close()


@pytest.mark.parametrize("path", ["/status", "/dataflows/x/peek", "/dataflows/x/subscribe"])
@pytest.mark.parametrize(
    "headers",
    [
        {},
        {"Authorization": "Bearer wrong"},
        {"X-Dataflow-Token": "s3cr3t-token-but-longer"},
        {"Authorization": f"Basic {TOKEN}"},
    ],
)
def test_without_the_token_every_endpoint_but_the_probes_is_401(
    server: ControlServer, path: str, headers: dict[str, str]
) -> None:
    status, text = get(server, path, headers)
    assert status == 401
    body = json.loads(text)
    assert body["error"] == "Unauthorized" and "X-Dataflow-Token" in body["message"]


@pytest.mark.parametrize(
    "headers", [{"Authorization": f"Bearer {TOKEN}"}, {"X-Dataflow-Token": TOKEN}]
)
def test_either_header_with_the_token_is_accepted(
    server: ControlServer, headers: dict[str, str]
) -> None:
    assert get(server, "/status", headers)[0] == 200
    status, text = get(server, "/dataflows/x/peek", headers)
    assert status == 404 and json.loads(text)["error"] == "UnknownDataflow"


def test_probes_and_metrics_stay_open(server: ControlServer) -> None:
    assert get(server, "/healthz")[0] == 200
    assert get(server, "/readyz")[0] == 503  # not ready yet, but not 401
    status, text = get(server, "/metrics")
    assert status == 200 and "dataflow_replica" in text


def test_read_token(tmp_path: Path) -> None:
    (tmp_path / "token").write_text(f"  {TOKEN}\n")
    assert read_token(tmp_path / "token") == TOKEN
    (tmp_path / "empty").write_text("\n")
    with pytest.raises(ValueError, match="empty"):
        read_token(tmp_path / "empty")
