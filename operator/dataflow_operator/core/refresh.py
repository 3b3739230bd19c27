"""Refresh schedules: a dataflow's output advances only at refresh times."""

from __future__ import annotations

from dataclasses import dataclass

from dataflow_operator.core.durations import Duration
from dataflow_operator.core.time import MAX_TIMESTAMP, Timestamp

__all__ = ["RefreshSchedule"]


@dataclass(frozen=True, slots=True)
class RefreshSchedule:
    """Refreshes every ``every`` from ``aligned_to`` (repeating), and at each of ``at``.

    A schedule with neither repeats nor remaining ``at`` times has no later refresh.
    """

    every: Duration | None = None
    aligned_to: Timestamp = 0
    at: tuple[Timestamp, ...] = ()

    def round_up(self, time: Timestamp) -> Timestamp | None:
        """The first refresh at or after ``time``, or ``None`` if there is none."""
        candidates = [t for t in self.at if t >= time]
        if self.every is not None and self.every.millis > 0:
            step = self.every.millis
            if time <= self.aligned_to:
                candidates.append(self.aligned_to)
            else:
                periods = -(-(time - self.aligned_to) // step)
                candidates.append(self.aligned_to + periods * step)
        valid = [t for t in candidates if t <= MAX_TIMESTAMP]
        return min(valid) if valid else None

    def round_down(self, time: Timestamp) -> Timestamp | None:
        """The last refresh at or before ``time``, or ``None`` if there is none yet."""
        candidates = [t for t in self.at if t <= time]
        if self.every is not None and self.every.millis > 0 and time >= self.aligned_to:
            step = self.every.millis
            candidates.append(self.aligned_to + (time - self.aligned_to) // step * step)
        return max(candidates) if candidates else None
