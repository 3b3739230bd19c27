"""Pure builders of the Kubernetes objects behind a Replica: its driver Pod and Service,
its state claim, its control-token Secret and its executor pod template.

The driver runs ``dataflow-operator replica`` in the Replica's image. With
``executor.instances: 0`` Spark runs in local mode inside it (``local[<driver cores>]``);
otherwise Spark, in client mode inside that pod, creates the executors itself
(``spark.kubernetes.*``): in the same namespace, with the replica's image and service
account, from the executor pod template built here. Spark adds the driver pod as the
executors' controller owner (``spark.kubernetes.driver.pod.name``), so the template
carries no owner reference of its own: executors go with their driver, the driver with
the Replica. The operator injects the attempt's start time and expiration offset, as
environment variables and as Spark conf (names in :mod:`dataflow_operator.api.injection`).

Injected environment of the driver container:

==================================  ==================================================
``DATAFLOW_REPLICA_START_TIME_MS``  attempt start, epoch milliseconds
``DATAFLOW_REPLICA_START_TIME``     the same, RFC 3339
``DATAFLOW_EXPIRATION_OFFSET``      offset in force (``21d``; ``0`` disables)
``DATAFLOW_REPLICA``/``_NAMESPACE``  the Replica
``DATAFLOW_CLUSTER``/``_ATTEMPT``   its cluster and the attempt number
``DATAFLOW_CONTROL_ADDRESS``        ``0.0.0.0:PORT`` the control API listens on
``DATAFLOW_CONTROL_TOKEN_FILE``     ``/var/run/dataflow/control/token`` (the Secret)
``DATAFLOW_SPARK_MASTER``           ``k8s://https://kubernetes.default.svc``, or
                                    ``local[N]`` with ``executor.instances: 0``
``DATAFLOW_SPARK_CONF``             every Spark setting below, as a JSON object
``DATAFLOW_STATE_URI``              the attempt's state (see below)
``DATAFLOW_STATE_KEEP``             a successor's predecessor's state (see below)
``DATAFLOW_EXECUTOR_POD_TEMPLATE``  the executor pod template, JSON (with executors)
==================================  ==================================================

The state location holds the runtime's checkpoints and changelogs, reached by the driver
and every executor. With ``spec.stateUri`` it is that URI (credentials from
``spec.stateCredentials`` as ``envFrom`` on every pod). Otherwise it is
``file:///opt/dataflow/state``, the mounted ``state`` volume: with ``spec.storage`` the
Replica's PersistentVolumeClaim (``<replica>-state``, built by :func:`build_state_claim`,
created before any driver pod, shared by every attempt and mounted on every executor), so
a restarted driver resumes from its checkpoint; without it, an emptyDir that dies with
the pod (driver only: :mod:`dataflow_operator.api.replica_rules` refuses executors then).

A make-before-break successor runs beside the driver it succeeds, so it gets its own
state, ``attempts/N`` under the location, and ``DATAFLOW_STATE_KEEP`` names the
predecessor's (it removes every other attempt's state when it starts). Every other
attempt keeps the state directory of the one it replaces and resumes from its checkpoint.

Two Services: the driver Service (``<replica>-driver``, :func:`build_driver_service`)
selects the serving attempt's pod, and is what users and the operator address; the
headless ``<replica>-attempts`` (:func:`build_attempts_service`) gives every driver pod
its own DNS name, ``driver-N.<replica>-attempts``, which its executors reach it by.

The control API requires the token of the Replica's Secret ``<replica>-control-token``
(built by :func:`build_control_token_secret`), mounted read-only into the driver.
"""

from __future__ import annotations

import base64
import hashlib
import json
import math
import re
from dataclasses import dataclass
from typing import Any

