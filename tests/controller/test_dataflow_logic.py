"""Dataflow validity within a cluster, desired sets and status, as data."""

from __future__ import annotations

from typing import Any

from dataflow_operator.api.dataflow import (
    MAX_NODES_IN_STATUS,
    Dataflow,
    DataflowStatus,
    NodeStatus,
    SourceStatus,
)
from dataflow_operator.api.protocol import DataflowReport
from dataflow_operator.controller.shared.dataflow_logic import (
    ReplicaSeen,
    Validity,
    dataflow_status,
    desired_dataflows,
    status_events,
    status_patch,
    validate,
)
from dataflow_operator.core.timelines import MULTIPLE_TIMELINES_MESSAGE

T0 = 1_767_225_600_000


def dataflow(
    name: str, sources: list[dict[str, Any]], sql: str = "SELECT * FROM a", **meta: Any
) -> Dataflow:
    return Dataflow.model_validate(
        {
            "metadata": {"name": name, "namespace": "ns", **meta},
            "spec": {"cluster": "c", "kind": "Index", "sources": sources, "sql": sql},
        }
    )


TABLE = {"name": "a", "table": {"path": "data/a", "schema": "x INT"}}
ERP = {"name": "b", "table": {"path": "data/b", "schema": "x INT"}, "timeline": {"external": "erp"}}


def test_mixed_timelines_are_invalid_with_the_exact_message() -> None:
    bad = dataflow("bad", [TABLE, ERP], sql="SELECT * FROM a JOIN b USING (x)")
    result = validate({"bad": bad.spec}, ["bad"])["bad"]
    assert not result.ok
    assert result.reason == "MultipleTimelines"
    assert result.message.splitlines()[0] == MULTIPLE_TIMELINES_MESSAGE
    assert "DETAIL: timelines:" in result.message


def test_timelines_mix_through_another_dataflow() -> None:
    upstream = dataflow("up", [ERP], sql="SELECT * FROM b")
    down = dataflow(
        "down",
        [TABLE, {"name": "u", "dataflow": {"name": "up"}}],
        sql="SELECT * FROM a JOIN u USING (x)",
    )
    specs = {"up": upstream.spec, "down": down.spec}
    result = validate(specs, specs)
    assert result["up"].ok and result["up"].timeline == "external:erp"
    assert result["down"].reason == "MultipleTimelines"


def test_unknown_dataflow_source() -> None:
    down = dataflow("down", [{"name": "u", "dataflow": {"name": "missing"}}], sql="SELECT * FROM u")
    result = validate({"down": down.spec}, ["down"])["down"]
    assert (result.ok, result.reason) == (False, "UnknownSource")


def test_a_query_that_reads_none_of_its_sources_is_invalid() -> None:
    constant = dataflow("constant", [TABLE], sql="SELECT 1 AS one")
    result = validate({"constant": constant.spec}, ["constant"])["constant"]
    assert (result.ok, result.reason, result.field) == (False, "InvalidSql", "spec.sql")
    assert result.message.startswith("the query reads none of the dataflow's sources")


def test_desired_set_holds_valid_not_deleted_dataflows_sorted() -> None:
    flows = [
        dataflow("z", [TABLE]),
        dataflow("a", [TABLE], generation=3, resourceVersion="9"),
        dataflow("bad", [TABLE]),
        dataflow("gone", [TABLE], deletionTimestamp="2026-01-01T00:00:00Z"),
    ]
    validity = {
        "z": Validity(True),
        "a": Validity(True),
        "bad": Validity(False),
        "gone": Validity(True),
    }
    desired = desired_dataflows(flows, validity)
    assert [d.name for d in desired.dataflows] == ["a", "z"]
    assert desired.dataflows[0].generation == 3
    # A status write bumps resourceVersion, not the spec: the replica must not reinstall.
    flows[1] = dataflow("a", [TABLE], generation=3, resourceVersion="10")
    assert desired_dataflows(flows, validity) == desired


def report(**values: Any) -> DataflowReport:
    return DataflowReport(name="df", **values)


