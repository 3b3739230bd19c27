"""Make-before-break expiration restarts, as data: the successor hydrates, then takes over."""

from __future__ import annotations

from typing import Any

from dataflow_operator.api.protocol import ReplicaPhase, ReplicaReport
from dataflow_operator.api.replica import Replica
from dataflow_operator.controller.replica.logic import (
    Action,
    ActionKind,
    ControlObservation,
    Decision,
    ReplicaView,
    decide,
)
from dataflow_operator.controller.shared.observation import PodObservation, PodPhase
from tests.controller.test_replica_logic import (
    CONFIG,
    HOUR,
    OK,
    T0,
    conditions,
    replica,
    restarts,
    running,
    started,
)

LEAD = 600_000  # CONFIG's expiration lead time
DAY = 24 * HOUR
HANDOVER_AT = T0 + DAY - LEAD
HYDRATED = ControlObservation(
    reachable=True,
    report=ReplicaReport(start_time=T0, phase=ReplicaPhase.RUNNING),
    hydrated=True,
)


def step(r: Replica, now: int, **view: Any) -> tuple[Replica, Decision]:
    decision = decide(ReplicaView(replica=r, now=now, config=CONFIG, **view))
    return r.model_copy(update={"status": decision.status}), decision


def serving(**spec: Any) -> Replica:
    """Attempt 1 runs and every dataflow on it is hydrated (10 s after its start)."""
    r = started(**spec)
    r, _ = step(r, T0 + 10_000, driver=running(), control=HYDRATED)
    return r


def handing_over(**spec: Any) -> Replica:
    r, _ = step(serving(**spec), HANDOVER_AT, driver=running(), control=HYDRATED)
    return r


def test_the_successor_is_recorded_then_created_beside_the_serving_driver() -> None:
    r = serving()
    assert r.status is not None
    assert r.status.restart_strategy == "MakeBeforeBreak"
    assert r.status.planned_cutover_at == "2026-01-01T23:50:00.000Z"
    assert r.status.service_name == "r1-driver"
    r, d = step(r, HANDOVER_AT, driver=running(), control=HYDRATED)
    assert r.status is not None and r.status.handover is not None
    # the serving attempt is untouched: the Service keeps selecting it
    assert (r.status.attempt, r.status.driver_pod, r.status.phase) == (1, "r1-driver-1", "Running")
    successor = r.status.handover
    assert (successor.attempt, successor.driver_pod) == (2, "r1-driver-2")
    assert successor.start_time_ms == HANDOVER_AT
    assert successor.expires_at == "2026-01-02T23:50:00.000Z"
    assert successor.state_dir == "attempts/2"  # its own state: both run at once
    assert d.actions == [Action(ActionKind.CREATE_POD, "r1-driver-2")]  # no delete
    assert [e.reason for e in d.events] == ["Handover"]
    assert conditions(r)["Progressing"] == ("True", "Handover")
    assert conditions(r)["Ready"] == ("True", "DriverReady")


def test_the_lead_time_covers_twice_the_last_hydration() -> None:
    r = started()
    # attempt 1 hydrated 20 minutes after its start: the successor gets 40 minutes
    r, _ = step(r, T0 + 20 * 60_000, driver=running(), control=HYDRATED)
    assert r.status is not None and r.status.last_hydration_seconds == 1200
    assert r.status.planned_cutover_at == "2026-01-01T23:20:00.000Z"
    early, _ = step(r, T0 + DAY - 40 * 60_000 - 1, driver=running(), control=HYDRATED)
    assert early.status is not None and early.status.handover is None
    now, _ = step(r, T0 + DAY - 40 * 60_000, driver=running(), control=HYDRATED)
    assert now.status is not None and now.status.handover is not None


def test_the_lead_time_never_exceeds_half_the_offset() -> None:
    r = started(expirationOffset="1h")
    r, _ = step(r, T0 + 25 * 60_000, driver=running(), control=HYDRATED)  # slow hydration
    assert r.status is not None
    assert r.status.planned_cutover_at == "2026-01-01T00:30:00.000Z"  # not 00:10


