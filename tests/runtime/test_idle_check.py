"""The idle check looks only at a dataflow with no batch in flight (``engine/quiet.py``).

A changelog's new file starts a Spark batch between steps; were the check to read that
batch's offsets before its sink wrote its updates, the frontier would move past them. No
Spark: the checkpoint's offset and commit logs are written here as Spark writes them.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from dataflow_operator.runtime.engine.quiet import RUN, IdleCheck, Step
from dataflow_operator.runtime.sources.options import SourceOptions
from dataflow_operator.runtime.storage import Location

NOW = 1_000_000


def _table(tmp_path: Path) -> SourceOptions:
    data, logs = tmp_path / "data", tmp_path / "logs"
    data.mkdir()
    logs.mkdir()
    return SourceOptions({"kind": "table", "path": str(data), "log_dir": str(logs)})


def _planned(checkpoint: Path, batch: int, upper: int) -> None:
    """Spark planned ``batch``: its offsets, one table source read up to ``upper``."""
    offset = {"upper": upper, "seq": 0, "source": 0}
    (checkpoint / "offsets").mkdir(parents=True, exist_ok=True)
    lines = ["v1", json.dumps({"batchWatermarkMs": 0}), json.dumps(offset)]
    (checkpoint / "offsets" / str(batch)).write_text("\n".join(lines))


def _committed(checkpoint: Path, batch: int) -> None:
    (checkpoint / "commits").mkdir(parents=True, exist_ok=True)
    (checkpoint / "commits" / str(batch)).write_text('v1\n{"nextBatchWatermarkMs":0}')


def _check(idle: IdleCheck, batch: int) -> Step:
    spark: Any = None  # a stateless dataflow's check reads no state
    return idle.check(spark, NOW, upper=500, batch=batch, stateful=False, holding=False)


def test_a_batch_in_flight_is_waited_for_not_skipped(tmp_path: Path) -> None:
    checkpoint = tmp_path / "checkpoint"
    idle = IdleCheck("d", Location.of(str(checkpoint)), [_table(tmp_path)])
    _planned(checkpoint, 0, 500)
    _committed(checkpoint, 0)
    assert _check(idle, batch=0) == Step(upper=NOW + 1)  # nothing new: the clock's time
    _planned(checkpoint, 1, 600)  # a batch started, its sink has not written yet
    assert _check(idle, batch=0) == RUN
    # its sink wrote it, Spark has not committed it yet (its state may not be readable)
    assert _check(idle, batch=1) == RUN
    _committed(checkpoint, 1)
    assert _check(idle, batch=1) == Step(upper=NOW + 1)


def test_a_dataflow_without_a_batch_runs_one(tmp_path: Path) -> None:
    checkpoint = tmp_path / "checkpoint"
    idle = IdleCheck("d", Location.of(str(checkpoint)), [_table(tmp_path)])
    assert _check(idle, batch=0) == RUN
