"""The loop behind each Replica's kopf daemon: observe → :func:`decide` → act → sync.

One iteration reads the Replica (parsed with the api model and checked against
:func:`~dataflow_operator.api.replica_rules.replica_problems`: a spec that breaks a rule
gets ``Degraded``/``InvalidSpec`` and a Warning Event, and no driver pod), its driver pods
(from kopf's pod index) and the last control-API poll, lets the pure decision compute the
new status and actions, writes the status *first* (a merge patch of what changed), then
acts. Before a driver pod it ensures the Replica's state claim and its control-token
Secret; every control-API request carries that token. While the driver runs, it keeps
the replica's desired set of dataflows in sync (``PUT /dataflows``) and pulls
``GET /status`` every poll interval.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import json
import secrets
import time
from collections.abc import Iterable, Mapping
from typing import Any

import kopf
from pydantic import ValidationError

from dataflow_operator.api.protocol import DesiredDataflows, ReplicaPhase, ReplicaReport
from dataflow_operator.api.replica import HandoverOutcome, Replica, ReplicaStatus, RestartReason
from dataflow_operator.api.replica_rules import replica_problems
from dataflow_operator.controller.control_client import ControlError
from dataflow_operator.controller.dataflow_logic import status_patch
from dataflow_operator.controller.errors import describe_validation
from dataflow_operator.controller.kube import ApiError, KubeApi
from dataflow_operator.controller.manifests import (
    CONTROL_TOKEN_KEY,
    Attempt,
    build_attempts_service,
    build_control_token_secret,
    build_driver_pod,
    build_driver_service,
    build_state_claim,
    control_address,
    driver_service_selector,
)
from dataflow_operator.controller.naming import (
    control_token_secret_name,
    label_value,
    state_claim_name,
)
from dataflow_operator.controller.observation import (
    ClaimObservation,
    PodObservation,
    PodPhase,
    observe_claim,
    observe_pod,
)
from dataflow_operator.controller.replica_logic import (
    ActionKind,
    ControlObservation,
    Decision,
    Phase,
    ReplicaView,
    decide,
)
from dataflow_operator.controller.state import (
    AttemptLink,
    ClusterView,
    OperatorState,
    ReplicaRuntime,
    now_ms,
)
from dataflow_operator.controller.status_conditions import from_api, to_api
from dataflow_operator.core.conditions import ConditionStatus, set_condition
from dataflow_operator.core.durations import parse_duration
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
    dataflows: kopf.Index[Any, Mapping[str, Any]],
) -> None:
    """Reconcile one Replica until kopf stops its daemon."""
    key = (namespace, name)
    rt = state.replicas.setdefault(key, ReplicaRuntime())
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
                    dataflows=dataflows,
                )
            except (ApiError, OSError, TimeoutError) as error:
                log.warning("reconcile failed; retrying", error=str(error))
                delay_ms = 2_000
            state.metrics.reconcile_seconds.labels("Replica").observe(time.perf_counter() - started)
            await _wait(rt, stopped, delay_ms / 1000)
    finally:
        state.replicas.pop(key, None)
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
    rt.cluster = replica.spec.cluster
    cluster = state.cluster_view(
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
        _forget_control(state, rt, namespace)
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
            control=_observation(rt.serving, cluster.desired),
            claim=await _observe_claim(state.kube, rt, replica),
            successor=successor,
            successor_control=_observation(rt.successor, cluster.desired),
            sink_dataflows=tuple(
                d.name for d in cluster.desired.dataflows if d.spec.sink is not None
            ),
        )
    )
    new = decision.status
    await _write_status(state.kube, rt, namespace, name, new.to_wire())
    await _ensure_services(state, rt, replica, new.attempt)
    await _act(state, rt, replica, decision)
    _record(state, body, decision)
    if rt.successor is not None and rt.successor.pod == new.driver_pod:
        _promote(state, rt, namespace)
    rt.conditions = {c.type: c.status for c in new.conditions}
    rt.expires_at_ms = (
        (new.start_time_ms or 0) + _offset_ms(new.expiration_offset) if new.expires_at else None
    )
    seen = [p for p in (driver, successor) if p is not None]
    delay = await _poll(state, rt, replica.model_copy(update={"status": new}), cluster, seen)
    return _min(_min(decision.requeue_after_ms, delay), config.reconcile_interval.millis) or 0


async def _poll(
    state: OperatorState,
    rt: ReplicaRuntime,
    replica: Replica,
    cluster: ClusterView,
    pods: list[PodObservation],
) -> int | None:
    """Sync and poll the serving driver, and a successor that runs; ms until next time.

    ``pods``: the serving and successor pods as observed before the decision (a cutover
    may have swapped their roles since).
    """
    status = replica.status or ReplicaStatus()
    namespace = replica.metadata.namespace or "default"
    by_name = {p.name: p for p in pods}
    delay: int | None = None
    driver = by_name.get(status.driver_pod or "")
    if status.phase == Phase.RUNNING.value and driver is not None:
        rt.serving = rt.serving or AttemptLink(driver.name)
        delay = await _sync(
            state,
            rt,
            rt.serving,
            replica=replica,
            attempt=status.attempt,
            pod=driver,
            cluster=cluster,
        )
    elif rt.serving is not None:
        _forget_control(state, rt, namespace)
    handover = status.handover
    successor = by_name.get(handover.driver_pod) if handover is not None else None
    if handover is not None and successor is not None and successor.phase is PodPhase.RUNNING:
        rt.successor = rt.successor or AttemptLink(successor.name)
        poll = await _sync(
            state,
            rt,
            rt.successor,
            replica=replica,
            attempt=handover.attempt,
            pod=successor,
            cluster=cluster,
        )
        delay = _min(delay, poll)
    return delay


def _observation(link: AttemptLink | None, desired: DesiredDataflows) -> ControlObservation | None:
    """What the last poll of one attempt says, for the decision."""
    if link is None:
        return None
    return ControlObservation(link.ready, link.report, link.error, _hydrated(link, desired))


def _hydrated(link: AttemptLink, desired: DesiredDataflows) -> bool:
    """Every desired dataflow is installed at its generation and hydrated on the attempt."""
    report = link.report
    if not link.ready or report is None or report.phase is not ReplicaPhase.RUNNING:
        return False
    if link.applied is None:
        return False  # the desired set was never accepted: the report is not about it
    reported = {d.name: d for d in report.dataflows if not d.dropping}
    for wanted in desired.dataflows:
        seen = reported.get(wanted.name)
        if seen is None or not seen.hydrated:
            return False
        if wanted.generation is not None and seen.generation not in (None, wanted.generation):
            return False
    return True


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


def _promote(state: OperatorState, rt: ReplicaRuntime, namespace: str) -> None:
    """After a cutover: the successor's control link serves, its reports reach the Dataflows."""
    link = rt.successor
    assert link is not None
    _forget_control(state, rt, namespace)
    rt.serving, rt.successor = link, None
    if rt.cluster is not None and link.report is not None:
        state.mark_dirty(namespace, rt.cluster, [d.name for d in link.report.dataflows])


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
    if others and status.phase == Phase.CREATING.value:
        confirmed = []
        for pod in others:
            if await kube.get(KubeApi.core(namespace, "pods", pod.name)) is not None:
                confirmed.append(pod)
        others = tuple(confirmed)
    return driver, successor, others