from dataflow_operator.api import injection
from dataflow_operator.api.meta import API_VERSION
from dataflow_operator.api.naming import CONTROL_PORT_NAME
from dataflow_operator.api.replica import Replica
from dataflow_operator.controller.config import OperatorConfig
from dataflow_operator.controller.naming import (
    ANNOTATION_CONTROL_ADDRESS,
    ANNOTATION_SPEC_HASH,
    DRIVER_CONTAINER,
    EXECUTOR_CONTAINER,
    LABEL_ATTEMPT,
    LABEL_REPLICA,
    LABEL_ROLE,
    ROLE_DRIVER,
    ROLE_EXECUTOR,
    ROLE_STATE,
    attempts_service_name,
    control_token_secret_name,
    driver_service_name,
    standard_labels,
    state_claim_name,
)
from dataflow_operator.core.durations import Duration
from dataflow_operator.core.time import Timestamp, format_timestamp

__all__ = [
    "CONTROL_TOKEN_DIR",
    "CONTROL_TOKEN_FILE",
    "CONTROL_TOKEN_KEY",
    "DRIVER_BLOCK_MANAGER_PORT",
    "DRIVER_PORT",
    "LOCAL_STATE_URI",
    "SPARK_MASTER",
    "STATE_DIR",
    "STATE_VOLUME",
    "Attempt",
    "attempt_host",
    "build_attempts_service",
    "build_control_token_secret",
    "build_driver_pod",
    "build_driver_service",
    "build_executor_pod_template",
    "build_state_claim",
    "control_address",
    "driver_service_selector",
    "driver_spec_hash",
    "effective_offset",
    "memory_to_spark",
    "quantity_bytes",
    "spark_conf",
    "spark_master",
    "state_uri",
]

SPARK_MASTER = "k8s://https://kubernetes.default.svc"
DRIVER_PORT = 7078
DRIVER_BLOCK_MANAGER_PORT = 7079
UI_PORT = 4040
STATE_DIR = "/opt/dataflow/state"
"""Where the ``state`` volume is mounted, on the driver and on every executor."""
LOCAL_STATE_URI = f"file://{STATE_DIR}"
"""The state location when it is the ``state`` volume (a claim or an emptyDir)."""
STATE_VOLUME = "state"
CONTROL_TOKEN_VOLUME = "control-token"
CONTROL_TOKEN_DIR = "/var/run/dataflow/control"
CONTROL_TOKEN_KEY = "token"
CONTROL_TOKEN_FILE = f"{CONTROL_TOKEN_DIR}/{CONTROL_TOKEN_KEY}"
IMAGE_GID = 185
"""The group of the image's user: owner of a claim's files (``fsGroup``)."""
NON_JVM_OVERHEAD_FACTOR = 0.4  # Spark's own factor for Python drivers
MIN_OVERHEAD_BYTES = 384 * 2**20
_PROTECTED_PREFIXES = (
    "spark.dataflow.",
    "spark.kubernetes.driver.pod.name",
    "spark.kubernetes.executor.podTemplateContainerName",
)

_QUANTITY = re.compile(r"^([0-9]+(?:\.[0-9]+)?)(Ki|Mi|Gi|Ti|Pi|Ei|k|M|G|T|P|E|m)?$")
_FACTORS: dict[str, float] = {
    "": 1,
    "m": 1e-3,
    "k": 1e3,
    "M": 1e6,
    "G": 1e9,
    "T": 1e12,
    "P": 1e15,
    "E": 1e18,
    "Ki": 2**10,
    "Mi": 2**20,
    "Gi": 2**30,
    "Ti": 2**40,
    "Pi": 2**50,
    "Ei": 2**60,
}


@dataclass(frozen=True, slots=True)
class Attempt:
    """One driver attempt of a replica: what its pod is built from."""

    number: int
    pod_name: str
    start_time_ms: Timestamp
    state_dir: str = ""
    """Its state, relative to the replica's state location (``''``: the root)."""
    keep_state_dir: str | None = None
    """A make-before-break successor's predecessor's state dir (kept while it runs)."""


def quantity_bytes(quantity: str) -> int:
    """Bytes of a Kubernetes memory quantity (``2Gi`` → 2147483648), rounded up."""
    match = _QUANTITY.match(quantity)
    if match is None:
        raise ValueError(f"not a Kubernetes quantity: {quantity!r}")
    return math.ceil(float(match.group(1)) * _FACTORS[match.group(2) or ""])


