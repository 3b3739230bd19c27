"""A changelog source's frontier moves with its data, its producer's ``_upper.json`` and
its allowed lateness; output held back by a stateful operator comes out without new input;
a run that ends with a dataflow's output incomplete says so (docs/frontiers.md)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import SparkSession
from tests.runtime.runs import DAY, T, dataflow_manifest, run_replica, write_manifests

from dataflow_operator.api.injection import EXIT_OK
from dataflow_operator.api.protocol import DesiredDataflows
from dataflow_operator.core.time import format_timestamp
from dataflow_operator.runtime.changelog_store import ChangelogStore
from dataflow_operator.runtime.engine.config import EngineConfig
from dataflow_operator.runtime.engine.engine import Engine
from dataflow_operator.runtime.engine.running import BatchOutput

pytestmark = [pytest.mark.spark, pytest.mark.timeout(300)]

WINDOW_SQL = "SELECT v FROM readings WHERE mz_now() <= ts + INTERVAL '1 day'"


def _reading(path: Path, name: str, time: int, value: str) -> None:
    """A changelog file with one +1 at ``time`` whose ``ts`` is ``time`` too."""
    path.mkdir(parents=True, exist_ok=True)
    row = {"v": value, "ts": format_timestamp(time), "time": time, "diff": 1}
    (path / name).write_text(json.dumps(row) + "\n")


def _source(path: Path, **extra: Any) -> dict[str, Any]:
    settings = {"path": str(path), "format": "json", "schema": "v STRING, ts TIMESTAMP"}
    return {"name": "readings", "changelog": {**settings, **extra}}


def _run(spark: SparkSession, tmp_path: Path, source: dict[str, Any], until: int) -> Any:
    manifest = write_manifests(
        tmp_path / "df.yaml", [dataflow_manifest("feed", WINDOW_SQL, [source])]
    )
    argv = [str(manifest), "--clock", "simulated", "--tick", "1d", "--start-time", str(T)]
    argv += ["--until", str(until), "--state-dir", str(tmp_path / "state")]
    return run_replica(spark, tmp_path, argv)


@pytest.mark.slow
def test_the_producers_upper_completes_a_changelog_source_without_new_files(
    spark: SparkSession, tmp_path: Path
) -> None:
    readings = tmp_path / "readings"
    _reading(readings, "a.json", T + DAY, "x")
    ChangelogStore(readings).write_upper(0, T + 3 * DAY)  # as a MaterializedView's sink
    result = _run(spark, tmp_path, _source(readings), T + 3 * DAY)
    assert result.code == EXIT_OK, result.err
    assert result.lines == [[str(T + DAY), "1", "x"], [str(T + 2 * DAY + 1), "-1", "x"]]
    assert result.dataflow("feed")["frontier"] == [T + 3 * DAY]
    assert "incomplete" not in result.err


@pytest.mark.slow
def test_lateness_completes_a_changelog_source_behind_the_clock(
    spark: SparkSession, tmp_path: Path
) -> None:
    readings = tmp_path / "readings"
    _reading(readings, "a.json", T + DAY, "x")
    result = _run(spark, tmp_path, _source(readings, lateness="1h"), T + 4 * DAY)
    assert result.code == EXIT_OK, result.err
    assert result.lines == [[str(T + DAY), "1", "x"], [str(T + 2 * DAY + 1), "-1", "x"]]
    frontier = result.dataflow("feed")["frontier"]
    assert frontier == [T + 4 * DAY - 3_600_000]  # the last step's time + 1 - 1h


def test_a_run_that_ends_incomplete_says_which_dataflow_and_how_far(
    spark: SparkSession, tmp_path: Path
) -> None:
    readings = tmp_path / "readings"
    _reading(readings, "a.json", T + DAY, "x")
    result = _run(spark, tmp_path, _source(readings), T + 4 * DAY)
    assert result.code == EXIT_OK, result.err
    assert result.lines == [[str(T + DAY), "1", "x"]]  # its source said nothing newer
    incomplete = [line for line in result.err.splitlines() if "incomplete" in line]
    assert len(incomplete) == 1, result.err
    assert incomplete[0].startswith("dataflow feed: output incomplete")
    assert format_timestamp(T + DAY + 1) in incomplete[0]  # how far it got
    assert format_timestamp(T + 4 * DAY) in incomplete[0]  # where the run ended


def test_held_output_comes_out_on_the_wall_clock_without_new_input(
    spark: SparkSession, tmp_path: Path
) -> None:
    outputs: list[BatchOutput] = []
    engine = Engine(spark, EngineConfig(state_dir=tmp_path / "state", start_time=T), outputs.append)
    readings = tmp_path / "readings"
    _reading(readings, "a.json", T, "a")
    spec = {
        "cluster": "default",
        "kind": "Subscribe",
        "sources": [_source(readings)],
        "sql": WINDOW_SQL,
    }
    engine.apply(DesiredDataflows.model_validate({"dataflows": [{"name": "s", "spec": spec}]}))

    def updates() -> list[tuple[int, int, tuple[object, ...]]]:
        (report,) = engine.report().dataflows
        assert report.last_error is None, report.last_error
        return [u for output in outputs for u in output.updates]

    try:
        engine.step(T, complete=False)  # the first step is complete
        assert updates() == [(T, 1, ("a",))]
        _reading(readings, "b.json", T + 1000, "b")
        engine.step(T + 2000, complete=False)  # reads b; its +1 waits for the watermark
        engine.step(T + 3000, complete=False)  # no new file: the held +1 still comes out
        assert updates() == [(T, 1, ("a",)), (T + 1000, 1, ("b",))]
        assert engine.report().dataflows[0].frontier == [T + 1001]
    finally:
        engine.close()
