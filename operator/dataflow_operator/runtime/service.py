"""The seam between the replica's engine and its control API.

The engine (which maintains the dataflows on Spark) implements :class:`ReplicaService`;
the HTTP control API and the local ``run`` command only talk to it through this
interface, so each can be tested without the other.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from dataflow_operator.api.dataflow import DataflowKindField
from dataflow_operator.api.protocol import (
    DesiredDataflows,
    InstallResult,
    PeekResult,
    ReleaseFrontiers,
    ReplicaReport,
)
from dataflow_operator.runtime.changelog_store import ChangelogStore

__all__ = [
    "BatchListener",
    "Changelog",
    "NotAnIndex",
    "NotReady",
    "ReplicaService",
    "UnknownDataflow",
]

BatchListener = Callable[[str], None]
"""Called with a dataflow's name after its batches up to the current time completed (or
after it was dropped or reinstalled); from the engine's thread, so it must be quick."""


class UnknownDataflow(LookupError):
    """No dataflow of that name is installed."""


class NotReady(RuntimeError):
    """The replica cannot do that now (it is starting, or stopping): the caller should
    retry (a stopping replica's successor takes it)."""


class NotAnIndex(LookupError):
    """Peek asked of a dataflow that keeps no queryable contents."""


@dataclass(frozen=True, slots=True)
class Changelog:
    """An installed dataflow's output changelog (a new object when it is reinstalled)."""

    store: ChangelogStore
    kind: DataflowKindField


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

    def changelog(self, name: str) -> Changelog:
        """The output changelog of a running dataflow. Raises :class:`UnknownDataflow`."""
        ...

    def add_batch_listener(self, listener: BatchListener) -> None:
        """Call ``listener(name)`` whenever dataflow ``name`` completed batches."""
        ...

    def release(self, frontiers: ReleaseFrontiers) -> None:
        """Take the cluster's listing frontiers: files below them may be released."""
        ...