def memory_to_spark(quantity: str) -> str:
    """A Kubernetes quantity in Spark's units: whole mebibytes (``1Gi`` → ``1024m``)."""
    return f"{max(1, math.ceil(quantity_bytes(quantity) / 2**20))}m"


def effective_offset(replica: Replica, config: OperatorConfig) -> Duration:
    """The Replica's expiration offset, else the operator's default; zero disables."""
    if replica.spec.expiration_offset is not None:
        return replica.spec.expiration_offset
    return config.default_expiration_offset


def _image(replica: Replica, config: OperatorConfig) -> str:
    return replica.spec.image or config.default_image


def _service_account(replica: Replica, config: OperatorConfig) -> str | None:
    return replica.spec.service_account_name or config.service_account or None


def driver_spec_hash(replica: Replica, config: OperatorConfig) -> str:
    """Hash of everything a running driver cannot change without a restart.

    Image, pull policy, service account, resources, Spark conf, environment and the
    offset in force; not the cluster's Dataflows, nor the restart policy.
    """
    spec = replica.spec
    relevant = {
        "image": _image(replica, config),
        "imagePullPolicy": spec.image_pull_policy,
        "serviceAccountName": _service_account(replica, config),
        "driver": spec.driver.to_wire(),
        "executor": spec.executor.to_wire(),
        "sparkConf": spec.spark_conf,
        "env": [item.to_wire() for item in spec.env],
        "expirationOffset": str(effective_offset(replica, config)),
    }
    if spec.storage is not None:  # absent from the hash without it: no restart on upgrade
        relevant["stateClaim"] = state_claim_name(replica.metadata.name)
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


def _namespace(replica: Replica) -> str:
    return replica.metadata.namespace or "default"


def state_uri(replica: Replica) -> str:
    """The replica's one state location: ``spec.stateUri``, else the ``state`` volume."""
    return replica.spec.state_uri or LOCAL_STATE_URI


def spark_master(replica: Replica) -> str:
    """``local[<driver cores>]`` without executors, else Kubernetes."""
    if replica.spec.executor.instances == 0:
        return f"local[{max(1, math.ceil(replica.spec.driver.cores))}]"
    return SPARK_MASTER


def attempt_host(replica: Replica, attempt: int) -> str:
    """The DNS name of one attempt's driver pod: ``driver-N.<replica>-attempts.<ns>.svc``."""
    service = attempts_service_name(replica.metadata.name)
    return f"driver-{attempt}.{service}.{_namespace(replica)}.svc"


def control_address(replica: Replica, port: int, attempt: int, pod_ip: str | None) -> str:
    """``http://host:port`` of one attempt's control API.

    Its pod's IP when known, else its DNS name; the Replica's
    ``dataflow.dev/control-address`` annotation overrides both (one address for every
    attempt: such a replica restarts BreakBeforeMake).
    """
    override = replica.metadata.annotations.get(ANNOTATION_CONTROL_ADDRESS)
    if override:
        return override if "://" in override else f"http://{override}"
    host = pod_ip if pod_ip else attempt_host(replica, attempt)
    if ":" in host:  # an IPv6 address
        host = f"[{host}]"
    return f"http://{host}:{port}"


