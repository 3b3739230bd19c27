"""GROUP BY count/sum/avg maintained in Spark state: over a changelog, and after a temporal filter."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import SparkSession
from tests.runtime.runs import DAY, T

from dataflow_operator.api.dataflow import DataflowSpec
from dataflow_operator.core.time import format_timestamp
from dataflow_operator.runtime.changelog_store import ChangelogStore
from dataflow_operator.runtime.engine.config import EngineConfig
from dataflow_operator.runtime.engine.engine import Engine, dataflows_from
from dataflow_operator.runtime.engine.running import BatchOutput
from dataflow_operator.runtime.inserts import insert_rows

pytestmark = pytest.mark.spark


def _changelog(path: Path, name: str, updates: list[dict[str, Any]]) -> None:
    path.mkdir(parents=True, exist_ok=True)
    (path / name).write_text("".join(json.dumps(u) + "\n" for u in updates))


@pytest.mark.slow
def test_sum_per_key_over_a_changelog_with_its_own_times(
    spark: SparkSession, tmp_path: Path
) -> None:
    orders = tmp_path / "orders"
    _changelog(
        orders,
        "a.json",
        [
            {"id": 1, "amount": 10.0, "time": 5, "diff": 1},
            {"id": 1, "amount": 5.0, "time": 7, "diff": 1},
            {"id": 2, "amount": 3.0, "time": 7, "diff": 1},
        ],
    )
    source = {
        "name": "orders",
        "changelog": {"path": str(orders), "format": "json", "schema": "id BIGINT, amount DOUBLE"},
        "timeline": {"external": "erp"},
    }
    sql = "SELECT id, sum(amount) AS total, count(*) AS n FROM orders GROUP BY id"
    sink = tmp_path / "archive"
    specs = [
        (
            name,
            DataflowSpec.model_validate(
                {"cluster": "c", "kind": kind, "sources": [source], "sql": sql, **extra}
            ),
        )
        for name, kind, extra in (
            ("totals", "Index", {}),
            ("feed", "Subscribe", {}),
            ("archive", "MaterializedView", {"sink": {"path": str(sink)}}),
        )
    ]
    outputs: list[BatchOutput] = []
    engine = Engine(spark, EngineConfig(tmp_path / "state", T), on_output=outputs.append)
    try:
        assert not engine.apply(dataflows_from(specs)).failed
        engine.step(T)
        _changelog(orders, "b.json", [{"id": 2, "amount": 3.0, "time": 9, "diff": -1}])
        engine.step(T + 1)
        updates = [u for o in outputs for u in o.updates]
        assert sorted(updates) == [
            (5, 1, (1, 10.0, 1)),
            (7, -1, (1, 10.0, 1)),
            (7, 1, (1, 15.0, 2)),
            (7, 1, (2, 3.0, 1)),
            (9, -1, (2, 3.0, 1)),
        ]
        assert [u[0] for u in updates] == sorted(u[0] for u in updates)  # in time order
        peek = engine.peek("totals")
        assert peek.columns == ["id", "total", "n"]
        assert peek.rows == [[1, 15.0, 2, 1]]
        archived = ChangelogStore(sink)  # a MaterializedView's changelog, upper beside it
        upper = archived.read_upper()
        assert upper is not None and upper.upper == 10
        assert archived.consolidated() == (["id", "total", "n"], [[1, 15.0, 2, 1]])
        report = {d.name: d for d in engine.report().dataflows}
        assert report["totals"].frontier == [10]
        assert report["totals"].expiration is None  # an external timeline never expires
    finally:
        engine.close()


@pytest.mark.slow
def test_count_per_key_of_the_last_thirty_days(spark: SparkSession, tmp_path: Path) -> None:
    events = tmp_path / "events"
    insert_rows(
        events,
        [
            {"content": "hello", "event_ts": format_timestamp(T)},
            {"content": "hello", "event_ts": format_timestamp(T - 10 * DAY)},
            {"content": "bye", "event_ts": format_timestamp(T)},
        ],
    )
    spec = DataflowSpec.model_validate(
        {
            "cluster": "c",
            "kind": "Subscribe",
            "sources": [
                {
                    "name": "events",
                    "table": {"path": str(events), "schema": "content STRING, event_ts TIMESTAMP"},
                }
            ],
            "sql": "SELECT content, count(*) AS n FROM events "
            "WHERE mz_now() <= event_ts + INTERVAL '30 days' GROUP BY content",
        }
    )
    outputs: list[BatchOutput] = []
    engine = Engine(spark, EngineConfig(tmp_path / "state", T), on_output=outputs.append)
    try:
        assert not engine.apply(dataflows_from([("counts", spec)])).failed
        for day in (0, 15, 25, 31):
            engine.step(T + day * DAY)
        updates = sorted(u for o in outputs for u in o.updates)
        first_gone = T + 20 * DAY + 1  # the older hello leaves the window
        last_gone = T + 30 * DAY + 1
        assert updates == sorted(
            [
                (T, 1, ("hello", 2)),
                (T, 1, ("bye", 1)),
                (first_gone, -1, ("hello", 2)),
                (first_gone, 1, ("hello", 1)),
                (last_gone, -1, ("hello", 1)),
                (last_gone, -1, ("bye", 1)),
            ]
        )
    finally:
        engine.close()