async def _observe_claim(
    kube: KubeApi, rt: ReplicaRuntime, replica: Replica
) -> ClaimObservation | None:
    """The state claim, read again only when ``spec.storage`` changed or none was seen."""
    storage = replica.spec.storage
    if storage is None:
        rt.claim, rt.claim_spec = None, None
        return None
    wanted = json.dumps(storage.to_wire(), sort_keys=True)
    if rt.claim is None or rt.claim_spec != wanted:
        namespace = replica.metadata.namespace or "default"
        path = KubeApi.core(
            namespace, "persistentvolumeclaims", state_claim_name(replica.metadata.name)
        )
        found = await kube.get(path)
        rt.claim = observe_claim(found) if found is not None else None
        rt.claim_spec = wanted
    return rt.claim


async def _ensure_claim(kube: KubeApi, rt: ReplicaRuntime, replica: Replica) -> None:
    """Create the state claim unless it exists (409 is success); before every driver pod.

    Not cached like the Service: a driver pod is created rarely, and a claim deleted by
    hand must come back before a pod that would otherwise stay Pending on it.
    """
    claim = build_state_claim(replica)
    if claim is None:
        return
    namespace = replica.metadata.namespace or "default"
    try:
        created = await kube.create(KubeApi.core(namespace, "persistentvolumeclaims"), claim)
    except ApiError as error:
        if error.status != 409:
            raise
        return
    rt.claim = observe_claim(created or claim)


