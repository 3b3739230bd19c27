"""The driver Pod of an attempt, the executor pod template, and the control-token Secret.

The driver runs ``dataflow-operator replica`` with the attempt's start time, expiration
offset and every other setting injected (names in :mod:`dataflow_operator.api.injection`);
executors get what the driver gets and an executor needs through the template.
"""

from __future__ import annotations

import base64
import hashlib
import json
from typing import Any

from dataflow_operator.api import injection
from dataflow_operator.api.naming import CONTROL_PORT_NAME
from dataflow_operator.api.replica import Replica
from dataflow_operator.controller.config import OperatorConfig
from dataflow_operator.controller.manifests.common import (
    DRIVER_BLOCK_MANAGER_PORT,
    DRIVER_PORT,
    UI_PORT,
    UI_PORT_NAME,
    Attempt,
    effective_offset,
    image_of,
    namespace_of,
    owner_reference,
    service_account_of,
)
from dataflow_operator.controller.manifests.sizing import driver_memory
from dataflow_operator.controller.manifests.spark import spark_conf, spark_master
from dataflow_operator.controller.manifests.state import (
    pod_security_context,
    state_mounts,
    state_uri,
    state_volumes,
)
from dataflow_operator.controller.naming import (
    ANNOTATION_SPEC_HASH,
    DRIVER_CONTAINER,
    EXECUTOR_CONTAINER,
    LABEL_ATTEMPT,
    LABEL_ROLE,
    ROLE_DRIVER,
    ROLE_EXECUTOR,
    attempts_service_name,
    control_token_secret_name,
    standard_labels,
    state_claim_name,
)
from dataflow_operator.core.durations import Duration
from dataflow_operator.core.time import format_timestamp

__all__ = [
    "CONTROL_TOKEN_DIR",
    "CONTROL_TOKEN_FILE",
    "CONTROL_TOKEN_KEY",
    "build_control_token_secret",
    "build_driver_pod",
    "build_executor_pod_template",
    "driver_spec_hash",
]

CONTROL_TOKEN_VOLUME = "control-token"
CONTROL_TOKEN_DIR = "/var/run/dataflow/control"
CONTROL_TOKEN_KEY = "token"
CONTROL_TOKEN_FILE = f"{CONTROL_TOKEN_DIR}/{CONTROL_TOKEN_KEY}"
SPARK_LOCAL_IP = "SPARK_LOCAL_IP"


