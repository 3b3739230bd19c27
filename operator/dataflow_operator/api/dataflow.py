"""The ``Dataflow`` custom resource: a Spark SQL query maintained on every replica."""

from __future__ import annotations

import re
from enum import StrEnum
from typing import Annotated, Literal

from pydantic import AfterValidator, ConfigDict, Field, WithJsonSchema, model_validator

from dataflow_operator.api.meta import NAME_PATTERN, ApiModel, Condition, ObjectMeta
from dataflow_operator.api.types import (
    DurationField,
    SparkSchemaField,
    TimelineField,
    TimestampField,
)
from dataflow_operator.core.expiration import DataflowKind
from dataflow_operator.core.kafka import DRIVER_RECORDS, RANGE_RECORDS
from dataflow_operator.core.refresh import RefreshSchedule
from dataflow_operator.core.timelines import Timeline

__all__ = [
    "KAFKA_OWNED_PROPERTIES",
    "SQL_IDENTIFIER",
    "ChangelogSource",
    "CleanSource",
    "Dataflow",
    "DataflowKindField",
    "DataflowSource",
    "DataflowSpec",
    "DataflowStatus",
    "FileFormat",
    "FilesSource",
    "KafkaSource",
    "MaintenanceStrategy",
    "NodeStatus",
    "RefreshSpec",
    "ReleasedFiles",
    "ReplicaDataflowStatus",
    "SinkSpec",
    "Source",
    "SourceKind",
    "SourceStatus",
    "TableSource",
    "is_secret_kafka_property",
]

SQL_IDENTIFIER = r"^[A-Za-z_][A-Za-z0-9_]*$"
MAX_REPLICAS_IN_STATUS = 64
MAX_NODES_IN_STATUS = 256
MAX_SOURCES_IN_STATUS = 64


class DataflowKindField(StrEnum):
    """What the dataflow maintains (one-off queries are not resources)."""

    MATERIALIZED_VIEW = DataflowKind.MATERIALIZED_VIEW.value
    INDEX = DataflowKind.INDEX.value
    SUBSCRIBE = DataflowKind.SUBSCRIBE.value

    @property
    def core(self) -> DataflowKind:
        """The core's kind."""
        return DataflowKind(self.value)


class MaintenanceStrategy(StrEnum):
    """How a replica keeps the dataflow's output up to date."""

    INCREMENTAL = "Incremental"
    """Each batch costs what changed: state in Spark (filters, aggregates, joins, sets)."""
    RECOMPUTE = "Recompute"
    """Each changed time re-runs the query over the whole consolidated input."""


class FileFormat(StrEnum):
    """File formats Spark reads."""

    JSON = "json"
    CSV = "csv"
    PARQUET = "parquet"


class CleanSource(StrEnum):
    """What happens to a source's files once every reader has durably ingested them.

    Spark's file source has the same option (``cleanSource``) with the same values.
    """

    OFF = "Off"
    """Keep them where they are."""
    ARCHIVE = "Archive"
    """Move them to ``archivePath``, under their own names."""
    DELETE = "Delete"
    """Delete them."""


class ReleasedFiles(ApiModel):
    """How a ``files`` or ``changelog`` source releases consumed input (design 3)."""

    model_config = ConfigDict(
        json_schema_extra={
            "x-kubernetes-validations": [
                {
                    "rule": "!has(self.cleanSource) || self.cleanSource != 'Archive' "
                    "|| has(self.archivePath)",
                    "message": "cleanSource Archive needs archivePath",
                }
            ]
        }
    )

    clean_source: CleanSource = Field(
        default=CleanSource.OFF,
        description="Off (default), Archive or Delete: what happens to a file once every "
        "Dataflow and Replica reading the directory has ingested it durably (it is never "
        "read from here again; restarts read the ingested collection).",
    )
    archive_path: str | None = Field(
        default=None,
        min_length=1,
        description="Where Archive moves released files; required for Archive, and "
        "outside the source directory.",
    )

    @model_validator(mode="after")
    def _archive_needs_a_path(self) -> ReleasedFiles:
        path = getattr(self, "path", "")
        if self.clean_source is CleanSource.ARCHIVE and not self.archive_path:
            raise ValueError("cleanSource Archive needs archivePath (where released files go)")
        if self.clean_source is not CleanSource.ARCHIVE and self.archive_path:
            raise ValueError(
                f"archivePath is only for cleanSource Archive, not {self.clean_source.value}"
            )
        if self.archive_path and _inside(self.archive_path, path):
            raise ValueError(
                f"archivePath {self.archive_path!r} is inside the source directory {path!r}: "
                "archived files would be read again"
            )
        return self


