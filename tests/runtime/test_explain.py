"""``dataflow-operator explain``: one node per line, indented, node ids on request."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from dataflow_operator.cli import main

MANIFESTS = """\
apiVersion: dataflow.dev/v1alpha1
kind: Dataflow
metadata: {name: recent}
spec:
  cluster: default
  kind: Subscribe
  sources:
    - name: events
      table: {path: data/events, schema: "content STRING, event_ts TIMESTAMP"}
  sql: SELECT event_ts, content FROM events WHERE mz_now() <= event_ts + INTERVAL '30 days'
---
apiVersion: dataflow.dev/v1alpha1
kind: Dataflow
metadata: {name: broken}
spec:
  cluster: default
  kind: Index
  sources:
    - name: orders
      table: {path: data/orders, schema: "id BIGINT"}
  sql: SELECT no_such_column FROM orders
---
apiVersion: dataflow.dev/v1alpha1
kind: Dataflow
metadata: {name: loud}
spec:
  cluster: default
  kind: Index
  sources:
    - name: recent
      dataflow: {name: recent}
    - name: more
      files: {path: data/more, format: json, schema: "content STRING, event_ts TIMESTAMP"}
  sql: |
    SELECT upper(content) AS content FROM recent WHERE content <> ''
    UNION ALL SELECT content FROM more
---
apiVersion: dataflow.dev/v1alpha1
kind: Dataflow
metadata: {name: ranked}
spec:
  cluster: default
  kind: Index
  sources:
    - name: orders
      table: {path: data/orders, schema: "id BIGINT"}
  sql: SELECT id, rank() OVER (ORDER BY id) AS r FROM orders
"""

NODE_ID = re.compile(r" // \{ node_id: (\d+) \}$")


def _sections(text: str) -> dict[str, list[str]]:
    sections: dict[str, list[str]] = {}
    current: list[str] = []
    for line in text.splitlines():
        if line.startswith("Dataflow/"):
            head, _, rest = line.partition(":")
            current = sections.setdefault(head.removeprefix("Dataflow/"), [])
            if rest.strip():
                current.append(rest.strip())
        elif line.strip():
            current.append(line)
    return sections


@pytest.fixture
def manifests(tmp_path: Path) -> Path:
    path = tmp_path / "flows.yaml"
    path.write_text(MANIFESTS)
    return path


@pytest.mark.spark
def test_explain_with_node_ids(
    spark: SparkSession, manifests: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code = main(["explain", str(manifests), "--node-ids"])
    out = capsys.readouterr().out
    sections = _sections(out)
    assert code == 1  # one dataflow does not plan…
    assert set(sections) == {"recent", "broken", "loud", "ranked"}  # …the others still print
    (error,) = sections["broken"]
    assert error.startswith("error: ") and "no_such_column" in error
    assert "Traceback" not in out and "\tat " not in out

    for name in ("recent", "loud"):
        _check_numbered(sections[name])
    assert any("Union" in line for line in sections["loud"])
    assert any("Exchange" in line for line in sections["recent"])  # the temporal filter's
    *plan, why = sections["ranked"]
    assert why == "  -- maintained by recompute: a window function (RANK() OVER (ORDER BY id))"
    _check_numbered(plan)


def _check_numbered(lines: list[str]) -> None:
    ids = [int(NODE_ID.search(line).group(1)) for line in lines]  # type: ignore[union-attr]
    assert sorted(ids) == list(range(1, len(lines) + 1))
    depths = [(len(line) - len(line.lstrip())) // 2 - 1 for line in lines]
    assert depths[0] == 0 and ids[0] == len(lines)  # the root comes first and has the last id
    # children are indented one level deeper than their parent and have smaller ids
    for index, depth in enumerate(depths[1:], start=1):
        parent = max(i for i in range(index) if depths[i] == depth - 1)
        assert ids[index] < ids[parent]


@pytest.mark.spark
def test_explain_without_node_ids_and_by_name(
    spark: SparkSession, manifests: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["explain", str(manifests), "--name", "recent"]) == 0
    sections = _sections(capsys.readouterr().out)
    assert list(sections) == ["recent"]
    lines = sections["recent"]
    assert len(lines) > 5
    assert not any("node_id" in line for line in lines)
    assert lines[0].startswith("  ") and not lines[0].startswith("   ")
    assert lines[1].startswith("    ")


@pytest.mark.spark
def test_explain_ids_are_the_ids_the_replica_reports(spark: SparkSession, tmp_path: Path) -> None:
    """The node ids of explain are those of the plan the engine runs for the snapshot."""
    import datetime as dt
    import time

    from dataflow_operator.api.catalog import Catalog
    from dataflow_operator.api.dataflow import DataflowSpec
    from dataflow_operator.runtime.cli.explain import explain_dataflow
    from dataflow_operator.runtime.engine.config import EngineConfig
    from dataflow_operator.runtime.engine.engine import Engine, dataflows_from
    from dataflow_operator.runtime.inserts import insert_rows

    events = tmp_path / "events"
    now = dt.datetime.now(dt.UTC)
    insert_rows(events, [{"content": f"c{i}", "event_ts": now.isoformat()} for i in range(50)])
    spec = DataflowSpec.model_validate(
        {
            "cluster": "default",
            "kind": "Subscribe",
            "sources": [
                {
                    "name": "events",
                    "table": {"path": str(events), "schema": "content STRING, event_ts TIMESTAMP"},
                }
            ],
            "sql": "SELECT event_ts, content FROM events "
            "WHERE mz_now() <= event_ts + INTERVAL '30 days'",
        }
    )
    explained = explain_dataflow(spark, "recent", Catalog({"recent": spec}))
    start = int(time.time() * 1000)
    engine = Engine(spark, EngineConfig(state_dir=tmp_path / "state", start_time=start))
    try:
        engine.apply(dataflows_from([("recent", spec)]))
        engine.step(start)
        (report,) = engine.report().dataflows
    finally:
        engine.close()
    assert report.last_error is None and report.hydrated
    reported = [(node.id, node.operator) for node in report.nodes]
    leaves = {node.node_id for node in explained if not node.children}
    assert [n.node_id for n in explained] == [node_id for node_id, _ in reported]
    for node in explained:
        operator = dict(reported)[node.node_id]
        if node.node_id not in leaves:  # StreamingRelation becomes the batch's scan
            assert operator == node.operator, (reported, list(explained))
