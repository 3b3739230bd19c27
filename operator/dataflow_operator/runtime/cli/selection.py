"""What ``run`` runs of the manifests it is given: one Replica's cluster, and whose
Subscribe output it prints.

The Replica is ``--replica NAME``'s; without it, the only one given, or of several the one
of cluster ``default`` (else the first): a local run is one replica. The dataflows of its
cluster run (all of them when no Replica is given); those of other clusters are skipped.
Every choice that is not the only possible one is said, one line each (:attr:`Selection.notes`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from dataflow_operator.api.dataflow import Dataflow, DataflowKindField
from dataflow_operator.api.replica import Replica

__all__ = ["DEFAULT_CLUSTER", "Selection", "select"]

DEFAULT_CLUSTER = "default"


@dataclass(frozen=True, slots=True)
class Selection:
    """The Replica that runs (``None``: none was given), its dataflows, the Subscribes
    whose output is printed, and what to tell the user about the choice."""

    replica: Replica | None
    dataflows: list[Dataflow]
    printed: list[str]
    notes: list[str] = field(default_factory=list)


def select(
    replicas: Sequence[Replica],
    dataflows: Sequence[Dataflow],
    *,
    replica_name: str | None = None,
    dataflow_name: str | None = None,
) -> Selection | str:
    """The selection, or the one line saying why there is none (a name not given)."""
    names = ", ".join(r.metadata.name for r in replicas) or "none"
    notes = []
    if replica_name is not None:
        chosen = [r for r in replicas if r.metadata.name == replica_name]
        if not chosen:
            return f"run: --replica {replica_name}: no Replica of that name (Replicas: {names})"
        replica: Replica | None = chosen[0]
    elif len(replicas) > 1:
        default = [r for r in replicas if r.spec.cluster == DEFAULT_CLUSTER]
        replica = default[0] if default else replicas[0]
        notes.append(
            f"run: running Replica {replica.metadata.name} (cluster {replica.spec.cluster}) "
            f"of the {len(replicas)} given ({names}); choose another with --replica NAME"
        )
    else:
        replica = replicas[0] if replicas else None
    running = [d for d in dataflows if replica is None or d.spec.cluster == replica.spec.cluster]
    skipped = [d for d in dataflows if d not in running]
    if replica is not None and skipped:
        listed = ", ".join(f"{d.metadata.name} (cluster {d.spec.cluster})" for d in skipped)
        notes.append(f"run: skipping the dataflows of other clusters: {listed}")
    subscribes = [d.metadata.name for d in running if d.spec.kind is DataflowKindField.SUBSCRIBE]
    printed = subscribes
    if dataflow_name is not None:
        if dataflow_name not in subscribes:
            known = ", ".join(subscribes) or "none"
            return (
                f"run: --dataflow {dataflow_name}: no Subscribe of that name runs "
                f"(Subscribes: {known})"
            )
        printed = [dataflow_name]
    return Selection(replica, running, printed, notes)
