"""Each cluster's Dataflows, parsed and validated once per change of their specs.

A status write changes its object (and its ``resourceVersion``) but no spec: views are
looked up by each body's fingerprint (name, generation, deletion, spec), worked out once
per body object, and validity is memoized on the parsed specs' identity, so writing the
status of every Dataflow of a cluster re-parses nothing.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from pydantic import ValidationError

from dataflow_operator.api.catalog import Catalog
from dataflow_operator.api.dataflow import Dataflow, DataflowSpec
from dataflow_operator.api.protocol import DesiredDataflows
from dataflow_operator.controller.errors import describe_validation
from dataflow_operator.controller.shared.dataflow_logic import (
    Validity,
    desired_dataflows,
    desired_entry,
    validate,
)
from dataflow_operator.core.errors import DomainError

__all__ = ["ClusterView", "ClusterViews"]

CACHE_LIMIT = 100_000
"""Entries of each memo before it starts over (a bound, not a tuning knob)."""

T = TypeVar("T")
V = TypeVar("V")


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


class PerObject(Generic[T, V]):
    """``compute(obj)`` worked out once per object (by identity, not by equal content).

    Each entry keeps its object alive, so no other object can get its id meanwhile;
    past :data:`CACHE_LIMIT` entries the memo starts over.
    """

    def __init__(self, compute: Callable[[T], V]) -> None:
        self._compute = compute
        self._known: dict[int, tuple[T, V]] = {}

    def __call__(self, obj: T) -> V:
        known = self._known.get(id(obj))
        if known is not None and known[0] is obj:
            return known[1]
        if len(self._known) > CACHE_LIMIT:
            self._known.clear()
        value = self._compute(obj)
        self._known[id(obj)] = (obj, value)
        return value


class ClusterViews:
    """The views of every cluster, and the one each cluster was last acted upon with."""

    def __init__(self) -> None:
        self.acted: dict[tuple[str, str], ClusterView] = {}
        """(namespace, cluster) → its view when the Dataflow handlers last acted on it."""
        self._by_content: dict[tuple[str, str], tuple[tuple[str, ...], ClusterView]] = {}
        self._parsed: dict[str, Dataflow | ValidationError] = {}
        self._validity: dict[tuple[Any, ...], tuple[tuple[DataflowSpec, ...], Validity]] = {}
        self._fingerprint = PerObject(_fingerprint)
        """A body's (name, generation, deletion, spec), once per body object."""
        self._entry = PerObject(desired_entry)
        """A parsed Dataflow's entry in the desired set, once per parsed object."""

    def _parse(self, body: Mapping[str, Any]) -> Dataflow | ValidationError:
        key = self._fingerprint(body)
        cached = self._parsed.get(key)
        if cached is None:
            relevant = {k: body.get(k) for k in ("apiVersion", "kind", "metadata", "spec")}
            try:
                cached = Dataflow.model_validate(relevant)
            except ValidationError as error:
                cached = error
            if len(self._parsed) > CACHE_LIMIT:
                self._parsed.clear()
            self._parsed[key] = cached
        return cached

    def view(
        self, namespace: str, cluster: str, bodies: Iterable[Mapping[str, Any]]
    ) -> ClusterView:
        """The cluster's Dataflows parsed and validated; the same specs, the same view."""
        bodies = list(bodies)
        key = tuple(sorted(self._fingerprint(body) for body in bodies))
        known = self._by_content.get((namespace, cluster))
        if known is not None and known[0] == key:
            return known[1]
        digest = hashlib.sha256("\n".join(key).encode()).hexdigest()[:16]
        view = self._build(bodies, digest)
        self._by_content[(namespace, cluster)] = (key, view)
        return view

    def _build(self, bodies: list[Mapping[str, Any]], digest: str) -> ClusterView:
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
        desired = desired_dataflows(dataflows.values(), validity, self._entry)
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
                if len(self._validity) > CACHE_LIMIT:
                    self._validity.clear()
                self._validity[key] = cached
            result[name] = cached[1]
        return result


def _fingerprint(body: Mapping[str, Any]) -> str:
    """What a view depends on in one body: name, generation, deletion and spec."""
    metadata = body.get("metadata") or {}
    return json.dumps(
        [
            metadata.get("name"),
            metadata.get("generation"),
            bool(metadata.get("deletionTimestamp")),
            body.get("spec"),
        ],
        sort_keys=True,
        default=str,
    )
