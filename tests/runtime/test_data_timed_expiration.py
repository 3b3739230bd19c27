"""A source with its own times never moves a dataflow past its expiration: the replica
restarts instead, and the restarted one reads what was held back."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import structlog
from pyspark.sql import SparkSession
from tests.runtime.runs import DAY, T, dataflow_manifest, run_replica, write_manifests

from dataflow_operator.api.injection import EXIT_EXPIRED, EXIT_OK

pytestmark = pytest.mark.spark


def _changelog_file(path: Path, name: str, time: int, value: str) -> None:
    path.mkdir(parents=True, exist_ok=True)
    (path / name).write_text(json.dumps({"v": value, "time": time, "diff": 1}) + "\n")


def test_updates_past_the_expiration_restart_the_replica_and_are_read_after(
    spark: SparkSession, tmp_path: Path
) -> None:
    readings = tmp_path / "readings"
    _changelog_file(readings, "a.json", T + DAY, "early")
    _changelog_file(readings, "b.json", T + 20 * DAY, "far")  # past the 10-day expiration
    source = {
        "name": "readings",
        "changelog": {"path": str(readings), "format": "json", "schema": "v STRING"},
    }
    manifest = write_manifests(
        tmp_path / "df.yaml", [dataflow_manifest("feed", "SELECT v FROM readings", [source])]
    )
    common = [str(manifest), "--clock", "simulated", "--tick", "1d"]
    common += ["--state-dir", str(tmp_path / "state"), "--expiration-offset", "10d"]

    with structlog.testing.capture_logs() as logs:
        first = run_replica(spark, tmp_path, [*common, "--start-time", str(T)])
    assert first.code == EXIT_EXPIRED, first.err
    assert first.lines == [[str(T + DAY), "1", "early"]]  # nothing of the later file
    assert first.err.startswith("replica expired. now: ")  # as at a wall-clock expiration
    held = [e for e in logs if e["event"].startswith("input at or past the expiration")]
    assert [(e["source"], e["file"]) for e in held] == [("readings", "b.json")]
    frontier = first.dataflow("feed")["frontier"]
    assert frontier and frontier[0] <= T + 10 * DAY  # never past the expiration

    second = run_replica(
        spark, tmp_path, [*common, "--start-time", str(T + DAY), "--until", str(T + 3 * DAY)]
    )
    assert second.code == EXIT_OK, second.err
    assert second.lines == [[str(T + 20 * DAY), "1", "far"]]  # read once, "early" not again
