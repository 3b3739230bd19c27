"""A dataflow's expiration and ``until`` on this replica, from the core rules."""

from __future__ import annotations

from dataflow_operator.api.catalog import Catalog
from dataflow_operator.core.expiration import ExpirationInputs, dataflow_expiration, dataflow_until
from dataflow_operator.core.refresh import RefreshSchedule
from dataflow_operator.core.time import Frontier, Timestamp

__all__ = ["expiration_of", "last_refresh_at_or_before"]


def expiration_of(
    catalog: Catalog,
    name: str,
    replica_expiration: Timestamp | None,
    inputs_upper: Frontier,
) -> tuple[Timestamp | None, Frontier]:
    """``(expiration, until)`` of dataflow ``name``: the core's rules over the catalog."""
    spec = catalog.spec(name)
    inputs = ExpirationInputs(
        kind=spec.kind.core,
        timeline=catalog.timeline(name),
        inputs_upper=inputs_upper,
        refresh_schedules=catalog.refresh_schedules(name),
    )
    expiration = dataflow_expiration(replica_expiration, inputs)
    return expiration, dataflow_until(Frontier.empty(), expiration)


def last_refresh_at_or_before(schedule: RefreshSchedule, time: Timestamp) -> Timestamp | None:
    """The latest refresh time ``<= time`` of ``schedule``, or ``None`` if none yet."""
    candidates = [t for t in schedule.at if t <= time]
    if schedule.every is not None and schedule.every.millis > 0 and time >= schedule.aligned_to:
        step = schedule.every.millis
        candidates.append(schedule.aligned_to + (time - schedule.aligned_to) // step * step)
    return max(candidates) if candidates else None
