"""Reconcile decisions for a Replica, as data: observation in, status and actions out."""

from __future__ import annotations

from typing import Any

from dataflow_operator.api import injection
from dataflow_operator.api.protocol import DataflowReport, ReplicaPhase, ReplicaReport
from dataflow_operator.api.replica import Replica, ReplicaStatus
from dataflow_operator.controller.config import OperatorConfig
from dataflow_operator.controller.replica.attempts import backoff_delay_ms
from dataflow_operator.controller.replica.logic import (
    Action,
    ActionKind,
    ControlObservation,
    Decision,
    ReplicaView,
    decide,
)
from dataflow_operator.controller.shared.observation import (
    ClaimObservation,
    PodObservation,
    PodPhase,
    observe_claim,
    observe_pod,
)
from dataflow_operator.core.durations import Duration

T0 = 1_767_225_600_000
HOUR = 3_600_000
CONFIG = OperatorConfig(
    default_image="img:1",
    expiration_lead_time=Duration(600_000),
    start_timeout=Duration(120_000),
    ready_timeout=Duration(300_000),
    lost_grace=Duration(10_000),
)
OK = ControlObservation(
    reachable=True, report=ReplicaReport(start_time=T0, phase=ReplicaPhase.RUNNING)
)


def replica(status: ReplicaStatus | None = None, generation: int = 1, **spec: Any) -> Replica:
    r = Replica.model_validate(
        {
            "metadata": {"name": "r1", "namespace": "ns", "uid": "u1", "generation": generation},
            "spec": {"cluster": "c", "expirationOffset": "1d", **spec},
        }
    )
    return r.model_copy(update={"status": status})


def step(r: Replica, now: int, **view: Any) -> tuple[Replica, Decision]:
    decision = decide(ReplicaView(replica=r, now=now, config=CONFIG, **view))
    return r.model_copy(update={"status": decision.status}), decision


def running(name: str = "r1-driver-1", **extra: Any) -> PodObservation:
    return PodObservation(name=name, phase=PodPhase.RUNNING, ready=True, **extra)


def conditions(r: Replica) -> dict[str, tuple[str, str]]:
    assert r.status is not None
    return {c.type: (c.status, c.reason) for c in r.status.conditions}


def restarts(r: Replica) -> dict[str, int]:
    assert r.status is not None
    return {item.reason.value: item.count for item in r.status.restarts}


def started(now: int = T0, **spec: Any) -> Replica:
    """A replica whose attempt 1 runs and is ready."""
    r, _ = step(replica(**spec), now)
    r, _ = step(r, now + 1000, driver=running(), control=OK)
    return r


def test_a_new_replica_records_attempt_1_then_creates_its_pod() -> None:
    r, d = step(replica(), T0)
    assert r.status is not None
    assert (r.status.attempt, r.status.driver_pod, r.status.phase) == (1, "r1-driver-1", "Creating")
    assert r.status.start_time_ms == T0
    assert r.status.start_time == "2026-01-01T00:00:00.000Z"
    assert r.status.expires_at == "2026-01-02T00:00:00.000Z"
    assert d.actions == [Action(ActionKind.CREATE_POD, "r1-driver-1")]
    assert d.events[0].reason == "Creating"
    assert r.status.observed_generation == 1


def test_zero_offset_means_no_expiration() -> None:
    r, _ = step(replica(expirationOffset="0"), T0)
    assert r.status is not None and r.status.expires_at is None
    assert conditions(r)["Expired"] == ("False", "ExpirationDisabled")


def test_creating_repeats_the_idempotent_create_until_the_pod_is_seen() -> None:
    r, _ = step(replica(), T0)
    r2, d = step(r, T0 + 500)
    assert r2.status is not None and r2.status.attempt == 1
    assert d.actions == [Action(ActionKind.CREATE_POD, "r1-driver-1")]


def test_running_with_control_api_answering_is_ready() -> None:
    r = started()
    assert r.status is not None and r.status.phase == "Running"
    assert conditions(r)["Ready"] == ("True", "DriverReady")
    assert conditions(r)["Progressing"] == ("False", "Stable")


def test_running_without_control_api_is_not_ready_until_the_ready_timeout() -> None:
    r, _ = step(replica(), T0)
    down = ControlObservation(reachable=False, error="connection refused")
    r, _ = step(r, T0 + 1000, driver=running(), control=down)
    assert conditions(r)["Ready"] == ("False", "ControlApiUnavailable")
    r, _ = step(r, T0 + 300_000, driver=running(), control=down)
    assert r.status is not None and r.status.phase == "BackingOff"
    assert conditions(r)["Degraded"][1] == "ReadyTimeout"


