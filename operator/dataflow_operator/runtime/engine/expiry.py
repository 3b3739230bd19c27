"""A dataflow's expiration and ``until`` on this replica, from the core rules."""

from __future__ import annotations

from dataflow_operator.api.catalog import Catalog
from dataflow_operator.core.expiration import ExpirationInputs, dataflow_expiration, dataflow_until
from dataflow_operator.core.time import Frontier, Timestamp

__all__ = ["expiration_of"]


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
