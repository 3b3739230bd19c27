"""What ``run`` runs of several Replicas and dataflows, and how it prints Subscribes."""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

from tests.runtime.runs import dataflow_manifest, table_source

from dataflow_operator.api.dataflow import Dataflow
from dataflow_operator.api.loading import load_paths
from dataflow_operator.api.replica import Replica
from dataflow_operator.runtime.cli.run import SubscribePrinter
from dataflow_operator.runtime.cli.selection import Selection, select
from dataflow_operator.runtime.engine.running import BatchOutput

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


def test_each_batch_is_printed_as_it_comes_in_time_order_with_its_name() -> None:
    out = io.StringIO()
    printer = SubscribePrinter(out, ["a", "b"])
    printer(BatchOutput("b", 0, 11, ("v",), [(9, 1, ("b9",)), (5, 1, ("late",))]))
    # written before the batch is committed: a kill after the commit loses no line
    assert out.getvalue().splitlines() == ["b\t5\t1\tlate", "b\t9\t1\tb9"]
    printer(BatchOutput("a", 0, 11, ("v",), [(7, 1, ("a7",))]))
    printer(BatchOutput("c", 0, 11, ("v",), [(1, 1, ("not printed",))]))
    printer.flush()
    assert out.getvalue().splitlines() == ["b\t5\t1\tlate", "b\t9\t1\tb9", "a\t7\t1\ta7"]
    alone = io.StringIO()
    printer = SubscribePrinter(alone, ["a"])
    printer(BatchOutput("a", 0, 11, ("v",), [(7, 1, ("a7",)), (3, -1, ("a3",))]))
    assert alone.getvalue().splitlines() == ["3\t-1\ta3", "7\t1\ta7"]