def test_status_lists_replicas_and_hydrated_needs_a_ready_replica() -> None:
    nodes = [
        NodeStatus(id=2, operator="Agg", hydrated=False),
        NodeStatus(id=1, operator="Scan", hydrated=True),
    ]
    seen = [
        ReplicaSeen("r2", ready=False, report=report(frontier=[T0 + 5], hydrated=True)),
        ReplicaSeen(
            "r1",
            ready=True,
            report=report(frontier=[T0], hydrated=False, nodes=nodes, hydration_time_ms=None),
        ),
        ReplicaSeen("r3", ready=True, report=None),
    ]
    status = dataflow_status(
        4, DataflowStatus(), Validity(True, timeline="EpochMilliseconds"), seen, T0
    )
    assert [r.replica for r in status.replicas] == ["r1", "r2"]
    assert [n.id for n in status.replicas[0].nodes] == [1, 2]
    conditions = {c.type: (c.status, c.reason) for c in status.conditions}
    assert conditions["Hydrated"] == ("False", "NotHydrated")  # r2 is hydrated but not ready
    assert conditions["Ready"] == ("True", "Installed")
    assert status.observed_generation == 4
    assert status.frontier == "2026-01-01T00:00:00.005Z"
    seen[1] = ReplicaSeen(
        "r1", ready=True, report=report(frontier=[T0], hydrated=True, hydration_time_ms=1500)
    )
    status = dataflow_status(4, status, Validity(True), seen, T0)
    assert {c.type: c.status for c in status.conditions}["Hydrated"] == "True"
    assert str(status.replicas[0].hydration_time) == "1s500ms"


def test_a_report_of_an_older_generation_is_not_hydrated_for_the_new_one() -> None:
    """Right after an edit the replica still reports the old spec: not hydrated for this one."""
    nodes = [NodeStatus(id=1, operator="Scan", hydrated=True)]
    old_spec = report(generation=1, hydrated=True, hydration_time_ms=900, nodes=nodes)
    status = dataflow_status(
        2, DataflowStatus(), Validity(True), [ReplicaSeen("r1", True, old_spec)], T0
    )
    conditions = {c.type: (c.status, c.reason) for c in status.conditions}
    assert conditions["Hydrated"] == ("False", "NotHydrated")
    entry = status.replicas[0]
    assert (entry.hydrated, entry.hydration_time) == (False, None)
    assert entry.nodes == nodes  # what the replica runs, as it reports it
    new_spec = report(generation=2, hydrated=True, hydration_time_ms=700, nodes=nodes)
    status = dataflow_status(2, status, Validity(True), [ReplicaSeen("r1", True, new_spec)], T0)
    assert {c.type: c.status for c in status.conditions}["Hydrated"] == "True"
    assert status.replicas[0].hydrated is True


def test_status_lists_stay_bounded() -> None:
    many = [NodeStatus(id=i, operator="X", hydrated=True) for i in range(1, 400)]
    seen = [ReplicaSeen(f"r{i:03}", True, report(nodes=many)) for i in range(100)]
    status = dataflow_status(1, DataflowStatus(), Validity(True), seen, T0)
    assert len(status.replicas) == 64
    assert len(status.replicas[0].nodes) == MAX_NODES_IN_STATUS


def test_status_shows_each_replica_s_sources_by_name() -> None:
    events = SourceStatus(
        name="events", resumption_frontier=[T0], offset=4, released_files=3, ingested_rows=9
    )
    users = SourceStatus(name="users", last_release_error="delete u.json: read-only")
    seen = [ReplicaSeen("r1", True, report(sources=[users, events]))]
    status = dataflow_status(1, DataflowStatus(), Validity(True), seen, T0)
    assert status.replicas[0].sources == [events, users]
    wire = status.to_wire()["replicas"][0]["sources"]
    assert wire[0] == {
        "name": "events",
        "resumptionFrontier": [T0],
        "offset": 4,
        "releasedFiles": 3,
        "ingestedRows": 9,
        "ingestedBytes": 0,
        "releaseFailures": 0,
    }
    assert wire[1]["lastReleaseError"] == "delete u.json: read-only"


def test_invalid_status_carries_reason_and_exact_message() -> None:
    validity = Validity(False, "MultipleTimelines", f"{MULTIPLE_TIMELINES_MESSAGE}\nDETAIL: x")
    status = dataflow_status(1, DataflowStatus(), validity, [], T0)
    ready = next(c for c in status.conditions if c.type == "Ready")
    assert (ready.status, ready.reason, ready.message) == (
        "False",
        "MultipleTimelines",
        validity.message,
    )


