""":class:`StartingService`: the replica's control API before its engine exists.

Spark takes tens of seconds to start; liveness must not wait for it. The replica serves
its control API at once over a :class:`StartingService`, which answers for the replica
while it starts (phase ``Starting``, no dataflows, not ready; what needs the engine
raises :class:`~dataflow_operator.runtime.service.NotReady`, a 503 that the operator
retries) and hands every call to the engine once :meth:`StartingService.attach` is
called: from then on the replica is ``Running`` and ready (``/readyz`` 200), with or
without a desired set (readiness means "Spark is up and the control API serves"; the
operator waits for its set's dataflows to hydrate itself; docs/operations.md).
"""

from __future__ import annotations

import threading

from dataflow_operator.api.protocol import (
    DesiredDataflows,
    InstallResult,
    PeekResult,
    ReleaseFrontiers,
    ReplicaPhase,
    ReplicaReport,
)
from dataflow_operator.core.time import Timestamp
from dataflow_operator.runtime.service import (
    BatchListener,
    Changelog,
    NotReady,
    ReplicaService,
)

__all__ = ["StartingService"]

NOT_STARTED = "the replica is starting (Spark is not up yet): retry shortly"


class StartingService:
    """A :class:`ReplicaService` that stands in for the engine until it is attached."""

    def __init__(self, start_time: Timestamp, expiration: Timestamp | None) -> None:
        self.start_time = start_time
        self.expiration = expiration
        self._service: ReplicaService | None = None
        self._listeners: list[BatchListener] = []
        self._lock = threading.Lock()

    def attach(self, service: ReplicaService) -> None:
        """From now on, every call goes to ``service`` (the listeners added so far too)."""
        with self._lock:
            for listener in self._listeners:
                service.add_batch_listener(listener)
            self._service = service

    def _started(self) -> ReplicaService:
        service = self._service
        if service is None:
            raise NotReady(NOT_STARTED)
        return service

    def report(self) -> ReplicaReport:
        """The engine's report; while starting: phase ``Starting`` and no dataflows."""
        service = self._service
        if service is None:
            return ReplicaReport(
                start_time=self.start_time,
                expiration=self.expiration,
                phase=ReplicaPhase.STARTING,
            )
        return service.report()

    def apply(self, desired: DesiredDataflows) -> InstallResult:
        """The engine's; :class:`NotReady` while starting."""
        return self._started().apply(desired)

    def peek(self, name: str) -> PeekResult:
        """The engine's; :class:`NotReady` while starting."""
        return self._started().peek(name)

    def ready(self) -> bool:
        """False until the engine is attached, then the engine's answer."""
        service = self._service
        return service is not None and service.ready()

    def changelog(self, name: str) -> Changelog:
        """The engine's; :class:`NotReady` while starting."""
        return self._started().changelog(name)

    def release(self, frontiers: ReleaseFrontiers) -> None:
        """The engine's; :class:`NotReady` while starting."""
        self._started().release(frontiers)

    def add_batch_listener(self, listener: BatchListener) -> None:
        """Keep ``listener`` for the engine (or pass it on, once attached)."""
        with self._lock:
            service = self._service
            if service is None:
                self._listeners.append(listener)
                return
        service.add_batch_listener(listener)
