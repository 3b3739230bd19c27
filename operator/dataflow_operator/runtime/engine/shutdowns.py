"""How long drops took: the shutdown histogram the replica's report carries.

:class:`~dataflow_operator.runtime.engine.drops.Drops` counts each drop's seconds, from
the drop to its last Spark task ending; the report carries the histogram as
:class:`~dataflow_operator.api.protocol.ShutdownDurations` and ``/metrics`` serves it.
"""

from __future__ import annotations

import bisect
import threading

from dataflow_operator.api.protocol import ShutdownDurations

__all__ = ["SHUTDOWN_BUCKETS", "ShutdownHistogram"]

SHUTDOWN_BUCKETS = (0.1, 0.25, 0.5, 1.0, 2.0, 5.0, 10.0, 30.0, 60.0)
"""Upper bounds (seconds) of the shutdown-duration histogram's buckets (+Inf implied)."""


class ShutdownHistogram:
    """Drop durations, counted into :data:`SHUTDOWN_BUCKETS` (thread-safe)."""

    def __init__(self) -> None:
        self._counts = [0] * len(SHUTDOWN_BUCKETS)
        self._total = 0
        self._sum = 0.0
        self._lock = threading.Lock()

    def observe(self, seconds: float) -> None:
        """Count one drop that took ``seconds``."""
        with self._lock:
            index = bisect.bisect_left(SHUTDOWN_BUCKETS, seconds)
            if index < len(self._counts):
                self._counts[index] += 1
            self._total += 1
            self._sum += max(0.0, seconds)

    def model(self) -> ShutdownDurations:
        """The histogram with cumulative counts, as the report carries it."""
        with self._lock:
            cumulative, running = [], 0
            for count in self._counts:
                running += count
                cumulative.append(running)
            return ShutdownDurations(
                bounds=list(SHUTDOWN_BUCKETS),
                counts=cumulative,
                total=self._total,
                sum_seconds=self._sum,
            )