def spark_conf(
    replica: Replica, config: OperatorConfig, attempt: Attempt, offset: Duration
) -> dict[str, str]:
    """The Spark settings of the driver: resources, injection, and executors on Kubernetes.

    Without executors (``executor.instances: 0``) Spark runs in local mode and gets no
    ``spark.kubernetes.*``, ``spark.executor.*`` or driver-address settings. The
    Replica's own ``sparkConf`` overrides the operator's choices except the injected
    ``spark.dataflow.*`` twins, the driver pod name (Spark needs it to own its executors)
    and the pod template's container name.
    """
    spec = replica.spec
    namespace = _namespace(replica)
    conf: dict[str, str] = {
        "spark.master": spark_master(replica),
        "spark.submit.deployMode": "client",
        "spark.app.name": f"{namespace}.{replica.metadata.name}",
        "spark.driver.cores": str(spec.driver.cores),
        "spark.driver.memory": memory_to_spark(spec.driver.memory),
    }
    if spec.driver.memory_overhead:
        conf["spark.driver.memoryOverhead"] = memory_to_spark(spec.driver.memory_overhead)
    if spec.executor.instances > 0:
        conf.update(_executor_conf(replica, config, attempt))
    user = {k: v for k, v in spec.spark_conf.items() if not k.startswith(_PROTECTED_PREFIXES)}
    conf.update(user)
    if spec.executor.instances > 0:
        conf["spark.kubernetes.driver.pod.name"] = attempt.pod_name
        conf["spark.kubernetes.executor.podTemplateContainerName"] = EXECUTOR_CONTAINER
    conf[injection.CONF_START_TIME_MS] = str(attempt.start_time_ms)
    conf[injection.CONF_EXPIRATION_OFFSET] = str(offset)
    return dict(sorted(conf.items()))


def _executor_conf(replica: Replica, config: OperatorConfig, attempt: Attempt) -> dict[str, str]:
    """Spark on Kubernetes: where and how Spark creates the executors."""
    spec = replica.spec
    namespace = _namespace(replica)
    labels = standard_labels(replica.metadata.name, spec.cluster)
    conf: dict[str, str] = {
        "spark.kubernetes.namespace": namespace,
        "spark.kubernetes.container.image": _image(replica, config),
        "spark.kubernetes.executor.deleteOnTermination": "true",
        "spark.driver.host": attempt_host(replica, attempt.number),
        "spark.driver.bindAddress": "0.0.0.0",
        "spark.driver.port": str(DRIVER_PORT),
        "spark.driver.blockManager.port": str(DRIVER_BLOCK_MANAGER_PORT),
        "spark.executor.instances": str(spec.executor.instances),
        "spark.executor.cores": str(spec.executor.cores),
        "spark.executor.memory": memory_to_spark(spec.executor.memory),
    }
    if spec.image_pull_policy:
        conf["spark.kubernetes.container.image.pullPolicy"] = spec.image_pull_policy
    account = _service_account(replica, config)
    if account:
        conf["spark.kubernetes.authenticate.driver.serviceAccountName"] = account
        conf["spark.kubernetes.authenticate.executor.serviceAccountName"] = account
    if spec.executor.memory_overhead:
        conf["spark.executor.memoryOverhead"] = memory_to_spark(spec.executor.memory_overhead)
    for key, value in {**labels, LABEL_ROLE: ROLE_EXECUTOR}.items():
        conf[f"spark.kubernetes.executor.label.{key}"] = value
    # the Replica's env (valueFrom included) reaches executors through the pod template
    return conf


def _driver_memory_limit(replica: Replica) -> str:
    heap = quantity_bytes(replica.spec.driver.memory)
    if replica.spec.driver.memory_overhead:
        overhead = quantity_bytes(replica.spec.driver.memory_overhead)
    else:
        overhead = max(MIN_OVERHEAD_BYTES, math.ceil(heap * NON_JVM_OVERHEAD_FACTOR))
    return f"{math.ceil((heap + overhead) / 2**20)}Mi"


def _owner_reference(replica: Replica) -> dict[str, Any]:
    return {
        "apiVersion": API_VERSION,
        "kind": "Replica",
        "name": replica.metadata.name,
        "uid": replica.metadata.uid or "",
        "controller": True,
        "blockOwnerDeletion": True,
    }