async def _ensure_token(kube: KubeApi, rt: ReplicaRuntime, replica: Replica) -> None:
    """Create the control-token Secret unless it exists; before every driver pod.

    A 409 means it exists (an earlier attempt, or a crash after the create): its token
    stays, and is read back when the operator next talks to the replica.
    """
    token = secrets.token_urlsafe(32)
    namespace = replica.metadata.namespace or "default"
    secret = build_control_token_secret(replica, token)
    try:
        await kube.create(KubeApi.core(namespace, "secrets"), secret)
    except ApiError as error:
        if error.status != 409:
            raise
        rt.token = None
        return
    rt.token = token


async def _control_token(kube: KubeApi, rt: ReplicaRuntime, replica: Replica) -> str | None:
    """The replica's control token, cached per Replica; read from its Secret when unknown."""
    if rt.token is None:
        namespace = replica.metadata.namespace or "default"
        name = control_token_secret_name(replica.metadata.name)
        found = await kube.get(KubeApi.core(namespace, "secrets", name))
        encoded = ((found or {}).get("data") or {}).get(CONTROL_TOKEN_KEY)
        if encoded:
            try:
                rt.token = base64.b64decode(encoded, validate=True).decode()
            except (binascii.Error, UnicodeDecodeError):
                rt.token = None
    return rt.token


def _offset_ms(offset: str | None) -> int:
    return parse_duration(offset).millis if offset else 0


def _min(a: int | None, b: int | None) -> int | None:
    values = [v for v in (a, b) if v is not None]
    return min(values) if values else None


def _forget_control(state: OperatorState, rt: ReplicaRuntime, namespace: str) -> None:
    """The serving driver changed or stopped: its reports no longer describe the replica."""
    had = rt.report
    rt.serving = None
    if had is not None and rt.cluster is not None:
        state.mark_dirty(namespace, rt.cluster, [d.name for d in had.dataflows])


async def _ensure_services(
    state: OperatorState, rt: ReplicaRuntime, replica: Replica, serving_attempt: int
) -> None:
    """The attempts Service exists; the driver Service exists and selects the serving attempt.

    Idempotent (a 409 on create is success), so an operator restarted at any point gets
    there again; the selector is written again after every cutover.
    """
    namespace = replica.metadata.namespace or "default"
    if not rt.attempts_service_ensured:
        await _create(state.kube, namespace, build_attempts_service(replica, state.config))
        rt.attempts_service_ensured = True
    if serving_attempt < 1 or rt.service_attempt == serving_attempt:
        return
    service = build_driver_service(replica, state.config, serving_attempt)
    if not await _create(state.kube, namespace, service):
        path = KubeApi.core(namespace, "services", service["metadata"]["name"])
        selector = driver_service_selector(replica, serving_attempt)
        await state.kube.merge_patch(path, {"spec": {"selector": selector}})
    rt.service_attempt = serving_attempt


async def _create(kube: KubeApi, namespace: str, service: dict[str, Any]) -> bool:
    """Create a Service; False when it existed already."""
    try:
        await kube.create(KubeApi.core(namespace, "services"), service)
    except ApiError as error:
        if error.status != 409:
            raise
        return False
    return True


