"""The custom resources and the operator↔replica protocol, as pydantic models.

These models are the single source of truth: the CRD schemas in ``crds/`` and the Helm
chart are generated from them (``dataflow-operator crds``), the operator parses request
bodies with them, and the replica runtime reads its dataflows through them.
"""

from dataflow_operator.api.dataflow import (
    Dataflow,
    DataflowSpec,
    DataflowStatus,
    ReplicaDataflowStatus,
    Source,
)
from dataflow_operator.api.meta import API_VERSION, GROUP, VERSION, Condition, ObjectMeta
from dataflow_operator.api.replica import Replica, ReplicaSpec, ReplicaStatus

__all__ = [
    "API_VERSION",
    "GROUP",
    "VERSION",
    "Condition",
    "Dataflow",
    "DataflowSpec",
    "DataflowStatus",
    "ObjectMeta",
    "Replica",
    "ReplicaDataflowStatus",
    "ReplicaSpec",
    "ReplicaStatus",
    "Source",
]
