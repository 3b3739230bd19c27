"""Shared model plumbing: the base model, object metadata, conditions."""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field
from pydantic.alias_generators import to_camel

from dataflow_operator.core.names import replica_name_problem, subdomain_problem

__all__ = [
    "API_VERSION",
    "GROUP",
    "VERSION",
    "ApiModel",
    "Condition",
    "ObjectMeta",
    "ReplicaMeta",
    "ResourceName",
]

GROUP = "dataflow.dev"
VERSION = "v1alpha1"
API_VERSION = f"{GROUP}/{VERSION}"
NAME_PATTERN = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"
"""An RFC 1123 label: what Kubernetes allows as a name of most things."""


class ApiModel(BaseModel):
    """Base of every model: camelCase on the wire, snake_case in Python."""

    model_config = ConfigDict(
        alias_generator=to_camel, populate_by_name=True, extra="forbid", frozen=True
    )

    def to_wire(self) -> dict[str, Any]:
        """The JSON-ready dict with camelCase keys and no unset optional fields."""
        return self.model_dump(mode="json", by_alias=True, exclude_none=True)


def _checked(rule: Callable[[str], str | None]) -> AfterValidator:
    def check(name: str) -> str:
        problem = rule(name)
        if problem is not None:
            raise ValueError(problem)
        return name

    return AfterValidator(check)


ResourceName = Annotated[str, _checked(subdomain_problem)]
"""A Dataflow's or a Replica's name wherever it is given (a manifest, a control API body):
a DNS-1123 subdomain, so it is also one safe path component (``core/names.py``)."""


class ObjectMeta(BaseModel):
    """The parts of Kubernetes object metadata the operator reads; the rest is kept."""

    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, extra="allow")

    name: Annotated[str, _checked(subdomain_problem)] = Field(
        min_length=1, max_length=253, description="The object's name."
    )
    namespace: str | None = Field(default=None, description="The object's namespace.")
    uid: str | None = Field(default=None, description="Set by the API server.")
    generation: int | None = Field(default=None, description="Set by the API server.")
    resource_version: str | None = Field(default=None, description="Set by the API server.")
    labels: dict[str, str] = Field(default_factory=dict, description="Labels.")
    annotations: dict[str, str] = Field(default_factory=dict, description="Annotations.")


class ReplicaMeta(ObjectMeta):
    """A Replica's metadata: its name also names its driver Service and labels."""

    name: Annotated[str, _checked(replica_name_problem)] = Field(
        min_length=1, max_length=253, description="The object's name."
    )


class Condition(ApiModel):
    """An observation of one aspect of the object's state (Kubernetes conventions)."""

    type: str = Field(description="The aspect, e.g. Ready, Hydrated, Expired.")
    status: Literal["True", "False", "Unknown"] = Field(description="True, False or Unknown.")
    reason: str = Field(description="A CamelCase word for the cause of the last transition.")
    message: str = Field(default="", description="A human-readable explanation.")
    last_transition_time: str = Field(description="When the status last changed (RFC 3339).")
    observed_generation: int | None = Field(
        default=None, description="The spec generation this condition was computed for."
    )
