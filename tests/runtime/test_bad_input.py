"""Bad input: one line naming the dataflow and the problem; the others keep running."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from pyspark.sql import SparkSession
from tests.runtime.runs import T, dataflow_manifest, run_replica, table_source, write_manifests

from dataflow_operator.api.injection import EXIT_FAILED
from dataflow_operator.runtime.errors import quiet_repeated_error_logs
from dataflow_operator.runtime.inserts import insert_rows

pytestmark = pytest.mark.spark


@pytest.mark.slow
def test_each_bad_dataflow_gets_one_line_and_the_good_one_runs(
    spark: SparkSession, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    quiet_repeated_error_logs()  # what run and replica do at start
    events = tmp_path / "events"
    insert_rows(events, [{"n": 1}])
    orders = tmp_path / "orders"
    orders.mkdir()
    (orders / "a.json").write_text(json.dumps({"id": 1, "time": T, "diff": "lots"}) + "\n")
    good = table_source("events", events, "n BIGINT")
    changelog = {
        "name": "orders",
        "changelog": {"path": str(orders), "format": "json", "schema": "id BIGINT"},
        "timeline": {"external": "erp"},
    }
    documents = [
        dataflow_manifest("good", "SELECT n FROM events", [good]),
        dataflow_manifest("unknown-source", "SELECT n FROM nowhere", [good]),
        dataflow_manifest("no-parse", "SELEC n FROM events", [good]),
        dataflow_manifest(
            "missing-dir",
            "SELECT n FROM events",
            [table_source("events", tmp_path / "absent", "n BIGINT")],
        ),
        dataflow_manifest("bad-diff", "SELECT id FROM orders", [changelog]),
        {"apiVersion": "dataflow.dev/v1alpha1", "kind": "Gadget", "metadata": {"name": "g"}},
    ]
    manifest = write_manifests(tmp_path / "mixed.yaml", documents)
    argv = [str(manifest), "--start-time", str(T), "--clock", "simulated", "--tick", "1d"]
    argv += ["--batches", "2", "--state-dir", str(tmp_path / "state")]
    result = run_replica(spark, tmp_path, argv)

    assert result.code == EXIT_FAILED
    # the good dataflow ran; several Subscribes were given, so each line names its own
    assert result.lines == [["good", str(T), "1", "1"]]
    assert "Traceback" not in result.err
    # nor in the logs: the bad value's error reached the query from its foreachBatch, and
    # py4j's copy of it (a traceback logged before the query failed) is left out
    assert not [r.getMessage() for r in caplog.records if r.exc_info or r.name.startswith("py4j")]
    lines = result.err.splitlines()

    def line_for(prefix: str) -> str:
        found = [line for line in lines if line.startswith(prefix)]
        assert len(found) == 1, (prefix, lines)
        return found[0]

    assert "nowhere" in line_for("dataflow unknown-source: ")
    assert "does not parse" in line_for("dataflow no-parse: ")
    # a table whose directory does not exist yet is an empty table, not an error
    assert not [line for line in lines if line.startswith("dataflow missing-dir: ")], lines
    assert "diff" in line_for("dataflow bad-diff: ") and "lots" in line_for("dataflow bad-diff: ")
    assert "Gadget" in line_for(f"{manifest}: Gadget/g: kind: ")
    assert result.dataflow("good")["frontier"] == [T + 86_400_000 + 1]
    assert result.dataflow("bad-diff")["lastError"]
    assert not result.dataflow("missing-dir").get("lastError")
