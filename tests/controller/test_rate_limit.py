"""The status writer's token bucket: a burst of one second's worth, then ``rate`` a second."""

from __future__ import annotations

import asyncio
import itertools

import pytest

from dataflow_operator.controller.rate_limit import TokenBucket

pytestmark = pytest.mark.asyncio


async def _times(bucket: TokenBucket, calls: int) -> list[float]:
    loop = asyncio.get_running_loop()
    began = loop.time()
    times = []
    for _ in range(calls):
        await bucket.acquire()
        times.append(loop.time() - began)
    return times


async def test_a_burst_goes_at_once_then_calls_are_spaced_by_the_rate() -> None:
    times = await _times(TokenBucket(20), 30)
    assert times[19] < 0.2  # the burst: one second's worth, without waiting
    assert times[29] - times[19] >= 0.45  # ten more at 20 a second
    assert all(b - a >= 0.04 for a, b in itertools.pairwise(times[20:]))


async def test_rate_zero_never_waits() -> None:
    assert (await _times(TokenBucket(0), 1000))[-1] < 0.2


async def test_spare_tokens_are_those_beyond_a_reserve_and_refill_with_the_rate() -> None:
    bucket = TokenBucket(100)
    assert bucket.spare(reserve=50) == 50
    for _ in range(60):
        await bucket.acquire()  # calls that may not wait took what there was
    assert bucket.spare(reserve=50) == 0  # nothing beyond the reserve for calls that can wait
    await asyncio.sleep(0.3)  # ~30 more tokens: 70 in all
    assert 10 <= (bucket.spare(reserve=50) or 0) <= 30
    assert TokenBucket(0).spare(reserve=50) is None  # no limit