def _env(
    replica: Replica, config: OperatorConfig, attempt: Attempt, offset: Duration
) -> list[dict[str, Any]]:
    injected: dict[str, str] = {
        injection.ENV_START_TIME_MS: str(attempt.start_time_ms),
        injection.ENV_START_TIME: format_timestamp(attempt.start_time_ms),
        injection.ENV_EXPIRATION_OFFSET: str(offset),
        injection.ENV_REPLICA: replica.metadata.name,
        injection.ENV_NAMESPACE: _namespace(replica),
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


def _state_mounts(replica: Replica) -> list[dict[str, Any]]:
    """The ``state`` volume's mount (none with ``stateUri``) and the extra mounts."""
    state = [] if replica.spec.state_uri else [{"name": STATE_VOLUME, "mountPath": STATE_DIR}]
    return [*state, *replica.spec.volume_mounts]


def _state_volumes(replica: Replica) -> list[dict[str, Any]]:
    state = [] if replica.spec.state_uri else [_state_volume(replica)]
    return [*state, *replica.spec.volumes]


def _pod_security_context(replica: Replica) -> dict[str, Any] | None:
    if replica.spec.storage is None:
        return None
    # the claim's files belong to the image's group, whatever user the image runs as
    return {"fsGroup": IMAGE_GID, "fsGroupChangePolicy": "OnRootMismatch"}


def build_executor_pod_template(replica: Replica) -> dict[str, Any]:
    """The executor Pod template Spark starts every executor from.

    What the driver gets and an executor needs: the ``state`` claim's mount (a
    ``stateUri`` needs none), the extra volumes and mounts, the credentials Secret as
    ``envFrom``, the Replica's env (``valueFrom`` included) and the state location, the
    security context and the replica's labels. Spark fills in the rest (name, image,
    resources, its own env and volumes) and makes the driver pod the controller owner.
    """
    spec = replica.spec
    labels = {**standard_labels(replica.metadata.name, spec.cluster), LABEL_ROLE: ROLE_EXECUTOR}
    container: dict[str, Any] = {
        "name": EXECUTOR_CONTAINER,
        "env": _with_user_env(replica, {injection.ENV_STATE_URI: state_uri(replica)}),
    }
    if env_from := _env_from(replica):
        container["envFrom"] = env_from
    if mounts := _state_mounts(replica):
        container["volumeMounts"] = mounts
    pod_spec: dict[str, Any] = {"containers": [container]}
    if volumes := _state_volumes(replica):
        pod_spec["volumes"] = volumes
    if security := _pod_security_context(replica):
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
    container: dict[str, Any] = {
        "name": DRIVER_CONTAINER,
        "image": _image(replica, config),
        "command": ["dataflow-operator", "replica"],
        "env": _env(replica, config, attempt, offset),
        "ports": [
            {"name": CONTROL_PORT_NAME, "containerPort": config.control_port, "protocol": "TCP"},
            {"name": "spark-driver", "containerPort": DRIVER_PORT, "protocol": "TCP"},
            {"name": "block-manager", "containerPort": DRIVER_BLOCK_MANAGER_PORT},
            {"name": "spark-ui", "containerPort": UI_PORT, "protocol": "TCP"},
        ],
        "resources": {
            "requests": {"cpu": str(spec.driver.cores), "memory": _driver_memory_limit(replica)},
            "limits": {"memory": _driver_memory_limit(replica)},
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
            *_state_mounts(replica),
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
            *_state_volumes(replica),
            {
                "name": CONTROL_TOKEN_VOLUME,
                "secret": {
                    "secretName": token_secret,
                    "items": [{"key": CONTROL_TOKEN_KEY, "path": CONTROL_TOKEN_KEY}],
                },
            },
        ],
    }
    if security := _pod_security_context(replica):
        pod_spec["securityContext"] = security
    account = _service_account(replica, config)
    if account:
        pod_spec["serviceAccountName"] = account
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": attempt.pod_name,
            "namespace": _namespace(replica),
            "labels": labels,
            "annotations": {ANNOTATION_SPEC_HASH: driver_spec_hash(replica, config)},
            "ownerReferences": [_owner_reference(replica)],
        },
        "spec": pod_spec,
    }


