"""A dataflow changed on existing state would start over without retracting its old
output: refused in one line that says how to accept it (``--reset NAME``), and logged
when accepted."""

from __future__ import annotations

from pathlib import Path

import pytest
import structlog
from pyspark.sql import SparkSession
from tests.runtime.runs import (
    DAY,
    RunResult,
    T,
    dataflow_manifest,
    run_replica,
    table_source,
    write_manifests,
)

from dataflow_operator.api.injection import EXIT_FAILED, EXIT_OK
from dataflow_operator.runtime.inserts import insert_rows

pytestmark = pytest.mark.spark


def test_a_changed_dataflow_is_refused_until_reset_and_its_restart_is_logged(
    spark: SparkSession, tmp_path: Path
) -> None:
    items = tmp_path / "items"
    insert_rows(items, [{"a": 1}, {"a": 2}])
    state = tmp_path / "state"

    def run(sql: str, start: int, *extra: str) -> RunResult:
        source = table_source("items", items, "a INT")
        manifest = write_manifests(tmp_path / "df.yaml", [dataflow_manifest("feed", sql, [source])])
        argv = [str(manifest), "--clock", "simulated", "--tick", "1d", "--batches", "1"]
        argv += ["--state-dir", str(state), "--start-time", str(start), *extra]
        return run_replica(spark, tmp_path, argv)

    first = run("SELECT a FROM items", T)
    assert first.code == EXIT_OK, first.err
    assert sorted(first.lines) == [[str(T), "1", "1"], [str(T), "1", "2"]]
    spec_file = state / "dataflows" / "feed" / "spec.json"
    made_for = spec_file.read_text()

    with structlog.testing.capture_logs() as logs:
        refused = run("SELECT a * 10 AS a FROM items", T + DAY)
    assert refused.code == EXIT_FAILED
    assert refused.out == ""
    (line,) = refused.err.splitlines()
    assert line.startswith("dataflow feed: its output would start over (")
    assert line.endswith("accept that with --reset feed, or use another --state-dir")
    assert spec_file.read_text() == made_for  # its state is kept
    assert [e["dataflow"] for e in logs if e["event"].endswith("refused")] == ["feed"]

    with structlog.testing.capture_logs() as logs:
        reset = run("SELECT a * 10 AS a FROM items", T + DAY, "--reset", "feed")
    assert reset.code == EXIT_OK, reset.err
    assert sorted(reset.lines) == [
        [str(T + DAY), "1", "10"],
        [str(T + DAY), "1", "20"],
    ]
    started_over = [e for e in logs if e["event"].startswith("dataflow output starts over")]
    assert [(e["dataflow"], e["accepted"]) for e in started_over] == [("feed", "--reset")]
