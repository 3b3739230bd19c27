"""The ``Replica`` custom resource: one Spark application that runs a cluster's dataflows."""

from __future__ import annotations

import re
from enum import StrEnum
from typing import Annotated, Any, Literal

from pydantic import Field, field_validator

from dataflow_operator.api.meta import NAME_PATTERN, ApiModel, Condition, ReplicaMeta
from dataflow_operator.api.types import DurationField, QuantityField
from dataflow_operator.core.time import parse_timestamp

__all__ = [
    "STATE_URI_SCHEMES",
    "AttemptPhase",
    "Backoff",
    "DriverResources",
    "EnvVar",
    "ExecutorFailure",
    "ExecutorResources",
    "Handover",
    "HandoverOutcome",
    "HandoverPhase",
    "HandoverRecord",
    "Replica",
    "ReplicaSpec",
    "ReplicaStatus",
    "RestartCount",
    "RestartPolicy",
    "RestartPolicyType",
    "RestartReason",
    "RestartStrategy",
    "StateStorage",
]

STATE_URI_SCHEMES = ("s3a", "gs", "abfss", "hdfs")
"""Schemes of ``spec.stateUri``: object stores and HDFS, reached through Hadoop's FileSystem."""
_STATE_URI = re.compile(r"^(?P<scheme>[a-z0-9]+)://(?P<authority>[^/\s?#]+)(?P<path>/[^\s?#]*)?$")
_STATE_URI_PATTERN = r"^(s3a|gs|abfss|hdfs)://[^/\s?#]+(/[^\s?#]*)?$"
_SECRET_NAME = r"^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$"


class RestartPolicyType(StrEnum):
    """When a driver that ended is replaced."""

    ALWAYS = "Always"
    ON_FAILURE = "OnFailure"
    NEVER = "Never"


class RestartReason(StrEnum):
    """Why a replica's driver was replaced; counted in status."""

    EXPIRED = "Expired"
    DRIVER_FAILED = "DriverFailed"
    DRIVER_LOST = "DriverLost"
    SPEC_CHANGED = "SpecChanged"


class RestartStrategy(StrEnum):
    """How an expiration restart replaces the driver."""

    MAKE_BEFORE_BREAK = "MakeBeforeBreak"
    """Start the successor beside the current driver; cut over once it is hydrated."""
    BREAK_BEFORE_MAKE = "BreakBeforeMake"
    """Stop the current driver, then start the next: one driver at a time."""


class AttemptPhase(StrEnum):
    """Where a replica's current driver attempt is (``status.phase``)."""

    CREATING = "Creating"
    """Recorded in status; its pod is being created."""
    PENDING = "Pending"
    """Its pod exists and is not running yet."""
    RUNNING = "Running"
    """Its pod runs."""
    BACKING_OFF = "BackingOff"
    """It failed; the next attempt waits for the backoff."""
    FAILED = "Failed"
    """The restart policy gave up."""
    COMPLETED = "Completed"
    """The driver exited 0 and the restart policy does not restart successes."""


class HandoverPhase(StrEnum):
    """Where a make-before-break successor is (``status.handover.phase``)."""

    STARTING = "Starting"
    """Its pod was created; its control API does not answer yet."""
    HYDRATING = "Hydrating"
    """It answers and is installing and hydrating the cluster's dataflows."""


class HandoverOutcome(StrEnum):
    """How a handover from one driver attempt to its successor ended."""

    CUT_OVER = "CutOver"
    """The successor hydrated and took over; readers saw no gap."""
    LATE = "Late"
    """The predecessor reached its expiration first: the successor took over unhydrated."""
    ABANDONED = "Abandoned"
    """The successor failed; the current driver served on and restarted at its expiration."""


class Backoff(ApiModel):
    """Exponential backoff between restarts after failures."""

    initial: DurationField = Field(
        default="10s",
        validate_default=True,
        description="Delay before the first restart after a failure.",
    )
    max: DurationField = Field(
        default="5m", validate_default=True, description="The longest delay between restarts."
    )
    multiplier: float = Field(
        default=2.0, ge=1.0, le=10.0, description="Factor by which the delay grows per failure."
    )