def test_expiration_restart_at_the_lead_time_is_not_a_failure() -> None:
    r = started(restartStrategy="BreakBeforeMake")
    before = T0 + 24 * HOUR - 600_000 - 1
    same, d = step(r, before, driver=running(), control=OK)
    assert same.status is not None and same.status.attempt == 1
    assert d.requeue_after_ms == 1
    r, d = step(r, before + 1, driver=running(), control=OK)
    assert r.status is not None
    assert (r.status.attempt, r.status.driver_pod, r.status.phase) == (2, "r1-driver-2", "Creating")
    assert r.status.start_time_ms == before + 1
    assert restarts(r) == {"Expired": 1}
    assert r.status.consecutive_failures == 0
    assert conditions(r)["Expired"] == ("True", "RestartingAtExpiration")
    assert r.status.unserved_since_ms == before + 1  # nothing serves until it hydrates
    # the old driver goes first; the new one is created once it is gone
    assert d.actions == [Action(ActionKind.DELETE_POD, "r1-driver-1")]
    assert [e.reason for e in d.events] == ["Expired"]
    old_terminating = running(deleting=True)
    r, d = step(r, before + 2, other_pods=(old_terminating,))
    assert d.actions == []
    r, d = step(r, before + 3)
    assert d.actions == [Action(ActionKind.CREATE_POD, "r1-driver-2")]


def test_lead_time_is_clamped_to_half_a_short_offset() -> None:
    r = started(expirationOffset="20s", restartStrategy="BreakBeforeMake")
    r2, _ = step(r, T0 + 9_999, driver=running(), control=OK)
    assert r2.status is not None and r2.status.attempt == 1
    r3, _ = step(r, T0 + 10_000, driver=running(), control=OK)
    assert r3.status is not None and r3.status.attempt == 2


def test_expired_exit_code_restarts_at_once() -> None:
    r = started()
    ended = PodObservation(
        name="r1-driver-1", phase=PodPhase.FAILED, exit_code=injection.EXIT_EXPIRED
    )
    r, _ = step(r, T0 + HOUR, driver=ended)
    assert r.status is not None and r.status.attempt == 2
    assert restarts(r) == {"Expired": 1}
    assert r.status.consecutive_failures == 0


def test_runtime_reporting_an_expired_dataflow_restarts_at_once() -> None:
    r = started()
    report = ReplicaReport(
        start_time=T0,
        phase=ReplicaPhase.RUNNING,
        dataflows=[DataflowReport(name="df1", expired=True)],
    )
    r, d = step(r, T0 + HOUR, driver=running(), control=ControlObservation(True, report))
    assert r.status is not None and r.status.attempt == 2
    assert "df1" in d.events[0].message


def test_crash_loop_backs_off_with_growing_delays_then_restarts() -> None:
    r = started(restartPolicy={"backoff": {"initial": "10s", "multiplier": 2}})
    crashed = PodObservation(name="r1-driver-1", phase=PodPhase.FAILED, exit_code=1, reason="Error")
    r, d = step(r, T0 + HOUR, driver=crashed)
    assert r.status is not None
    assert (r.status.phase, r.status.consecutive_failures) == ("BackingOff", 1)
    assert r.status.next_attempt_at_ms == T0 + HOUR + 10_000
    assert conditions(r)["Degraded"] == ("True", "Error")
    assert d.actions == [Action(ActionKind.DELETE_POD, "r1-driver-1")]
    assert d.events[0].type == "Warning"
    r, d = step(r, T0 + HOUR + 9_999)
    assert r.status is not None and r.status.phase == "BackingOff" and d.actions == []
    r, d = step(r, T0 + HOUR + 10_000)
    assert r.status is not None and (r.status.attempt, r.status.phase) == (2, "Creating")
    assert restarts(r) == {"DriverFailed": 1}
    crashed2 = PodObservation(name="r1-driver-2", phase=PodPhase.FAILED, exit_code=1)
    r, _ = step(r, T0 + HOUR + 20_000, driver=crashed2)
    assert r.status is not None and r.status.consecutive_failures == 2
    assert r.status.next_attempt_at_ms == T0 + HOUR + 20_000 + 20_000


