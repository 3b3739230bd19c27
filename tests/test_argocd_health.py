"""Argo CD health checks (deploy/argocd/*/*/health.lua) over real status objects.

The scripts run in Lua (lupa) as Argo CD runs them: ``obj`` is the resource, the
returned table has ``status`` and ``message``. Dataflow statuses come from the
controller's own ``dataflow_status``; Replica statuses are the pydantic status model
with the conditions and reasons the controller writes.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Any

import pytest
from lupa import LuaRuntime

from dataflow_operator.api.dataflow import DataflowStatus
from dataflow_operator.api.protocol import DataflowReport
from dataflow_operator.api.replica import ReplicaStatus
from dataflow_operator.controller.replica.logic import DEGRADED, EXPIRED, PROGRESSING, READY
from dataflow_operator.controller.shared.dataflow_logic import (
    ReplicaSeen,
    Validity,
    dataflow_status,
)
from dataflow_operator.controller.status_conditions import to_api
from dataflow_operator.core import errors
from dataflow_operator.core.conditions import Condition, ConditionStatus

ROOT = Path(__file__).resolve().parents[1]
SCRIPTS = ROOT / "deploy/argocd/dataflow.dev"
NOW = 1_767_225_600_000


def health(kind: str, obj: dict[str, Any]) -> tuple[str, str]:
    lua = LuaRuntime(unpack_returned_tuples=True)
    lua.globals().obj = lua.table_from(obj, recursive=True)
    result = lua.execute((SCRIPTS / kind / "health.lua").read_text())
    return result["status"], result["message"]


def resource(kind: str, generation: int, status: Any) -> dict[str, Any]:
    obj: dict[str, Any] = {
        "apiVersion": "dataflow.dev/v1alpha1",
        "kind": kind,
        "metadata": {"name": "x", "namespace": "default", "generation": generation},
        "spec": {},
    }
    if status is not None:
        obj["status"] = status.to_wire()
    return obj


# --- Dataflow -----------------------------------------------------------------------


def dataflow(
    validity: Validity, replicas: list[ReplicaSeen], generation: int = 2, observed: int = 2
) -> dict[str, Any]:
    status = dataflow_status(observed, DataflowStatus(), validity, replicas, NOW)
    return resource("Dataflow", generation, status)


def report(hydrated: bool, generation: int = 2) -> DataflowReport:
    return DataflowReport(name="x", generation=generation, hydrated=hydrated, frontier=[NOW])


def test_dataflow_hydrated_on_a_ready_replica_is_healthy() -> None:
    obj = dataflow(Validity(True), [ReplicaSeen("r1", True, report(True))])
    assert health("Dataflow", obj) == ("Healthy", "Hydrated: hydrated on r1")


@pytest.mark.parametrize(
    "replicas",
    [
        [],  # accepted, on no replica yet
        [ReplicaSeen("r1", True, report(False))],  # hydrating
        [ReplicaSeen("r1", False, report(True))],  # replica not ready (handing over)
        [ReplicaSeen("r1", True, report(True, generation=1))],  # still the old spec
    ],
)
def test_dataflow_not_hydrated_is_progressing(replicas: list[ReplicaSeen]) -> None:
    status, message = health("Dataflow", dataflow(Validity(True), replicas))
    assert (status, message) == (
        "Progressing",
        "Hydrating: NotHydrated: not hydrated on any ready replica",
    )


def test_dataflow_of_a_generation_not_yet_observed_is_progressing() -> None:
    obj = dataflow(Validity(True), [ReplicaSeen("r1", True, report(True))], generation=3)
    assert health("Dataflow", obj) == ("Progressing", "Generation 3 not yet observed")


def test_dataflow_without_status_is_progressing() -> None:
    assert health("Dataflow", resource("Dataflow", 1, None))[0] == "Progressing"


def _domain_reasons() -> list[str]:
    found, pending = set(), [errors.DomainError]
    while pending:
        cls = pending.pop()
        found.add(cls.reason)
        pending.extend(cls.__subclasses__())
    return sorted(found)


@pytest.mark.parametrize("reason", _domain_reasons())
def test_invalid_dataflow_is_degraded_with_reason_and_message(reason: str) -> None:
    obj = dataflow(Validity(False, reason, "what is wrong"), [])
    assert health("Dataflow", obj) == ("Degraded", f"{reason}: what is wrong")


# --- Replica ------------------------------------------------------------------------


def replica(
    *conditions: tuple[str, bool, str, str], generation: int = 1, observed: int = 1
) -> dict[str, Any]:
    built = [
        Condition(
            type_,
            ConditionStatus.TRUE if on else ConditionStatus.FALSE,
            reason,
            message,
            "2026-01-01T00:00:00Z",
        )
        for type_, on, reason, message in conditions
    ]
    status = ReplicaStatus(observed_generation=observed, conditions=to_api(built))
    return resource("Replica", generation, status)


RUNNING = (
    (READY, True, "DriverReady", "driver running and control API answering"),
    (PROGRESSING, False, "Stable", "attempt 1 is running"),
    (DEGRADED, False, "Healthy", ""),
)


def test_running_replica_is_healthy() -> None:
    assert health("Replica", replica(*RUNNING)) == (
        "Healthy",
        "DriverReady: driver running and control API answering",
    )


@pytest.mark.parametrize(
    ("conditions", "message"),
    [
        (
            [
                (READY, False, "Creating", "starting r1-driver-1"),
                (PROGRESSING, True, "Created", "attempt 1: creating driver pod r1-driver-1"),
            ],
            "Created: attempt 1: creating driver pod r1-driver-1",
        ),
        (
            [
                (READY, False, "ControlApiUnavailable", "refused"),
                (
                    PROGRESSING,
                    True,
                    "DriverStarting",
                    "driver running, waiting for its control API",
                ),
            ],
            "DriverStarting: driver running, waiting for its control API",
        ),
        (  # the hand-over at expiration
            [
                (READY, False, "Restarting", "starting r1-driver-2"),
                (PROGRESSING, True, "Expired", "attempt 2"),
                (EXPIRED, True, "RestartingAtExpiration", "expired"),
            ],
            "Expired: attempt 2",
        ),
    ],
)
def test_starting_or_handing_over_replica_is_progressing(
    conditions: list[tuple[str, bool, str, str]], message: str
) -> None:
    assert health("Replica", replica(*conditions)) == ("Progressing", message)


def test_replica_of_a_generation_not_yet_observed_is_progressing() -> None:
    obj = replica(*RUNNING, generation=2, observed=1)
    assert health("Replica", obj) == ("Progressing", "Generation 2 not yet observed")


@pytest.mark.parametrize(
    "reason",
    [
        "ImagePullBackOff",
        "ErrImagePull",
        "CreateContainerConfigError",
        "DriverNotCreated",
        "OOMKilled",
        "Error",
    ],
)
def test_failing_replica_is_degraded_with_reason_and_message(reason: str) -> None:
    obj = replica(
        (READY, False, reason, "the driver failed"),
        (PROGRESSING, True, "BackingOff", "failure 1; next attempt in backoff"),
        (DEGRADED, True, reason, "the driver failed; restarting in 10s"),
    )
    assert health("Replica", obj) == ("Degraded", f"{reason}: the driver failed; restarting in 10s")


def test_replica_that_stopped_for_good_is_degraded() -> None:
    obj = replica(
        (READY, False, "DriverCompleted", "the driver exited with code 0"),
        (PROGRESSING, False, "DriverCompleted", "restartPolicy is Never"),
    )
    assert health("Replica", obj) == ("Degraded", "DriverCompleted: the driver exited with code 0")


def test_argocd_cm_snippet_is_generated_from_the_scripts() -> None:
    spec = importlib.util.spec_from_file_location(
        "render_argocd_cm", ROOT / "tools/render_argocd_cm.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    assert set(module.health_scripts()) == {"dataflow.dev_Dataflow", "dataflow.dev_Replica"}
    assert (ROOT / "deploy/argocd/argocd-cm.yaml").read_text() == module.render(), (
        "deploy/argocd/argocd-cm.yaml is stale: run make argocd"
    )
