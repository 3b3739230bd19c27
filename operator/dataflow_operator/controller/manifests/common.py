"""What every object of a replica is built from: the attempt, names, owner, quantities."""

from __future__ import annotations

import math
from dataclasses import dataclass
from decimal import ROUND_CEILING
from typing import Any

import kopf
from kubernetes.utils import parse_quantity

from dataflow_operator.api.meta import API_VERSION
from dataflow_operator.api.replica import Replica
from dataflow_operator.controller.config import OperatorConfig
from dataflow_operator.controller.naming import attempts_service_name
from dataflow_operator.core.durations import Duration
from dataflow_operator.core.time import Timestamp

__all__ = [
    "DRIVER_BLOCK_MANAGER_PORT",
    "DRIVER_PORT",
    "UI_PORT",
    "UI_PORT_NAME",
    "Attempt",
    "attempt_host",
    "effective_offset",
    "image_of",
    "memory_to_spark",
    "namespace_of",
    "owner_reference",
    "quantity_bytes",
    "service_account_of",
]

DRIVER_PORT = 7078
DRIVER_BLOCK_MANAGER_PORT = 7079
UI_PORT = 4040
UI_PORT_NAME = "spark-ui"


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
    try:
        value = parse_quantity(quantity)  # type: ignore[no-untyped-call]
    except ValueError as error:
        raise ValueError(f"not a Kubernetes quantity: {quantity!r}") from error
    return int(value.to_integral_value(rounding=ROUND_CEILING))


def memory_to_spark(quantity: str) -> str:
    """A Kubernetes quantity in Spark's units: whole mebibytes (``1Gi`` → ``1024m``)."""
    return f"{max(1, math.ceil(quantity_bytes(quantity) / 2**20))}m"


def effective_offset(replica: Replica, config: OperatorConfig) -> Duration:
    """The Replica's expiration offset, else the operator's default; zero disables."""
    if replica.spec.expiration_offset is not None:
        return replica.spec.expiration_offset
    return config.default_expiration_offset


def image_of(replica: Replica, config: OperatorConfig) -> str:
    """The image of the replica's driver and executors."""
    return replica.spec.image or config.default_image


def service_account_of(replica: Replica, config: OperatorConfig) -> str | None:
    """The service account of the replica's pods (``None``: the namespace's default)."""
    return replica.spec.service_account_name or config.service_account or None


def namespace_of(replica: Replica) -> str:
    """The replica's namespace."""
    return replica.metadata.namespace or "default"


def attempt_host(replica: Replica, attempt: int) -> str:
    """The DNS name of one attempt's driver pod: ``driver-N.<replica>-attempts.<ns>.svc``."""
    service = attempts_service_name(replica.metadata.name)
    return f"driver-{attempt}.{service}.{namespace_of(replica)}.svc"


def owner_reference(replica: Replica) -> dict[str, Any]:
    """The Replica as its objects' controller owner (they go when it goes)."""
    body = {
        "apiVersion": API_VERSION,
        "kind": "Replica",
        "metadata": {"name": replica.metadata.name, "uid": replica.metadata.uid or ""},
    }
    return dict(kopf.build_owner_reference(body))  # type: ignore[arg-type]