def driver_spec_hash(replica: Replica, config: OperatorConfig) -> str:
    """Hash of everything a running driver cannot change without a restart.

    Image, pull policy, service account, resources, Spark conf, environment and the
    offset in force; not the cluster's Dataflows, nor the restart policy.
    """
    spec = replica.spec
    relevant = {
        "image": image_of(replica, config),
        "imagePullPolicy": spec.image_pull_policy,
        "serviceAccountName": service_account_of(replica, config),
        "driver": spec.driver.to_wire(),
        "executor": spec.executor.to_wire(),
        "sparkConf": spec.spark_conf,
        "env": [item.to_wire() for item in spec.env],
        "expirationOffset": str(effective_offset(replica, config)),
    }
    if spec.storage is not None:  # absent from the hash without it: no restart on upgrade
        relevant["stateClaim"] = state_claim_name(replica.metadata.name)
    if not spec.spark_ui:  # likewise: only a Replica that turns it off changes its hash
        relevant["sparkUi"] = "off"
    for key, value in (
        ("stateUri", spec.state_uri),
        ("stateCredentials", spec.state_credentials),
        ("volumes", spec.volumes),
        ("volumeMounts", spec.volume_mounts),
    ):
        if value:
            relevant[key] = value
    encoded = json.dumps(relevant, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(encoded.encode()).hexdigest()[:16]


def _env(
    replica: Replica, config: OperatorConfig, attempt: Attempt, offset: Duration
) -> list[dict[str, Any]]:
    injected: dict[str, str] = {
        injection.ENV_START_TIME_MS: str(attempt.start_time_ms),
        injection.ENV_START_TIME: format_timestamp(attempt.start_time_ms),
        injection.ENV_EXPIRATION_OFFSET: str(offset),
        injection.ENV_REPLICA: replica.metadata.name,
        injection.ENV_NAMESPACE: namespace_of(replica),
        injection.ENV_CLUSTER: replica.spec.cluster,
        injection.ENV_ATTEMPT: str(attempt.number),
        injection.ENV_CONTROL_ADDRESS: f"0.0.0.0:{config.control_port}",
        injection.ENV_CONTROL_TOKEN_FILE: CONTROL_TOKEN_FILE,
        injection.ENV_SPARK_MASTER: spark_master(replica),
        injection.ENV_SPARK_CONF: json.dumps(spark_conf(replica, config, attempt, offset)),
        injection.ENV_STATE_URI: _join(state_uri(replica), attempt.state_dir),
    }
    if attempt.keep_state_dir is not None:
        injected[injection.ENV_STATE_KEEP] = attempt.keep_state_dir
    if replica.spec.spark_ui:
        # Spark's UI binds to SPARK_LOCAL_IP, which the replica otherwise sets to the
        # loopback: all addresses, so that the driver Service (and its proxy) reach it
        injected[SPARK_LOCAL_IP] = "0.0.0.0"
    if replica.spec.executor.instances > 0:
        template = build_executor_pod_template(replica)
        injected[injection.ENV_EXECUTOR_POD_TEMPLATE] = json.dumps(template, separators=(",", ":"))
    return _with_user_env(replica, injected)


def _join(location: str, relative: str) -> str:
    return f"{location.rstrip('/')}/{relative}" if relative else location


def _with_user_env(replica: Replica, injected: dict[str, str]) -> list[dict[str, Any]]:
    """The injected variables, then the Replica's ``env`` (which cannot override them)."""
    user = [item.to_wire() for item in replica.spec.env if item.name not in injected]
    return [*({"name": k, "value": v} for k, v in injected.items()), *user]


def _env_from(replica: Replica) -> list[dict[str, Any]]:
    secret = replica.spec.state_credentials
    return [{"secretRef": {"name": secret}}] if secret else []


def build_executor_pod_template(replica: Replica) -> dict[str, Any]:
    """The executor Pod template Spark starts every executor from.

    What the driver gets and an executor needs: the ``state`` claim's mount (a
    ``stateUri`` needs none), the extra volumes and mounts, the credentials Secret as
    ``envFrom``, the Replica's env (``valueFrom`` included) and the state location, the
    security context and the replica's labels. Spark fills in the rest (name, image,
    resources, its own env and volumes) and makes the driver pod the controller owner,
    so the template carries no owner reference: executors go with their driver. No
    service-account token is mounted (executors run user SQL and need no API access),
    and a failed executor's log tail becomes its termination message.
    """
    spec = replica.spec
    labels = {**standard_labels(replica.metadata.name, spec.cluster), LABEL_ROLE: ROLE_EXECUTOR}
    container: dict[str, Any] = {
        "name": EXECUTOR_CONTAINER,
        "env": _with_user_env(replica, {injection.ENV_STATE_URI: state_uri(replica)}),
        # a failed executor's log tail becomes its termination message, which the
        # Replica's status quotes (condition ExecutorsFailing)
        "terminationMessagePolicy": "FallbackToLogsOnError",
    }
    if env_from := _env_from(replica):
        container["envFrom"] = env_from
    if mounts := state_mounts(replica):
        container["volumeMounts"] = mounts
    # executors run user SQL and never call the API server: no token to steal (they
    # keep the replica's service account, for a cloud identity bound to it)
    pod_spec: dict[str, Any] = {"containers": [container], "automountServiceAccountToken": False}
    if volumes := state_volumes(replica):
        pod_spec["volumes"] = volumes
    if security := pod_security_context(replica):
        pod_spec["securityContext"] = security
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"labels": labels},
        "spec": pod_spec,
    }