def test_a_hydrated_successor_takes_over_and_the_predecessor_is_deleted() -> None:
    r = handing_over()
    successor = running("r1-driver-2")
    hydrating = ControlObservation(
        reachable=True, report=OK.report, hydrated_dataflows=1, dataflows=2
    )
    r, d = step(
        r,
        HANDOVER_AT + 30_000,
        driver=running(),
        control=HYDRATED,
        successor=successor,
        successor_control=hydrating,
    )
    assert r.status is not None and r.status.handover is not None
    assert (r.status.handover.phase, r.status.handover.hydrated) == ("Hydrating", "1/2")
    assert "successor r1-driver-2 hydrating (1/2 dataflows hydrated)" in conditions_message(
        r, "Expired"
    )
    assert r.status.driver_pod == "r1-driver-1" and d.actions == []
    r, d = step(
        r,
        HANDOVER_AT + 90_000,
        driver=running(),
        control=HYDRATED,
        successor=successor,
        successor_control=HYDRATED,
    )
    status = r.status
    assert status is not None and status.handover is None
    assert (status.attempt, status.driver_pod, status.phase) == (2, "r1-driver-2", "Running")
    assert status.start_time_ms == HANDOVER_AT
    assert status.state_dir == "attempts/2"
    assert status.expires_at == "2026-01-02T23:50:00.000Z"
    assert status.last_handover is not None
    assert (status.last_handover.outcome, status.last_handover.overlap_seconds) == ("CutOver", 90)
    assert status.unserved_since_ms is None and status.last_hydration_seconds == 90
    assert restarts(r) == {"Expired": 1}
    assert d.actions == [Action(ActionKind.DELETE_POD, "r1-driver-1")]
    assert [e.reason for e in d.events] == ["CutOver"]
    assert (d.unserved_seconds, d.overlap_seconds) == (0.0, 90)
    assert conditions(r)["Expired"][0] == "False"
    # next round: the predecessor is just another pod to delete; the new one serves
    r, d = step(
        r,
        HANDOVER_AT + 91_000,
        driver=successor,
        control=HYDRATED,
        other_pods=(running(deleting=True),),
    )
    assert d.actions == []
    assert conditions(r)["Ready"] == ("True", "DriverReady")
    assert conditions(r)["Progressing"] == ("False", "Stable")


def test_the_expiration_wins_over_a_successor_still_hydrating() -> None:
    r = handing_over()
    successor = running("r1-driver-2")
    answering = ControlObservation(reachable=True, report=OK.report)
    r, d = step(
        r,
        T0 + DAY,
        driver=running(),
        control=HYDRATED,
        successor=successor,
        successor_control=answering,
    )
    status = r.status
    assert status is not None and status.driver_pod == "r1-driver-2" and status.handover is None
    assert status.last_handover is not None and status.last_handover.outcome == "Late"
    assert status.unserved_since_ms == T0 + DAY
    assert d.actions == [Action(ActionKind.DELETE_POD, "r1-driver-1")]
    assert [e.reason for e in d.events] == ["HandoverLate"]
    assert conditions(r)["Expired"] == ("True", "ExpiredBeforeHandover")
    # the unserved window closes when the new driver has hydrated
    r, d = step(r, T0 + DAY + 45_000, driver=successor, control=answering)
    assert conditions(r)["Expired"] == ("True", "ExpiredBeforeHandover")
    r, d = step(r, T0 + DAY + 60_000, driver=successor, control=HYDRATED)
    assert r.status is not None and r.status.unserved_since_ms is None
    assert d.unserved_seconds == 60
    assert conditions(r)["Expired"] == ("False", "NotExpired")


def test_a_predecessor_that_exits_hands_over_at_once() -> None:
    r = handing_over()
    ended = PodObservation("r1-driver-1", PodPhase.FAILED, exit_code=75)
    r, _ = step(
        r,
        HANDOVER_AT + 5_000,
        driver=ended,
        successor=running("r1-driver-2"),
        successor_control=None,
    )
    assert r.status is not None and r.status.driver_pod == "r1-driver-2"
    assert r.status.last_handover is not None and r.status.last_handover.outcome == "Late"


def test_a_failed_successor_is_abandoned_and_the_restart_breaks_before_making() -> None:
    r = handing_over()
    crashed = PodObservation("r1-driver-2", PodPhase.FAILED, exit_code=1, message="OOM")
    r, d = step(r, HANDOVER_AT + 20_000, driver=running(), control=HYDRATED, successor=crashed)
    status = r.status
    assert status is not None and status.handover is None and status.driver_pod == "r1-driver-1"
    assert status.last_handover is not None and status.last_handover.outcome == "Abandoned"
    assert "exited with code 1: OOM" in status.last_handover.message
    assert status.restart_strategy == "BreakBeforeMake"
    assert d.actions == [Action(ActionKind.DELETE_POD, "r1-driver-2")]
    assert [(e.type, e.reason) for e in d.events] == [("Warning", "HandoverAbandoned")]
    assert "its successor failed" in conditions_message(r, "Expired")
    # no second successor: past the configured lead, it restarts break-before-make
    r, d = step(r, HANDOVER_AT + 30_000, driver=running(), control=HYDRATED)
    assert r.status is not None and r.status.handover is None and r.status.attempt == 3
    assert r.status.driver_pod == "r1-driver-3"  # never the abandoned successor's name
    assert d.actions == [Action(ActionKind.DELETE_POD, "r1-driver-1")]


