"""The seam between the replica's engine and its control API.

The engine (which maintains the dataflows on Spark) implements :class:`ReplicaService`;
the HTTP control API and the local ``run`` command only talk to it through this
interface, so each can be tested without the other.
"""

from __future__ import annotations

from typing import Protocol

from dataflow_operator.api.protocol import (
    DesiredDataflows,
    InstallResult,
    PeekResult,
    ReplicaReport,
)

__all__ = ["NotAnIndex", "ReplicaService", "UnknownDataflow"]


class UnknownDataflow(LookupError):
    """No dataflow of that name is installed."""


class NotAnIndex(LookupError):
    """Peek asked of a dataflow that keeps no queryable contents."""


class ReplicaService(Protocol):
    """What a running replica offers its control API."""

    def report(self) -> ReplicaReport:
        """The replica's status: cheap enough to call every second."""
        ...

    def apply(self, desired: DesiredDataflows) -> InstallResult:
        """Converge to exactly ``desired``: install new, reinstall changed, drop removed.

        Idempotent: applying the same set twice changes nothing the second time.
        """
        ...

    def peek(self, name: str) -> PeekResult:
        """The current contents of an Index dataflow.

        Raises :class:`UnknownDataflow` or :class:`NotAnIndex`.
        """
        ...

    def ready(self) -> bool:
        """True once the Spark session is up and the desired set has been applied."""
        ...
