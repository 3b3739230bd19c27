"""The operator's parsed view of a cluster's Dataflows follows their specs, not their status."""

from __future__ import annotations

import copy
from typing import Any

from dataflow_operator.controller.shared.views import ClusterViews


def body(name: str, sql: str = "SELECT x FROM a", **metadata: Any) -> dict[str, Any]:
    return {
        "apiVersion": "dataflow.dev/v1alpha1",
        "kind": "Dataflow",
        "metadata": {"name": name, "namespace": "ns", "generation": 1, **metadata},
        "spec": {
            "cluster": "c",
            "kind": "Index",
            "sources": [{"name": "a", "table": {"path": "data/a", "schema": "x INT"}}],
            "sql": sql,
        },
    }


def state() -> ClusterViews:
    return ClusterViews()


def test_a_status_write_reuses_the_view_and_a_spec_edit_rebuilds_it() -> None:
    operator = state()
    bodies = [body("a"), body("b", resourceVersion="1")]
    view = operator.view("ns", "c", bodies)
    assert sorted(view.validity) == ["a", "b"] and all(v.ok for v in view.validity.values())
    # What the watch hands over after a status write: new objects, a new resourceVersion
    # and a status, the same specs.
    written = copy.deepcopy(bodies)
    written[1]["metadata"]["resourceVersion"] = "2"
    written[1]["status"] = {"frontier": "2026-01-01T00:00:00Z", "replicas": "not a list"}
    assert operator.view("ns", "c", written) is view
    # An edit (a new generation and spec) is seen, and only its dataflow is invalid.
    edited = copy.deepcopy(written)
    edited[0]["metadata"]["generation"] = 2
    edited[0]["spec"]["sql"] = "SELECT nope FROM missing"
    rebuilt = operator.view("ns", "c", edited)
    assert rebuilt is not view
    assert (rebuilt.validity["a"].ok, rebuilt.validity["a"].reason) == (False, "UnknownSource")
    assert rebuilt.validity["b"].ok
    assert [d.generation for d in rebuilt.desired.dataflows] == [1]


def test_a_change_marks_only_the_dataflows_whose_status_it_changes() -> None:
    operator = state()
    reader_source = {"name": "up", "dataflow": {"name": "a"}}
    reader = body("reader", sql="SELECT x FROM up")
    reader["spec"]["sources"] = [reader_source]
    bodies = [body("a"), body("b"), reader]
    first = operator.view("ns", "c", bodies)
    assert sorted(first.changed_from(None)) == ["a", "b", "reader"]
    assert first.generations == {"a": 1, "b": 1, "reader": 1}
    # A new Dataflow joins: only it is marked, not the cluster.
    grown = operator.view("ns", "c", [*bodies, body("new")])
    assert grown.changed_from(first) == ["new"]
    # An edit marks its own Dataflow; deleting it also marks the reader it leaves
    # without a source.
    edited_bodies = copy.deepcopy([*bodies, body("new")])
    edited_bodies[1]["metadata"]["generation"] = 2
    edited_bodies[1]["spec"]["sql"] = "SELECT x FROM a WHERE x > 1"
    edited = operator.view("ns", "c", edited_bodies)
    assert edited.changed_from(grown) == ["b"]
    assert edited.generations["b"] == 2
    deleting = copy.deepcopy(edited_bodies)
    deleting[0]["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    deleted = operator.view("ns", "c", deleting)
    assert sorted(deleted.changed_from(edited)) == ["a", "reader"]
    assert not deleted.validity["reader"].ok
