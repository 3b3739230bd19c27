"""The operator's own configuration: one documented class, from flags or environment.

Every setting has an environment variable (what the Helm chart sets) and a flag of
``dataflow-operator operator`` (which wins). Durations use the project's duration
syntax (``21d``, ``10m``, ``500ms``).
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from typing import Any

from dataflow_operator.core.durations import Duration, parse_duration

__all__ = ["DEFAULT_IMAGE", "OperatorConfig", "add_config_arguments", "config_from_args"]

DEFAULT_IMAGE = "ghcr.io/dataflow-dev/dataflow-operator:latest"


@dataclass(frozen=True, slots=True)
class OperatorConfig:
    """What the operator does when a Replica does not say.

    Field → environment variable → flag:

    - ``default_image`` ← ``DATAFLOW_REPLICA_IMAGE`` ← ``--replica-image``: image of
      drivers whose Replica has no ``spec.image``.
    - ``default_expiration_offset`` ← ``DATAFLOW_DEFAULT_EXPIRATION_OFFSET`` ←
      ``--default-expiration-offset``: offset of Replicas without
      ``spec.expirationOffset``; ``0`` (the default) disables expiration.
    - ``expiration_lead_time`` ← ``DATAFLOW_EXPIRATION_LEAD_TIME``: a replica is
      restarted this long before it expires (clamped to half the offset).
    - ``start_timeout`` ← ``DATAFLOW_START_TIMEOUT``: a driver not running this long
      after its attempt began is a failure (with the pod's own waiting reason).
    - ``ready_timeout`` ← ``DATAFLOW_READY_TIMEOUT``: a driver whose control API does not
      answer this long after its attempt began is a failure.
    - ``lost_grace`` ← ``DATAFLOW_LOST_GRACE``: how long a created driver pod may be
      missing before it counts as lost.
    - ``status_poll_interval`` ← ``DATAFLOW_STATUS_POLL_INTERVAL``: how often each
      replica's ``GET /status`` is pulled.
    - ``reconcile_interval`` ← ``DATAFLOW_RECONCILE_INTERVAL``: the longest a replica
      goes without a reconcile when nothing wakes it.
    - ``delete_timeout`` ← ``DATAFLOW_DELETE_TIMEOUT``: how long a deleted Dataflow
      waits for replicas to confirm the drop before it proceeds (with an Event).
    - ``control_port`` ← ``DATAFLOW_CONTROL_PORT``: port of the replicas' control API.
    - ``service_account`` ← ``DATAFLOW_REPLICA_SERVICE_ACCOUNT``: drivers' service
      account when the Replica names none (empty: the namespace default).
    - ``metrics_port`` ← ``DATAFLOW_METRICS_PORT``: Prometheus ``/metrics`` (0: off).
    """

    default_image: str = DEFAULT_IMAGE
    default_expiration_offset: Duration = field(default=Duration(0))
    expiration_lead_time: Duration = field(default=Duration(600_000))
    start_timeout: Duration = field(default=Duration(300_000))
    ready_timeout: Duration = field(default=Duration(600_000))
    lost_grace: Duration = field(default=Duration(10_000))
    status_poll_interval: Duration = field(default=Duration(5_000))
    reconcile_interval: Duration = field(default=Duration(10_000))
    delete_timeout: Duration = field(default=Duration(60_000))
    control_port: int = 8765
    service_account: str = ""
    metrics_port: int = 9090

    @classmethod
    def from_mapping(cls, values: Mapping[str, str]) -> OperatorConfig:
        """Read every field from ``values`` (environment-style names); absent → default."""
        parsed: dict[str, Any] = {}
        for item in fields(cls):
            raw = values.get(ENV_NAMES[item.name])
            if raw is None or raw == "":
                continue
            parsed[item.name] = _parse(item.name, raw)
        return cls(**parsed)


ENV_NAMES: dict[str, str] = {
    "default_image": "DATAFLOW_REPLICA_IMAGE",
    "default_expiration_offset": "DATAFLOW_DEFAULT_EXPIRATION_OFFSET",
    "expiration_lead_time": "DATAFLOW_EXPIRATION_LEAD_TIME",
    "start_timeout": "DATAFLOW_START_TIMEOUT",
    "ready_timeout": "DATAFLOW_READY_TIMEOUT",
    "lost_grace": "DATAFLOW_LOST_GRACE",
    "status_poll_interval": "DATAFLOW_STATUS_POLL_INTERVAL",
    "reconcile_interval": "DATAFLOW_RECONCILE_INTERVAL",
    "delete_timeout": "DATAFLOW_DELETE_TIMEOUT",
    "control_port": "DATAFLOW_CONTROL_PORT",
    "service_account": "DATAFLOW_REPLICA_SERVICE_ACCOUNT",
    "metrics_port": "DATAFLOW_METRICS_PORT",
}


def _parse(name: str, raw: str) -> Any:
    kind = OperatorConfig.__dataclass_fields__[name].type
    if kind == "Duration":
        return parse_duration(raw)
    if kind == "int":
        return int(raw)
    return raw


def add_config_arguments(parser: argparse.ArgumentParser) -> None:
    """One flag per field (``--default-expiration-offset 21d``); the env var is the default."""
    group = parser.add_argument_group("operator configuration (flags override environment)")
    for item in fields(OperatorConfig):
        flag = "--" + item.name.replace("_", "-")
        if item.name == "default_image":
            flag = "--replica-image"
        group.add_argument(
            flag,
            dest=f"config_{item.name}",
            metavar="VALUE",
            default=None,
            help=f"(env {ENV_NAMES[item.name]}; default {item.default})",
        )


def config_from_args(
    args: argparse.Namespace, environ: Mapping[str, str] | None = None
) -> OperatorConfig:
    """Environment first, then the flags given on the command line."""
    values = dict(os.environ if environ is None else environ)
    for item in fields(OperatorConfig):
        flag_value = getattr(args, f"config_{item.name}", None)
        if flag_value is not None:
            values[ENV_NAMES[item.name]] = flag_value
    return OperatorConfig.from_mapping(values)
