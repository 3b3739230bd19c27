"""Dropping a busy dataflow beside a running sibling (shared by tests and bench/shutdown.py).

The engine steps in a thread of its own; a sibling temporal-filter dataflow (``a-sibling``,
first in step order) advances one day per step; the heavy dataflow (``heavy``) is one of:
``cross`` (a triple cross join), ``nested-loop`` (two theta left joins over one input's
distinct rows: Spark runs them as broadcast nested-loop joins streaming an aggregate's
output, and no loop of theirs checks for a cancel, so only a fuse stops the task),
``snapshot`` (a large table snapshot) or ``recursion`` (a
divergent ``WITH RECURSIVE`` with the recursion limits at -1).
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pyspark.sql import SparkSession

from dataflow_operator.api.dataflow import DataflowSpec
from dataflow_operator.api.protocol import ReplicaReport
from dataflow_operator.core.time import format_timestamp, parse_timestamp
from dataflow_operator.runtime.engine.config import EngineConfig
from dataflow_operator.runtime.engine.engine import Engine, dataflows_from
from dataflow_operator.runtime.engine.running import RunningDataflow
from dataflow_operator.runtime.inserts import insert_rows
from dataflow_operator.runtime.token import active_tasks

T = parse_timestamp("2026-01-01T00:00:00Z")
DAY = 86_400_000
SIBLING, HEAVY = "a-sibling", "heavy"
RECURSION_LIMITS = ("spark.sql.cteRecursionLevelLimit", "spark.sql.cteRecursionRowLimit")
SQL = {
    "cross": "SELECT count(*) AS n FROM a, b, c",
    "nested-loop": (
        "SELECT count(*) AS n FROM (SELECT DISTINCT x FROM a) AS d "
        "LEFT JOIN b ON d.x <> b.x LEFT JOIN c ON b.x <> c.x"
    ),
    "snapshot": "SELECT x FROM big",
    "recursion": (
        "WITH RECURSIVE r(n) AS (SELECT x FROM a UNION ALL SELECT n + 1 FROM r) "
        "SELECT max(n) AS m FROM r"
    ),
}


def _changelog(path: Path, rows: int) -> dict[str, Any]:
    path.mkdir(parents=True, exist_ok=True)
    lines = "".join(json.dumps({"x": i, "time": 1, "diff": 1}) + "\n" for i in range(rows))
    (path / "part-0.json").write_text(lines, encoding="utf-8")
    return {
        "name": path.name,
        "changelog": {"path": str(path), "format": "json", "schema": "x BIGINT"},
        "timeline": {"external": "erp"},
    }


def _table(path: Path, rows: int, files: int) -> dict[str, Any]:
    path.mkdir(parents=True, exist_ok=True)
    per_file = rows // files
    for index in range(files):
        start = index * per_file
        text = "".join(f'{{"x": {i}}}\n' for i in range(start, start + per_file))
        (path / f"part-{index}.json").write_text(text, encoding="utf-8")
    return {"name": path.name, "table": {"path": str(path), "schema": "x BIGINT"}}


def heavy_spec(kind: str, data: Path, rows: int) -> DataflowSpec:
    """The heavy dataflow of scenario ``kind`` over ``rows``-row inputs written to ``data``."""
    if kind == "snapshot":
        sources = [_table(data / "big", rows, files=4)]
    elif kind in {"cross", "nested-loop"}:
        sources = [_changelog(data / name, rows) for name in "abc"]
    else:
        sources = [_changelog(data / "a", rows)]
    return DataflowSpec.model_validate(
        {"cluster": "c", "kind": "Subscribe", "sources": sources, "sql": SQL[kind]}
    )


def sibling_spec(data: Path) -> DataflowSpec:
    """A temporal filter over one event: its frontier follows the steps."""
    events = data / "events"
    insert_rows(events, [{"content": "hello", "event_ts": format_timestamp(T)}])
    source = {
        "name": "events",
        "table": {"path": str(events), "schema": "content STRING, event_ts TIMESTAMP"},
    }
    sql = "SELECT content, event_ts FROM events WHERE mz_now() <= event_ts + INTERVAL '30 days'"
    return DataflowSpec.model_validate(
        {"cluster": "c", "kind": "Subscribe", "sources": [source], "sql": sql}
    )


@dataclass
class Replica:
    """An engine stepping in a background thread, one day per step."""

    engine: Engine
    specs: dict[str, DataflowSpec] = field(default_factory=dict)
    stop: threading.Event = field(default_factory=threading.Event)
    paused: threading.Event = field(default_factory=threading.Event)
    """While set, no new step starts (the bench measures the CPU without the sibling)."""
    errors: list[BaseException] = field(default_factory=list)

    def loop(self) -> None:
        step = 0
        try:
            while not self.stop.is_set():
                if self.paused.is_set():
                    time.sleep(0.05)
                    continue
                self.engine.step(T + step * DAY)
                step += 1
                time.sleep(0.05)
        except BaseException as error:
            self.errors.append(error)

    def frontier(self, name: str) -> int:
        """The dataflow's write frontier (0 before its first batch)."""
        report = self.engine.report()
        flow = next((d for d in report.dataflows if d.name == name), None)
        return flow.frontier[0] if flow is not None and flow.frontier else 0


