"""The operator's own configuration: one documented class, from flags or environment.

Every setting has an environment variable (what the Helm chart sets) and a flag of
``dataflow-operator operator`` (which wins); ``pydantic-settings`` reads and validates
both. Durations use the project's duration syntax (``21d``, ``10m``, ``500ms``).
"""

from __future__ import annotations

import argparse
from typing import Any

from pydantic import Field, ValidationError
from pydantic_settings import BaseSettings, SettingsConfigDict

from dataflow_operator.api.types import DurationField
from dataflow_operator.core.durations import Duration

__all__ = [
    "DEFAULT_IMAGE",
    "ENV_NAMES",
    "ConfigError",
    "OperatorConfig",
    "add_config_arguments",
    "config_from_args",
]

DEFAULT_IMAGE = "ghcr.io/dataflow-dev/dataflow-operator:latest"


def _setting(default: Any, env: str, description: str) -> Any:
    """A field read from the environment variable ``env`` (and set by name in code)."""
    return Field(default=default, validation_alias=env, description=description)


class OperatorConfig(BaseSettings):
    """What the operator does when a Replica does not say; each field names its variable."""

    model_config = SettingsConfigDict(
        frozen=True,
        populate_by_name=True,
        env_ignore_empty=True,
        enable_decoding=False,  # values are plain text (durations), never JSON
        extra="ignore",
    )

    default_image: str = _setting(
        DEFAULT_IMAGE, "DATAFLOW_REPLICA_IMAGE", "Image of drivers whose Replica has no spec.image."
    )
    default_expiration_offset: DurationField = _setting(
        Duration(0),
        "DATAFLOW_DEFAULT_EXPIRATION_OFFSET",
        "Offset of Replicas without spec.expirationOffset; 0 disables expiration.",
    )
    expiration_lead_time: DurationField = _setting(
        Duration(600_000),
        "DATAFLOW_EXPIRATION_LEAD_TIME",
        "A replica is restarted this long before it expires (at most half the offset).",
    )
    start_timeout: DurationField = _setting(
        Duration(300_000),
        "DATAFLOW_START_TIMEOUT",
        "A driver not running this long after its attempt began is a failure (with the "
        "pod's own waiting reason).",
    )
    ready_timeout: DurationField = _setting(
        Duration(600_000),
        "DATAFLOW_READY_TIMEOUT",
        "A driver whose control API does not answer this long after its attempt began is a "
        "failure.",
    )
    lost_grace: DurationField = _setting(
        Duration(10_000),
        "DATAFLOW_LOST_GRACE",
        "How long a created driver pod may be missing before it counts as lost.",
    )
    status_poll_interval: DurationField = _setting(
        Duration(5_000),
        "DATAFLOW_STATUS_POLL_INTERVAL",
        "How often each replica's GET /status is pulled.",
    )
    reconcile_interval: DurationField = _setting(
        Duration(10_000),
        "DATAFLOW_RECONCILE_INTERVAL",
        "The longest a replica goes without a reconcile when nothing wakes it.",
    )
    status_qps: float = Field(
        default=500.0,
        ge=0,
        validation_alias="DATAFLOW_STATUS_QPS",
        description="Dataflow status patches a second, at most, in bursts of one second's "
        "worth (0: no limit); a Dataflow's pending changes are coalesced meanwhile. Writes "
        "that only move a frontier are slowed down to a hundredth of it while the operator "
        "is busy, so that new and changed Dataflows go first.",
    )
    delete_timeout: DurationField = _setting(
        Duration(60_000),
        "DATAFLOW_DELETE_TIMEOUT",
        "How long a deleted Dataflow waits for its replicas to confirm the drop before it "
        "goes anyway (with an Event).",
    )
    control_port: int = _setting(
        8765, "DATAFLOW_CONTROL_PORT", "Port of the replicas' control API."
    )
    service_account: str = _setting(
        "",
        "DATAFLOW_REPLICA_SERVICE_ACCOUNT",
        "Drivers' service account when the Replica names none (empty: the namespace default).",
    )
    metrics_port: int = _setting(
        9090, "DATAFLOW_METRICS_PORT", "Port of the operator's Prometheus /metrics (0: off)."
    )


ENV_NAMES: dict[str, str] = {
    name: str(field.validation_alias) for name, field in OperatorConfig.model_fields.items()
}
"""Field → the environment variable it is read from."""

_FLAG_NAMES = {"default_image": "--replica-image"}


class ConfigError(ValueError):
    """A setting that does not parse; the message names its variable or flag."""


def add_config_arguments(parser: argparse.ArgumentParser) -> None:
    """One flag per field (``--default-expiration-offset 21d``); the env var is the default."""
    group = parser.add_argument_group("operator configuration (flags override environment)")
    for name, field in OperatorConfig.model_fields.items():
        group.add_argument(
            _FLAG_NAMES.get(name, "--" + name.replace("_", "-")),
            dest=f"config_{name}",
            metavar="VALUE",
            default=None,
            help=f"{field.description} (env {ENV_NAMES[name]}; default {field.default})",
        )


def config_from_args(args: argparse.Namespace) -> OperatorConfig:
    """The environment, overridden by the flags given on the command line.

    Raises :class:`ConfigError` naming the variable (or flag) of a value that does not parse.
    """
    flags = {
        name: value
        for name in OperatorConfig.model_fields
        if (value := getattr(args, f"config_{name}", None)) is not None
    }
    try:
        return OperatorConfig(**flags)
    except ValidationError as error:
        problems = []
        for item in error.errors():
            where = str(item["loc"][0]) if item["loc"] else "configuration"
            if where in flags:
                where = _FLAG_NAMES.get(where, "--" + where.replace("_", "-"))
            problems.append(f"{where}: {item['msg']}")
        raise ConfigError("; ".join(problems)) from None