def test_backoff_grows_to_its_maximum() -> None:
    r = replica(restartPolicy={"backoff": {"initial": "10s", "max": "1m", "multiplier": 3}})
    assert [backoff_delay_ms(r, n) for n in (1, 2, 3, 4)] == [10_000, 30_000, 60_000, 60_000]


def test_reset_after_clears_the_failure_count() -> None:
    r = started(restartPolicy={"resetAfter": "10m"})
    assert r.status is not None
    r = r.model_copy(update={"status": r.status.model_copy(update={"consecutive_failures": 3})})
    r2, _ = step(r, T0 + 599_000, driver=running(), control=OK)
    assert r2.status is not None and r2.status.consecutive_failures == 3
    r3, _ = step(r, T0 + 600_000, driver=running(), control=OK)
    assert r3.status is not None and r3.status.consecutive_failures == 0


def test_image_that_never_pulls_ends_degraded_with_the_pods_reason() -> None:
    r, _ = step(replica(restartPolicy={"type": "Never"}), T0)
    pulling = PodObservation(
        name="r1-driver-1",
        phase=PodPhase.PENDING,
        reason="ImagePullBackOff",
        message='Back-off pulling image "nope:1"',
    )
    r, _ = step(r, T0 + 5_000, driver=pulling)
    assert conditions(r)["Degraded"] == ("True", "ImagePullBackOff")
    assert r.status is not None and r.status.phase == "Pending"
    r, d = step(r, T0 + 120_000, driver=pulling)
    assert r.status is not None and r.status.phase == "Failed"
    assert conditions(r)["Degraded"] == ("True", "ImagePullBackOff")
    assert "restartPolicy is Never" in r.status.conditions[1].message or any(
        "Never" in c.message for c in r.status.conditions
    )
    assert d.actions == []  # the failed pod stays for inspection
    again, d = step(r, T0 + 200_000, driver=pulling)
    assert again.status is not None and again.status.phase == "Failed" and d.actions == []


def test_invalid_image_name_fails_at_once() -> None:
    r, _ = step(replica(), T0)
    bad = PodObservation(name="r1-driver-1", phase=PodPhase.PENDING, reason="InvalidImageName")
    r, _ = step(r, T0 + 1_000, driver=bad)
    assert r.status is not None and r.status.phase == "BackingOff"


def test_max_attempts_gives_up() -> None:
    r = started(restartPolicy={"maxAttempts": 1})
    crashed = PodObservation(
        name="r1-driver-1", phase=PodPhase.FAILED, exit_code=137, reason="OOMKilled"
    )
    r, _ = step(r, T0 + HOUR, driver=crashed)
    assert r.status is not None and r.status.phase == "Failed"
    assert conditions(r)["Degraded"] == ("True", "OOMKilled")


def test_a_vanished_driver_is_lost_after_the_grace_period() -> None:
    r = started()
    r2, d = step(r, T0 + HOUR, driver_missing_since=T0 + HOUR)
    assert r2.status is not None and r2.status.attempt == 1 and d.actions == []
    assert conditions(r2)["Ready"] == ("False", "DriverMissing")
    r3, d = step(r, T0 + HOUR + 10_000, driver_missing_since=T0 + HOUR)
    assert r3.status is not None and r3.status.phase == "BackingOff"
    assert r3.status.pending_restart is not None and r3.status.pending_restart.value == "DriverLost"
    r4, _ = step(r3, T0 + HOUR + 30_000)
    assert restarts(r4) == {"DriverLost": 1}


def test_spec_change_restarts_without_counting_a_failure() -> None:
    r = started()
    changed = replica(status=r.status, generation=2, image="img:2")
    r2, _ = step(changed, T0 + HOUR, driver=running(), control=OK)
    assert r2.status is not None and r2.status.attempt == 2
    assert restarts(r2) == {"SpecChanged": 1}
    assert r2.status.consecutive_failures == 0
    assert r2.status.observed_generation == 2


def test_restart_policy_change_alone_does_not_restart() -> None:
    r = started()
    changed = replica(status=r.status, generation=2, restartPolicy={"type": "OnFailure"})
    r2, _ = step(changed, T0 + HOUR, driver=running(), control=OK)
    assert r2.status is not None and r2.status.attempt == 1
    assert r2.status.observed_generation == 2


