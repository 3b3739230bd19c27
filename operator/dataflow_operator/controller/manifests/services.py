"""The replica's two headless Services, and where the operator reaches an attempt.

The driver Service (``<replica>-driver``) selects the serving attempt's pod and is what
users and the operator address; ``<replica>-attempts`` gives every driver pod its own DNS
name, ``driver-N.<replica>-attempts``, which its executors reach it by.
"""

from __future__ import annotations

from typing import Any

from dataflow_operator.api.naming import CONTROL_PORT_NAME
from dataflow_operator.api.replica import Replica
from dataflow_operator.controller.config import OperatorConfig
from dataflow_operator.controller.manifests.common import (
    DRIVER_BLOCK_MANAGER_PORT,
    DRIVER_PORT,
    UI_PORT,
    UI_PORT_NAME,
    attempt_host,
    namespace_of,
    owner_reference,
)
from dataflow_operator.controller.naming import (
    ANNOTATION_CONTROL_ADDRESS,
    LABEL_ATTEMPT,
    LABEL_REPLICA,
    LABEL_ROLE,
    ROLE_DRIVER,
    attempts_service_name,
    driver_service_name,
    standard_labels,
)

__all__ = [
    "build_attempts_service",
    "build_driver_service",
    "control_address",
    "driver_service_selector",
]


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
    return _selector(replica, {LABEL_ATTEMPT: str(serving_attempt)})


def _selector(replica: Replica, extra: dict[str, str]) -> dict[str, str]:
    labels = standard_labels(replica.metadata.name, replica.spec.cluster)
    return {LABEL_REPLICA: labels[LABEL_REPLICA], LABEL_ROLE: ROLE_DRIVER, **extra}


def _service(
    replica: Replica, config: OperatorConfig, name: str, extra_selector: dict[str, str]
) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {
            "name": name,
            "namespace": namespace_of(replica),
            "labels": standard_labels(replica.metadata.name, replica.spec.cluster),
            "ownerReferences": [owner_reference(replica)],
        },
        "spec": {
            "clusterIP": "None",
            "publishNotReadyAddresses": True,
            "selector": _selector(replica, extra_selector),
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
                *(
                    [{"name": UI_PORT_NAME, "port": UI_PORT, "targetPort": UI_PORT_NAME}]
                    if replica.spec.spark_ui
                    else []
                ),
            ],
        },
    }