def _inside(candidate: str, directory: str) -> bool:
    """True when ``candidate`` is ``directory`` or below it (as written, no filesystem)."""
    a, b = candidate.rstrip("/"), directory.rstrip("/")
    return bool(b) and (a == b or a.startswith(b + "/"))


class TableSource(ApiModel):
    """An append-only table: a directory that ``dataflow-operator insert`` appends to.

    Each row's time is the time at which the replica ingests it.
    """

    path: str = Field(min_length=1, description="Directory of the table's files.")
    schema_: SparkSchemaField = Field(
        alias="schema", min_length=1, description="Spark DDL of the rows, e.g. 'a INT, b STRING'."
    )


class FilesSource(ReleasedFiles):
    """A directory of data files; each row's time is the time it is ingested."""

    path: str = Field(min_length=1, description="Directory of the files.")
    format: FileFormat = Field(description="json, csv or parquet.")
    schema_: SparkSchemaField = Field(
        alias="schema", min_length=1, description="Spark DDL of the rows."
    )


class ChangelogSource(ReleasedFiles):
    """Files of updates that carry their own time and diff columns."""

    path: str = Field(min_length=1, description="Directory of the changelog files.")
    format: FileFormat = Field(description="json, csv or parquet.")
    schema_: SparkSchemaField = Field(
        alias="schema", min_length=1, description="Spark DDL of the data columns."
    )
    time_column: str = Field(
        default="time", min_length=1, description="Column with the update's time."
    )
    diff_column: str = Field(
        default="diff", min_length=1, description="Column with the update's diff (+n/-n)."
    )
    lateness: DurationField | None = Field(
        default=None,
        description="How late an update may arrive on the wall clock: the source is "
        "complete through the clock's time minus this, even when no new file arrives "
        "(a later update's time is advanced to the frontier). Only on the "
        "EpochMilliseconds timeline. Without it the frontier moves with the files' times "
        "and the directory's _upper.json (see docs/frontiers.md).",
    )


class DataflowSource(ApiModel):
    """The output of another Dataflow of the same cluster (views over views)."""

    name: str = Field(
        min_length=1, max_length=253, pattern=NAME_PATTERN, description="The Dataflow's name."
    )


KAFKA_PROPERTY_NAME = r"^[a-z0-9]+([._-][a-z0-9]+)*$"
"""A librdkafka configuration property's name (``security.protocol``)."""
ENV_NAME = r"^[A-Za-z_][A-Za-z0-9_]*$"
"""An environment variable's name."""
MAX_KAFKA_PROPERTIES = 64
"""Entries of ``properties`` and of ``propertiesFromEnv``, at most each."""
MAX_KAFKA_PROPERTY_VALUE = 8192
"""Characters of a property's value, at most (a PEM certificate fits; larger files go by
their ``*.location``)."""
DEFAULT_MAX_RECORDS_PER_BATCH = 1_000_000
"""A kafka source's records per batch unless it says: a source behind its topic catches up
in batches of up to a million records (read by the executors' tasks), as Spark's own
Kafka source reads all it finds."""
KAFKA_OWNED_PROPERTIES: dict[str, str] = {
    "bootstrap.servers": "use bootstrapServers",
    "group.id": "use groupId",
    "enable.auto.commit": "the replicas never commit while reading",
    "enable.auto.offset.store": "the replicas keep their own positions",
    "auto.offset.reset": "a partition is read from its oldest record kept",
}
"""The Kafka client properties a kafka source sets itself (the runtime's clients set
exactly these), each with what to do instead."""
KAFKA_SECRET_PROPERTIES = frozenset({"sasl.jaas.config", "sasl.oauthbearer.config", "ssl.key.pem"})
"""Properties that hold a secret without saying so in their name."""
KAFKA_SECRET_WORDS = ("password", "secret")
"""A property whose name contains one of these holds a secret."""


