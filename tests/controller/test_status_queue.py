"""The status queue: coalesced per Dataflow, taken in small rounds, changes before progress."""

from __future__ import annotations

import asyncio

import pytest

from dataflow_operator.controller.shared.status_queue import Marked, StatusQueue

pytestmark = pytest.mark.asyncio


async def test_a_dataflow_marked_twice_is_taken_once_since_its_first_mark() -> None:
    queue = StatusQueue()
    queue.mark("ns", "c", ["a", "b"], now=1)
    queue.mark("ns", "c", ["a"], now=5)
    taken = await queue.take(10)
    assert taken == [Marked(("ns", "c", "a"), 1, False), Marked(("ns", "c", "b"), 1, False)]
    assert not queue.pending


async def test_changes_go_ahead_of_a_backlog_of_progress_taken_in_rounds() -> None:
    queue = StatusQueue()
    queue.mark("ns", "c", [f"old{i:04}" for i in range(1000)], now=1, progress=True)
    first_round = await queue.take(100)
    assert [m.key[2] for m in first_round] == [f"old{i:04}" for i in range(100)]
    assert all(m.progress for m in first_round)
    # A Dataflow created while the backlog waits, and one whose report says more than
    # a frontier, are served in the next round; the latter keeps its first time.
    queue.mark("ns", "c", ["new"], now=2)
    queue.mark("ns", "c", ["old0500"], now=3)
    queue.mark("ns", "c", ["old0600"], now=4, progress=True)  # coalesced, stays behind
    second_round = await queue.take(100)
    assert [m.key[2] for m in second_round[:3]] == ["new", "old0500", "old0100"]
    assert second_round[:2] == [
        Marked(("ns", "c", "new"), 2, False),
        Marked(("ns", "c", "old0500"), 1, False),
    ]
    # A failed write goes back as a change, with its original time.
    queue.retry(("ns", "c", "new"), since=2)
    rest = []
    while queue.pending:
        rest += await queue.take(100)
    assert rest[0] == Marked(("ns", "c", "new"), 2, False)
    assert len(rest) == 1 + 1001 - 200  # the retried one, and what two rounds left
    assert Marked(("ns", "c", "old0600"), 1, True) in rest


async def test_take_waits_until_something_is_marked() -> None:
    queue = StatusQueue()
    waiting = asyncio.ensure_future(queue.take(10))
    await asyncio.sleep(0.05)
    assert not waiting.done()
    queue.mark("ns", "c", ["a"], now=3, progress=True)
    assert await asyncio.wait_for(waiting, 1) == [Marked(("ns", "c", "a"), 3, True)]


async def test_progress_is_taken_only_within_its_limit_and_never_holds_back_changes() -> None:
    queue = StatusQueue()
    queue.mark("ns", "c", [f"p{i}" for i in range(10)], now=1, progress=True)
    queue.mark("ns", "c", ["new"], now=2)
    taken = await queue.take(100, progress_limit=3)
    assert [(m.key[2], m.progress) for m in taken] == [
        ("new", False),
        ("p0", True),
        ("p1", True),
        ("p2", True),
    ]
    # Only progress is left and none may go: nothing is taken, after at most the wait.
    assert await queue.take(100, progress_limit=0, wait_s=0.05) == []
    # A change marked while it waits is taken at once.
    waiting = asyncio.ensure_future(queue.take(100, progress_limit=0, wait_s=5))
    await asyncio.sleep(0.05)
    queue.mark("ns", "c", ["edited"], now=3)
    assert [m.key[2] for m in await asyncio.wait_for(waiting, 1)] == ["edited"]
    assert len(await queue.take(100)) == 7  # the rest of the progress, without a limit
