"""The operator's in-memory view, shared by its handlers, daemons and status writer.

Nothing here is durable: everything can be rebuilt from the API server (kopf's indexes
are populated before any handler runs) and from the replicas' next reports.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from pydantic import ValidationError

from dataflow_operator.api.catalog import Catalog
from dataflow_operator.api.dataflow import Dataflow, DataflowSpec
from dataflow_operator.api.protocol import DesiredDataflows, ReplicaReport
from dataflow_operator.controller.config import OperatorConfig
from dataflow_operator.controller.control_client import ControlClient
from dataflow_operator.controller.dataflow.logic import (
    Validity,
    desired_dataflows,
    validate,
)
from dataflow_operator.controller.errors import describe_validation
from dataflow_operator.controller.kube import KubeApi
from dataflow_operator.controller.metrics import Metrics, ReplicaSample
from dataflow_operator.controller.replica.observation import ClaimObservation
from dataflow_operator.core.errors import DomainError
from dataflow_operator.core.time import Timestamp

__all__ = ["AttemptLink", "ClusterView", "OperatorState", "ReplicaRuntime", "now_ms"]

Key = tuple[str, str]
"""(namespace, name) — or (namespace, cluster) for clusters."""


def now_ms() -> Timestamp:
    """The wall clock in epoch milliseconds."""
    return int(time.time() * 1000)


@dataclass(slots=True)
class AttemptLink:
    """The operator's view of one driver attempt's control API."""

    pod: str
    """The driver pod it is about."""
    ready: bool = False
    """The last poll answered."""
    report: ReplicaReport | None = None
    report_at: Timestamp | None = None
    error: str | None = None
    applied: str | None = None
    """Digest of the desired set the attempt last accepted."""
    released: str | None = None
    """The release frontiers (JSON) the attempt last accepted."""
    next_poll_at: Timestamp = 0


@dataclass(slots=True)
class ReplicaRuntime:
    """What one Replica's daemon knows between iterations."""

    cluster: str | None = None
    wake: asyncio.Event = field(default_factory=asyncio.Event)
    status: dict[str, Any] | None = None
    """The status this operator last wrote (the watch may lag behind it)."""
    driver_missing_since: Timestamp | None = None
    serving: AttemptLink | None = None
    """The serving driver's control API, once polled."""
    successor: AttemptLink | None = None
    """A make-before-break successor's control API, while it hydrates."""
    service_attempt: int | None = None
    """The attempt the driver Service was last made to select."""
    attempts_service_ensured: bool = False
    claim: ClaimObservation | None = None
    """The state claim as last read or created (``None``: none seen)."""
    claim_spec: str | None = None
    """The ``spec.storage`` (JSON) that :attr:`claim` was last compared with."""
    conditions: dict[str, str] = field(default_factory=dict)
    expires_at_ms: int | None = None
    token: str | None = None
    """The replica's control token as last read from (or written to) its Secret."""

    @property
    def ready(self) -> bool:
        """The serving driver's control API answered its last poll."""
        return self.serving is not None and self.serving.ready

    @property
    def report(self) -> ReplicaReport | None:
        """The serving driver's last report."""
        return self.serving.report if self.serving is not None else None


@dataclass(frozen=True, slots=True)
class ClusterView:
    """The Dataflows of one cluster, parsed and validated, and the desired set."""

    dataflows: dict[str, Dataflow]
    invalid_schema: dict[str, Validity]
    validity: dict[str, Validity]
    desired: DesiredDataflows
    digest: str
    generations: dict[str, int | None]
    """Each Dataflow's ``metadata.generation``, the invalid ones' included."""

    def changed_from(self, previous: ClusterView | None) -> list[str]:
        """The dataflows whose status this view may change since ``previous``.

        A Dataflow's status depends on its own spec, deletion and validity (and on the
        replicas' reports, which mark it themselves): a new Dataflow in a cluster of
        hundreds must not recompute the status of every other one.
        """
        if previous is None:
            return [*self.dataflows, *self.invalid_schema]
        return [
            name
            for name in [*self.dataflows, *self.invalid_schema]
            if self.dataflows.get(name) is not previous.dataflows.get(name)
            or self.validity.get(name) != previous.validity.get(name)
        ]


