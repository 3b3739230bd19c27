"""The loop behind each Replica's kopf daemon: observe → :func:`decide` → act → sync.

One iteration reads the Replica (parsed with the api model and checked against
:func:`~dataflow_operator.api.replica_rules.replica_problems`: a spec that breaks a rule
gets ``Degraded``/``InvalidSpec`` and a Warning Event, and no driver pod), its driver and
executor pods (from kopf's pod indexes) and the last control-API poll, lets the pure
decision compute the new status and actions, writes the status *first* (a merge patch
of what changed), then acts (:mod:`.resources`: Services, claim, token Secret, pods),
posts the Events and records the metrics. While a driver runs — the serving one, and a
make-before-break successor — :mod:`.control` keeps the desired set of dataflows
installed on it and pulls its ``GET /status`` every poll interval.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Mapping
from typing import Any

import kopf
from pydantic import ValidationError

from dataflow_operator.api.replica import (
    AttemptPhase,
    HandoverOutcome,
    Replica,
    ReplicaStatus,
    RestartReason,
)
from dataflow_operator.api.replica_rules import replica_problems
from dataflow_operator.controller.dataflow.logic import status_patch
from dataflow_operator.controller.errors import describe_validation
from dataflow_operator.controller.kube import ApiError, KubeApi
from dataflow_operator.controller.naming import label_value
from dataflow_operator.controller.replica.control import (
    forget_control,
    observation,
    poll_attempts,
    promote,
)
from dataflow_operator.controller.replica.logic import Decision, ReplicaView, decide
from dataflow_operator.controller.replica.observation import (
    ExecutorObservation,
    PodObservation,
    observe_pod,
)
from dataflow_operator.controller.replica.registry import ReplicaRuntime
from dataflow_operator.controller.replica.resources import (
    act,
    ensure_services,
    observe_state_claim,
)
from dataflow_operator.controller.state import OperatorState, now_ms
from dataflow_operator.controller.status_conditions import from_api, to_api
from dataflow_operator.core.conditions import ConditionStatus, set_condition
from dataflow_operator.logs import get_logger

__all__ = ["run_replica"]

_RESTART_REASONS = {reason.value for reason in RestartReason}


async def _wait(rt: ReplicaRuntime, stopped: kopf.DaemonStopped, delay_s: float) -> None:
    wake = asyncio.ensure_future(rt.wake.wait())
    stop = asyncio.ensure_future(stopped.wait())
    try:
        await asyncio.wait({wake, stop}, timeout=delay_s, return_when=asyncio.FIRST_COMPLETED)
    finally:
        wake.cancel()
        stop.cancel()
    rt.wake.clear()


async def run_replica(
    *,
    state: OperatorState,
    stopped: kopf.DaemonStopped,
    namespace: str,
    name: str,
    body: kopf.Body,
    driver_pods: kopf.Index[Any, PodObservation],
    executor_pods: kopf.Index[Any, ExecutorObservation],
    dataflows: kopf.Index[Any, Mapping[str, Any]],
) -> None:
    """Reconcile one Replica until kopf stops its daemon."""
    rt = state.replicas.open(namespace, name)
    log = get_logger("dataflow_operator.replica").bind(namespace=namespace, name=name)
    try:
        while not stopped:
            started = time.perf_counter()
            try:
                delay_ms = await _iteration(
                    state=state,
                    rt=rt,
                    namespace=namespace,
                    name=name,
                    body=body,
                    driver_pods=driver_pods,
                    executor_pods=executor_pods,
                    dataflows=dataflows,
                )
            except (ApiError, OSError, TimeoutError) as error:
                log.warning("reconcile failed; retrying", error=str(error))
                delay_ms = 2_000
            state.metrics.reconcile_seconds.labels("Replica").observe(time.perf_counter() - started)
            await _wait(rt, stopped, delay_ms / 1000)
    finally:
        state.replicas.close(namespace, name)
        if rt.cluster is not None:
            names = [
                str(b.get("metadata", {}).get("name"))
                for b in dataflows.get((namespace, rt.cluster), [])
            ]
            state.mark_dirty(namespace, rt.cluster, names)


async def _write_status(
    kube: KubeApi, rt: ReplicaRuntime, namespace: str, name: str, new: dict[str, Any]
) -> None:
    old = rt.status or {}
    patch = status_patch(old, new)
    if patch:
        await kube.merge_patch(
            KubeApi.custom(namespace, "replicas", name, status=True), {"status": patch}
        )
    rt.status = new


async def _invalid(
    *,
    state: OperatorState,
    rt: ReplicaRuntime,
    namespace: str,
    name: str,
    body: kopf.Body,
    message: str,
) -> int:
    """A spec the models or the rules reject: say so in status (Degraded/InvalidSpec) and
    a Warning Event; nothing is created."""
    if rt.status is None:
        rt.status = dict(body.get("status") or {})
    try:
        old = from_api(ReplicaStatus.model_validate(rt.status).conditions)
    except ValidationError:
        old = []
    conditions = set_condition(
        old,
        type_="Degraded",
        status=ConditionStatus.TRUE,
        reason="InvalidSpec",
        message=message,
        now=now_ms(),
        observed_generation=(body.get("metadata") or {}).get("generation"),
    )
    new = {**rt.status, "conditions": [c.to_wire() for c in to_api(conditions)]}
    if rt.status.get("conditions") != new["conditions"]:
        kopf.warn(body, reason="InvalidSpec", message=message)
        await _write_status(state.kube, rt, namespace, name, new)
    return state.config.reconcile_interval.millis


async def _iteration(
    *,
    state: OperatorState,
    rt: ReplicaRuntime,
    namespace: str,
    name: str,
    body: kopf.Body,
    driver_pods: kopf.Index[Any, PodObservation],
    executor_pods: kopf.Index[Any, ExecutorObservation],
    dataflows: kopf.Index[Any, Mapping[str, Any]],
) -> int:
    config, now = state.config, now_ms()
    raw = {k: body.get(k) for k in ("apiVersion", "kind", "metadata", "spec")}
    try:
        replica = Replica.model_validate(raw)
    except ValidationError as error:
        message = describe_validation(error)
    else:
        message = "; ".join(str(problem) for problem in replica_problems(replica.spec))
    if message:
        return await _invalid(
            state=state, rt=rt, namespace=namespace, name=name, body=body, message=message
        )
    if rt.status is None:
        rt.status = dict(body.get("status") or {})
    try:
        status = ReplicaStatus.model_validate(rt.status)
    except ValidationError:
        status = ReplicaStatus()
    replica = replica.model_copy(update={"status": status})
    state.replicas.assign(namespace, name, replica.spec.cluster)
    cluster = state.views.view(
        namespace, replica.spec.cluster, dataflows.get((namespace, replica.spec.cluster), [])
    )
    successor_pod = status.handover.driver_pod if status.handover is not None else None
    pods = [p for p in driver_pods.get((namespace, label_value(name)), []) if p.name]
    driver, successor, others = await _confirm(state.kube, namespace, status, pods)
    if driver is None or driver.deleting:
        rt.driver_missing_since = rt.driver_missing_since or now
    else:
        rt.driver_missing_since = None
    if rt.serving is not None and rt.serving.pod != status.driver_pod:
        forget_control(state, rt, namespace)
    if rt.successor is not None and rt.successor.pod != successor_pod:
        rt.successor = None
    decision = decide(
        ReplicaView(
            replica=replica,
            now=now,
            config=config,
            driver=driver,
            other_pods=others,
            driver_missing_since=rt.driver_missing_since,
            control=observation(rt.serving, cluster.desired),
            claim=await observe_state_claim(state.kube, rt, replica),
            successor=successor,
            successor_control=observation(rt.successor, cluster.desired),
            sink_dataflows=tuple(
                d.name for d in cluster.desired.dataflows if d.spec.sink is not None
            ),
            executors=tuple(executor_pods.get((namespace, label_value(name)), [])),
        )
    )
    new = decision.status
    await _write_status(state.kube, rt, namespace, name, new.to_wire())
    await ensure_services(state, rt, replica, new.attempt)
    await act(state, rt, replica, decision)
    _record(state, body, decision)
    if rt.successor is not None and rt.successor.pod == new.driver_pod:
        promote(state, rt, namespace)
    rt.conditions = {c.type: c.status for c in new.conditions}
    rt.expires_at_ms = new.expiration_ms()
    seen = [p for p in (driver, successor) if p is not None]
    replica = replica.model_copy(update={"status": new})
    delay = await poll_attempts(state, rt, replica, cluster, seen)
    return _min(_min(decision.requeue_after_ms, delay), config.reconcile_interval.millis) or 0


def _record(state: OperatorState, body: kopf.Body, decision: Decision) -> None:
    """The decision's Events and metrics."""
    for note in decision.events:
        kopf.event(body, type=note.type, reason=note.reason, message=note.message)
        if note.reason in _RESTART_REASONS:
            state.metrics.restarts.labels(note.reason).inc()
    if decision.unserved_seconds is not None:
        state.metrics.unserved_seconds.observe(decision.unserved_seconds)
    handover = decision.status.last_handover
    if decision.overlap_seconds is not None and handover is not None:
        outcome = handover.outcome
        state.metrics.handover_seconds.labels(outcome.value).observe(decision.overlap_seconds)
        if outcome is not HandoverOutcome.ABANDONED:
            state.metrics.restarts.labels(RestartReason.EXPIRED.value).inc()


