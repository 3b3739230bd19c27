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
metadata: {name: totals}
spec:
  cluster: default
  kind: Index
  sources:
    - name: orders
      table: {path: data/orders, schema: "id BIGINT, customer BIGINT, amount DOUBLE"}
    - name: customers
      table: {path: data/customers, schema: "id BIGINT, name STRING"}
  sql: |
    SELECT c.name, sum(o.amount) AS total
    FROM orders o JOIN customers c ON o.customer = c.id GROUP BY c.name
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
metadata: {name: recent}
spec:
  cluster: default
  kind: Subscribe
  sources:
    - name: events
      table: {path: data/events, schema: "content STRING, event_ts TIMESTAMP"}
  sql: SELECT event_ts, content FROM events WHERE mz_now() <= event_ts + INTERVAL '30 days'
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
    assert set(sections) == {"totals", "broken", "recent"}  # …and the others still print
    (error,) = sections["broken"]
    assert error.startswith("error: ") and "no_such_column" in error
    assert "Traceback" not in out and "\tat " not in out

    lines = sections["totals"]
    ids = [int(NODE_ID.search(line).group(1)) for line in lines]  # type: ignore[union-attr]
    assert sorted(ids) == list(range(1, len(lines) + 1))
    depths = [(len(line) - len(line.lstrip())) // 2 - 1 for line in lines]
    assert depths[0] == 0 and ids[0] == len(lines)  # the root comes first and has the last id
    # children are indented one level deeper than their parent and have smaller ids
    for index, depth in enumerate(depths[1:], start=1):
        parent = max(i for i in range(index) if depths[i] == depth - 1)
        assert ids[index] < ids[parent]
    assert any("Join" in line for line in lines)
    assert any("HashAggregate" in line for line in lines)
    assert NODE_ID.search(sections["recent"][0])


@pytest.mark.spark
def test_explain_without_node_ids_and_by_name(
    spark: SparkSession, manifests: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["explain", str(manifests), "--name", "totals"]) == 0
    sections = _sections(capsys.readouterr().out)
    assert list(sections) == ["totals"]
    lines = sections["totals"]
    assert len(lines) > 5
    assert not any("node_id" in line for line in lines)
    assert lines[0].startswith("  HashAggregate")
    assert lines[1].startswith("    ")