def _kafka_property_problem(name: str) -> str | None:
    """Why ``name`` may not be a kafka source's client property, if it may not."""
    if not re.fullmatch(KAFKA_PROPERTY_NAME, name):
        return (
            f"{name!r} is not a Kafka client property name (lowercase words joined by "
            "'.', '_' or '-', e.g. security.protocol)"
        )
    if name in KAFKA_OWNED_PROPERTIES:
        return f"{name!r} is set by the source: {KAFKA_OWNED_PROPERTIES[name]}"
    return None


def is_secret_kafka_property(name: str) -> bool:
    """Whether a Kafka client property holds a secret (its value must not be in a spec)."""
    return name in KAFKA_SECRET_PROPERTIES or any(word in name for word in KAFKA_SECRET_WORDS)


def _property_names(properties: dict[str, str], *, secrets_allowed: bool) -> dict[str, str]:
    """``properties``, if each name may be given (and, unless ``secrets_allowed``, none
    holds a secret: its value would be in the spec)."""
    problems = []
    for name in properties:
        problem = _kafka_property_problem(name)
        if problem is None and not secrets_allowed and is_secret_kafka_property(name):
            problem = (
                f"{name!r} holds a secret: put it in propertiesFromEnv and set the variable "
                "from a Secret in the Replica's spec.env"
            )
        if problem is not None:
            problems.append(problem)
    if problems:
        raise ValueError("; ".join(problems))
    return properties


def _plain_properties(properties: dict[str, str]) -> dict[str, str]:
    """``properties``: names the source does not set, and no secret."""
    return _property_names(properties, secrets_allowed=False)


def _env_properties(properties: dict[str, str]) -> dict[str, str]:
    """``propertiesFromEnv``: names the source does not set (their values are not here)."""
    return _property_names(properties, secrets_allowed=True)


def _env_name(name: str) -> str:
    """``name``, if it names an environment variable."""
    if not re.fullmatch(ENV_NAME, name):
        raise ValueError(
            f"{name!r} is not an environment variable name (letters, digits and '_', "
            "not starting with a digit)"
        )
    return name


PropertyValue = Annotated[str, Field(max_length=MAX_KAFKA_PROPERTY_VALUE)]
EnvName = Annotated[
    str,
    AfterValidator(_env_name),
    WithJsonSchema({"type": "string", "maxLength": 253, "pattern": ENV_NAME}),
]