def _state_volume(replica: Replica) -> dict[str, Any]:
    """The ``state`` volume: the Replica's claim with ``spec.storage``, else an emptyDir."""
    if replica.spec.storage is None:
        return {"name": STATE_VOLUME, "emptyDir": {}}
    claim = state_claim_name(replica.metadata.name)
    return {"name": STATE_VOLUME, "persistentVolumeClaim": {"claimName": claim}}


def build_state_claim(replica: Replica) -> dict[str, Any] | None:
    """The PersistentVolumeClaim of the replica's state; ``None`` without ``spec.storage``.

    One per Replica, deterministic name, owned by the Replica (deleted with it, never
    with a driver pod), so every attempt mounts the same checkpoints.
    """
    storage = replica.spec.storage
    if storage is None:
        return None
    labels = {
        **standard_labels(replica.metadata.name, replica.spec.cluster),
        LABEL_ROLE: ROLE_STATE,
    }
    spec: dict[str, Any] = {
        "accessModes": list(storage.access_modes),
        "resources": {"requests": {"storage": storage.size}},
        "volumeMode": "Filesystem",
    }
    if storage.storage_class_name is not None:
        spec["storageClassName"] = storage.storage_class_name
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": {
            "name": state_claim_name(replica.metadata.name),
            "namespace": _namespace(replica),
            "labels": labels,
            "ownerReferences": [_owner_reference(replica)],
        },
        "spec": spec,
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
            "namespace": _namespace(replica),
            "labels": standard_labels(replica.metadata.name, replica.spec.cluster),
            "ownerReferences": [_owner_reference(replica)],
        },
        "data": {CONTROL_TOKEN_KEY: base64.b64encode(token.encode()).decode()},
    }


def build_driver_service(
    replica: Replica, config: OperatorConfig, serving_attempt: int
) -> dict[str, Any]:
    """The headless Service that users and the operator address: the serving driver.

    It selects the pod of ``serving_attempt`` only, so that a make-before-break
    successor, running beside it while it hydrates, receives no traffic until the
    operator cuts over (by patching the selector).
    """
    return _service(
        replica,
        config,
        driver_service_name(replica.metadata.name),
        {LABEL_ATTEMPT: str(serving_attempt)},
    )


def build_attempts_service(replica: Replica, config: OperatorConfig) -> dict[str, Any]:
    """The headless Service behind every attempt's own DNS name (``driver-N.<service>``).

    It selects every driver pod of the replica, ready or not: each pod's ``hostname`` and
    ``subdomain`` give it a name here, which its executors use as ``spark.driver.host``.
    """
    return _service(replica, config, attempts_service_name(replica.metadata.name), {})


def driver_service_selector(replica: Replica, serving_attempt: int) -> dict[str, str]:
    """The driver Service's selector while ``serving_attempt`` serves."""
    labels = standard_labels(replica.metadata.name, replica.spec.cluster)
    return {
        LABEL_REPLICA: labels[LABEL_REPLICA],
        LABEL_ROLE: ROLE_DRIVER,
        LABEL_ATTEMPT: str(serving_attempt),
    }


def _service(
    replica: Replica, config: OperatorConfig, name: str, extra_selector: dict[str, str]
) -> dict[str, Any]:
    labels = standard_labels(replica.metadata.name, replica.spec.cluster)
    selector = {
        LABEL_REPLICA: labels[LABEL_REPLICA],
        LABEL_ROLE: ROLE_DRIVER,
        **extra_selector,
    }
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {
            "name": name,
            "namespace": _namespace(replica),
            "labels": labels,
            "ownerReferences": [_owner_reference(replica)],
        },
        "spec": {
            "clusterIP": "None",
            "publishNotReadyAddresses": True,
            "selector": selector,
            "ports": [
                {
                    "name": CONTROL_PORT_NAME,
                    "port": config.control_port,
                    "targetPort": CONTROL_PORT_NAME,
                },
                {"name": "spark-driver", "port": DRIVER_PORT, "targetPort": "spark-driver"},
                {
                    "name": "block-manager",
                    "port": DRIVER_BLOCK_MANAGER_PORT,
                    "targetPort": "block-manager",
                },
            ],
        },
    }
