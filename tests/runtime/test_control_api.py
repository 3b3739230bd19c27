"""The control API over HTTP, against a small in-test ReplicaService."""

from __future__ import annotations

import http.client
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from tests.runtime.fake_replica import FakeReplica

from dataflow_operator.api.protocol import (
    DEFAULT_CONTROL_PORT,
    ErrorBody,
    InstallResult,
    PeekResult,
    ReplicaReport,
)
from dataflow_operator.runtime.serve import ControlServer, parse_address


@pytest.fixture
def replica(tmp_path: Path) -> FakeReplica:
    return FakeReplica(tmp_path)


@pytest.fixture
def server(replica: FakeReplica) -> Iterator[ControlServer]:
    with ControlServer(replica, "127.0.0.1:0", clock=lambda: 2000) as running:
        yield running


def call(
    server: ControlServer,
    method: str,
    path: str,
    body: Any = None,
    raw: bytes | None = None,
    headers: dict[str, str] | None = None,
) -> tuple[int, str, Any]:
    connection = http.client.HTTPConnection("127.0.0.1", server.port, timeout=10)
    try:
        data = raw if raw is not None else (None if body is None else json.dumps(body).encode())
        connection.request(method, path, body=data, headers=headers or {})
        response = connection.getresponse()
        text = response.read().decode()
        kind = response.getheader("Content-Type", "")
        return response.status, kind, json.loads(text) if "json" in kind else text
    finally:
        connection.close()


def flow(name: str, kind: str = "Index", sql: str = "SELECT 1 AS x") -> dict[str, Any]:
    return {"name": name, "generation": 1, "spec": {"cluster": "c", "kind": kind, "sql": sql}}


def test_install_change_drop_status_peek_metrics(server: ControlServer) -> None:
    assert call(server, "GET", "/readyz")[0] == 503
    assert call(server, "GET", "/healthz")[0] == 200

    status, _, body = call(
        server,
        "PUT",
        "/dataflows",
        {"version": "v1", "dataflows": [flow("a"), flow("s", "Subscribe")]},
    )
    assert status == 200
    assert InstallResult.model_validate(body).installed == ["a", "s"]
    assert call(server, "GET", "/readyz")[0] == 200

    desired = {"version": "v1", "dataflows": [flow("a", sql="SELECT 2 AS x")]}
    result = InstallResult.model_validate(call(server, "PUT", "/dataflows", desired)[2])
    assert (result.reinstalled, result.dropped) == (["a"], ["s"])
    again = InstallResult.model_validate(call(server, "PUT", "/dataflows", desired)[2])
    assert (again.unchanged, again.installed, again.reinstalled) == (["a"], [], [])

    status, kind, body = call(server, "GET", "/status")
    assert status == 200 and kind.startswith("application/json")
    report = ReplicaReport.model_validate(body)
    assert [d.name for d in report.dataflows] == ["a"]
    assert body["dataflows"][0]["stateRows"] == 3  # camelCase on the wire

    status, _, body = call(server, "GET", "/dataflows/a/peek")
    assert status == 200 and PeekResult.model_validate(body).rows == [[1, 1]]

    status, kind, text = call(server, "GET", "/metrics")
    assert status == 200 and kind.startswith("text/plain; version=0.0.4")
    assert 'dataflow_state_rows{dataflow="a"} 3' in text
    assert "dataflow_replica_expiration_remaining_seconds 3" in text


@pytest.mark.parametrize(
    ("body", "reason"),
    [
        ({"dataflows": []}, "UnsupportedVersion"),
        ({"version": "v2", "dataflows": []}, "UnsupportedVersion"),
        ([1, 2], "InvalidBody"),
        ({"version": "v1", "dataflows": [{"name": "x"}]}, "InvalidBody"),
        ({"version": "v1", "dataflows": [], "extra": 1}, "InvalidBody"),
    ],
)
def test_bad_bodies_get_a_clear_400(server: ControlServer, body: Any, reason: str) -> None:
    status, kind, answer = call(server, "PUT", "/dataflows", body)
    assert status == 400 and kind.startswith("application/json")
    error = ErrorBody.model_validate(answer)
    assert error.error == reason and error.message
    if reason == "UnsupportedVersion":
        assert "v1" in error.message


def test_release_frontiers_reach_the_replica_and_bad_ones_name_the_field(
    server: ControlServer, replica: FakeReplica
) -> None:
    body = {"version": "v1", "sources": [{"dataflow": "a", "source": "s", "listed": 1000}]}
    status, _, echoed = call(server, "PUT", "/release", body)
    assert (status, echoed) == (200, body)
    assert replica.released.sources[0].listed == 1000
    bad = {"version": "v1", "sources": [{"dataflow": "a", "source": "s", "listed": -1}]}
    status, _, answer = call(server, "PUT", "/release", bad)
    error = ErrorBody.model_validate(answer)
    assert (status, error.error) == (400, "InvalidBody")
    assert error.message.startswith("sources[0].listed: ")


def test_malformed_json_unknown_names_and_paths(
    server: ControlServer, replica: FakeReplica
) -> None:
    status, _, body = call(server, "PUT", "/dataflows", raw=b"{not json")
    assert status == 400 and body["error"] == "MalformedJson"
    status, _, body = call(server, "GET", "/dataflows/nope/peek")
    assert status == 404 and body["error"] == "UnknownDataflow" and "nope" in body["message"]
    call(server, "PUT", "/dataflows", {"version": "v1", "dataflows": [flow("s", "Subscribe")]})
    status, _, body = call(server, "GET", "/dataflows/s/peek")
    assert status == 409 and body["error"] == "NotAnIndex"
    assert call(server, "GET", "/nowhere")[0] == 404
    assert call(server, "POST", "/status")[0] == 405
    status, _, body = call(server, "GET", "/status?version=v0")
    assert status == 400 and body["error"] == "UnsupportedVersion"
    status, _, body = call(server, "GET", "/status", headers={"X-Dataflow-Protocol-Version": "v9"})
    assert status == 400
    # the server is still up after all of that
    assert call(server, "GET", "/status")[0] == 200


def test_service_failures_are_500_with_a_body(server: ControlServer, replica: FakeReplica) -> None:
    def broken() -> ReplicaReport:
        raise RuntimeError("engine fell over")

    replica.report = broken  # type: ignore[method-assign]
    status, _, body = call(server, "GET", "/status")
    assert status == 500 and "engine fell over" in body["message"]
    assert call(server, "GET", "/healthz")[0] == 200


def test_stop_releases_the_port(replica: FakeReplica) -> None:
    server = ControlServer(replica, "127.0.0.1:0").start()
    port = server.port
    server.stop()
    with ControlServer(replica, f"127.0.0.1:{port}") as again:
        assert again.port == port
        assert call(again, "GET", "/healthz")[0] == 200


def test_parse_address() -> None:
    assert parse_address(None) == ("0.0.0.0", DEFAULT_CONTROL_PORT)
    assert parse_address(":9000") == ("0.0.0.0", 9000)
    assert parse_address("127.0.0.1:0") == ("127.0.0.1", 0)
    assert parse_address("9001") == ("0.0.0.0", 9001)
    assert parse_address("localhost") == ("localhost", DEFAULT_CONTROL_PORT)
    assert parse_address("[::1]:7000") == ("::1", 7000)
    with pytest.raises(ValueError, match="not a port"):
        parse_address("host:http")