@contextmanager
def replica(spark: SparkSession, kind: str, work: Path, rows: int) -> Iterator[Replica]:
    """The engine with the sibling and the heavy dataflow installed, stepping."""
    saved = {key: spark.conf.get(key, None) for key in RECURSION_LIMITS}
    if kind == "recursion":
        for key in RECURSION_LIMITS:
            spark.conf.set(key, "-1")
    engine = Engine(spark, EngineConfig(work / "state", T))
    specs = {SIBLING: sibling_spec(work), HEAVY: heavy_spec(kind, work, rows)}
    running = Replica(engine, specs)
    thread = threading.Thread(target=running.loop, daemon=True)
    try:
        result = engine.apply(dataflows_from(list(specs.items())))
        assert not result.failed, result.failed
        thread.start()
        yield running
    finally:
        running.stop.set()
        engine.close()
        thread.join(30)
        for key, value in saved.items():
            if value is None:
                spark.conf.unset(key)
            else:
                spark.conf.set(key, value)


def groups_of(running: RunningDataflow) -> list[str]:
    """The job groups of a dataflow's work: its token's and its streaming query's."""
    query = running.query
    return [running.token.group, *([str(query.runId)] if query is not None else [])]


LOOPING_JOBS = 20
"""Jobs of one dataflow that show it is looping: a recursion runs a job per iteration,
each over in a millisecond, so a poll seldom sees one of its tasks at work."""


def wait_busy(
    spark: SparkSession, groups: list[str], timeout: float, sustained: float = 0.0
) -> float:
    """Seconds until some task of ``groups`` has run for ``sustained`` seconds without a
    pause (tasks of a short stage before the heavy one do not count then), or they have
    run :data:`LOOPING_JOBS` jobs (raises after ``timeout``)."""
    tracker = spark.sparkContext.statusTracker()
    start = time.monotonic()
    busy_since: float | None = None
    while time.monotonic() - start < timeout:
        jobs = sum(len(tracker.getJobIdsForGroup(group)) for group in groups)
        if jobs >= LOOPING_JOBS:
            return time.monotonic() - start
        if not active_tasks(spark, groups):
            busy_since = None
        elif busy_since is None:
            busy_since = time.monotonic()
        if busy_since is not None and time.monotonic() - busy_since >= sustained:
            return time.monotonic() - start
        time.sleep(0.05)
    raise TimeoutError(f"no task of {groups} ran {sustained}s within {timeout}s")


def report_within(engine: Engine, timeout: float) -> ReplicaReport | None:
    """``engine.report()`` from another thread; None if it did not answer in time."""
    answer: list[ReplicaReport] = []
    thread = threading.Thread(target=lambda: answer.append(engine.report()), daemon=True)
    thread.start()
    thread.join(timeout)
    return answer[0] if answer else None


def executor_running_tasks(spark: SparkSession) -> int:
    """Tasks running on every executor (the JVM's own count)."""
    jsc: Any = spark.sparkContext._jsc
    infos = jsc.sc().statusTracker().getExecutorInfos()
    return sum(info.numRunningTasks() for info in infos)
