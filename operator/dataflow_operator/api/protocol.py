"""The operator↔replica control protocol (HTTP + JSON), versioned.

The runtime in a replica's driver serves these bodies; the operator's replica client
sends and reads them. Every body carries ``version``; a peer that receives another
version answers 400 with an :class:`ErrorBody` instead of guessing.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Literal

from pydantic import Field

from dataflow_operator.api.dataflow import (
    SQL_IDENTIFIER,
    DataflowSpec,
    MaintenanceStrategy,
    NodeStatus,
    SourceStatus,
)
from dataflow_operator.api.meta import ApiModel, ResourceName

__all__ = [
    "CONTROL_TOKEN_HEADER",
    "DEFAULT_CONTROL_PORT",
    "PROTOCOL_VERSION",
    "DataflowReport",
    "DesiredDataflow",
    "DesiredDataflows",
    "ErrorBody",
    "InstallResult",
    "PeekResult",
    "ReleaseFrontiers",
    "ReplicaPhase",
    "ReplicaReport",
    "ShutdownDurations",
    "SourceRelease",
]

PROTOCOL_VERSION = "v1"
DEFAULT_CONTROL_PORT = 8765
CONTROL_TOKEN_HEADER = "X-Dataflow-Token"
"""Carries the control token besides ``Authorization: Bearer``, which the Kubernetes API
server's service proxy does not pass on."""


class DesiredDataflow(ApiModel):
    """One dataflow the replica should maintain, as of one version of its resource."""

    name: ResourceName = Field(
        description="The Dataflow's name (unique within its cluster): a DNS-1123 subdomain, "
        "as metadata.name (it names the dataflow's state directory)."
    )
    namespace: str | None = Field(default=None, description="The Dataflow's namespace.")
    generation: int | None = Field(default=None, description="metadata.generation.")
    spec: DataflowSpec = Field(description="The dataflow's spec.")


class DesiredDataflows(ApiModel):
    """``PUT /dataflows``: the full desired set; the replica converges to it."""

    version: Literal["v1"] = Field(default="v1", description="Protocol version.")
    dataflows: list[DesiredDataflow] = Field(default_factory=list, description="All of them.")


class SourceRelease(ApiModel):
    """The cluster's listing frontier of one source of one dataflow."""

    dataflow: ResourceName = Field(description="The Dataflow's name.")
    source: str = Field(
        max_length=128, pattern=SQL_IDENTIFIER, description="The source's name in its spec."
    )
    listed: int = Field(
        ge=0,
        description="Every replica of the cluster has read, in a committed batch, every file "
        "that was in the directory at this wall-clock time (epoch ms): files first listed "
        "at or before it may be released.",
    )
    offsets: dict[str, int] | None = Field(
        default=None,
        description="A kafka source: per partition, the position every replica of the "
        "cluster has read durably; the consumer group's offsets are committed there.",
    )


class ReleaseFrontiers(ApiModel):
    """``PUT /release``: how far the cluster has read each source that releases files
    (the meet over its replicas, design 3). A source not listed releases nothing."""

    version: Literal["v1"] = Field(default="v1", description="Protocol version.")
    sources: list[SourceRelease] = Field(
        default_factory=list, max_length=100_000, description="One entry per source."
    )


class InstallResult(ApiModel):
    """What ``PUT /dataflows`` changed."""

    version: Literal["v1"] = Field(default="v1", description="Protocol version.")
    installed: list[str] = Field(default_factory=list, description="Newly installed.")
    reinstalled: list[str] = Field(default_factory=list, description="Changed and reinstalled.")
    dropped: list[str] = Field(default_factory=list, description="Removed and dropped.")
    unchanged: list[str] = Field(default_factory=list, description="Left as they were.")
    failed: dict[str, str] = Field(
        default_factory=dict, description="Dataflows that could not be installed, with why."
    )


class ReplicaPhase(StrEnum):
    """The runtime's own phase."""

    STARTING = "Starting"
    RUNNING = "Running"
    EXPIRED = "Expired"
    STOPPING = "Stopping"


class DataflowReport(ApiModel):
    """One dataflow as the replica maintains it."""

    name: str = Field(description="The Dataflow's name.")
    generation: int | None = Field(default=None, description="The generation installed.")
    frontier: list[int] = Field(default_factory=list, description="Write frontier; [] closed.")
    as_of: list[int] = Field(default_factory=list, description="The snapshot time.")
    expiration: int | None = Field(default=None, description="Drops updates at/after (ms).")
    until: list[int] = Field(default_factory=list, description="Produces no time at/after.")
    hydrated: bool = Field(default=False, description="Snapshot processed.")
    hydration_time_ms: int | None = Field(default=None, description="How long hydration took.")
    nodes: list[NodeStatus] = Field(default_factory=list, description="Per plan node.")
    strategy: MaintenanceStrategy | None = Field(
        default=None, description="How the replica maintains it (None: not built)."
    )
    strategy_reason: str | None = Field(
        default=None, description="Why it is recomputed: what no incremental strategy covers."
    )
    state_rows: int = Field(default=0, ge=0, description="Rows in Spark state.")
    state_bytes: int = Field(default=0, ge=0, description="Bytes of Spark state.")
    expired: bool = Field(default=False, description="Stopped at its expiration.")
    last_error: str | None = Field(default=None, description="The last error, if failing.")
    dropping: bool = Field(
        default=False,
        description="Dropped, and some of its Spark work is still stopping; it leaves the "
        "report once its last task has ended.",
    )
    sources: list[SourceStatus] = Field(
        default_factory=list, description="Its sources' ingestion and release (design 3)."
    )


class ShutdownDurations(ApiModel):
    """A histogram of how long dataflows took to stop, from the drop to their last task."""

    bounds: list[float] = Field(description="Upper bounds of the buckets (seconds).")
    counts: list[int] = Field(description="Drops per bucket, cumulative (le), same order.")
    total: int = Field(default=0, ge=0, description="Drops measured.")
    sum_seconds: float = Field(default=0.0, ge=0, description="Their summed duration.")


class ReplicaReport(ApiModel):
    """``GET /status``: the replica and every dataflow it maintains."""

    version: Literal["v1"] = Field(default="v1", description="Protocol version.")
    start_time: int = Field(description="Replica start time (epoch ms).")
    expiration: int | None = Field(default=None, description="Replica expiration (epoch ms).")
    phase: ReplicaPhase = Field(description="The runtime's phase.")
    dataflows: list[DataflowReport] = Field(default_factory=list, description="Dataflows.")
    shutdowns: ShutdownDurations | None = Field(
        default=None, description="How long dropped dataflows took to stop."
    )


class PeekResult(ApiModel):
    """``GET /dataflows/{name}/peek``: an Index dataflow's current contents."""

    version: Literal["v1"] = Field(default="v1", description="Protocol version.")
    name: str = Field(description="The Dataflow's name.")
    time: int = Field(description="The time the contents are valid at (epoch ms).")
    columns: list[str] = Field(description="Column names.")
    rows: list[list[object]] = Field(description="Rows, each with its multiplicity last.")


class ErrorBody(ApiModel):
    """The body of every 4xx/5xx answer."""

    version: Literal["v1"] = Field(default="v1", description="Protocol version.")
    error: str = Field(description="A CamelCase reason.")
    message: str = Field(description="What went wrong, for a human.")
