"""Pure decisions for Dataflows: validity within their cluster, the desired set of a
replica, and the status that the replicas' reports add up to.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from dataflow_operator.api.catalog import Catalog
from dataflow_operator.api.dataflow import (
    MAX_NODES_IN_STATUS,
    MAX_REPLICAS_IN_STATUS,
    MAX_SOURCES_IN_STATUS,
    Dataflow,
    DataflowSpec,
    DataflowStatus,
    ReplicaDataflowStatus,
)
from dataflow_operator.api.protocol import DataflowReport, DesiredDataflow, DesiredDataflows
from dataflow_operator.controller.shared.release_meet import source_meets
from dataflow_operator.controller.status_conditions import from_api, to_api
from dataflow_operator.core.conditions import Condition, set_condition
from dataflow_operator.core.durations import Duration
from dataflow_operator.core.errors import DomainError
from dataflow_operator.core.time import Timestamp, format_timestamp

__all__ = [
    "ReplicaSeen",
    "Validity",
    "dataflow_status",
    "desired_dataflows",
    "desired_entry",
    "recompute_message",
    "status_events",
    "status_patch",
    "validate",
]

READY = "Ready"
HYDRATED = "Hydrated"
INPUT_RELEASED = "InputReleased"


@dataclass(frozen=True, slots=True)
class Validity:
    """Whether a dataflow may be installed, and if not, why (a DomainError's reason)."""

    ok: bool
    reason: str = "Valid"
    message: str = ""
    field: str | None = None
    timeline: str | None = None


@dataclass(frozen=True, slots=True)
class ReplicaSeen:
    """One replica of the cluster as the operator last saw it."""

    name: str
    ready: bool
    report: DataflowReport | None
    """This dataflow in the replica's last ``GET /status``; ``None`` if not there."""


def recompute_message(reason: str) -> str:
    """The Event message of a dataflow maintained by recompute."""
    return (
        f"maintained by recompute: {reason}; every changed time re-runs the query over "
        "the whole input, so its cost grows with the input, not with the change"
    )


def validate(specs: Mapping[str, DataflowSpec], names: Iterable[str]) -> dict[str, Validity]:
    """Validity of each of ``names`` against the whole cluster's ``specs``.

    The first problem wins; its reason (``MultipleTimelines``, ``UnknownSource``,
    ``InvalidSql``…) and its exact message go into the Ready condition.
    """
    catalog = Catalog(specs)
    result: dict[str, Validity] = {}
    for name in names:
        problems = catalog.problems(name)
        if problems:
            first = problems[0]
            result[name] = Validity(
                ok=False, reason=first.error.reason, message=first.error.message, field=first.field
            )
            continue
        try:
            timeline = catalog.timeline(name)
        except DomainError as error:  # pragma: no cover - problems() reports it first
            result[name] = Validity(False, error.reason, error.message, error.field)
            continue
        result[name] = Validity(ok=True, timeline=str(timeline) if timeline else None)
    return result


def desired_entry(dataflow: Dataflow) -> DesiredDataflow:
    """One dataflow of the desired set, from a model already validated."""
    return DesiredDataflow.model_construct(
        name=dataflow.metadata.name,
        namespace=dataflow.metadata.namespace,
        generation=dataflow.metadata.generation,
        spec=dataflow.spec,
    )


def desired_dataflows(
    dataflows: Iterable[Dataflow],
    validity: Mapping[str, Validity],
    entry: Callable[[Dataflow], DesiredDataflow] = desired_entry,
) -> DesiredDataflows:
    """The full desired set of a replica: every valid, not-deleted dataflow, by name.

    A cluster's set is rebuilt on each change of any of its specs: ``entry`` may reuse
    the entries of the Dataflows that did not change.
    """
    desired = [
        entry(df)
        for df in dataflows
        if validity.get(df.metadata.name, Validity(False)).ok
        and not df.metadata.model_extra.get("deletionTimestamp")  # type: ignore[union-attr]
    ]
    return DesiredDataflows.model_construct(dataflows=sorted(desired, key=lambda d: d.name))


def _current(report: DataflowReport, generation: int | None) -> bool:
    """Whether the replica runs this generation of the spec (or either side cannot say).

    Right after an edit, the last report still describes the previous spec until the
    replica has reinstalled it: its hydration says nothing about the new one.
    """
    return generation is None or report.generation is None or report.generation >= generation


def _entry(seen: ReplicaSeen, generation: int | None) -> ReplicaDataflowStatus:
    report = seen.report
    assert report is not None
    frontier = [min(report.frontier)] if report.frontier else []
    hydrated = report.hydrated and _current(report, generation)
    return ReplicaDataflowStatus(
        replica=seen.name,
        frontier=frontier,
        expiration=report.expiration,
        hydrated=hydrated,
        hydration_time=(
            Duration(report.hydration_time_ms)
            if hydrated and report.hydration_time_ms is not None
            else None
        ),
        nodes=sorted(report.nodes, key=lambda n: n.id)[:MAX_NODES_IN_STATUS],
        sources=sorted(report.sources, key=lambda s: s.name)[:MAX_SOURCES_IN_STATUS],
    )


def _input_released(
    conditions: list[Condition],
    *,
    name: str,
    spec: DataflowSpec,
    replicas: Sequence[ReplicaSeen],
    generation: int | None,
    now: Timestamp,
) -> list[Condition]:
    """``InputReleased``, when some source has ``cleanSource`` or is a kafka source (else
    none)."""
    ordered = sorted(replicas, key=lambda r: r.name)
    released, held_by = source_meets(name, spec, [(r.name, [r.report]) for r in ordered])
    if not released and not held_by:
        return [c for c in conditions if c.type != INPUT_RELEASED]  # no source releases
    held = "; ".join(
        f"source {source}: replica {replica} has not reported reading it"
        for source, replica in sorted(held_by.items())
    )
    return set_condition(
        conditions,
        type_=INPUT_RELEASED,
        status=not held_by,
        reason="HeldBack" if held_by else "Releasing",
        message=held
        or "input every replica has read is released (files archived or deleted, consumer "
        "groups committed): "
        + ", ".join(s.source for s in released),
        now=now,
        observed_generation=generation,
    )


def dataflow_status(
    generation: int | None,
    old: DataflowStatus,
    validity: Validity,
    replicas: Sequence[ReplicaSeen],
    now: Timestamp,
    *,
    name: str = "",
    spec: DataflowSpec | None = None,
) -> DataflowStatus:
    """The Dataflow's status from its validity and every replica's latest report.

    ``strategy`` (and why it is Recompute) is what the replicas running this generation
    report (they plan the query; the first by name wins).

    ``Ready``: valid (False with the error's reason and exact message otherwise).
    ``Hydrated``: True when hydrated on at least one Ready replica, from a report of
    this ``generation`` (a replica still running an older spec is not hydrated for this
    one). ``replicas`` lists the replicas that report the dataflow, by name, at most 64.
    ``InputReleased`` (given the ``spec``, when a source has ``cleanSource``): whether
    every replica reports how far it has read each such source, or which one holds the
    release back.
    """
    conditions = from_api(old.conditions)
    reporting = sorted((r for r in replicas if r.report is not None), key=lambda r: r.name)
    entries = [_entry(r, generation) for r in reporting][:MAX_REPLICAS_IN_STATUS]
    if validity.ok:
        installed = len(reporting)
        conditions = set_condition(
            conditions,
            type_=READY,
            status=True,
            reason="Installed" if installed else "Accepted",
            message=f"installed on {installed} of {len(replicas)} replica(s)",
            now=now,
            observed_generation=generation,
        )
        hydrated_on = sorted(
            r.name
            for r in reporting
            if r.ready
            and r.report is not None
            and r.report.hydrated
            and _current(r.report, generation)
        )
        conditions = set_condition(
            conditions,
            type_=HYDRATED,
            status=bool(hydrated_on),
            reason="Hydrated" if hydrated_on else "NotHydrated",
            message=(
                f"hydrated on {', '.join(hydrated_on)}"
                if hydrated_on
                else "not hydrated on any ready replica"
            ),
            now=now,
            observed_generation=generation,
        )
    else:
        conditions = set_condition(
            conditions,
            type_=READY,
            status=False,
            reason=validity.reason,
            message=validity.message,
            now=now,
            observed_generation=generation,
        )
        conditions = set_condition(
            conditions,
            type_=HYDRATED,
            status=False,
            reason=validity.reason,
            message="not installed: the spec is invalid",
            now=now,
            observed_generation=generation,
        )
    if validity.ok and spec is not None:
        conditions = _input_released(
            conditions, name=name, spec=spec, replicas=replicas, generation=generation, now=now
        )
    frontiers = [e.frontier[0] for e in entries if e.frontier]
    # How it is maintained: what the replicas running this generation say they do.
    built = [
        r.report
        for r in reporting
        if validity.ok
        and r.report is not None
        and r.report.strategy is not None
        and _current(r.report, generation)
    ]
    return DataflowStatus(
        observed_generation=generation,
        conditions=to_api(conditions),
        timeline=validity.timeline,
        strategy=built[0].strategy if built else None,
        strategy_reason=built[0].strategy_reason if built else None,
        frontier=format_timestamp(max(frontiers)) if frontiers else None,
        replicas=entries,
    )


def status_patch(old: Mapping[str, Any], new: Mapping[str, Any]) -> dict[str, Any]:
    """A merge patch of ``status`` with only what changed (removed keys → ``None``)."""
    patch: dict[str, Any] = {key: value for key, value in new.items() if old.get(key) != value}
    patch.update({key: None for key in old if key not in new})
    return patch


def status_events(old: DataflowStatus, new: DataflowStatus) -> list[tuple[str, str]]:
    """The Normal Events (reason, message) that writing ``new`` over ``old`` announces.

    The Hydrated condition's flips, except its first ``False`` (a new Dataflow is not
    hydrated yet: nothing happened), and each reason the query is recomputed for.
    ``old`` is the status on the object, so an operator restart announces nothing again.
    """
    events: list[tuple[str, str]] = []
    before = next((c for c in old.conditions if c.type == HYDRATED), None)
    after = next((c for c in new.conditions if c.type == HYDRATED), None)
    if after is not None and (
        (before is not None and before.status != after.status)
        or (before is None and after.status == "True")
    ):
        events.append((after.reason, after.message))
    recomputed = new.strategy_reason if new.strategy == "Recompute" else None
    was_recomputed = old.strategy_reason if old.strategy == "Recompute" else None
    if recomputed is not None and recomputed != was_recomputed:
        events.append(("Recompute", recompute_message(recomputed)))
    return events
