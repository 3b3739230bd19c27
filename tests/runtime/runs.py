"""Helpers for runtime tests: manifests in a temporary directory, and ``run`` in-process."""

from __future__ import annotations

import argparse
import io
import json
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pyspark.sql import SparkSession

from dataflow_operator.api.dataflow import DataflowSpec
from dataflow_operator.core.time import parse_timestamp
from dataflow_operator.runtime.cli import run as run_command
from dataflow_operator.runtime.engine.config import EngineConfig
from dataflow_operator.runtime.engine.engine import Engine, dataflows_from
from dataflow_operator.runtime.engine.running import BatchOutput

DAY = 86_400_000
T = parse_timestamp("2026-01-01T00:00:00Z")

LAST_30_DAYS_SQL = (
    "SELECT event_ts, content FROM events WHERE mz_now() <= event_ts + INTERVAL '30 days'"
)


def dataflow_manifest(
    name: str,
    sql: str,
    sources: list[dict[str, Any]],
    kind: str = "Subscribe",
    **extra: Any,
) -> dict[str, Any]:
    """A Dataflow manifest as a dict."""
    spec: dict[str, Any] = {"cluster": "default", "kind": kind, "sources": sources, "sql": sql}
    spec.update(extra)
    return {
        "apiVersion": "dataflow.dev/v1alpha1",
        "kind": "Dataflow",
        "metadata": {"name": name},
        "spec": spec,
    }


def table_source(name: str, path: Path, schema: str) -> dict[str, Any]:
    """A ``table`` source entry."""
    return {"name": name, "table": {"path": str(path), "schema": schema}}


def write_manifests(path: Path, documents: list[dict[str, Any]]) -> Path:
    """Write documents as multi-document YAML (JSON is YAML)."""
    path.write_text("\n---\n".join(json.dumps(d) for d in documents), encoding="utf-8")
    return path


@dataclass
class RunResult:
    """What a ``run`` printed and returned."""

    code: int
    out: str
    err: str
    status: dict[str, Any]

    @property
    def lines(self) -> list[list[str]]:
        """The changelog lines, split on tabs."""
        return [line.split("\t") for line in self.out.splitlines() if line]

    def dataflow(self, name: str) -> dict[str, Any]:
        """One dataflow's entry of the status file."""
        return next(d for d in self.status["dataflows"] if d["name"] == name)


def run_replica(spark: SparkSession, tmp: Path, argv: list[str]) -> RunResult:
    """``dataflow-operator run ARGV`` against the shared session, with a status file."""
    parser = argparse.ArgumentParser()
    run_command.configure(parser)
    status_file = tmp / "status.json"
    args = parser.parse_args([*argv, "--status-file", str(status_file)])
    out, err = io.StringIO(), io.StringIO()
    code = run_command.execute(args, lambda: spark, out, err)
    status = json.loads(status_file.read_text()) if status_file.exists() else {}
    return RunResult(code, out.getvalue(), err.getvalue(), status)


Rows = Counter[tuple[Any, ...]]


def maintained_and_batch(
    spark: SparkSession, tmp: Path, sql: str, schema: str, rows: list[dict[str, Any]]
) -> tuple[Rows, Rows]:
    """``sql`` over a ``changelog`` source ``events`` (``schema``) of ``rows``, all inserted
    at one time: its output maintained by the engine in one step (which must keep it
    incremental) and Spark's batch answer over the same rows."""
    events = tmp / "events"
    events.mkdir()
    updates = [{**row, "time": 10, "diff": 1} for row in rows]
    (events / "0.json").write_text("".join(json.dumps(u) + "\n" for u in updates))
    source = {
        "name": "events",
        "changelog": {"path": str(events), "format": "json", "schema": schema},
        "timeline": {"external": "erp"},
    }
    spec = DataflowSpec.model_validate(
        {"cluster": "c", "kind": "Subscribe", "sources": [source], "sql": sql}
    )
    outputs: list[BatchOutput] = []
    engine = Engine(spark, EngineConfig(tmp / "state", T), on_output=outputs.append)
    try:
        assert not engine.apply(dataflows_from([("events", spec)])).failed
        engine.step(T)
        (report,) = engine.report().dataflows
        assert report.strategy_reason is None, report.strategy_reason
    finally:
        engine.close()
    got = Counter(row for o in outputs for _, diff, row in o.updates for _ in range(diff))
    spark.read.schema(schema).json(str(events)).createOrReplaceTempView("events")
    try:
        expected = Counter(tuple(r) for r in spark.sql(sql).collect())
    finally:
        spark.catalog.dropTempView("events")
    return got, expected