class OperatorState:
    """Shared state of one operator process."""

    def __init__(self, config: OperatorConfig, kube: KubeApi, control: ControlClient) -> None:
        self.config = config
        self.kube = kube
        self.control = control
        self.metrics = Metrics()
        self.replicas: dict[Key, ReplicaRuntime] = {}
        self.dirty: dict[tuple[str, str, str], Timestamp] = {}
        """(namespace, cluster, dataflow) → since when its status is stale."""
        self.writer_wake = asyncio.Event()
        self.announced: dict[Key, tuple[str, str]] = {}
        """(namespace, dataflow) → the validity last announced in an Event."""
        self.seen_status: dict[Key, Mapping[str, Any]] = {}
        """(namespace, dataflow) → its status as last seen on the watch."""
        self.acted_views: dict[Key, ClusterView] = {}
        """(namespace, cluster) → its view when last acted upon."""
        self._parsed: dict[str, Dataflow | ValidationError] = {}
        self._validity: dict[tuple[Any, ...], tuple[tuple[DataflowSpec, ...], Validity]] = {}
        self._by_content: dict[tuple[str, str], tuple[tuple[str, ...], ClusterView]] = {}
        self._fingerprints: dict[int, tuple[Mapping[str, Any], str]] = {}
        self.metrics.watch_replicas(self.samples, now_ms)

    def samples(self) -> Iterable[ReplicaSample]:
        """Replica samples for the metrics."""
        return [
            ReplicaSample(ns, name, dict(rt.conditions), rt.expires_at_ms)
            for (ns, name), rt in list(self.replicas.items())
        ]

    def replicas_of(self, namespace: str, cluster: str) -> list[tuple[str, ReplicaRuntime]]:
        """The replicas of one cluster this operator runs daemons for."""
        return [
            (name, rt)
            for (ns, name), rt in self.replicas.items()
            if ns == namespace and rt.cluster == cluster
        ]

    def wake_cluster(self, namespace: str, cluster: str) -> None:
        """Make every replica daemon of the cluster reconcile now."""
        for _, rt in self.replicas_of(namespace, cluster):
            rt.wake.set()

    def mark_dirty(self, namespace: str, cluster: str, names: Iterable[str]) -> None:
        """These dataflows' status must be recomputed and written."""
        now = now_ms()
        for name in names:
            self.dirty.setdefault((namespace, cluster, name), now)
        self.writer_wake.set()

    def _parse(self, body: Mapping[str, Any]) -> Dataflow | ValidationError:
        key = self._fingerprint(body)
        cached = self._parsed.get(key)
        if cached is None:
            relevant = {k: body.get(k) for k in ("apiVersion", "kind", "metadata", "spec")}
            try:
                cached = Dataflow.model_validate(relevant)
            except ValidationError as error:
                cached = error
            if len(self._parsed) > 100_000:
                self._parsed.clear()
            self._parsed[key] = cached
        return cached

    def cluster_view(
        self, namespace: str, cluster: str, bodies: Iterable[Mapping[str, Any]]
    ) -> ClusterView:
        """Parse and validate the cluster's Dataflows (memoized on what the view uses).

        A status write changes its object (and its ``resourceVersion``) but no spec: the
        view is looked up by each body's fingerprint (name, generation, deletion, spec),
        which is worked out once per body object, so writing the status of every
        Dataflow of a cluster does not re-parse the cluster each time.
        """
        bodies = list(bodies)
        key = tuple(sorted(self._fingerprint(body) for body in bodies))
        known = self._by_content.get((namespace, cluster))
        if known is not None and known[0] == key:
            return known[1]
        digest = hashlib.sha256("\n".join(key).encode()).hexdigest()[:16]
        view = self._cluster_view(bodies, digest)
        self._by_content[(namespace, cluster)] = (key, view)
        return view

    def _fingerprint(self, body: Mapping[str, Any]) -> str:
        known = self._fingerprints.get(id(body))
        if known is not None and known[0] is body:
            return known[1]
        metadata = body.get("metadata") or {}
        fingerprint = json.dumps(
            [
                metadata.get("name"),
                metadata.get("generation"),
                bool(metadata.get("deletionTimestamp")),
                body.get("spec"),
            ],
            sort_keys=True,
            default=str,
        )
        if len(self._fingerprints) > 100_000:
            self._fingerprints.clear()
        # The entry keeps the body alive, so no other object can get its id meanwhile.
        self._fingerprints[id(body)] = (body, fingerprint)
        return fingerprint

    def _cluster_view(self, bodies: list[Mapping[str, Any]], digest: str) -> ClusterView:
        dataflows: dict[str, Dataflow] = {}
        invalid: dict[str, Validity] = {}
        generations: dict[str, int | None] = {}
        for body in bodies:
            parsed = self._parse(body)
            metadata = body.get("metadata") or {}
            name = str(metadata.get("name"))
            generations[name] = metadata.get("generation")
            if isinstance(parsed, ValidationError):
                invalid[name] = Validity(False, "InvalidSpec", describe_validation(parsed))
            else:
                dataflows[name] = parsed
        specs: dict[str, DataflowSpec] = {
            name: df.spec
            for name, df in dataflows.items()
            if not df.metadata.model_extra.get("deletionTimestamp")  # type: ignore[union-attr]
        }
        validity = {**self._validate(specs), **invalid}
        for name in dataflows:
            validity.setdefault(name, Validity(False, "Deleting", "the dataflow is being deleted"))
        desired = desired_dataflows(dataflows.values(), validity)
        return ClusterView(dataflows, invalid, validity, desired, digest, generations)

    def _validate(self, specs: Mapping[str, DataflowSpec]) -> dict[str, Validity]:
        """Validity of every dataflow, memoized on its spec and its upstream specs."""
        catalog = Catalog(specs)
        result: dict[str, Validity] = {}
        for name, spec in specs.items():
            try:
                chain = catalog.upstream(name)
            except DomainError:
                result[name] = validate(specs, [name])[name]
                continue
            # Parsed specs are shared while their content stays (see _parse): identity
            # says "unchanged" without serializing them. The entry holds the specs, so
            # their ids are not reused while it exists.
            used = (spec, *(specs[n] for n in chain))
            key = (name, *map(id, used))
            cached = self._validity.get(key)
            if cached is None or any(a is not b for a, b in zip(cached[0], used, strict=True)):
                cached = (used, validate(specs, [name])[name])
                if len(self._validity) > 100_000:
                    self._validity.clear()
                self._validity[key] = cached
            result[name] = cached[1]
        return result