class KafkaSource(ApiModel):
    """A Kafka topic: each record is an insert at its timestamp (on the source's timeline).

    Its updates are kept in the source's ingested collection like every other kind's, and
    how far every replica of the cluster has read is committed to the consumer group
    ``groupId``, so the usual consumer-lag monitoring works.
    """

    bootstrap_servers: str = Field(min_length=1, description="host:port[,host:port…]")
    topic: str = Field(min_length=1, description="The topic.")
    format: Literal["json", "csv"] = Field(default="json", description="Encoding of values.")
    schema_: SparkSchemaField = Field(
        alias="schema", min_length=1, description="Spark DDL of the values."
    )
    group_id: str | None = Field(
        default=None,
        min_length=1,
        max_length=249,
        description="Consumer group whose offsets are committed at the offset resumption "
        "frontier (default: dataflow.<cluster>.<dataflow>.<source>). The replicas read "
        "with their own positions and never join the group.",
    )
    max_records_per_batch: int = Field(
        default=DEFAULT_MAX_RECORDS_PER_BATCH,
        ge=1,
        le=10_000_000,
        description="Records read per batch, at most: a source behind its topic catches up "
        f"in batches this large, read by the executors' tasks in ranges of at most "
        f"{RANGE_RECORDS:,} ({DRIVER_RECORDS:,} when the driver reads a batch itself). "
        "Lower it to shorten each step while a large backlog is read.",
    )
    properties: Annotated[dict[str, PropertyValue], AfterValidator(_plain_properties)] = Field(
        default_factory=dict,
        max_length=MAX_KAFKA_PROPERTIES,
        description="librdkafka client properties of the source's consumer and of the "
        "admin client that commits its group, e.g. security.protocol: SASL_SSL, "
        "sasl.mechanism: SCRAM-SHA-512, ssl.ca.location: /etc/kafka-ca/ca.crt. Not for "
        "secrets: a property whose name contains 'password' or 'secret', "
        "sasl.jaas.config, sasl.oauthbearer.config and ssl.key.pem are refused here (give "
        "them in propertiesFromEnv). The source sets bootstrap.servers, group.id, "
        "enable.auto.commit, enable.auto.offset.store and auto.offset.reset itself. At "
        f"most {MAX_KAFKA_PROPERTIES}.",
    )
    properties_from_env: Annotated[dict[str, EnvName], AfterValidator(_env_properties)] = Field(
        default_factory=dict,
        max_length=MAX_KAFKA_PROPERTIES,
        description="librdkafka client properties whose values are read from the "
        "replica's environment: property name → environment variable name, e.g. "
        "sasl.password: KAFKA_PASSWORD, the variable set in the Replica's spec.env from a "
        "Secret (valueFrom.secretKeyRef). Only the names are in the spec and in Spark's "
        "plans; a variable missing on the replica fails the source, naming it. At most "
        f"{MAX_KAFKA_PROPERTIES}.",
    )

    @model_validator(mode="after")
    def _each_property_given_once(self) -> KafkaSource:
        both = sorted(set(self.properties) & set(self.properties_from_env))
        if both:
            names = ", ".join(repr(name) for name in both)
            raise ValueError(
                f"{names} given in both properties and propertiesFromEnv: give each in one"
            )
        return self


class SourceKind(StrEnum):
    """Which of a source's settings is given."""

    TABLE = "table"
    FILES = "files"
    CHANGELOG = "changelog"
    DATAFLOW = "dataflow"
    KAFKA = "kafka"


class Source(ApiModel):
    """An input of the dataflow, visible to its SQL under ``name``.

    Exactly one of table, files, changelog, dataflow or kafka is given.
    """

    name: str = Field(
        min_length=1, max_length=128, pattern=SQL_IDENTIFIER, description="Name used in the SQL."
    )
    table: TableSource | None = Field(default=None, description="An append-only table.")
    files: FilesSource | None = Field(default=None, description="A directory of files.")
    changelog: ChangelogSource | None = Field(default=None, description="Timestamped updates.")
    dataflow: DataflowSource | None = Field(default=None, description="Another Dataflow.")
    kafka: KafkaSource | None = Field(default=None, description="A Kafka topic.")
    timeline: TimelineField | None = Field(
        default=None,
        description="What the source's timestamps mean: EpochMilliseconds (the default), "
        "{user: NAME}, {external: NAME} or {counter: NAME}. A dataflow source carries "
        "the timeline of the dataflow it reads and takes none.",
    )

    @model_validator(mode="after")
    def _exactly_one_kind(self) -> Source:
        given = [kind.value for kind in SourceKind if getattr(self, kind.value) is not None]
        if len(given) != 1:
            choices = ", ".join(kind.value for kind in SourceKind)
            found = ", ".join(given) if given else "none"
            raise ValueError(f"give exactly one of {choices}; found {found}")
        if self.dataflow is not None and self.timeline is not None:
            raise ValueError(
                "a dataflow source carries the timeline of the dataflow it reads; remove 'timeline'"
            )
        if (
            self.changelog is not None
            and self.changelog.lateness is not None
            and self.declared_timeline != Timeline.epoch_milliseconds()
        ):
            raise ValueError(
                "changelog.lateness is measured on the wall clock: only for the "
                "EpochMilliseconds timeline; remove 'lateness' or 'timeline'"
            )
        return self

    @property
    def kind(self) -> SourceKind:
        """Which kind of source this is."""
        return next(kind for kind in SourceKind if getattr(self, kind.value) is not None)

    @property
    def clean_source(self) -> CleanSource:
        """What happens to the source's files once read (``Off`` for kinds without it)."""
        settings = self.files or self.changelog
        return CleanSource.OFF if settings is None else settings.clean_source

    @property
    def declared_timeline(self) -> Timeline | None:
        """The source's own timeline; ``None`` for a dataflow source (it inherits)."""
        if self.dataflow is not None:
            return None
        return self.timeline or Timeline.epoch_milliseconds()


