"""Names, labels and annotations of what the operator creates for a Replica.

Names are deterministic (the driver pod of attempt 3 of Replica ``r1`` is
``r1-driver-3``), so that an operator restarted half-way through a restart finds the
pod it meant to create instead of creating a second one.
"""

from __future__ import annotations

from dataflow_operator.api.meta import GROUP
from dataflow_operator.api.naming import (
    attempts_service_name,
    control_token_secret_name,
    driver_service_name,
)
from dataflow_operator.api.naming import short_digest as _digest

__all__ = [
    "ANNOTATION_CONTROL_ADDRESS",
    "ANNOTATION_SPEC_HASH",
    "DRIVER_CONTAINER",
    "EXECUTOR_CONTAINER",
    "FINALIZER",
    "LABEL_ATTEMPT",
    "LABEL_CLUSTER",
    "LABEL_REPLICA",
    "LABEL_ROLE",
    "ROLE_DRIVER",
    "ROLE_EXECUTOR",
    "ROLE_STATE",
    "attempts_service_name",
    "control_token_secret_name",
    "driver_pod_name",
    "driver_service_name",
    "label_value",
    "standard_labels",
    "state_claim_name",
]

LABEL_REPLICA = f"{GROUP}/replica"
LABEL_CLUSTER = f"{GROUP}/cluster"
LABEL_ATTEMPT = f"{GROUP}/attempt"
LABEL_ROLE = f"{GROUP}/role"
ROLE_DRIVER = "driver"
ROLE_EXECUTOR = "executor"
ROLE_STATE = "state"
ANNOTATION_SPEC_HASH = f"{GROUP}/spec-hash"
ANNOTATION_CONTROL_ADDRESS = f"{GROUP}/control-address"
"""On a Replica: ``host:port`` (or ``http://host:port``) of its control API, overriding
the driver Service's DNS name — for tests and for debugging through a port-forward."""
FINALIZER = f"{GROUP}/finalizer"
DRIVER_CONTAINER = "driver"
EXECUTOR_CONTAINER = "executor"
"""The container of the executor pod template
(``spark.kubernetes.executor.podTemplateContainerName``)."""

_MAX_LABEL = 63


def label_value(value: str) -> str:
    """``value`` if it fits in a label (63 chars), else a truncated form with a hash."""
    if len(value) <= _MAX_LABEL:
        return value
    return f"{value[: _MAX_LABEL - 9].rstrip('-.')}-{_digest(value)}"


def driver_pod_name(replica: str, attempt: int) -> str:
    """The driver pod of one attempt: ``{replica}-driver-{attempt}``."""
    return _suffixed(replica, f"-driver-{attempt}")


def _suffixed(replica: str, suffix: str) -> str:
    if len(replica) + len(suffix) <= 253:
        return replica + suffix
    return f"{replica[: 253 - len(suffix) - 9]}-{_digest(replica)}{suffix}"


def state_claim_name(replica: str) -> str:
    """The PersistentVolumeClaim of a replica's state: ``{replica}-state`` (one per Replica,
    shared by all its driver attempts)."""
    return _suffixed(replica, "-state")


def standard_labels(replica: str, cluster: str) -> dict[str, str]:
    """Labels shared by everything of one replica (without attempt and role)."""
    return {
        "app.kubernetes.io/name": "dataflow-replica",
        "app.kubernetes.io/instance": label_value(replica),
        "app.kubernetes.io/component": "replica",
        "app.kubernetes.io/part-of": "dataflow-operator",
        "app.kubernetes.io/managed-by": "dataflow-operator",
        LABEL_REPLICA: label_value(replica),
        LABEL_CLUSTER: label_value(cluster),
    }