def test_a_failed_replica_starts_again_when_its_spec_changes() -> None:
    r, _ = step(replica(restartPolicy={"type": "Never"}), T0)
    crashed = PodObservation(name="r1-driver-1", phase=PodPhase.FAILED, exit_code=1)
    r, _ = step(r, T0 + 1000, driver=crashed)
    assert r.status is not None and r.status.phase == "Failed"
    fixed = replica(status=r.status, generation=2, image="img:2", restartPolicy={"type": "Never"})
    r2, d = step(fixed, T0 + 2000, driver=crashed)
    assert r2.status is not None and r2.status.attempt == 2 and r2.status.consecutive_failures == 0
    assert Action(ActionKind.DELETE_POD, "r1-driver-1") in d.actions


def test_exit_0_under_on_failure_completes() -> None:
    r = started(restartPolicy={"type": "OnFailure"})
    done = PodObservation(name="r1-driver-1", phase=PodPhase.SUCCEEDED, exit_code=0)
    r, _ = step(r, T0 + HOUR, driver=done)
    assert r.status is not None and r.status.phase == "Completed"


def test_operator_killed_after_recording_the_attempt_converges_to_one_driver() -> None:
    """Status says attempt 2 while attempt 1's pod still runs: delete it, then create 2."""
    r = started(restartStrategy="BreakBeforeMake")
    r, _ = step(r, T0 + 24 * HOUR, driver=running(), control=OK)  # expiration restart recorded
    assert r.status is not None and r.status.driver_pod == "r1-driver-2"
    # a fresh operator: no memory, the old pod still there, the new one not yet created
    again, d = step(r, T0 + 24 * HOUR + 5, other_pods=(running(),))
    assert again.status is not None and again.status.attempt == 2
    assert d.actions == [Action(ActionKind.DELETE_POD, "r1-driver-1")]
    # killed after creating pod 2 as well: both exist; only the old one is deleted
    again, d = step(
        r,
        T0 + 24 * HOUR + 6,
        driver=PodObservation("r1-driver-2", PodPhase.PENDING),
        other_pods=(running(),),
    )
    assert d.actions == [Action(ActionKind.DELETE_POD, "r1-driver-1")]
    assert again.status is not None and again.status.attempt == 2


def test_observed_generation_is_written_on_a_no_op_reconcile() -> None:
    r = started()
    bumped = replica(status=r.status, generation=7)
    r2, d = step(bumped, T0 + 2000, driver=running(), control=OK)
    assert r2.status is not None and r2.status.observed_generation == 7
    assert d.actions == []


def test_observe_pod_reads_waiting_and_terminated_states() -> None:
    pending = observe_pod(
        {
            "metadata": {"name": "p", "labels": {"dataflow.dev/attempt": "4"}},
            "status": {
                "phase": "Pending",
                "containerStatuses": [
                    {
                        "name": "driver",
                        "ready": False,
                        "state": {"waiting": {"reason": "ErrImagePull", "message": "no"}},
                    }
                ],
            },
        }
    )
    assert (pending.phase, pending.reason, pending.attempt) == (PodPhase.PENDING, "ErrImagePull", 4)
    ended = observe_pod(
        {
            "metadata": {"name": "p", "deletionTimestamp": "x"},
            "status": {
                "phase": "Failed",
                "containerStatuses": [
                    {"name": "driver", "state": {"terminated": {"exitCode": 75, "reason": "Error"}}}
                ],
            },
        }
    )
    assert (ended.exit_code, ended.terminated, ended.deleting) == (75, True, True)
    unschedulable = observe_pod(
        {
            "metadata": {"name": "p"},
            "status": {
                "phase": "Pending",
                "conditions": [
                    {
                        "type": "PodScheduled",
                        "status": "False",
                        "reason": "Unschedulable",
                        "message": "0/3 nodes",
                    }
                ],
            },
        }
    )
    assert unschedulable.reason == "Unschedulable"


STORAGE = {"size": "10Gi"}
CLAIM = ClaimObservation("r1-state", "10Gi", "standard", ("ReadWriteOnce",))
"""The claim as the cluster holds it: the default class filled in by admission."""


def test_without_storage_the_state_is_ephemeral_and_says_so() -> None:
    r, d = step(replica(), T0)
    assert r.status is not None and r.status.state_claim is None
    assert conditions(r)["PersistentState"] == ("False", "EphemeralState")
    assert d.actions == [Action(ActionKind.CREATE_POD, "r1-driver-1")]


