"""The dataflows of one cluster, and what each depends on transitively.

A dataflow may read another dataflow's output (a ``dataflow`` source). The catalog
resolves those references to answer what the core rules need: the dataflow's timeline
(from all transitive inputs), the refresh schedules of its transitive dependencies, and
whether every reference exists and none is circular.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from dataflow_operator.api.dataflow import Dataflow, DataflowSpec
from dataflow_operator.core.ddl import Column, parse_schema
from dataflow_operator.core.errors import DomainError, InvalidSpec, UnknownSource
from dataflow_operator.core.incremental import check_query
from dataflow_operator.core.kafka import check_read_once
from dataflow_operator.core.refresh import RefreshSchedule
from dataflow_operator.core.sql_columns import unknown_column
from dataflow_operator.core.timelines import Timeline, dataflow_timeline

__all__ = ["Catalog", "SpecProblem", "catalogs_by_scope", "first_problems", "scope_of"]


@dataclass(frozen=True, slots=True)
class SpecProblem:
    """A domain error found in one dataflow, with the field it concerns."""

    dataflow: str
    field: str
    error: DomainError


class Catalog:
    """The dataflow specs of one cluster (within one namespace), by name."""

    def __init__(self, dataflows: Mapping[str, DataflowSpec]) -> None:
        self._dataflows = dict(dataflows)

    def __contains__(self, name: str) -> bool:
        return name in self._dataflows

    def spec(self, name: str) -> DataflowSpec:
        """The spec of ``name``; raises :class:`UnknownSource` if absent."""
        try:
            return self._dataflows[name]
        except KeyError:
            raise UnknownSource(f'unknown dataflow "{name}"') from None

    def upstream(self, name: str) -> list[str]:
        """Names of the dataflows ``name`` reads, transitively, dependencies first."""
        order: list[str] = []
        self._visit(name, (), order)
        return order[:-1]

    def _visit(self, name: str, path: tuple[str, ...], order: list[str]) -> None:
        if name in path:
            cycle = " -> ".join([*path[path.index(name) :], name])
            raise InvalidSpec(f"dataflows read each other in a cycle: {cycle}")
        if name in order:
            return
        spec = self.spec(name)
        for index, source in enumerate(spec.sources):
            if source.dataflow is None:
                continue
            if source.dataflow.name not in self._dataflows:
                raise UnknownSource(
                    f'source "{source.name}" reads dataflow "{source.dataflow.name}", '
                    f'which does not exist in cluster "{spec.cluster}"',
                    field=f"spec.sources[{index}].dataflow.name",
                )
            self._visit(source.dataflow.name, (*path, name), order)
        order.append(name)

    def timeline(self, name: str) -> Timeline | None:
        """The single timeline of ``name``'s transitive inputs (``None``: constants only).

        Raises :class:`~dataflow_operator.core.errors.MultipleTimelines` when they mix.
        """
        self.upstream(name)  # reports unknown references and cycles first
        return self._timeline(name)

    def _timeline(self, name: str) -> Timeline | None:
        inputs: list[tuple[str, Timeline | None]] = []
        for source in self.spec(name).sources:
            if source.dataflow is not None:
                inputs.append((source.name, self._timeline(source.dataflow.name)))
            else:
                inputs.append((source.name, source.declared_timeline))
        return dataflow_timeline(inputs)

    def refresh_schedules(self, name: str) -> tuple[RefreshSchedule, ...]:
        """Refresh schedules of ``name`` and of every dataflow it reads, transitively."""
        names = [*self.upstream(name), name]
        return tuple(
            spec.refresh.schedule()
            for spec in (self.spec(n) for n in names)
            if spec.refresh is not None
        )

    def problems(self, name: str) -> list[SpecProblem]:
        """Everything wrong with ``name`` that the models alone cannot see."""
        problems: list[SpecProblem] = []
        spec = self.spec(name)
        try:
            check_query(spec.sql, [source.name for source in spec.sources])
        except DomainError as error:
            problems.append(SpecProblem(name, error.field or "spec.sql", error))
        else:
            schemas = _declared_columns(spec)
            unknown = None if schemas is None else unknown_column(spec.sql, schemas)
            if unknown is not None:
                problems.append(SpecProblem(name, "spec.sql", unknown))
        try:
            kafka = [source.name for source in spec.sources if source.kafka is not None]
            check_read_once(spec.sql, [source.name for source in spec.sources], kafka)
        except DomainError as error:
            problems.append(SpecProblem(name, error.field or "spec.sql", error))
        try:
            self.timeline(name)
        except DomainError as error:
            problems.append(SpecProblem(name, error.field or "spec.sources", error))
        return problems


def _declared_columns(spec: DataflowSpec) -> dict[str, list[Column]] | None:
    """Each source's columns as its SQL sees them, when every source declares them
    (``None`` with a dataflow or kafka source, whose columns are known only at run time)."""
    schemas: dict[str, list[Column]] = {}
    for source in spec.sources:
        settings = source.table or source.files or source.changelog
        if settings is None:
            return None
        schemas[source.name] = parse_schema(settings.schema_)
    return schemas


def scope_of(dataflow: Dataflow) -> tuple[str, str]:
    """The namespace and cluster whose dataflows ``dataflow`` may read."""
    return (dataflow.metadata.namespace or "default", dataflow.spec.cluster)


def catalogs_by_scope(dataflows: Iterable[Dataflow]) -> dict[tuple[str, str], Catalog]:
    """One catalog per namespace and cluster (:func:`scope_of`) of ``dataflows``."""
    scopes: dict[tuple[str, str], dict[str, DataflowSpec]] = defaultdict(dict)
    for dataflow in dataflows:
        scopes[scope_of(dataflow)][dataflow.metadata.name] = dataflow.spec
    return {scope: Catalog(specs) for scope, specs in scopes.items()}


def first_problems(
    dataflows: Sequence[Dataflow], among: Sequence[Dataflow] | None = None
) -> list[SpecProblem | None]:
    """For each of ``dataflows``, in order, the first problem its catalog finds in it
    (``None``: none): what a replica refuses it for before Spark plans anything. Its
    references resolve among the dataflows of its scope in ``among`` (default:
    ``dataflows``), which holds ``dataflows`` themselves."""
    catalogs = catalogs_by_scope(dataflows if among is None else among)
    found: list[SpecProblem | None] = []
    for dataflow in dataflows:
        problems = catalogs[scope_of(dataflow)].problems(dataflow.metadata.name)
        found.append(problems[0] if problems else None)
    return found
