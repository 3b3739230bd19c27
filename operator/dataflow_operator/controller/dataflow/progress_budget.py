"""How many progress-only status writes may go out: the first work shed when busy.

Everything the operator does runs on one event loop: kopf handling new and changed
objects, the replica daemons polling their drivers, the status writer. A frontier that
moved is the one status change that can wait — the next write carries the newer
frontier anyway — while a new Dataflow that is not yet validated, installed and
reported waits for every other task on the loop. So progress writes get a rate of
their own, adjusted from the loop's lag (how late a timer fires; see
:func:`watch_loop_lag`): halved while the loop stays late, raised again by steps while it
keeps time (additive increase, multiplicative decrease), between a trickle and the
status writer's configured rate. Changes are never held by it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

__all__ = ["HIGH_LAG_S", "LOW_LAG_S", "ProgressBudget", "watch_loop_lag"]

HIGH_LAG_S = 0.1
"""A loop this late, twice in a row, is busy: the progress rate halves. Once is a burst
(the status writer's own round of writes, say), not a load to make room for."""
LOW_LAG_S = 0.025
"""A loop at most this late keeps time: the progress rate goes up by a step."""
STEPS = 20
"""Increases from the trickle back to the full rate (one per lag sample)."""
TRICKLE = 100
"""The lowest progress rate is the full rate divided by this (at least one a second)."""


class ProgressBudget:
    """A token bucket whose rate follows the event loop's lag.

    ``ceiling`` is the full rate (writes a second); 0 means no limit and no shedding.
    ``clock`` gives seconds (the loop's ``time``); tokens refill at the current rate, up
    to one second's worth.
    """

    def __init__(self, ceiling: float, clock: Callable[[], float]) -> None:
        self.ceiling = ceiling
        self.rate = ceiling
        self.floor = max(1.0, ceiling / TRICKLE)
        self._clock = clock
        self._tokens = max(1.0, ceiling)
        self._updated = clock()
        self._late = 0
        """Lag samples in a row above :data:`HIGH_LAG_S`."""

    @property
    def unlimited(self) -> bool:
        """No rate at all (``DATAFLOW_STATUS_QPS`` 0)."""
        return self.ceiling <= 0

    def observe_lag(self, lag_s: float) -> None:
        """One sample of the loop's lag: halve the rate if late again, step it up if on
        time."""
        if self.unlimited:
            return
        self._refill()
        self._late = self._late + 1 if lag_s > HIGH_LAG_S else 0
        if self._late >= 2:
            self.rate = max(self.floor, self.rate / 2)
        elif lag_s <= LOW_LAG_S:
            self.rate = min(self.ceiling, self.rate + self.ceiling / STEPS)

    def allowance(self) -> int | None:
        """Progress writes that may go out now (``None``: any number)."""
        if self.unlimited:
            return None
        self._refill()
        return int(self._tokens)

    def spend(self, writes: int) -> None:
        """``writes`` progress writes went out."""
        if not self.unlimited:
            self._tokens -= writes

    def next_token_in(self) -> float | None:
        """Seconds until another progress write may go out (``None``: no limit)."""
        if self.unlimited:
            return None
        self._refill()
        return max(0.0, (1 - self._tokens) / self.rate)

    def _refill(self) -> None:
        now = self._clock()
        self._tokens = min(max(1.0, self.rate), self._tokens + (now - self._updated) * self.rate)
        self._updated = now


async def watch_loop_lag(on_lag: Callable[[float], None], interval_s: float = 0.25) -> None:
    """Until cancelled: every ``interval_s``, how late the loop woke this task, to ``on_lag``."""
    loop = asyncio.get_running_loop()
    while True:
        started = loop.time()
        await asyncio.sleep(interval_s)
        on_lag(max(0.0, loop.time() - started - interval_s))
