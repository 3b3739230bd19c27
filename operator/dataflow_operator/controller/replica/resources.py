"""The Kubernetes objects behind a Replica, made to exist: its Services, state claim,
control-token Secret and driver pods.

Every step is idempotent (a 409 on create is success), so an operator restarted at any
point repeats it safely.
"""

from __future__ import annotations

import base64
import binascii
import json
import secrets
from typing import Any

from dataflow_operator.api.replica import Replica, ReplicaStatus
from dataflow_operator.controller.kube import ApiError, KubeApi
from dataflow_operator.controller.manifests import (
    CONTROL_TOKEN_KEY,
    Attempt,
    build_attempts_service,
    build_control_token_secret,
    build_driver_pod,
    build_driver_service,
    build_state_claim,
    driver_service_selector,
)
from dataflow_operator.controller.naming import control_token_secret_name, state_claim_name
from dataflow_operator.controller.replica.logic import ActionKind, Decision
from dataflow_operator.controller.replica.observation import ClaimObservation, observe_claim
from dataflow_operator.controller.replica.registry import ReplicaRuntime
from dataflow_operator.controller.state import OperatorState, now_ms

__all__ = [
    "act",
    "control_token",
    "ensure_control_token",
    "ensure_services",
    "ensure_state_claim",
    "observe_state_claim",
]


async def observe_state_claim(
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


async def ensure_state_claim(kube: KubeApi, rt: ReplicaRuntime, replica: Replica) -> None:
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


async def ensure_control_token(kube: KubeApi, rt: ReplicaRuntime, replica: Replica) -> None:
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


async def control_token(kube: KubeApi, rt: ReplicaRuntime, replica: Replica) -> str | None:
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


async def ensure_services(
    state: OperatorState, rt: ReplicaRuntime, replica: Replica, serving_attempt: int
) -> None:
    """The attempts Service exists; the driver Service exists and selects the serving attempt.

    Idempotent (a 409 on create is success), so an operator restarted at any point gets
    there again; the selector is written again after every cutover, with the ports (the
    Spark UI's comes and goes with ``spec.sparkUi``), as are an existing attempts
    Service's ports once per operator run.
    """
    namespace = replica.metadata.namespace or "default"
    if not rt.attempts_service_ensured:
        attempts = build_attempts_service(replica, state.config)
        if not await _create_service(state.kube, namespace, attempts):
            path = KubeApi.core(namespace, "services", attempts["metadata"]["name"])
            await state.kube.merge_patch(path, {"spec": {"ports": attempts["spec"]["ports"]}})
        rt.attempts_service_ensured = True
    if serving_attempt < 1 or rt.service_attempt == serving_attempt:
        return
    service = build_driver_service(replica, state.config, serving_attempt)
    if not await _create_service(state.kube, namespace, service):
        path = KubeApi.core(namespace, "services", service["metadata"]["name"])
        selector = driver_service_selector(replica, serving_attempt)
        ports = service["spec"]["ports"]
        await state.kube.merge_patch(path, {"spec": {"selector": selector, "ports": ports}})
    rt.service_attempt = serving_attempt


async def _create_service(kube: KubeApi, namespace: str, service: dict[str, Any]) -> bool:
    """Create a Service; False when it existed already."""
    try:
        await kube.create(KubeApi.core(namespace, "services"), service)
    except ApiError as error:
        if error.status != 409:
            raise
        return False
    return True


async def act(
    state: OperatorState, rt: ReplicaRuntime, replica: Replica, decision: Decision
) -> None:
    namespace = replica.metadata.namespace or "default"
    for action in decision.actions:
        path = KubeApi.core(namespace, "pods", action.pod)
        if action.kind is ActionKind.DELETE_POD:
            await state.kube.delete(path)
            continue
        await ensure_state_claim(state.kube, rt, replica)
        await ensure_control_token(state.kube, rt, replica)
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