async def _confirm(
    kube: KubeApi, namespace: str, status: ReplicaStatus, pods: list[PodObservation]
) -> tuple[PodObservation | None, PodObservation | None, tuple[PodObservation, ...]]:
    """The serving pod, the successor's and the others; the API server settles doubts.

    Before a pod counts as missing (lost, or never created), and while a new attempt
    waits for older pods to go, a GET settles it: a watch can lag or, on emulators,
    drop events, and neither may cost a second driver or a stuck restart.
    """
    successor_name = status.handover.driver_pod if status.handover is not None else None
    driver = next((p for p in pods if p.name == status.driver_pod), None)
    successor = next((p for p in pods if p.name == successor_name), None)
    others = tuple(p for p in pods if p.name not in (status.driver_pod, successor_name))
    for name, seen in ((status.driver_pod, driver), (successor_name, successor)):
        if seen is None and name:
            found = await kube.get(KubeApi.core(namespace, "pods", name))
            if found is not None:
                if name == status.driver_pod:
                    driver = observe_pod(found)
                else:
                    successor = observe_pod(found)
    if others and status.phase is AttemptPhase.CREATING:
        confirmed = []
        for pod in others:
            if await kube.get(KubeApi.core(namespace, "pods", pod.name)) is not None:
                confirmed.append(pod)
        others = tuple(confirmed)
    return driver, successor, others


def _min(a: int | None, b: int | None) -> int | None:
    values = [v for v in (a, b) if v is not None]
    return min(values) if values else None
