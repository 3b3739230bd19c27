"""The custom resources and the operator↔replica protocol, as pydantic models.

These models are the single source of truth: the CRD schemas in ``crds/`` and the Helm
chart are generated from them (``dataflow-operator crds``), the operator parses request
bodies with them, and the replica runtime reads its dataflows through them.

The names below are imported on first use: a command that needs only a constant of
:mod:`.injection` (``dataflow-operator insert``) does not build the models.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from dataflow_operator.api.dataflow import (
        Dataflow,
        DataflowSpec,
        DataflowStatus,
        ReplicaDataflowStatus,
        Source,
    )
    from dataflow_operator.api.meta import API_VERSION, GROUP, VERSION, Condition, ObjectMeta
    from dataflow_operator.api.replica import Replica, ReplicaSpec, ReplicaStatus

_MODULES = {
    "dataflow_operator.api.dataflow": (
        "Dataflow",
        "DataflowSpec",
        "DataflowStatus",
        "ReplicaDataflowStatus",
        "Source",
    ),
    "dataflow_operator.api.meta": ("API_VERSION", "GROUP", "VERSION", "Condition", "ObjectMeta"),
    "dataflow_operator.api.replica": ("Replica", "ReplicaSpec", "ReplicaStatus"),
}
_MODULE_OF = {name: module for module, names in _MODULES.items() for name in names}

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


def __getattr__(name: str) -> Any:
    """Import an exported name's module on first use."""
    module = _MODULE_OF.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(module), name)
