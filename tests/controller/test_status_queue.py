"""The status queue: coalesced per Dataflow, taken in small rounds, changes before progress."""

from __future__ import annotations

import asyncio

import pytest

from dataflow_operator.controller.dataflow.status_queue import StatusQueue

pytestmark = pytest.mark.asyncio


async def test_a_dataflow_marked_twice_is_taken_once_since_its_first_mark() -> None:
    queue = StatusQueue()
    queue.mark("ns", "c", ["a", "b"], now=1)
    queue.mark("ns", "c", ["a"], now=5)
    taken = await queue.take(10)
    assert taken == [(("ns", "c", "a"), 1), (("ns", "c", "b"), 1)]
    assert not queue.pending


async def test_changes_go_ahead_of_a_backlog_of_progress_taken_in_rounds() -> None:
    queue = StatusQueue()
    queue.mark("ns", "c", [f"old{i:04}" for i in range(1000)], now=1, progress=True)
    first_round = await queue.take(100)
    assert [key[2] for key, _ in first_round] == [f"old{i:04}" for i in range(100)]
    # A Dataflow created while the backlog waits, and one whose report says more than
    # a frontier, are served in the next round; the latter keeps its first time.
    queue.mark("ns", "c", ["new"], now=2)
    queue.mark("ns", "c", ["old0500"], now=3)
    queue.mark("ns", "c", ["old0600"], now=4, progress=True)  # coalesced, stays behind
    second_round = await queue.take(100)
    assert [key[2] for key, _ in second_round[:3]] == ["new", "old0500", "old0100"]
    assert second_round[:2] == [(("ns", "c", "new"), 2), (("ns", "c", "old0500"), 1)]
    # A failed write goes back as a change, with its original time.
    queue.retry(("ns", "c", "new"), since=2)
    rest = []
    while queue.pending:
        rest += await queue.take(100)
    assert rest[0] == (("ns", "c", "new"), 2)
    assert len(rest) == 1 + 1001 - 200  # the retried one, and what two rounds left
    assert (("ns", "c", "old0600"), 1) in rest


async def test_take_waits_until_something_is_marked() -> None:
    queue = StatusQueue()
    waiting = asyncio.ensure_future(queue.take(10))
    await asyncio.sleep(0.05)
    assert not waiting.done()
    queue.mark("ns", "c", ["a"], now=3, progress=True)
    assert await asyncio.wait_for(waiting, 1) == [(("ns", "c", "a"), 3)]