def conditions_message(r: Replica, type_: str) -> str:
    assert r.status is not None
    return next(c.message for c in r.status.conditions if c.type == type_)


def test_a_successor_that_never_starts_is_abandoned_after_the_start_timeout() -> None:
    r = handing_over()
    pulling = PodObservation("r1-driver-2", PodPhase.PENDING, reason="ImagePullBackOff")
    r2, _ = step(r, HANDOVER_AT + 60_000, driver=running(), control=HYDRATED, successor=pulling)
    assert r2.status is not None and r2.status.handover is not None
    r3, _ = step(r, HANDOVER_AT + 120_000, driver=running(), control=HYDRATED, successor=pulling)
    assert r3.status is not None and r3.status.last_handover is not None
    assert r3.status.last_handover.outcome == "Abandoned"


def test_an_operator_restarted_mid_handover_repeats_only_idempotent_steps() -> None:
    r = handing_over()
    # killed after recording the successor, before creating it: created now
    _, d = step(r, HANDOVER_AT + 1_000, driver=running(), control=HYDRATED)
    assert d.actions == [Action(ActionKind.CREATE_POD, "r1-driver-2")]
    # a stray pod of neither attempt (say, one abandoned before a crash) goes
    stray = running("r1-driver-7")
    _, d = step(
        r,
        HANDOVER_AT + 2_000,
        driver=running(),
        control=HYDRATED,
        successor=running("r1-driver-2"),
        other_pods=(stray,),
    )
    assert d.actions == [Action(ActionKind.DELETE_POD, "r1-driver-7")]
    # killed after recording the cutover, before deleting the predecessor: deleted now
    cut, _ = step(
        r,
        HANDOVER_AT + 3_000,
        driver=running(),
        control=HYDRATED,
        successor=running("r1-driver-2"),
        successor_control=HYDRATED,
    )
    again, d = step(
        cut, HANDOVER_AT + 4_000, driver=running("r1-driver-2"), other_pods=(running(),)
    )
    assert again.status is not None and again.status.driver_pod == "r1-driver-2"
    assert d.actions == [Action(ActionKind.DELETE_POD, "r1-driver-1")]


def test_a_spec_change_mid_handover_replaces_both_drivers() -> None:
    r = handing_over()
    changed = replica(status=r.status, generation=2, driver={"memory": "2Gi"})
    r, d = step(
        changed,
        HANDOVER_AT + 5_000,
        driver=running(),
        control=HYDRATED,
        successor=running("r1-driver-2"),
    )
    assert r.status is not None and r.status.handover is None
    assert r.status.attempt == 3
    assert set(d.actions) == {
        Action(ActionKind.DELETE_POD, "r1-driver-1"),
        Action(ActionKind.DELETE_POD, "r1-driver-2"),
    }


def test_make_before_break_needs_two_addresses_two_mounts_and_no_shared_sink() -> None:
    cases = {
        "spec.restartStrategy is BreakBeforeMake": ({"restartStrategy": "BreakBeforeMake"}, ()),
        "ReadWriteOnce": ({"storage": {"size": "1Gi"}}, ()),
        "writes a sink": ({}, ("mv1",)),
    }
    for why, (spec, sinks) in cases.items():
        r = started(**spec)
        r, d = step(r, HANDOVER_AT, driver=running(), control=HYDRATED, sink_dataflows=sinks)
        assert r.status is not None and r.status.handover is None, why
        assert r.status.attempt == 2, why  # restarted break-before-make
        assert "BreakBeforeMake" in d.events[0].message and why in d.events[0].message
    rwx = started(storage={"size": "1Gi", "accessModes": ["ReadWriteMany"]})
    rwx, _ = step(rwx, HANDOVER_AT, driver=running(), control=HYDRATED)
    assert rwx.status is not None and rwx.status.handover is not None
    planned = started()
    planned, _ = step(planned, T0 + 5_000, driver=running(), control=OK, sink_dataflows=("mv1",))
    assert "(dataflow mv1 writes a sink" in conditions_message(planned, "Expired")