def build_driver_pod(replica: Replica, config: OperatorConfig, attempt: Attempt) -> dict[str, Any]:
    """The driver Pod of one attempt, owned by the Replica (``controller: true``)."""
    spec = replica.spec
    offset = effective_offset(replica, config)
    labels = {
        **standard_labels(replica.metadata.name, spec.cluster),
        LABEL_ROLE: ROLE_DRIVER,
        LABEL_ATTEMPT: str(attempt.number),
    }
    memory = driver_memory(spec.driver).limit
    container: dict[str, Any] = {
        "name": DRIVER_CONTAINER,
        "image": image_of(replica, config),
        "command": ["dataflow-operator", "replica"],
        "env": _env(replica, config, attempt, offset),
        "ports": [
            {"name": CONTROL_PORT_NAME, "containerPort": config.control_port, "protocol": "TCP"},
            {"name": "spark-driver", "containerPort": DRIVER_PORT, "protocol": "TCP"},
            {"name": "block-manager", "containerPort": DRIVER_BLOCK_MANAGER_PORT},
            *(
                [{"name": UI_PORT_NAME, "containerPort": UI_PORT, "protocol": "TCP"}]
                if spec.spark_ui
                else []
            ),
        ],
        "resources": {
            "requests": {"cpu": str(spec.driver.cores), "memory": memory},
            "limits": {"memory": memory},
        },
        "readinessProbe": {
            "httpGet": {"path": "/readyz", "port": CONTROL_PORT_NAME},
            "periodSeconds": 5,
        },
        "livenessProbe": {
            "httpGet": {"path": "/healthz", "port": CONTROL_PORT_NAME},
            "initialDelaySeconds": 30,
            "periodSeconds": 10,
            "failureThreshold": 6,
        },
        "volumeMounts": [
            *state_mounts(replica),
            {"name": CONTROL_TOKEN_VOLUME, "mountPath": CONTROL_TOKEN_DIR, "readOnly": True},
        ],
    }
    if env_from := _env_from(replica):
        container["envFrom"] = env_from
    if spec.image_pull_policy:
        container["imagePullPolicy"] = spec.image_pull_policy
    token_secret = control_token_secret_name(replica.metadata.name)
    pod_spec: dict[str, Any] = {
        "restartPolicy": "Never",
        "containers": [container],
        "hostname": f"driver-{attempt.number}",
        "subdomain": attempts_service_name(replica.metadata.name),
        "volumes": [
            *state_volumes(replica),
            {
                "name": CONTROL_TOKEN_VOLUME,
                "secret": {
                    "secretName": token_secret,
                    "items": [{"key": CONTROL_TOKEN_KEY, "path": CONTROL_TOKEN_KEY}],
                },
            },
        ],
    }
    if security := pod_security_context(replica):
        pod_spec["securityContext"] = security
    account = service_account_of(replica, config)
    if account:
        pod_spec["serviceAccountName"] = account
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": attempt.pod_name,
            "namespace": namespace_of(replica),
            "labels": labels,
            "annotations": {ANNOTATION_SPEC_HASH: driver_spec_hash(replica, config)},
            "ownerReferences": [owner_reference(replica)],
        },
        "spec": pod_spec,
    }


def build_control_token_secret(replica: Replica, token: str) -> dict[str, Any]:
    """The Secret with the replica's control-API token (key ``token``), owned by the Replica.

    One per Replica and kept across attempts: created once, before the first driver pod,
    and read back by the operator to authenticate its requests.
    """
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "type": "Opaque",
        "metadata": {
            "name": control_token_secret_name(replica.metadata.name),
            "namespace": namespace_of(replica),
            "labels": standard_labels(replica.metadata.name, replica.spec.cluster),
            "ownerReferences": [owner_reference(replica)],
        },
        "data": {CONTROL_TOKEN_KEY: base64.b64encode(token.encode()).decode()},
    }