def test_with_a_state_uri_the_state_survives_and_status_says_where() -> None:
    r, _ = step(replica(stateUri="s3a://bucket/r1"), T0)
    assert r.status is not None and r.status.state_claim is None
    assert conditions(r)["PersistentState"] == ("True", "StateUri")
    (condition,) = [c for c in r.status.conditions if c.type == "PersistentState"]
    assert condition.message.startswith("state at s3a://bucket/r1")
    assert "survives restarts" in condition.message


def test_with_storage_the_claim_is_recorded_before_the_first_pod() -> None:
    r, d = step(replica(storage=STORAGE), T0)
    assert r.status is not None and r.status.state_claim == "r1-state"
    assert conditions(r)["PersistentState"] == ("True", "StateClaim")
    assert d.actions == [Action(ActionKind.CREATE_POD, "r1-driver-1")]
    r, d = step(r, T0 + 1000, driver=running(), control=OK, claim=CLAIM)
    assert conditions(r)["PersistentState"] == ("True", "StateClaim")
    assert [e.type for e in d.events] == ["Normal"]


def test_an_expiration_restart_keeps_the_same_claim() -> None:
    r = started(storage=STORAGE)
    r, _ = step(r, T0 + 24 * HOUR, driver=running(), control=OK, claim=CLAIM)
    assert r.status is not None and r.status.attempt == 2
    assert r.status.state_claim == "r1-state"


def test_adding_storage_restarts_the_driver_to_mount_it() -> None:
    r = started()
    changed = replica(status=r.status, generation=2, storage=STORAGE)
    r2, _ = step(changed, T0 + HOUR, driver=running(), control=OK)
    assert r2.status is not None and r2.status.attempt == 2
    assert restarts(r2) == {"SpecChanged": 1}


def test_shrinking_storage_is_rejected_with_a_condition_and_no_restart() -> None:
    r = started(storage=STORAGE)
    smaller = replica(status=r.status, generation=2, storage={"size": "5Gi"})
    r2, d = step(smaller, T0 + HOUR, driver=running(), control=OK, claim=CLAIM)
    assert r2.status is not None and r2.status.attempt == 1 and d.actions == []
    status, reason = conditions(r2)["PersistentState"]
    assert (status, reason) == ("False", "StorageChangeRejected")
    message = next(c.message for c in r2.status.conditions if c.type == "PersistentState")
    assert "size 5Gi (the claim has 10Gi)" in message and "r1-state" in message
    assert [(e.type, e.reason) for e in d.events] == [("Warning", "StorageChangeRejected")]
    # said once, not on every reconcile
    _, d = step(r2, T0 + HOUR + 1000, driver=running(), control=OK, claim=CLAIM)
    assert d.events == []
    # back to what the claim has: accepted again
    back = replica(status=r2.status, generation=3, storage={"size": "10240Mi"})
    r3, _ = step(back, T0 + HOUR + 2000, driver=running(), control=OK, claim=CLAIM)
    assert conditions(r3)["PersistentState"] == ("True", "StateClaim")


def test_changing_storage_class_or_access_modes_is_rejected() -> None:
    r = started(storage=STORAGE)
    changed = replica(
        status=r.status,
        generation=2,
        storage={"size": "10Gi", "storageClassName": "fast", "accessModes": ["ReadWriteMany"]},
    )
    r2, _ = step(changed, T0 + HOUR, driver=running(), control=OK, claim=CLAIM)
    assert r2.status is not None and r2.status.attempt == 1
    message = next(c.message for c in r2.status.conditions if c.type == "PersistentState")
    assert "storageClassName fast (the claim has standard)" in message
    assert "accessModes ['ReadWriteMany']" in message


def test_growing_storage_is_rejected_too_the_operator_never_resizes() -> None:
    r = started(storage=STORAGE)
    bigger = replica(status=r.status, generation=2, storage={"size": "20Gi"})
    r2, _ = step(bigger, T0 + HOUR, driver=running(), control=OK, claim=CLAIM)
    assert conditions(r2)["PersistentState"] == ("False", "StorageChangeRejected")


def test_observe_claim_reads_size_class_and_modes() -> None:
    claim = observe_claim(
        {
            "metadata": {"name": "r1-state"},
            "spec": {
                "accessModes": ["ReadWriteOnce"],
                "resources": {"requests": {"storage": "10Gi"}},
                "storageClassName": "standard",
            },
        }
    )
    assert claim == CLAIM