class RefreshSpec(ApiModel):
    """When the dataflow's output advances: every ``every`` from ``alignedTo``, and at ``at``."""

    every: DurationField | None = Field(default=None, description="Refresh period.")
    aligned_to: TimestampField | None = Field(
        default=None, description="A refresh time the period is aligned to (default: the epoch)."
    )
    at: list[TimestampField] = Field(
        default_factory=list, max_length=1000, description="Single refresh times."
    )

    @model_validator(mode="after")
    def _some_refresh(self) -> RefreshSpec:
        if (self.every is None or self.every.is_zero) and not self.at:
            raise ValueError("give a non-zero 'every', or 'at' times, or remove 'refresh'")
        if self.aligned_to is not None and self.every is None:
            raise ValueError("'alignedTo' needs 'every'")
        return self

    def schedule(self) -> RefreshSchedule:
        """The core's schedule."""
        return RefreshSchedule(
            every=self.every, aligned_to=self.aligned_to or 0, at=tuple(sorted(self.at))
        )


class SinkSpec(ApiModel):
    """Where a MaterializedView writes its changelog (a Parquet directory it owns)."""

    path: str = Field(min_length=1, description="Directory of the changelog.")


class DataflowSpec(ApiModel):
    """The desired state of a dataflow."""

    cluster: str = Field(
        min_length=1,
        max_length=63,
        pattern=NAME_PATTERN,
        description="The cluster whose every Replica maintains this dataflow.",
    )
    kind: DataflowKindField = Field(description="MaterializedView, Index or Subscribe.")
    sources: list[Source] = Field(
        default_factory=list,
        max_length=64,
        description="The inputs, by the names the SQL uses.",
        json_schema_extra={"x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["name"]},
    )
    sql: str = Field(
        min_length=1,
        max_length=65536,
        description="Spark SQL that reads at least one of the sources; may use mz_now() in WHERE.",
    )
    refresh: RefreshSpec | None = Field(
        default=None, description="Advance the output only at refresh times."
    )
    sink: SinkSpec | None = Field(default=None, description="For MaterializedView only.")

    @model_validator(mode="after")
    def _consistent(self) -> DataflowSpec:
        if not self.sql.strip():
            raise ValueError("'sql' is blank")
        names = [source.name for source in self.sources]
        duplicates = sorted({name for name in names if names.count(name) > 1})
        if duplicates:
            raise ValueError(f"source names must be unique; repeated: {', '.join(duplicates)}")
        if self.sink is not None and self.kind is not DataflowKindField.MATERIALIZED_VIEW:
            raise ValueError(f"'sink' is only for MaterializedView, not {self.kind.value}")
        return self


class NodeStatus(ApiModel):
    """Hydration of one physical plan node on one replica."""

    id: int = Field(ge=1, description="The node's id, as shown by explain --node-ids.")
    operator: str = Field(description="The physical operator.")
    hydrated: bool = Field(description="Whether its output for the snapshot is complete.")


class SourceStatus(ApiModel):
    """How far one source's input is ingested durably on a replica, and what was released
    upstream (design 3)."""

    name: str = Field(description="The source's name in the spec.")
    resumption_frontier: list[int] = Field(
        default_factory=list,
        description="Timestamp resumption frontier: a restart reads nothing below it from "
        "the upstream ([] = closed).",
    )
    offset: int = Field(default=0, ge=0, description="Offset resumption frontier (files read).")
    listed: int | None = Field(
        default=None,
        description="Every file in the source's directory at this wall-clock time (epoch "
        "ms) has been read in a committed batch; the operator's release meet is its "
        "minimum over the cluster's replicas.",
    )
    released_files: int = Field(
        default=0, ge=0, description="Files archived or deleted (a table's: folded)."
    )
    ingested_rows: int = Field(default=0, ge=0, description="Rows in the ingested collection.")
    ingested_bytes: int = Field(default=0, ge=0, description="Its bytes on storage.")
    release_failures: int = Field(
        default=0, ge=0, description="Failed releases so far (each is retried)."
    )
    offsets: dict[str, int] | None = Field(
        default=None,
        description="A kafka source's offset resumption frontier: per partition, the next "
        "offset a restart reads; the operator commits their meet over the cluster.",
    )
    committed_offsets: dict[str, int] | None = Field(
        default=None,
        description="A kafka source's consumer group offsets, per partition, as this "
        "replica last committed or read them.",
    )
    last_read_error: str | None = Field(
        default=None,
        description="Why the upstream could not be read at the last try (a kafka source: "
        "the broker out of reach, the topic missing); it is retried every step.",
    )
    upstream_lag: int | None = Field(
        default=None,
        ge=0,
        description="Records the upstream has that are not read yet (a kafka source: high "
        "watermarks less positions); absent where not known.",
    )
    last_release_error: str | None = Field(
        default=None, description="Why the last release failed (it is retried)."
    )


class ReplicaDataflowStatus(ApiModel):
    """The dataflow as maintained on one replica."""

    replica: str = Field(description="The Replica's name.")
    frontier: list[int] = Field(
        default_factory=list,
        max_length=1,
        description="Write frontier (epoch ms): output is complete before it; [] = closed.",
    )
    expiration: int | None = Field(
        default=None, description="Updates at or past this time (epoch ms) are dropped."
    )
    hydrated: bool = Field(default=False, description="Whether the snapshot is processed.")
    hydration_time: DurationField | None = Field(
        default=None, description="How long hydration took."
    )
    nodes: list[NodeStatus] = Field(
        default_factory=list,
        max_length=MAX_NODES_IN_STATUS,
        description="Hydration of each physical plan node.",
        json_schema_extra={"x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["id"]},
    )
    sources: list[SourceStatus] = Field(
        default_factory=list,
        max_length=MAX_SOURCES_IN_STATUS,
        description="Each source's resumption frontier, ingested size and releases.",
        json_schema_extra={
            "x-kubernetes-list-type": "map",
            "x-kubernetes-list-map-keys": ["name"],
        },
    )


class DataflowStatus(ApiModel):
    """The observed state of a dataflow."""

    observed_generation: int | None = Field(
        default=None, description="The generation of the spec last reconciled."
    )
    conditions: list[Condition] = Field(
        default_factory=list,
        max_length=16,
        description="Ready, Hydrated, and InputReleased when a source has cleanSource.",
        json_schema_extra={"x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["type"]},
    )
    timeline: str | None = Field(default=None, description="The timeline of the dataflow.")
    strategy: MaintenanceStrategy | None = Field(
        default=None,
        description="How the query is maintained: Incremental, or Recompute (each changed "
        "time re-reads the whole input; strategyReason says which construct causes it).",
    )
    strategy_reason: str | None = Field(
        default=None,
        max_length=256,
        description="Why the query is recomputed: the construct no incremental strategy covers.",
    )
    frontier: str | None = Field(
        default=None, description="The most advanced write frontier over replicas (RFC 3339)."
    )
    replicas: list[ReplicaDataflowStatus] = Field(
        default_factory=list,
        max_length=MAX_REPLICAS_IN_STATUS,
        description="The dataflow on each replica of its cluster.",
        json_schema_extra={
            "x-kubernetes-list-type": "map",
            "x-kubernetes-list-map-keys": ["replica"],
        },
    )


class Dataflow(ApiModel):
    """A Dataflow custom resource."""

    api_version: Literal["dataflow.dev/v1alpha1"] = Field(
        default="dataflow.dev/v1alpha1", description="dataflow.dev/v1alpha1"
    )
    kind: Literal["Dataflow"] = Field(default="Dataflow", description="Dataflow")
    metadata: ObjectMeta = Field(description="Standard object metadata.")
    spec: DataflowSpec = Field(description="The desired state.")
    status: DataflowStatus | None = Field(default=None, description="The observed state.")
