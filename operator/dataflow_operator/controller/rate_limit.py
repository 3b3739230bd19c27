"""A token bucket: at most ``rate`` calls a second to the API server, in bursts of one
second's worth; ``rate`` 0 lets everything through. Calls that can wait may take only
what is :meth:`~TokenBucket.spare` above a reserve, so that they never use up the
rate that others need."""

from __future__ import annotations

import asyncio

__all__ = ["TokenBucket"]


class TokenBucket:
    """Waits in :meth:`acquire` until a call may go out; fair in the order of arrival."""

    def __init__(self, rate: float) -> None:
        self.rate = rate
        self.capacity = max(rate, 1.0)
        self._tokens = self.capacity
        self._updated: float | None = None
        self._lock = asyncio.Lock()

    def spare(self, reserve: float) -> int | None:
        """Tokens there are now beyond ``reserve`` (``None``: no limit at all)."""
        if self.rate <= 0:
            return None
        self._refill()
        return max(0, int(self._tokens - reserve))

    def _refill(self) -> None:
        now = asyncio.get_running_loop().time()
        if self._updated is not None:
            elapsed = now - self._updated
            self._tokens = min(self.capacity, self._tokens + elapsed * self.rate)
        self._updated = now

    async def acquire(self) -> None:
        """Take one token, waiting for it if the bucket is empty."""
        if self.rate <= 0:
            return
        async with self._lock:  # one waiter at a time keeps the order of arrival
            loop = asyncio.get_running_loop()
            self._refill()
            if self._tokens < 1:
                await asyncio.sleep((1 - self._tokens) / self.rate)
                self._tokens = 1.0
                self._updated = loop.time()
            self._tokens -= 1