def test_status_patch_has_only_what_changed() -> None:
    assert status_patch({"a": 1, "b": [1], "c": 3}, {"a": 1, "b": [2]}) == {"b": [2], "c": None}
    assert status_patch({"a": 1}, {"a": 1}) == {}


def test_status_says_how_the_replicas_of_this_generation_maintain_it() -> None:
    why = "a window function (RANK() OVER (ORDER BY x))"
    recomputed = report(generation=2, strategy="Recompute", strategy_reason=why)
    older = report(generation=1, strategy="Incremental")
    seen = [ReplicaSeen("r2", True, older), ReplicaSeen("r1", True, recomputed)]
    status = dataflow_status(2, DataflowStatus(), Validity(True), seen, T0)
    assert (status.strategy, status.strategy_reason) == ("Recompute", why)
    # a replica still on the previous spec says nothing about this one
    status = dataflow_status(2, DataflowStatus(), Validity(True), seen[:1], T0)
    assert (status.strategy, status.strategy_reason) == (None, None)
    invalid = dataflow_status(2, DataflowStatus(), Validity(False, "InvalidSql", "bad"), seen, T0)
    assert (invalid.strategy, invalid.strategy_reason) == (None, None)


def test_input_released_names_the_replica_that_holds_a_source_back() -> None:
    drops = {
        "name": "a",
        "files": {"path": "/in", "format": "json", "schema": "x INT", "cleanSource": "Delete"},
    }
    spec = dataflow("d", [drops]).spec
    read = report(sources=[SourceStatus(name="a", listed=T0)])
    seen = [ReplicaSeen("r1", True, read), ReplicaSeen("r2", False, None)]
    status = dataflow_status(1, DataflowStatus(), Validity(True), seen, T0, name="d", spec=spec)
    (held,) = [c for c in status.conditions if c.type == "InputReleased"]
    assert (held.status, held.reason) == ("False", "HeldBack")
    assert held.message == "source a: replica r2 has not reported reading it"
    seen[1] = ReplicaSeen("r2", True, read)
    status = dataflow_status(1, status, Validity(True), seen, T0, name="d", spec=spec)
    (releasing,) = [c for c in status.conditions if c.type == "InputReleased"]
    assert (releasing.status, releasing.reason) == ("True", "Releasing")
    edited = dataflow("d", [TABLE]).spec  # no source releases files any more
    plain = dataflow_status(1, status, Validity(True), seen, T0, name="d", spec=edited)
    assert sorted(c.type for c in plain.conditions) == ["Hydrated", "Ready"]


def _status(hydrated: str | None = None, reason: str | None = None) -> DataflowStatus:
    conditions = (
        []
        if hydrated is None
        else [
            {
                "type": "Hydrated",
                "status": hydrated,
                "reason": "Hydrated" if hydrated == "True" else "NotHydrated",
                "message": f"hydrated={hydrated}",
                "lastTransitionTime": "2026-01-01T00:00:00Z",
            }
        ]
    )
    strategy = {"strategy": "Recompute", "strategyReason": reason} if reason else {}
    return DataflowStatus.model_validate({"conditions": conditions, **strategy})


def test_a_written_status_announces_hydration_flips_but_not_a_new_dataflow() -> None:
    assert status_events(_status(), _status("False")) == []  # new: nothing happened yet
    assert status_events(_status(), _status("True")) == [("Hydrated", "hydrated=True")]
    assert status_events(_status("False"), _status("True")) == [("Hydrated", "hydrated=True")]
    assert status_events(_status("True"), _status("False")) == [("NotHydrated", "hydrated=False")]
    # an operator restart starts from the status on the object: no second announcement
    assert status_events(_status("True"), _status("True")) == []


def test_a_written_status_announces_each_reason_for_a_recompute_once() -> None:
    why, other = "a window function", "a LIMIT"
    (event,) = status_events(_status("True"), _status("True", why))
    assert event[0] == "Recompute" and event[1].startswith(f"maintained by recompute: {why};")
    assert status_events(_status("True", why), _status("True", why)) == []
    assert [r for r, _ in status_events(_status("True", why), _status("True", other))] == [
        "Recompute"
    ]
    assert status_events(_status("True", why), _status("True")) == []