class RestartPolicy(ApiModel):
    """How the operator replaces a driver that ended.

    Expiration restarts are expected and never count as failures.
    """

    type: RestartPolicyType = Field(
        default=RestartPolicyType.ALWAYS,
        description="Always: replace any ended driver. OnFailure: only failed ones. "
        "Never: leave a failed replica Degraded.",
    )
    max_attempts: int | None = Field(
        default=None,
        ge=1,
        description="Consecutive failed attempts after which the replica stays Degraded; "
        "absent means no limit.",
    )
    backoff: Backoff = Field(default_factory=Backoff, description="Delay between failures.")
    reset_after: DurationField = Field(
        default="10m",
        validate_default=True,
        description="A driver that ran this long without failing clears the failure count.",
    )


class DriverResources(ApiModel):
    """Resources of the driver pod."""

    cores: int = Field(default=1, ge=1, le=256, description="CPU cores (spark.driver.cores).")
    memory: QuantityField = Field(
        default="1Gi", description="Memory for the JVM heap (spark.driver.memory)."
    )
    memory_overhead: QuantityField | None = Field(
        default=None,
        description="Memory for everything in the driver pod besides the JVM heap (the "
        "replica's Python process, the JVM's own, local Python workers); the pod's request "
        "and limit are memory + memoryOverhead. Absent: Spark's rule for Python drivers, "
        "max(384Mi, 40% of memory). See docs/sizing.md.",
    )


class ExecutorResources(ApiModel):
    """Resources of the executors, which Spark creates as pods owned by the driver."""

    cores: int = Field(default=1, ge=1, le=256, description="CPU cores (spark.executor.cores).")
    memory: QuantityField = Field(
        default="1Gi", description="Memory for the JVM heap (spark.executor.memory)."
    )
    memory_overhead: QuantityField | None = Field(
        default=None,
        description="Memory for everything in an executor pod besides the JVM heap (the "
        "JVM's own, one Python worker per core); the pod's request and limit are memory + "
        "memoryOverhead (spark.executor.memoryOverhead). Absent: max(384Mi, 10% of memory) "
        "for the JVM plus 384Mi per core for Python workers. See docs/sizing.md.",
    )
    instances: int = Field(
        default=0,
        ge=0,
        le=10_000,
        description="Number of executor pods. 0, the default, runs Spark inside the driver "
        "(local mode); executors need state they can reach: spec.stateUri, or spec.storage "
        "with ReadWriteMany.",
    )


class EnvVar(ApiModel):
    """An environment variable for the driver and executors."""

    name: str = Field(min_length=1, description="Variable name.")
    value: str | None = Field(default=None, description="Literal value.")
    value_from: dict[str, Any] | None = Field(
        default=None,
        description="A Kubernetes EnvVarSource (secretKeyRef, configMapKeyRef, fieldRef…).",
        json_schema_extra={"x-kubernetes-preserve-unknown-fields": True},
    )


AccessMode = Literal["ReadWriteOnce", "ReadWriteOncePod", "ReadWriteMany"]


def _read_write_once() -> list[AccessMode]:
    return ["ReadWriteOnce"]


class StateStorage(ApiModel):
    """A PersistentVolumeClaim for the replica's checkpoints and changelogs.

    The operator creates one claim per Replica (``<replica>-state``), owned by it, and
    mounts it in every driver attempt and on every executor at the state directory, so
    that a restart (at expiration, after a failure or a spec change) resumes from the last
    checkpoint.
    """

    size: QuantityField = Field(
        description="Requested capacity of the claim, e.g. 10Gi. Changing it later is "
        "rejected (condition PersistentState=False, reason StorageChangeRejected): the "
        "operator never resizes or replaces an existing claim.",
    )
    storage_class_name: str | None = Field(
        default=None,
        min_length=1,
        description="StorageClass of the claim; absent uses the cluster's default class. "
        "Fixed once the claim exists.",
    )
    access_modes: list[AccessMode] = Field(
        default_factory=_read_write_once,
        min_length=1,
        max_length=3,
        description="Access modes of the claim. It is mounted on the driver and on every "
        "executor at the same path, so executors need ReadWriteMany (they run in other "
        "pods, often on other nodes). Default: [ReadWriteOnce], enough for Spark inside the "
        "driver (executor.instances: 0). Fixed once the claim exists.",
    )


