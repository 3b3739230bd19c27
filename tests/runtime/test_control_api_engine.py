"""The control API round trip against the real engine in Spark local mode.

Install, change, drop, status (with plan node hydration), peek and metrics, over HTTP,
while the engine's clock loop runs in a thread as in a replica's driver.
"""

from __future__ import annotations

import http.client
import json
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import SparkSession

from dataflow_operator.api.protocol import InstallResult, PeekResult, ReplicaReport
from dataflow_operator.runtime.clock import TickPlan
from dataflow_operator.runtime.engine.config import EngineConfig
from dataflow_operator.runtime.engine.engine import Engine
from dataflow_operator.runtime.engine.loop import run_plan
from dataflow_operator.runtime.inserts import insert_rows
from dataflow_operator.runtime.serve import ControlServer

pytestmark = pytest.mark.spark


def call(server: ControlServer, method: str, path: str, body: Any = None) -> tuple[int, Any]:
    connection = http.client.HTTPConnection("127.0.0.1", server.port, timeout=120)
    try:
        data = None if body is None else json.dumps(body).encode()
        connection.request(method, path, body=data)
        response = connection.getresponse()
        text = response.read().decode()
        kind = response.getheader("Content-Type", "")
        return response.status, json.loads(text) if "json" in kind else text
    finally:
        connection.close()


def wait_for(what: str, check: Callable[[], Any], timeout: float = 120.0) -> Any:
    """Poll ``check`` until it returns something truthy."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = check()
        if value:
            return value
        time.sleep(0.2)
    raise AssertionError(f"timed out waiting for {what}")


@pytest.fixture
def replica(spark: SparkSession, tmp_path: Path) -> Iterator[tuple[ControlServer, Engine]]:
    start = int(time.time() * 1000)
    engine = Engine(spark, EngineConfig(state_dir=tmp_path / "state", start_time=start))
    stop = threading.Event()
    loop = threading.Thread(
        target=run_plan,
        args=(engine, TickPlan(start=start, tick=300, simulated=False)),
        kwargs={"stop": stop},
        daemon=True,
    )
    with ControlServer(engine, "127.0.0.1:0") as server:
        loop.start()
        try:
            yield server, engine
        finally:
            stop.set()
            loop.join(timeout=60)
            engine.close()


def dataflow(name: str, kind: str, sql: str, events: Path, generation: int = 1) -> dict[str, Any]:
    source = {"name": "events", "table": {"path": str(events), "schema": "content STRING, n INT"}}
    spec = {"cluster": "default", "kind": kind, "sources": [source], "sql": sql}
    return {"name": name, "generation": generation, "spec": spec}


@pytest.mark.slow
def test_round_trip_install_change_drop(
    replica: tuple[ControlServer, Engine], tmp_path: Path
) -> None:
    server, _ = replica
    events = tmp_path / "data" / "events"
    insert_rows(events, [{"content": "hello", "n": 1}, {"content": "world", "n": 2}])
    assert call(server, "GET", "/readyz")[0] == 200  # Spark is up: ready before any set

    index = dataflow("contents", "Index", "SELECT content, n FROM events", events)
    feed = dataflow("feed", "Subscribe", "SELECT content FROM events WHERE n > 1", events)
    status, body = call(server, "PUT", "/dataflows", {"version": "v1", "dataflows": [index, feed]})
    assert status == 200, body
    result = InstallResult.model_validate(body)
    assert sorted(result.installed) == ["contents", "feed"] and not result.failed
    assert call(server, "GET", "/readyz")[0] == 200

    def hydrated() -> ReplicaReport | None:
        report = ReplicaReport.model_validate(call(server, "GET", "/status")[1])
        flows = {d.name: d for d in report.dataflows}
        return report if all(f.hydrated for f in flows.values()) and len(flows) == 2 else None

    report = wait_for("both dataflows hydrated", hydrated)
    for flow in report.dataflows:
        assert flow.last_error is None
        assert flow.frontier
        assert not flow.as_of or flow.frontier[0] > flow.as_of[0]
        assert flow.hydration_time_ms is not None and flow.hydration_time_ms >= 0
        assert flow.nodes, f"{flow.name} reports its plan nodes"
        assert all(node.hydrated for node in flow.nodes)
        assert [node.id for node in flow.nodes] == list(range(1, len(flow.nodes) + 1))

    def peeked() -> PeekResult | None:
        status, body = call(server, "GET", "/dataflows/contents/peek")
        assert status == 200, body
        peek = PeekResult.model_validate(body)
        return peek if len(peek.rows) == 2 else None

    peek = wait_for("the index's contents", peeked)
    assert sorted(row[peek.columns.index("content")] for row in peek.rows) == ["hello", "world"]
    assert call(server, "GET", "/dataflows/feed/peek")[0] == 409

    status, text = call(server, "GET", "/metrics")
    assert status == 200
    assert 'dataflow_hydrated{dataflow="contents"} 1' in text
    assert 'dataflow_write_frontier_seconds{dataflow="feed"}' in text

    _change_one_drop_the_other(server, events)


def _change_one_drop_the_other(server: ControlServer, events: Path) -> None:
    changed = dataflow(
        "contents", "Index", "SELECT upper(content) AS content, n FROM events", events, 2
    )
    status, body = call(server, "PUT", "/dataflows", {"version": "v1", "dataflows": [changed]})
    assert status == 200, body
    result = InstallResult.model_validate(body)
    assert result.reinstalled == ["contents"] and result.dropped == ["feed"]

    def upper_cased() -> PeekResult | None:
        status, body = call(server, "GET", "/dataflows/contents/peek")
        if status != 200:
            return None
        peek = PeekResult.model_validate(body)
        values = sorted(row[peek.columns.index("content")] for row in peek.rows)
        return peek if values == ["HELLO", "WORLD"] else None

    wait_for("the changed index's contents", upper_cased)
    report = ReplicaReport.model_validate(call(server, "GET", "/status")[1])
    assert [(d.name, d.generation) for d in report.dataflows] == [("contents", 2)]
    assert call(server, "GET", "/dataflows/feed/peek")[0] == 404

    # applying the same set again changes nothing
    again = InstallResult.model_validate(
        call(server, "PUT", "/dataflows", {"version": "v1", "dataflows": [changed]})[1]
    )
    assert again.unchanged == ["contents"] and not (again.installed or again.reinstalled)
    # and a body of another version is refused, the replica unharmed
    status, body = call(server, "PUT", "/dataflows", {"version": "v0", "dataflows": []})
    assert status == 400 and body["error"] == "UnsupportedVersion"
    assert call(server, "GET", "/healthz")[0] == 200
