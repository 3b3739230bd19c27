"""What ``run`` runs of several Replicas and dataflows."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests.runtime.runs import dataflow_manifest, table_source

from dataflow_operator.api.dataflow import Dataflow
from dataflow_operator.api.loading import load_paths
from dataflow_operator.api.replica import Replica
from dataflow_operator.runtime.cli.selection import Selection, select

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def _replica(name: str, cluster: str) -> Replica:
    return Replica.model_validate(
        {
            "apiVersion": "dataflow.dev/v1alpha1",
            "kind": "Replica",
            "metadata": {"name": name},
            "spec": {"cluster": cluster},
        }
    )


def _dataflow(name: str, cluster: str, kind: str = "Subscribe") -> Dataflow:
    manifest: dict[str, Any] = dataflow_manifest(
        name, "SELECT a FROM t", [table_source("t", Path("/tmp/t"), "a INT")], kind=kind
    )
    manifest["spec"]["cluster"] = cluster
    return Dataflow.model_validate(manifest)


def test_run_examples_runs_the_default_cluster_and_says_what_it_skips() -> None:
    manifests, problems = load_paths([EXAMPLES])
    assert not problems
    chosen = select(
        [m.resource for m in manifests if isinstance(m.resource, Replica)],
        [m.resource for m in manifests if isinstance(m.resource, Dataflow)],
    )
    assert isinstance(chosen, Selection)
    assert chosen.replica is not None and chosen.replica.spec.cluster == "default"
    assert {d.metadata.name for d in chosen.dataflows} == {"last-30-days", "order-totals"}
    running, skipping = chosen.notes
    assert running.startswith(f"run: running Replica {chosen.replica.metadata.name} ")
    assert "--replica NAME" in running
    assert "recent-events (cluster analytics)" in skipping  # the object-store example


def test_replica_and_dataflow_are_chosen_by_name_or_refused_in_one_line() -> None:
    replicas = [_replica("a", "one"), _replica("b", "two")]
    dataflows = [_dataflow("x", "one"), _dataflow("y", "two"), _dataflow("z", "two", "Index")]
    chosen = select(replicas, dataflows, replica_name="b")
    assert isinstance(chosen, Selection)
    assert [d.metadata.name for d in chosen.dataflows] == ["y", "z"]
    assert chosen.printed == ["y"]
    assert chosen.notes == ["run: skipping the dataflows of other clusters: x (cluster one)"]
    assert select(replicas, dataflows, replica_name="c") == (
        "run: --replica c: no Replica of that name (Replicas: a, b)"
    )
    assert select(replicas, dataflows, replica_name="b", dataflow_name="x") == (
        "run: --dataflow x: no Subscribe of that name runs (Subscribes: y)"
    )
    one = select([], dataflows, dataflow_name="y")
    assert isinstance(one, Selection) and one.printed == ["y"] and not one.notes
