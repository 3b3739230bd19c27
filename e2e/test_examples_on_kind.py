"""The example Replica and Dataflow on a real cluster, through the Helm-installed operator."""

from __future__ import annotations

import json
import time
from typing import Any

from e2e.conftest import ROOT, run, tool


def kubectl(context: str, *args: str) -> str:
    return run(tool("kubectl"), "--context", context, *args).stdout


def get(context: str, kind: str, name: str) -> dict[str, Any]:
    result: dict[str, Any] = json.loads(kubectl(context, "get", kind, name, "-o", "json"))
    return result


def wait_for(description: str, predicate: Any, timeout: float = 600) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(3)
    raise AssertionError(f"timed out after {timeout:.0f}s waiting for {description}")


def condition(obj: dict[str, Any], kind: str) -> str | None:
    for item in obj.get("status", {}).get("conditions", []):
        if item["type"] == kind:
            return str(item["status"])
    return None


def test_crds_are_accepted_by_a_real_api_server(kind_cluster: str) -> None:
    for name in ("dataflows.dataflow.dev", "replicas.dataflow.dev"):
        crd = json.loads(kubectl(kind_cluster, "get", "crd", name, "-o", "json"))
        established = [c for c in crd["status"]["conditions"] if c["type"] == "Established"]
        assert established and established[0]["status"] == "True"


INPUT = "/opt/dataflow/state/inputs/events"
"""The example's table, moved onto the Replica's own claim: `data/events` is a path on
the machine of `make run`, and exists in no pod."""


def test_example_replica_runs_and_dataflow_hydrates(kind_cluster: str) -> None:
    replica_doc, dataflow_doc = (ROOT / "examples/last-30-days.yaml").read_text().split("\n---\n")
    assert "path: data/events" in dataflow_doc
    run(tool("kubectl"), "--context", kind_cluster, "apply", "-f", "-", stdin=replica_doc)
    wait_for(
        "Replica r1 Ready", lambda: condition(get(kind_cluster, "replica", "r1"), "Ready") == "True"
    )
    replica = get(kind_cluster, "replica", "r1")
    assert replica["status"]["expiresAt"]
    row = json.dumps({"content": "hello", "event_ts": "2026-01-01T00:00:00Z"})
    pod = replica["status"]["driverPod"]
    kubectl(kind_cluster, "exec", pod, "--", "dataflow-operator", "insert", INPUT, row)
    dataflow_doc = dataflow_doc.replace("path: data/events", f"path: {INPUT}")
    run(tool("kubectl"), "--context", kind_cluster, "apply", "-f", "-", stdin=dataflow_doc)
    wait_for(
        "Dataflow last-30-days Hydrated",
        lambda: condition(get(kind_cluster, "dataflow", "last-30-days"), "Hydrated") == "True",
    )
    dataflow = get(kind_cluster, "dataflow", "last-30-days")
    (entry,) = dataflow["status"]["replicas"]
    assert entry["replica"] == "r1" and entry["nodes"]
    kubectl(kind_cluster, "delete", "dataflow", "last-30-days", "--wait=true", "--timeout=120s")
    kubectl(kind_cluster, "delete", "replica", "r1", "--wait=true", "--timeout=120s")


def test_invalid_dataflow_is_rejected_by_the_schema(kind_cluster: str) -> None:
    bad = (
        (ROOT / "examples/last-30-days.yaml").read_text().replace("kind: Subscribe", "kind: Table")
    )
    applied = run(
        tool("kubectl"), "--context", kind_cluster, "apply", "-f", "-", stdin=bad, check=False
    )
    assert applied.returncode != 0
    assert "spec.kind" in applied.stderr and "Unsupported value" in applied.stderr
