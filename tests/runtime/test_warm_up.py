"""A replica warms Spark up with a dataflow of its own, in its state location, and leaves
nothing behind; a warm-up that fails is a warning, never a failed start."""

from __future__ import annotations

import re
import time
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from dataflow_operator.runtime.engine.warm_up import WARM_UP, warm_up
from dataflow_operator.runtime.storage import Location

pytestmark = pytest.mark.spark


@pytest.mark.slow
def test_the_warm_up_runs_a_dataflow_and_removes_its_folder(
    spark: SparkSession, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / WARM_UP / "dataflows" / "left-by-a-killed-replica").mkdir(parents=True)
    seconds = warm_up(spark, Location.of(tmp_path), int(time.time() * 1000))
    log = capsys.readouterr().out
    assert seconds is not None and seconds > 0, log
    # it hydrated its dataflow (one complete step), then removed everything it wrote
    assert re.search(r"dataflow hydrated\s+dataflow=warm-up", log), log
    assert list(tmp_path.iterdir()) == []
    assert "[warning" not in log and "[error" not in log, log


def test_a_warm_up_that_fails_is_a_warning(
    spark: SparkSession, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    state = tmp_path / "state"
    state.write_text("a file where the state folder should be")
    assert warm_up(spark, Location.of(state), int(time.time() * 1000)) is None
    log = capsys.readouterr().out
    assert re.search(r"\[warning\s*\] warm-up failed; the replica starts cold\s+error=", log), log
    assert state.read_text() == "a file where the state folder should be"
