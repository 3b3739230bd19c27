"""One background thread that polls the probes of the dataflows still hydrating.

A dataflow is polled only until it is hydrated, so the cost is bounded by the snapshot
and nil afterwards.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping

from dataflow_operator.logs import get_logger
from dataflow_operator.runtime.hydration.probe import ProgressProbe
from dataflow_operator.runtime.hydration.tracker import HydrationTracker

__all__ = ["HydrationMonitor", "shared_monitor"]

log = get_logger(__name__)


class HydrationMonitor:
    """Polls the progress probes of hydrating dataflows from one background thread.

    ``interval`` is the time between polls (seconds). A dataflow is polled only until it
    is hydrated.
    """

    def __init__(self, interval: float = 0.5) -> None:
        self.interval = interval
        self._lock = threading.Lock()
        self._watched: dict[str, tuple[HydrationTracker, ProgressProbe]] = {}
        self._wake = threading.Event()
        self._stopping = threading.Event()
        self._thread: threading.Thread | None = None

    def watch(self, tracker: HydrationTracker, probe: ProgressProbe | None) -> None:
        """Follow ``tracker``'s dataflow through ``probe`` until it is hydrated."""
        if probe is None or tracker.hydrated:
            return
        with self._lock:
            self._watched[tracker.name] = (tracker, probe)
            if self._thread is None:
                self._thread = threading.Thread(
                    target=self._run, name="hydration-monitor", daemon=True
                )
                self._thread.start()
        self._wake.set()

    def forget(self, name: str) -> None:
        """Stop following dataflow ``name`` (dropped or reinstalled)."""
        with self._lock:
            self._watched.pop(name, None)

    def watched(self) -> Mapping[str, HydrationTracker]:
        """The dataflows still followed."""
        with self._lock:
            return {name: tracker for name, (tracker, _) in self._watched.items()}

    def poll_once(self) -> None:
        """Poll every followed dataflow once (the thread does this every ``interval``)."""
        with self._lock:
            watched = list(self._watched.items())
        for name, (tracker, probe) in watched:
            if tracker.hydrated:
                self.forget(name)
                continue
            try:
                tracker.observe_progress(probe.poll())
            except Exception as error:  # a query stopping under us; retried next time
                log.debug("hydration probe failed", dataflow=name, error=str(error))

    def _run(self) -> None:
        while not self._stopping.is_set():
            self.poll_once()
            with self._lock:
                idle = not self._watched
            if idle:
                self._wake.wait()
                self._wake.clear()
            else:
                self._stopping.wait(self.interval)

    def stop(self) -> None:
        """Stop the polling thread."""
        self._stopping.set()
        self._wake.set()
        thread, self._thread = self._thread, None
        if thread is not None:
            thread.join(timeout=5)


_shared: list[HydrationMonitor] = []
_shared_lock = threading.Lock()


def shared_monitor() -> HydrationMonitor:
    """The process's hydration monitor (one polling thread for every dataflow)."""
    with _shared_lock:
        if not _shared:
            _shared.append(HydrationMonitor())
        return _shared[0]
