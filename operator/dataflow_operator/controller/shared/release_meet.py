"""The cluster's release meet (design 3): how far every replica has read each source.

Every replica of a cluster ingests each source on its own, so a file may be released
only once all of them have read it. Each replica reports, per source, ``listed``: every
file in the directory at that wall-clock time is read in a committed batch. The meet
over the cluster's replicas (and their make-before-break successors, which read on
their own too) is what the operator sends back; a replica without a report for it — down,
starting, or not running the dataflow — holds the meet back, and is named.

A kafka source reports its offset resumption frontier per partition (``offsets``)
instead; its meet is per partition (:func:`~dataflow_operator.core.kafka.positions_meet`),
and the replicas commit the consumer group's offsets there.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from dataflow_operator.api.dataflow import CleanSource, DataflowSpec, Source
from dataflow_operator.api.protocol import (
    DataflowReport,
    DesiredDataflows,
    ReleaseFrontiers,
    ReplicaReport,
    SourceRelease,
)
from dataflow_operator.core.kafka import positions_meet

__all__ = ["ReleaseMeet", "release_meet", "source_meets"]


@dataclass(frozen=True, slots=True)
class ReleaseMeet:
    """What to send every replica, and who holds which source back."""

    frontiers: ReleaseFrontiers
    held_by: dict[tuple[str, str], str] = field(default_factory=dict)
    """``(dataflow, source)`` → the first replica that has not reported reading it."""


def source_meets(
    dataflow: str,
    spec: DataflowSpec,
    replicas: Sequence[tuple[str, Sequence[DataflowReport | None]]],
) -> tuple[list[SourceRelease], dict[str, str]]:
    """For one dataflow, each source that releases files: its meet over ``replicas`` (name,
    and the dataflow's report from each of its running attempts), or the first replica
    that holds it back (source → replica)."""
    released: list[SourceRelease] = []
    held_by: dict[str, str] = {}
    for source in filter(_releases, spec.sources):
        if source.kafka is not None:
            offsets, holder = _offsets_meet(source.name, replicas)
            if holder is not None:
                held_by[source.name] = holder
            elif offsets is not None:
                found = {str(p): o for p, o in offsets.items()}
                released.append(
                    SourceRelease(dataflow=dataflow, source=source.name, listed=0, offsets=found)
                )
            continue
        meet: int | None = None
        for name, reports in replicas:
            listed = [_listed(report, source.name) for report in reports] or [None]
            if any(value is None for value in listed):
                held_by[source.name] = name
                break
            lowest = min(value for value in listed if value is not None)
            meet = lowest if meet is None else min(meet, lowest)
        if source.name not in held_by and meet is not None:
            released.append(SourceRelease(dataflow=dataflow, source=source.name, listed=meet))
    return released, held_by


def release_meet(
    replicas: Sequence[tuple[str, Sequence[ReplicaReport | None]]], desired: DesiredDataflows
) -> ReleaseMeet:
    """The meet over ``replicas`` (name, and the reports of its running attempts) of
    each desired source that releases files."""
    sources: list[SourceRelease] = []
    held_by: dict[tuple[str, str], str] = {}
    releasing = [d for d in desired.dataflows if any(map(_releases, d.spec.sources))]
    if not releasing:
        return ReleaseMeet(ReleaseFrontiers())  # the usual case: nothing to index
    indexed = [
        (name, [{} if r is None else {f.name: f for f in r.dataflows} for r in of])
        for name, of in replicas
    ]
    for dataflow in releasing:
        reports = [(name, [flows.get(dataflow.name) for flows in of]) for name, of in indexed]
        released, held = source_meets(dataflow.name, dataflow.spec, reports)
        sources += released
        held_by |= {(dataflow.name, source): replica for source, replica in held.items()}
    return ReleaseMeet(ReleaseFrontiers(sources=sources), held_by)


def _releases(source: Source) -> bool:
    return source.clean_source is not CleanSource.OFF or source.kafka is not None


def _offsets_meet(
    source: str, replicas: Sequence[tuple[str, Sequence[DataflowReport | None]]]
) -> tuple[dict[int, int] | None, str | None]:
    """A kafka source's positions read on every replica (and attempt), or the first
    replica that has reported none."""
    everyone: list[dict[int, int] | None] = []
    for name, reports in replicas:
        found = [_offsets(report, source) for report in reports] or [None]
        if any(offsets is None for offsets in found):
            return None, name
        everyone += found
    return positions_meet(everyone), None


def _offsets(report: DataflowReport | None, source: str) -> dict[int, int] | None:
    entry = None if report is None else next((s for s in report.sources if s.name == source), None)
    if entry is None or not entry.offsets:
        return None
    return {int(partition): offset for partition, offset in entry.offsets.items()}


def _listed(report: DataflowReport | None, source: str) -> int | None:
    if report is None:
        return None
    return next((entry.listed for entry in report.sources if entry.name == source), None)
