"""What a Replica's status says of its executors, as data: executor pods in, status out."""

from __future__ import annotations

from typing import Any

import pytest

from dataflow_operator.api.replica import Replica
from dataflow_operator.controller.replica.executors import FAILING_WINDOW_MS, telling_line
from dataflow_operator.controller.replica.logic import Decision
from dataflow_operator.controller.replica.observation import (
    ExecutorObservation,
    PodPhase,
    observe_executor,
)
from dataflow_operator.core.time import format_timestamp
from tests.controller.test_replica_logic import OK, T0, conditions, replica, running, step

URI = "s3a://bucket/r1"
OOM_LOG = """\
26/11/27 10:00:01 INFO Executor: Running task 3.0 in stage 7.0 (TID 41)
26/11/27 10:00:02 ERROR Executor: Exception in task 3.0 in stage 7.0 (TID 41)
java.lang.OutOfMemoryError: Java heap space
\tat java.base/java.util.Arrays.copyOf(Arrays.java:3537)
\t... 12 more
"""


def executor_pod(
    name: str,
    driver: str = "r1-driver-1",
    *,
    phase: str = "Running",
    terminated: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """An executor Pod as Spark creates it (owned by its driver pod) and the kubelet
    reports it."""
    state = {"terminated": terminated} if terminated else {"running": {"startedAt": "x"}}
    return {
        "metadata": {
            "name": name,
            "labels": {"dataflow.dev/replica": "r1", "dataflow.dev/role": "executor"},
            "ownerReferences": [
                {"apiVersion": "v1", "kind": "Pod", "name": driver, "uid": "d", "controller": True}
            ],
        },
        "status": {
            "phase": phase,
            "containerStatuses": [{"name": "executor", "ready": True, "state": state}],
        },
    }


def oom_killed(name: str, at: int, driver: str = "r1-driver-1") -> ExecutorObservation:
    return observe_executor(
        executor_pod(
            name,
            driver,
            phase="Failed",
            terminated={
                "exitCode": 137,
                "reason": "OOMKilled",
                "message": OOM_LOG,
                "finishedAt": format_timestamp(at).replace(".000Z", "Z"),
            },
        )
    )


def up(name: str, driver: str = "r1-driver-1") -> ExecutorObservation:
    return observe_executor(executor_pod(name, driver))


def with_executors() -> Replica:
    r, _ = step(replica(stateUri=URI, executor={"instances": 2}), T0)
    return r


def look(r: Replica, now: int, *executors: ExecutorObservation) -> tuple[Replica, Decision]:
    return step(r, now, driver=running(), control=OK, executors=executors)


def test_an_executor_pod_is_reduced_to_its_driver_and_its_end() -> None:
    seen = oom_killed("r1-exec-1", T0)
    assert (seen.name, seen.driver, seen.phase) == ("r1-exec-1", "r1-driver-1", PodPhase.FAILED)
    assert (seen.exit_code, seen.reason, seen.finished_at) == (137, "OOMKilled", T0)
    assert seen.failed and not seen.running
    assert up("r1-exec-2").running and not up("r1-exec-2").failed


def test_status_counts_the_running_executors_of_the_current_attempt() -> None:
    r, _ = look(with_executors(), T0 + 1000, up("r1-exec-1"), up("r1-exec-9", "r1-driver-0"))
    assert r.status is not None
    assert r.status.executors == "1/2 running"
    assert (r.status.executors_desired, r.status.executors_running) == (2, 1)
    assert conditions(r)["ExecutorsFailing"] == ("False", "ExecutorsRunning")


def test_an_oom_killed_executor_is_named_once_in_status_condition_and_event() -> None:
    r, _ = look(with_executors(), T0 + 1000, up("r1-exec-1"), up("r1-exec-2"))
    r, d = look(r, T0 + 5000, up("r1-exec-1"), oom_killed("r1-exec-2", T0 + 4000))
    assert r.status is not None
    failure = r.status.last_executor_failure
    assert failure is not None
    assert (failure.pod, failure.exit_code, failure.reason) == ("r1-exec-2", 137, "OOMKilled")
    assert failure.message == "java.lang.OutOfMemoryError: Java heap space"
    assert r.status.executor_failures == 1
    status, reason = conditions(r)["ExecutorsFailing"]
    assert (status, reason) == ("True", "OOMKilled")
    (event,) = [e for e in d.events if e.reason == "ExecutorFailed"]
    assert event.type == "Warning"
    assert event.message.startswith("executor r1-exec-2 exited with code 137 (OOMKilled): java")
    # the same failed pod seen again is not a second failure, nor a second Event
    r, d = look(r, T0 + 6000, up("r1-exec-1"), oom_killed("r1-exec-2", T0 + 4000))
    assert r.status is not None and r.status.executor_failures == 1
    assert not [e for e in d.events if e.reason == "ExecutorFailed"]
    # Spark replaces it; another fails later: counted
    r, _ = look(r, T0 + 9000, up("r1-exec-1"), up("r1-exec-3"), oom_killed("r1-exec-4", T0 + 8000))
    assert r.status is not None and r.status.executor_failures == 2
    assert r.status.executors == "2/2 running"


def test_executors_failing_clears_a_while_after_the_last_failure() -> None:
    r, _ = look(with_executors(), T0 + 1000, oom_killed("r1-exec-1", T0 + 500))
    assert conditions(r)["ExecutorsFailing"][0] == "True"
    r, d = look(r, T0 + 2000, up("r1-exec-2"), up("r1-exec-3"))
    assert conditions(r)["ExecutorsFailing"][0] == "True"
    assert d.requeue_after_ms is not None and d.requeue_after_ms <= FAILING_WINDOW_MS
    r, _ = look(r, T0 + 500 + FAILING_WINDOW_MS, up("r1-exec-2"), up("r1-exec-3"))
    assert conditions(r)["ExecutorsFailing"] == ("False", "ExecutorsRunning")
    assert r.status is not None and r.status.executor_failures == 1  # kept for the attempt


def test_a_new_attempt_counts_afresh() -> None:
    r, _ = look(with_executors(), T0 + 1000, oom_killed("r1-exec-1", T0 + 500))
    assert r.status is not None
    restarted = r.model_copy(
        update={"status": r.status.model_copy(update={"attempt": 2, "driver_pod": "r1-driver-2"})}
    )
    r, _ = step(restarted, T0 + 3000, driver=running("r1-driver-2"), control=OK, executors=(
        oom_killed("r1-exec-1", T0 + 500), up("r1-exec-5", "r1-driver-2"),
    ))  # fmt: skip
    assert r.status is not None
    assert r.status.executor_failures == 0 and r.status.last_executor_failure is None
    assert r.status.executors == "1/2 running"


@pytest.mark.parametrize(
    ("spec", "summary"),
    [
        ({}, "0 (no shared storage)"),
        ({"storage": {"size": "1Gi"}}, "0 (no shared storage)"),
        ({"executor": {"instances": 0}}, "0 (no shared storage)"),
        ({"stateUri": URI, "executor": {"instances": 0}}, "0 (in the driver)"),
        ({"stateUri": URI}, "0 (in the driver)"),
        ({"stateUri": URI, "executor": {"instances": 1}}, "0/1 running"),
    ],
)
def test_status_says_why_spark_runs_in_the_driver(spec: dict[str, Any], summary: str) -> None:
    r, _ = step(replica(**spec), T0)
    assert r.status is not None
    assert r.status.executors == summary
    if summary.startswith("0 ("):
        assert r.status.executors_desired == 0
        assert conditions(r)["ExecutorsFailing"] == ("False", "NoExecutors")


@pytest.mark.parametrize(
    ("message", "line"),
    [
        (OOM_LOG, "java.lang.OutOfMemoryError: Java heap space"),
        (
            "Exception in thread main org.apache.spark.SparkException: boom\n"
            "\tat a.b(C.java:1)\n"
            "Caused by: java.net.UnknownHostException: driver-1.r1-attempts\n"
            "\tat d.e(F.java:2)\n",
            "java.net.UnknownHostException: driver-1.r1-attempts",
        ),
        ("", ""),
        ("x" * 1000, "x" * 256),
    ],
)
def test_the_telling_line_of_a_termination_message(message: str, line: str) -> None:
    assert telling_line(message) == line
