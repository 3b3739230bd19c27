"""The subscribe stream on the real engine (Spark local mode): what ``run`` prints for a
Subscribe is what ``GET /dataflows/{name}/subscribe`` streams."""

from __future__ import annotations

import http.client
import json
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from dataflow_operator.api.protocol import DesiredDataflows
from dataflow_operator.runtime.engine.config import EngineConfig
from dataflow_operator.runtime.engine.engine import Engine
from dataflow_operator.runtime.engine.running import BatchOutput
from dataflow_operator.runtime.inserts import insert_rows
from dataflow_operator.runtime.serve import ControlServer
from dataflow_operator.runtime.service import NotReady
from dataflow_operator.runtime.values import format_update

pytestmark = [pytest.mark.spark, pytest.mark.timeout(300)]

START = 1_767_225_600_000  # 2026-01-01T00:00:00Z


def test_the_stream_shows_the_insert_as_run_prints_it(spark: SparkSession, tmp_path: Path) -> None:
    printed: list[str] = []

    def on_output(output: BatchOutput) -> None:  # what `run` prints
        printed.extend(format_update(t, d, v) for t, d, v in output.updates)

    engine = Engine(spark, EngineConfig(state_dir=tmp_path / "state", start_time=START), on_output)
    events = tmp_path / "events"
    insert_rows(events, [{"content": "before", "n": 1}])
    source = {"name": "events", "table": {"path": str(events), "schema": "content STRING, n INT"}}
    sql = "SELECT content, n * 10 AS tens FROM events WHERE n > 0"
    spec = {"cluster": "default", "kind": "Subscribe", "sources": [source], "sql": sql}
    result = engine.apply(
        DesiredDataflows.model_validate({"dataflows": [{"name": "feed", "spec": spec}]})
    )
    assert not result.failed, result.failed
    try:
        with ControlServer(engine, "127.0.0.1:0") as server:
            engine.step(START)  # the snapshot: 'before'
            connection = http.client.HTTPConnection("127.0.0.1", server.port, timeout=120)
            connection.request("GET", "/dataflows/feed/subscribe?progress=true")
            response = connection.getresponse()
            assert response.status == 200

            def line() -> str:
                return response.readline().decode().rstrip("\n")

            snapshot, progress = line(), line()
            complete = int(progress.split("\t")[1])
            assert snapshot == f"{complete}\t1\tbefore\t10"
            insert_rows(events, [{"content": "hello", "n": 2}])
            engine.step(START + 1000)
            inserted = line()
            assert inserted in printed  # exactly the line `run` prints for the insert
            time, diff, *values = inserted.split("\t")
            assert (diff, values) == ("1", ["hello", "20"]) and int(time) > complete
            after = line().split("\t")
            assert after[0] == "#progress" and int(after[1]) >= int(time)
            connection.close()
            # 404 like peek's for a dataflow that is not installed
            connection = http.client.HTTPConnection("127.0.0.1", server.port, timeout=30)
            connection.request("GET", "/dataflows/nope/subscribe")
            missing = connection.getresponse()
            assert (
                missing.status == 404 and json.loads(missing.read())["error"] == "UnknownDataflow"
            )
            connection.close()
    finally:
        engine.close()


def test_a_closed_engine_takes_no_dataflows(spark: SparkSession, tmp_path: Path) -> None:
    """A set sent while the replica stops is refused with a 503 (its Spark session is
    going), not installed on a stopped session."""
    engine = Engine(spark, EngineConfig(tmp_path / "state", 0))
    engine.close()
    with pytest.raises(NotReady, match="the replica is stopping"):
        engine.apply(DesiredDataflows(dataflows=[]))