class ReplicaSpec(ApiModel):
    """The desired state of a replica."""

    cluster: str = Field(
        min_length=1,
        max_length=63,
        pattern=NAME_PATTERN,
        description="The cluster this replica belongs to: it runs every Dataflow of the cluster.",
    )
    image: str | None = Field(
        default=None,
        min_length=1,
        description="Container image with dataflow-operator and Spark; absent uses the "
        "operator's default image.",
    )
    image_pull_policy: Literal["Always", "IfNotPresent", "Never"] | None = Field(
        default=None, description="Image pull policy of the driver and executors."
    )
    service_account_name: str | None = Field(
        default=None,
        description="Service account of the driver; it must be allowed to manage executor pods.",
    )
    driver: DriverResources = Field(default_factory=DriverResources, description="Driver pod.")
    executor: ExecutorResources = Field(
        default_factory=ExecutorResources, description="Executor pods."
    )
    spark_conf: dict[str, str] = Field(
        default_factory=dict, description="Extra Spark configuration (spark.* keys)."
    )
    spark_ui: bool = Field(
        default=True,
        description="The driver's Spark UI on port 4040 (spark-ui), on the driver Service: "
        "kubectl port-forward svc/<replica>-driver 4040. false turns it off. Changing it "
        "restarts the driver (SpecChanged).",
    )
    env: list[EnvVar] = Field(
        default_factory=list,
        description="Environment of the driver and executors.",
        json_schema_extra={"x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["name"]},
    )
    expiration_offset: DurationField | None = Field(
        default=None,
        description="How long after its start the replica expires and is restarted; "
        "'0' disables expiration; absent uses the operator's default.",
    )
    restart_policy: RestartPolicy = Field(
        default_factory=RestartPolicy, description="How ended drivers are replaced."
    )
    restart_strategy: RestartStrategy = Field(
        default=RestartStrategy.MAKE_BEFORE_BREAK,
        description="How an expiration restart replaces the driver. MakeBeforeBreak: the "
        "successor starts beside the current driver (its own state, hydrated from the "
        "sources) and the driver Service switches to it once every dataflow on it is "
        "hydrated, so readers see no gap; it costs a second driver (and its executors) "
        "for the overlap. BreakBeforeMake: the driver is stopped first (tight quotas); "
        "the replica serves nothing until the new driver has hydrated.",
    )
    storage: StateStorage | None = Field(
        default=None,
        description="Persistent storage for the replica's state (Spark checkpoints and "
        "changelogs), kept across driver restarts and deleted with the Replica. Absent: "
        "the state lives in an emptyDir and is LOST whenever the driver pod is replaced "
        "(expiration, failure, spec change), so every restart recomputes from the sources; "
        "condition PersistentState=False says so. Adding or removing it restarts the "
        "driver (SpecChanged); a removed claim stays until the Replica is deleted. "
        "Exclusive with stateUri.",
    )
    state_uri: str | None = Field(
        default=None,
        description="The replica's state on an object store or HDFS instead of a volume: "
        "s3a://bucket/prefix, gs://bucket/prefix, abfss://container@account.dfs.core."
        "windows.net/prefix or hdfs://namenode:port/path. The driver and every executor "
        "read and write it through Hadoop's FileSystem API; it survives restarts and is "
        "not deleted with the Replica. Exclusive with storage.",
        json_schema_extra={"pattern": _STATE_URI_PATTERN},
    )
    state_credentials: str | None = Field(
        default=None,
        max_length=253,
        pattern=_SECRET_NAME,
        description="A Secret in the Replica's namespace whose keys become environment "
        "variables of the driver and every executor (envFrom), e.g. AWS_ACCESS_KEY_ID, "
        "AWS_SECRET_ACCESS_KEY and AWS_ENDPOINT_URL for s3a (MinIO).",
    )
    volumes: list[
        Annotated[dict[str, Any], Field(description="A Kubernetes Volume (name and source).")]
    ] = Field(
        default_factory=list,
        max_length=64,
        description="Extra Kubernetes Volumes (e.g. for sources), added to the driver and "
        "to every executor.",
    )
    volume_mounts: list[
        Annotated[
            dict[str, Any],
            Field(description="A Kubernetes VolumeMount (name of a volume, mountPath)."),
        ]
    ] = Field(
        default_factory=list,
        max_length=64,
        description="Kubernetes VolumeMounts of the extra volumes, on the driver's and "
        "every executor's container.",
    )

    @field_validator("state_uri")
    @classmethod
    def _state_uri(cls, uri: str | None) -> str | None:
        if uri is None:
            return None
        match = _STATE_URI.match(uri)
        schemes = ", ".join(f"{s}://" for s in STATE_URI_SCHEMES)
        if match is None or match["scheme"] not in STATE_URI_SCHEMES:
            raise ValueError(
                f"{uri!r} is not an object-store or HDFS URI: expected "
                f"SCHEME://BUCKET-OR-HOST/PREFIX with a scheme among {schemes} (no query, "
                "no spaces); a volume is spec.storage"
            )
        if match["scheme"] == "abfss" and "@" not in match["authority"]:
            raise ValueError(f"{uri!r}: an abfss URI names CONTAINER@ACCOUNT.dfs.core.windows.net")
        return uri

    @field_validator("volumes", "volume_mounts")
    @classmethod
    def _named(cls, items: list[dict[str, Any]]) -> list[dict[str, Any]]:
        for index, item in enumerate(items):
            if not isinstance(item.get("name"), str) or not item["name"]:
                raise ValueError(f"item [{index}] has no name")
        return items

    @field_validator("spark_conf")
    @classmethod
    def _spark_keys(cls, conf: dict[str, str]) -> dict[str, str]:
        for key in conf:
            if not key.startswith("spark."):
                raise ValueError(f"key {key!r} is not a Spark setting (they start with 'spark.')")
        return conf


class RestartCount(ApiModel):
    """How often a replica was restarted for one reason."""

    reason: RestartReason = Field(description="Why.")
    count: int = Field(ge=0, description="How many times.")


class Handover(ApiModel):
    """The successor attempt of a make-before-break restart, while it hydrates."""

    attempt: int = Field(ge=1, description="The successor's attempt number.")
    driver_pod: str = Field(description="The successor's driver pod.")
    start_time: str = Field(description="The successor's start time (RFC 3339).")
    start_time_ms: int = Field(description="The same start time in epoch milliseconds.")
    expires_at: str | None = Field(default=None, description="When the successor expires.")
    expires_at_ms: int | None = Field(default=None, description="The same in epoch ms.")
    expiration_offset: str = Field(description="The offset in force for the successor.")
    spec_hash: str = Field(description="Hash of the driver-relevant spec it was built from.")
    state_dir: str = Field(description="Its state, relative to the replica's state location.")
    phase: HandoverPhase = Field(
        description="Starting (pod created, control API not answering yet) or Hydrating."
    )
    hydrated: str | None = Field(
        default=None,
        description="While Hydrating: dataflows hydrated on the successor out of those "
        "the replica runs, e.g. '3/5'.",
    )


class HandoverRecord(ApiModel):
    """How the last handover ended."""

    attempt: int = Field(ge=1, description="The successor's attempt number.")
    outcome: HandoverOutcome = Field(description="CutOver, Late or Abandoned.")
    at: str = Field(description="When it ended (RFC 3339).")
    overlap_seconds: float = Field(
        ge=0, description="How long the successor ran beside its predecessor."
    )
    message: str = Field(default="", max_length=1024, description="What happened.")


class ExecutorFailure(ApiModel):
    """The last executor pod of the current attempt that failed."""

    pod: str = Field(max_length=253, description="The executor pod.")
    attempt: int = Field(ge=1, description="The driver attempt it belonged to.")
    exit_code: int | None = Field(default=None, description="Its container's exit code.")
    reason: str = Field(
        max_length=128, description="Why it ended, as the kubelet says: OOMKilled, Error…"
    )
    message: str = Field(
        default="",
        max_length=256,
        description="The telling line of its termination message (its log's tail: the "
        "exception, else the last line).",
    )
    at: str = Field(description="When it ended (RFC 3339).")
    at_ms: int = Field(description="The same in epoch milliseconds.")


class ReplicaStatus(ApiModel):
    """The observed state of a replica."""

    observed_generation: int | None = Field(
        default=None, description="The generation of the spec last reconciled."
    )
    conditions: list[Condition] = Field(
        default_factory=list,
        max_length=16,
        description="Ready, Progressing, Degraded, Expired, PersistentState and ExecutorsFailing.",
        json_schema_extra={"x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["type"]},
    )
    start_time: str | None = Field(
        default=None, description="When the current driver attempt started (RFC 3339)."
    )
    start_time_ms: int | None = Field(
        default=None, description="The same start time in epoch milliseconds, as injected."
    )
    expires_at: str | None = Field(
        default=None, description="When the current attempt expires (RFC 3339); absent: never."
    )
    expires_at_ms: int | None = Field(
        default=None, description="The same expiration in epoch milliseconds."
    )
    expiration_offset: str | None = Field(
        default=None, description="The offset in force for the current attempt."
    )
    driver_pod: str | None = Field(default=None, description="Name of the current driver pod.")
    attempt: int = Field(default=0, ge=0, description="Number of the current driver attempt.")
    consecutive_failures: int = Field(
        default=0, ge=0, description="Failures since the last healthy run; drives the backoff."
    )
    restarts: list[RestartCount] = Field(
        default_factory=list,
        max_length=8,
        description="Restart counts by reason.",
        json_schema_extra={
            "x-kubernetes-list-type": "map",
            "x-kubernetes-list-map-keys": ["reason"],
        },
    )
    total_restarts: int = Field(default=0, ge=0, description="Sum of the restart counts.")
    spec_hash: str | None = Field(
        default=None, description="Hash of the driver-relevant spec of the current attempt."
    )
    phase: AttemptPhase | None = Field(
        default=None,
        description="Where the current attempt is: Creating (recorded, pod being created), "
        "Pending, Running, BackingOff (waiting to restart after a failure), Failed (given up) "
        "or Completed.",
    )
    pending_restart: RestartReason | None = Field(
        default=None, description="Why the next attempt will start, while BackingOff."
    )
    next_attempt_at_ms: int | None = Field(
        default=None, description="When the next attempt starts (epoch ms), while BackingOff."
    )
    state_claim: str | None = Field(
        default=None,
        description="The PersistentVolumeClaim that holds the replica's state; absent: "
        "the state is ephemeral (no spec.storage).",
    )
    state_dir: str = Field(
        default="",
        description="The current attempt's state, relative to the replica's state location "
        "('' is its root; a make-before-break successor gets attempts/N).",
    )
    service_name: str | None = Field(
        default=None,
        description="The driver Service that users and the operator address: it selects the "
        "serving attempt's pod.",
    )
    hydrated_at_ms: int | None = Field(
        default=None,
        description="When every dataflow of the current attempt was first seen hydrated.",
    )
    last_hydration_seconds: float | None = Field(
        default=None,
        ge=0,
        description="How long the last attempt took from its start to hydrated; sizes the "
        "handover lead time.",
    )
    restart_strategy: RestartStrategy | None = Field(
        default=None,
        description="The strategy the next expiration restart will use (BreakBeforeMake when "
        "MakeBeforeBreak cannot apply; the Expired condition says why).",
    )
    planned_cutover_at: str | None = Field(
        default=None,
        description="When the next expiration restart begins (RFC 3339): MakeBeforeBreak "
        "starts the successor then and cuts over once it is hydrated; BreakBeforeMake stops "
        "the driver then.",
    )
    unserved_since_ms: int | None = Field(
        default=None,
        description="Since when no hydrated driver serves (a break-before-make restart or a "
        "late handover), until the new attempt has hydrated.",
    )
    handover: Handover | None = Field(
        default=None, description="The successor attempt, while a handover is under way."
    )
    last_handover: HandoverRecord | None = Field(
        default=None, description="How the last handover ended."
    )
    executors: str | None = Field(
        default=None,
        max_length=64,
        description="The current attempt's executors at a glance: 'R/N running', or "
        "'0 (no shared storage)' / '0 (in the driver)' when Spark runs inside the driver.",
    )
    executors_desired: int | None = Field(
        default=None,
        ge=0,
        description="Executors the current attempt runs (spark.executor.instances); 0: "
        "Spark runs inside the driver.",
    )
    executors_running: int | None = Field(
        default=None, ge=0, description="Executor pods of the current attempt that run."
    )
    executor_failures: int = Field(
        default=0, ge=0, description="Executor pods of the current attempt that failed."
    )
    last_executor_failure: ExecutorFailure | None = Field(
        default=None,
        description="The current attempt's last failed executor (condition ExecutorsFailing).",
    )

    def expiration_ms(self) -> int | None:
        """The current attempt's expiration in epoch ms, as recorded (``None``: never)."""
        if self.expires_at_ms is not None:
            return self.expires_at_ms
        return parse_timestamp(self.expires_at) if self.expires_at else None  # older statuses


class Replica(ApiModel):
    """A Replica custom resource."""

    api_version: Literal["dataflow.dev/v1alpha1"] = Field(
        default="dataflow.dev/v1alpha1", description="dataflow.dev/v1alpha1"
    )
    kind: Literal["Replica"] = Field(default="Replica", description="Replica")
    metadata: ReplicaMeta = Field(description="Standard object metadata.")
    spec: ReplicaSpec = Field(description="The desired state.")
    status: ReplicaStatus | None = Field(default=None, description="The observed state.")