async def _act(
    state: OperatorState, rt: ReplicaRuntime, replica: Replica, decision: Decision
) -> None:
    namespace = replica.metadata.namespace or "default"
    for action in decision.actions:
        path = KubeApi.core(namespace, "pods", action.pod)
        if action.kind is ActionKind.DELETE_POD:
            await state.kube.delete(path)
            continue
        await _ensure_claim(state.kube, rt, replica)
        await _ensure_token(state.kube, rt, replica)
        pod = build_driver_pod(replica, state.config, _attempt_of(decision.status, action.pod))
        try:
            await state.kube.create(KubeApi.core(namespace, "pods"), pod)
        except ApiError as error:
            if error.status != 409:  # already created before a crash: same name, same attempt
                raise


def _attempt_of(status: ReplicaStatus, pod: str) -> Attempt:
    """The recorded attempt a pod to create belongs to: the serving one or the successor."""
    handover = status.handover
    if handover is not None and handover.driver_pod == pod:
        return Attempt(
            handover.attempt,
            pod,
            handover.start_time_ms,
            state_dir=handover.state_dir,
            keep_state_dir=status.state_dir,
        )
    return Attempt(status.attempt, pod, status.start_time_ms or now_ms(), status.state_dir)


async def _sync(
    state: OperatorState,
    rt: ReplicaRuntime,
    link: AttemptLink,
    *,
    replica: Replica,
    attempt: int,
    pod: PodObservation,
    cluster: ClusterView,
) -> int:
    """Install the desired set on one attempt if it changed, pull its status; ms until the
    next poll. Only the serving attempt's reports reach the Dataflows' status."""
    config, now = state.config, now_ms()
    namespace = replica.metadata.namespace or "default"
    serving = link is rt.serving
    if link.applied == cluster.digest and now < link.next_poll_at:
        return link.next_poll_at - now
    address = control_address(replica, config.control_port, attempt, pod.ip)
    log = get_logger("dataflow_operator.replica").bind(
        namespace=namespace, name=replica.metadata.name, pod=link.pod
    )
    was_ready = link.ready
    token = await _control_token(state.kube, rt, replica)
    try:
        if link.applied != cluster.digest:
            result = await state.control.put_dataflows(address, cluster.desired, token)
            link.applied = cluster.digest
            if result.failed:
                for dataflow, why in sorted(result.failed.items()):
                    log.warning("dataflow failed to install", dataflow=dataflow, error=why)
        report = await state.control.status(address, token)
    except ControlError as error:
        if error.status == 401:
            rt.token = None  # read the Secret again: it may have been replaced
        state.metrics.control_errors.labels(error.reason).inc()
        link.ready, link.error = False, error.message
        link.next_poll_at = now_ms() + config.status_poll_interval.millis
        if was_ready and serving:
            _mark_report(state, rt, namespace, link, None)
            return 0
        return config.status_poll_interval.millis
    link.ready, link.error = True, None
    if serving:
        _mark_report(state, rt, namespace, link, report)
    else:
        link.report, link.report_at = report, now_ms()
    installed = {d.name for d in report.dataflows if not d.dropping}  # dropping: on its way out
    if installed != {d.name for d in cluster.desired.dataflows}:
        link.applied = None  # the replica lost or kept something: send the full set again
    link.next_poll_at = now_ms() + config.status_poll_interval.millis
    return 0 if not was_ready else config.status_poll_interval.millis


def _names(report: ReplicaReport | None) -> Iterable[str]:
    return [d.name for d in report.dataflows] if report is not None else []


def _mark_report(
    state: OperatorState,
    rt: ReplicaRuntime,
    namespace: str,
    link: AttemptLink,
    report: ReplicaReport | None,
) -> None:
    """Keep the serving attempt's new report; mark the dataflows whose view changed."""
    old = link.report
    link.report, link.report_at = report, now_ms()
    if rt.cluster is None:
        return
    before = {d.name: d for d in old.dataflows} if old is not None else {}
    after = {d.name: d for d in report.dataflows} if report is not None else {}
    changed = [n for n in set(before) | set(after) if before.get(n) != after.get(n)]
    if old is None or report is None:
        changed = list(set(_names(old)) | set(_names(report)))
    if changed:
        state.mark_dirty(namespace, rt.cluster, changed)
